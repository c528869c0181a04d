#!/usr/bin/env bash
# How a janitor pass scales, on one throwaway cluster:
#   alerts     janitor_run() raising the alerts of 100k and of 300k abandoned
#              claims (each pass starts with none alerted); the ratio should
#              stay near 3 (the work is linear) and at most 3.3
#   idle       an idle pass over 300k completed rows that are not expired,
#              with and without a one-hour policy on another workflow; the
#              ratio should stay at most 1.5 (a pass costs what expires per
#              workflow, not the rows it walks past)
# Each figure is the median of BENCH_ROUNDS (5) passes, alternated.
#   BENCH_PORT (55435), BENCH_ROUNDS (5)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
PORT=${BENCH_PORT:-55435}
ROUNDS=${BENCH_ROUNDS:-5}

"$ROOT/scripts/deps.sh"
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_bench.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '4GB'" \
	"idem_gate.naptime = '1d'" "autovacuum = off"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# load DB N STATE AGE: N rows of STATE in workflow wf, last changed AGE ago
load() {
	q -d "$1" -c "INSERT INTO idem_gate.claims
		(workflow, key, state, attempt, token, created_at, claimed_at, updated_at, completed_at)
		SELECT 'wf', 'k_' || g, '$3', 1, nextval('idem_gate.token_seq'),
			   now() - interval '$4', now() - interval '$4', now() - interval '$4',
			   CASE WHEN '$3' = 'completed' THEN now() - interval '$4' END
		  FROM generate_series(1, $2) g" -c "VACUUM ANALYZE idem_gate.claims" >/dev/null
}

# pass_ms DB SETUP: the time of one janitor_run() in ms, after SETUP
pass_ms() {
	q -d "$1" -c "SET client_min_messages = error" -c "$2" -c '\timing on' \
		-c "SELECT alerts FROM idem_gate.janitor_run()" |
		awk '/^Time:/ { print $2 }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for db in alerts_100k alerts_300k idle; do
	q -c "CREATE DATABASE $db"
	q -d "$db" -c "CREATE EXTENSION idem_gate"
done
load alerts_100k 100000 processing '2 hours'
load alerts_300k 300000 processing '2 hours'
load idle 300000 completed '2 days'

# every alert pass starts from none alerted: alerted_token is reset first
declare -a small big with without
for r in $(seq "$ROUNDS"); do
	for db in alerts_100k alerts_300k; do
		q -d "$db" -c "UPDATE idem_gate.claims SET alerted_token = NULL" -c "VACUUM idem_gate.claims" >/dev/null
		q -c "CHECKPOINT" >/dev/null
		ms=$(pass_ms "$db" "SET idem_gate.stuck_after = '1h'")
		if [ "$db" = alerts_100k ]; then small+=("$ms"); else big+=("$ms"); fi
	done
	q -d idle -c "DELETE FROM idem_gate.policies" >/dev/null
	without+=("$(pass_ms idle "SELECT 1")")
	q -d idle -c "INSERT INTO idem_gate.policies (workflow, retention) VALUES ('short', '1 hour')" >/dev/null
	with+=("$(pass_ms idle "SELECT 1")")
done
s=$(printf '%s\n' "${small[@]}" | median)
b=$(printf '%s\n' "${big[@]}" | median)
w=$(printf '%s\n' "${with[@]}" | median)
o=$(printf '%s\n' "${without[@]}" | median)
printf 'alerting 100k stuck claims: %s ms; 300k: %s ms; ratio %.2f (target <= 3.3)\n' "$s" "$b" \
	"$(echo "$b / $s" | bc -l)"
printf '  rounds 100k: %s; 300k: %s\n' "${small[*]}" "${big[*]}"
printf 'idle pass over 300k live completed rows: %s ms without a policy, %s ms with a one-hour policy on another workflow; ratio %.2f (target <= 1.5)\n' \
	"$o" "$w" "$(echo "$w / $o" | bc -l)"
printf '  rounds without: %s; with: %s\n' "${without[*]}" "${with[*]}"
