#!/usr/bin/env bash
# idem_gate claim benchmark, side by side with the hand-written gate of
# bench/baseline/ in one run on one throwaway cluster:
#   new key        idem_claim           vs both floors: the same-schema raw
#                  INSERT (raw2_new: the gate's row and indexes) and the
#                  one-index raw INSERT ... ON CONFLICT DO NOTHING (raw_new)
#   duplicate      idem_claim           vs the PL/pgSQL gate (base.claim)
#   claim+complete idem_claim_ex+complete vs base.claim + base.complete, and
#                  vs both floors' bare two-statement cycles (raw2_cycle,
#                  raw_cycle)
# with synchronous_commit off and on (pgbench -M prepared, 8 clients), then
# WAL bytes per duplicate claim, and new-key claims at 10M rows vs 100k.
#   BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_SCALE_ROWS (10000000; 0 skips),
#   PG_MAJOR (15; 17 or 18 run the server from its Debian root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BASE=$ROOT/bench/baseline
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
SCALE_ROWS=${BENCH_SCALE_ROWS:-10000000}
PORT=${BENCH_PORT:-55434}

"$ROOT/scripts/deps.sh"
# PG_MAJOR=17 or 18: idem_gate built and installed in that major's Debian
# root (scripts/roots.sh), its server run there by cluster.sh; the clients
# (pgbench, psql) are the host's
. "$ROOT/bench/lib.sh"
bench_install "$ROOT"
MAJOR=$PG_MAJOR
DIR=$(mktemp -d /tmp/idem_gate_bench.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'" \
	"checkpoint_timeout = '30min'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

q -f "$BASE/schema.sql" >/dev/null 2>&1
q -f "$here/setup.sql" >/dev/null
# the floors' tables start with the gate's completed rows (as in wal.sh),
# so that their indexes are as deep as the gate's
q -c "INSERT INTO base.raw_claims (workflow, key, state, token, result, completed_at)
	SELECT workflow, key, 'completed', token, result, completed_at FROM idem_gate.claims" \
  -c "INSERT INTO base.raw_keys (key, workflow)
	SELECT key, workflow FROM idem_gate.claims ON CONFLICT DO NOTHING" \
  -c "VACUUM ANALYZE base.raw_claims, base.raw_keys, idem_gate.claims" >/dev/null

# tps SCRIPT SYNC: one pgbench run, prints its tps
tps() {
	PGOPTIONS="-c synchronous_commit=$2" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" -f "$1" 2>&1 |
		awk '/^tps = / { print $3 }'
}

# ratio A B: A / B with two decimals, as every per-round figure is printed
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

# Each case: the gate's script, then what it is measured against.  New keys
# and claim + complete are measured against both floors: the same-schema
# floor (raw2_*: the gate's row and both its indexes, written by plain SQL)
# and the one-index raw floor (raw_*: one heap tuple and one primary-key
# entry, the least any gate can write); claim + complete also against the
# hand-written PL/pgSQL gate, duplicates against it alone.
declare -A sum per
cases=("new:$here/idem_new.pgb:$BASE/raw2_new.pgb $BASE/raw_new.pgb"
	   "duplicate:$here/idem_dup.pgb:$BASE/plpgsql_dup.pgb"
	   "claim+complete:$here/idem_cycle.pgb:$BASE/plpgsql_cycle.pgb $BASE/raw2_cycle.pgb $BASE/raw_cycle.pgb")
echo "PostgreSQL $MAJOR; pgbench -M prepared -c 8 -j 2 -T $SECS, $ROUNDS alternating rounds, mean tps"
for sync in off on; do
	for r in $(seq "$ROUNDS"); do
		for c in "${cases[@]}"; do
			IFS=: read -r name i bases <<<"$c"
			it=$(tps "$i" $sync)
			sum[$sync:$name:idem]=$(echo "${sum[$sync:$name:idem]:-0} + $it" | bc -l)
			for b in $bases; do
				bt=$(tps "$b" $sync)
				sum[$sync:$name:$b]=$(echo "${sum[$sync:$name:$b]:-0} + $bt" | bc -l)
				per[$sync:$name:$b]="${per[$sync:$name:$b]:-} $(ratio "$it" "$bt")"
			done
		done
	done
done
# target CASE BASELINE: the goal for the gate / baseline ratio, or - for none
target() {
	case $1:$2 in
		new:raw_new) echo 0.97;;			# issue 37, on 17 and 18 (1.2: 0.90)
		duplicate:plpgsql_dup) echo 1.10;;
		claim+complete:plpgsql_cycle) echo 1.30;;
		claim+complete:raw_cycle) echo 0.95;;	# issue 37, on 17 and 18
		*) echo -;;
	esac
}
floor_name() {
	case $1 in raw2_*) echo "same-schema";; raw_*) echo "one-index";; *) echo "plpgsql gate";; esac
}
printf '\n%-16s %-6s %-28s %12s %12s %7s %7s  %s\n' case sync baseline baseline_tps idem_tps ratio target rounds
for sync in off on; do
	for c in "${cases[@]}"; do
		IFS=: read -r name i bases <<<"$c"
		it=$(echo "${sum[$sync:$name:idem]} / $ROUNDS" | bc -l)
		for b in $bases; do
			bn=$(basename "$b" .pgb)
			bt=$(echo "${sum[$sync:$name:$b]} / $ROUNDS" | bc -l)
			printf '%-16s %-6s %-28s %12.0f %12.0f %7.2f %7s %s\n' "$name" "$sync" "$bn ($(floor_name "$bn"))" \
				"$bt" "$it" "$(echo "$it / $bt" | bc -l)" "$(target "$name" "$bn")" "${per[$sync:$name:$b]}"
		done
	done
