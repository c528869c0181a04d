#!/usr/bin/env bash
# Batch claims and per-workflow access, side by side in one run on one
# throwaway cluster (pgbench -M prepared, 8 clients, alternating rounds):
#   keys claimed per second by idem_claim_many with batches of 100, against
#   the same keys claimed one idem_claim_ex call each, for new keys and for
#   duplicates of completed keys (goals: >= 5x and >= 8x);
#   idem_claim_ex by a role that is not a superuser with
#   idem_gate.workflow_acl on and 100 grant rows, against off (goal: at most
#   5% fewer claims per second), for new keys and duplicates.
#   BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_PORT (55436)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
PORT=${BENCH_PORT:-55436}

"$ROOT/scripts/deps.sh"
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_bench.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'" \
	"checkpoint_timeout = '30min'" "synchronous_commit = off" "idem_gate.naptime = '1d'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

q <<'SQL'
CREATE EXTENSION idem_gate;
CREATE ROLE bench_client LOGIN;
GRANT USAGE ON SCHEMA idem_gate TO bench_client;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_claim_many(text[], text, interval, text[], text) TO bench_client;
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
	created_at, claimed_at, updated_at, completed_at)
SELECT 'orders_wf', 'dup_' || g, 'completed', 1, nextval('idem_gate.token_seq'), '{"action_id": "inv_1"}',
	   now(), now(), now(), now()
  FROM generate_series(1, 100000) g;
-- 100 grant rows: 99 to other roles or workflows, one that matches
SELECT count(idem_gate.grant_workflow('bench_client', 'other_' || g || '_%')) FROM generate_series(1, 99) g \g /dev/null
SELECT idem_gate.grant_workflow('bench_client', 'orders_%') \g /dev/null
VACUUM ANALYZE idem_gate.claims;
SQL

cat >"$DIR/many_new.pgb" <<'PGB'
\set r random(1, 1000000000000)
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT 'n' || :r || '_' || g FROM generate_series(1, 100) g), 'orders_wf');
PGB
cat >"$DIR/one_new.pgb" <<'PGB'
\set r random(1, 1000000000000)
SELECT outcome FROM idem_claim_ex('n' || :r, 'orders_wf');
PGB
cat >"$DIR/many_dup.pgb" <<'PGB'
SELECT count(*) FROM idem_claim_many(ARRAY(SELECT 'dup_' || (1 + (random() * 99999)::int) FROM generate_series(1, 100)), 'orders_wf');
PGB
cat >"$DIR/one_dup.pgb" <<'PGB'
\set k random(1, 100000)
SELECT outcome FROM idem_claim_ex('dup_' || :k, 'orders_wf');
PGB

# tps SCRIPT ROLE: one pgbench run, prints its tps
tps() {
	pgbench -U "$2" -n -M prepared -c 8 -j 2 -T "$SECS" -f "$1" postgres 2>&1 |
		awk '/^tps = / { print $3 }'
}
q -c "ALTER ROLE bench_client SET idem_gate.workflow_acl = off"
declare -A sum
for r in $(seq "$ROUNDS"); do
	for kind in new dup; do
		sum[many_$kind]=$(echo "${sum[many_$kind]:-0} + $(tps "$DIR/many_$kind.pgb" bench_client) * 100" | bc -l)
		sum[one_$kind]=$(echo "${sum[one_$kind]:-0} + $(tps "$DIR/one_$kind.pgb" bench_client)" | bc -l)
		# the setting is a superuser's: set for the role by ALTER ROLE
		q -c "ALTER ROLE bench_client SET idem_gate.workflow_acl = on"
		sum[on_$kind]=$(echo "${sum[on_$kind]:-0} + $(tps "$DIR/one_$kind.pgb" bench_client)" | bc -l)
		q -c "ALTER ROLE bench_client SET idem_gate.workflow_acl = off"
		sum[off_$kind]=$(echo "${sum[off_$kind]:-0} + $(tps "$DIR/one_$kind.pgb" bench_client)" | bc -l)
	done
	q -c "CHECKPOINT"
done
echo "pgbench -M prepared -c 8 -j 2 -T $SECS, $ROUNDS alternating rounds, synchronous_commit off"
for kind in new dup; do
	printf 'keys/s, %-4s: idem_claim_many (100 a call) %10.0f, one idem_claim_ex a call %8.0f: %.2fx (goal %s)\n' \
		"$kind" "$(echo "${sum[many_$kind]} / $ROUNDS" | bc -l)" "$(echo "${sum[one_$kind]} / $ROUNDS" | bc -l)" \
		"$(echo "${sum[many_$kind]} / ${sum[one_$kind]}" | bc -l)" "$([ $kind = new ] && echo '>= 5x' || echo '>= 8x')"
done
for kind in new dup; do
	printf 'claims/s as a non-superuser, %-4s: workflow_acl on (100 grants) %8.0f, off %8.0f: %.3f (goal >= 0.95)\n' \
		"$kind" "$(echo "${sum[on_$kind]} / $ROUNDS" | bc -l)" "$(echo "${sum[off_$kind]} / $ROUNDS" | bc -l)" \
		"$(echo "${sum[on_$kind]} / ${sum[off_$kind]}" | bc -l)"
done
