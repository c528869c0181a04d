#!/usr/bin/env bash
# What each claim writes, counted rather than timed (so a busy machine gives
# the same figures): WAL bytes per operation and the share of HOT updates,
# for the gate and for its two floors, side by side on one cluster, one
# client, N operations each:
#   gate             idem_claim (new key), idem_claim_ex + idem_complete
#                    (cycle), idem_claim of a completed key (duplicate)
#   same-schema      base.raw_claims: the gate's row and both its indexes,
#                    written by plain SQL (raw2_new, raw2_cycle)
#   one-index        base.raw_keys: one heap tuple and one primary-key entry
#                    (raw_new, raw_cycle): the least any gate can write
# WAL bytes come from pg_current_wal_insert_lsn() before and after; HOT
# from pg_stat_user_tables (n_tup_hot_upd of n_tup_upd).
#   BENCH_OPS (5000), PG_MAJOR (15; 17 or 18 run the server from its
#   Debian root, as run.sh does), BENCH_PORT (55438)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BASE=$ROOT/bench/baseline
OPS=${BENCH_OPS:-5000}
PORT=${BENCH_PORT:-55438}

"$ROOT/scripts/deps.sh"
. "$ROOT/bench/lib.sh"
bench_install "$ROOT"
MAJOR=$PG_MAJOR
DIR=$(mktemp -d /tmp/idem_gate_bench_wal.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
# no full-page images after the first touch of a page skewing one side:
# a checkpoint far away, and each run starts after one
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'" \
	"checkpoint_timeout = '1h'" "idem_gate.naptime = '1d'" "autovacuum = off"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -f "$BASE/schema.sql" >/dev/null 2>&1
q -f "$here/setup.sql" >/dev/null
# the floors' tables start with the gate's 100,000 completed rows, so that
# their indexes have as many pages to touch (and to log once after a
# checkpoint) as the gate's
q -c "INSERT INTO base.raw_claims (workflow, key, state, token, result, completed_at)
	SELECT workflow, key, 'completed', token, result, completed_at FROM idem_gate.claims" \
  -c "INSERT INTO base.raw_keys (key, workflow)
	SELECT key, workflow FROM idem_gate.claims ON CONFLICT DO NOTHING" \
  -c "VACUUM ANALYZE base.raw_claims, base.raw_keys, idem_gate.claims" >/dev/null

# measure NAME SCRIPT TABLE: WAL bytes per operation and HOT updates
measure() {
	local name=$1 script=$2 table=$3 l0 l1 u0 h0 u1 h1
	q -c "CHECKPOINT" >/dev/null
	read -r u0 h0 < <(q -F ' ' -c "SELECT pg_stat_force_next_flush(); SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '$table'::regclass" | tail -1)
	l0=$(q -c "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -M prepared -c 1 -t "$OPS" -f "$script" >/dev/null 2>&1
	l1=$(q -c "SELECT pg_current_wal_insert_lsn()")
	sleep 1
	read -r u1 h1 < <(q -F ' ' -c "SELECT pg_stat_force_next_flush(); SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '$table'::regclass" | tail -1)
	local bytes upd hot
	bytes=$(q -c "SELECT round(pg_wal_lsn_diff('$l1', '$l0') / $OPS)")
	upd=$((u1 - u0))
	hot=$((h1 - h0))
	printf '%-28s %10s %12s %s\n' "$name" "$bytes" "$upd" \
		"$([ "$upd" -gt 0 ] && echo "$hot ($((100 * hot / upd))%)" || echo "-")"
	echo "$name $bytes" >>"$DIR/figures"
}

echo "PostgreSQL $MAJOR: $OPS operations each, one client; WAL bytes per operation"
printf '%-28s %10s %12s %s\n' "operation" "WAL bytes" "updates" "HOT updates"
measure "gate new key" "$here/idem_new.pgb" idem_gate.claims
measure "same-schema new (raw2)" "$BASE/raw2_new.pgb" base.raw_claims
measure "one-index new (raw)" "$BASE/raw_new.pgb" base.raw_keys
measure "gate claim+complete" "$here/idem_cycle.pgb" idem_gate.claims
measure "same-schema cycle (raw2)" "$BASE/raw2_cycle.pgb" base.raw_claims
measure "one-index cycle (raw)" "$BASE/raw_cycle.pgb" base.raw_keys
# a read prunes what the runs above left dead, and PostgreSQL logs that
# (once per page, whoever reads it): VACUUM first, as run.sh does, so that
# only what a duplicate itself writes is counted
q -c "VACUUM idem_gate.claims" >/dev/null
measure "gate duplicate" "$here/idem_dup.pgb" idem_gate.claims
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
get() { awk -v n="$1" '{ v = $NF; $NF = ""; sub(/ $/, ""); if ($0 == n) print v }' "$DIR/figures"; }
echo "gate / same-schema: new $(ratio "$(get 'gate new key')" "$(get 'same-schema new (raw2)')"), cycle $(ratio "$(get 'gate claim+complete')" "$(get 'same-schema cycle (raw2)')")"
echo "gate / one-index:   new $(ratio "$(get 'gate new key')" "$(get 'one-index new (raw)')"), cycle $(ratio "$(get 'gate claim+complete')" "$(get 'one-index cycle (raw)')")"