done

# WAL written by 10,000 duplicate claims of completed keys, twice: first
# with the table as the runs above left it, where a claim's read of a page
# may prune row versions those runs left dead (PostgreSQL's opportunistic
# pruning, which it logs: once per page, whoever reads it), then after a
# VACUUM has done that pruning, which leaves only what the claims write
q -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" >/dev/null
dup_wal() {
	local before after
	q -c "CHECKPOINT" >/dev/null
	before=$(q -c "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -M prepared -c 8 -j 2 -t 1250 -f "$here/idem_dup.pgb" >/dev/null 2>&1
	after=$(q -c "SELECT pg_current_wal_insert_lsn()")
	q -c "SELECT pg_wal_lsn_diff('$after', '$before')"
}
wal_left=$(dup_wal)
q -c "VACUUM idem_gate.claims"
wal=$(dup_wal)
printf '\nWAL bytes for 10,000 duplicate claims: %s (%s per claim; target 0)\n' "$wal" \
	"$(echo "$wal / 10000" | bc -l | xargs printf '%.3f')"
printf '  before VACUUM, pruning what the runs above left dead: %s (%s per claim)\n' "$wal_left" \
	"$(echo "$wal_left / 10000" | bc -l | xargs printf '%.3f')"
q -c "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null

# new-key claims with a big table: one database holds 100k rows, another
# SCALE_ROWS; their runs alternate, each after a checkpoint, and the small
# one is loaded again before each of its runs so that it stays at 100k
scale_db() {
	q -d "$1" -c "TRUNCATE idem_gate.claims" -c "INSERT INTO idem_gate.claims
		(workflow, key, state, attempt, token, result, created_at, claimed_at, updated_at, completed_at)
		SELECT 'wf', 'old_' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{\"action_id\":\"inv_1\"}',
			   now() - interval '1 day', now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
		  FROM generate_series(1, $2) g" -c "VACUUM ANALYZE idem_gate.claims" >/dev/null
}
if [ "$SCALE_ROWS" -gt 0 ]; then
	for db in scale_small scale_big; do
		q -c "CREATE DATABASE $db"
		q -d "$db" -c "CREATE EXTENSION idem_gate" 2>/dev/null
	done
	echo
	echo "loading $SCALE_ROWS rows..."
	scale_db scale_big "$SCALE_ROWS"
	small_sum=0 big_sum=0 rounds=""
	for r in $(seq "$ROUNDS"); do
		scale_db scale_small 100000
		q -c "CHECKPOINT"
		small=$(PGDATABASE=scale_small tps "$here/idem_new.pgb" off)
		q -c "CHECKPOINT"
		big=$(PGDATABASE=scale_big tps "$here/idem_new.pgb" off)
		small_sum=$(echo "$small_sum + $small" | bc -l)
		big_sum=$(echo "$big_sum + $big" | bc -l)
		rounds="$rounds $(ratio "$big" "$small")"
	done
	printf 'new-key claims (sync off): %.0f tps at 100k rows, %.0f tps at %d rows: ratio %.2f (target 0.80; rounds:%s)\n' \
		"$(echo "$small_sum / $ROUNDS" | bc -l)" "$(echo "$big_sum / $ROUNDS" | bc -l)" "$SCALE_ROWS" \
		"$(echo "$big_sum / $small_sum" | bc -l)" "$rounds"
fi
