#!/usr/bin/env bash
# The best a gate on the redesigned schema of docs/dev/hot_completions.md
# could reach (issue 37: "measure the limit side by side"): the same
# plain SQL as the same-schema floor (raw2_*), on a copy of its table
# whose janitor index is (workflow, claimed_at, token), set once per grant,
# instead of (state, workflow, updated_at, token): raw3_*.  Against the
# one-index floor (raw_*), side by side on one cluster:
#   - WAL bytes per operation and the share of HOT updates (one client,
#     BENCH_OPS operations each, after a checkpoint): counts;
#   - tps (pgbench -M prepared -c 8 -j 2, synchronous_commit off, rounds
#     alternating): times, noisy on a shared machine.
#   BENCH_OPS (3000), BENCH_SECONDS (10), BENCH_ROUNDS (3), PG_MAJOR (15;
#   17 or 18 run the server from its Debian root), BENCH_PORT (55442)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BASE=$ROOT/bench/baseline
OPS=${BENCH_OPS:-3000}
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
PORT=${BENCH_PORT:-55442}

"$ROOT/scripts/deps.sh"
. "$ROOT/bench/lib.sh"
bench_install "$ROOT"
DIR=$(mktemp -d /tmp/idem_gate_bench_redesign.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'" \
	"checkpoint_timeout = '1h'" "idem_gate.naptime = '1d'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -f "$BASE/schema.sql" >/dev/null 2>&1
q -f "$here/setup.sql" >/dev/null
# raw3: raw2's table with the redesigned janitor index; all three floors
# start with the gate's 100,000 completed rows
q -c "CREATE TABLE base.raw3_claims (LIKE base.raw_claims INCLUDING DEFAULTS INCLUDING CONSTRAINTS)" \
  -c "ALTER TABLE base.raw3_claims ADD PRIMARY KEY (workflow, key)" \
  -c "CREATE INDEX ON base.raw3_claims (workflow, claimed_at, token)" \
  -c "INSERT INTO base.raw_claims (workflow, key, state, token, result, completed_at)
	SELECT workflow, key, 'completed', token, result, completed_at FROM idem_gate.claims" \
  -c "INSERT INTO base.raw3_claims SELECT * FROM base.raw_claims" \
  -c "INSERT INTO base.raw_keys (key, workflow)
	SELECT key, workflow FROM idem_gate.claims ON CONFLICT DO NOTHING" \
  -c "VACUUM ANALYZE base.raw_claims, base.raw3_claims, base.raw_keys" >/dev/null
for s in new cycle; do
	sed 's/base\.raw_claims/base.raw3_claims/g' "$BASE/raw2_$s.pgb" >"$DIR/raw3_$s.pgb"
done
chmod 644 "$DIR"/*.pgb

# wal NAME SCRIPT TABLE: WAL bytes per operation, and updates (HOT share)
wal() {
	local l0 l1 u0 h0 u1 h1
	q -c "CHECKPOINT" >/dev/null
	read -r u0 h0 < <(q -F ' ' -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '$3'::regclass")
	l0=$(q -c "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -M prepared -c 1 -t "$OPS" -f "$2" >/dev/null 2>&1
	l1=$(q -c "SELECT pg_current_wal_insert_lsn()")
	sleep 1
	read -r u1 h1 < <(q -F ' ' -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '$3'::regclass")
	printf '%-34s %10s %s\n' "$1" "$(q -c "SELECT round(pg_wal_lsn_diff('$l1', '$l0') / $OPS)")" \
		"$([ $((u1 - u0)) -gt 0 ] && echo "$(((h1 - h0) * 100 / (u1 - u0)))%" || echo -)"
}
echo "PostgreSQL $PG_MAJOR: WAL bytes per operation ($OPS each, one client), HOT share of updates"
wal "one-index new (raw_new)" "$BASE/raw_new.pgb" base.raw_keys
wal "same-schema new (raw2_new)" "$BASE/raw2_new.pgb" base.raw_claims
wal "redesigned new (raw3_new)" "$DIR/raw3_new.pgb" base.raw3_claims
wal "one-index cycle (raw_cycle)" "$BASE/raw_cycle.pgb" base.raw_keys
wal "same-schema cycle (raw2_cycle)" "$BASE/raw2_cycle.pgb" base.raw_claims
wal "redesigned cycle (raw3_cycle)" "$DIR/raw3_cycle.pgb" base.raw3_claims

tps() {
	PGOPTIONS="-c synchronous_commit=off" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" -f "$1" 2>&1 |
		awk '/^tps = / { print $3 }'
}
declare -A sum per
for r in $(seq "$ROUNDS"); do
	for s in new cycle; do
		a=$(tps "$BASE/raw_$s.pgb"); b=$(tps "$BASE/raw2_$s.pgb"); c=$(tps "$DIR/raw3_$s.pgb")
		sum[$s:1]=$(echo "${sum[$s:1]:-0} + $a" | bc -l)
		sum[$s:2]=$(echo "${sum[$s:2]:-0} + $b" | bc -l)
		sum[$s:3]=$(echo "${sum[$s:3]:-0} + $c" | bc -l)
		per[$s]="${per[$s]:-} $(printf '%.2f/%.2f' "$(echo "$b / $a" | bc -l)" "$(echo "$c / $a" | bc -l)")"
	done
done
echo
echo "tps, sync off, 8 clients, $ROUNDS alternating rounds of ${SECS}s: each floor / one-index"
for s in new cycle; do
	printf '%-6s one-index %8.0f  same-schema %8.0f (%.2f)  redesigned %8.0f (%.2f)  rounds same/redesigned:%s\n' "$s" \
		"$(echo "${sum[$s:1]} / $ROUNDS" | bc -l)" "$(echo "${sum[$s:2]} / $ROUNDS" | bc -l)" \
		"$(echo "${sum[$s:2]} / ${sum[$s:1]}" | bc -l)" "$(echo "${sum[$s:3]} / $ROUNDS" | bc -l)" \
		"$(echo "${sum[$s:3]} / ${sum[$s:1]}" | bc -l)" "${per[$s]}"
done
