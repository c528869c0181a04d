#!/usr/bin/env bash
# The inbox on a big table: SELECT * FROM idem_gate.inbox with 10 million
# claims of 20 workflows, of which 100 need a person (40 needs_review, 30
# stuck in processing, 30 failing at idem_gate.max_attempts), beside 1,000
# fresh processing claims and 1,000 failed_retryable ones below the
# threshold.  Prints EXPLAIN (ANALYZE, BUFFERS) of the view five times and
# the median execution time; the goal is under 5 ms.
#   bench/inbox/view.sh   (bench/inbox/run.sh: the page and the runbook)
#   BENCH_ROWS (10000000), BENCH_PORT (55436)
# PostgreSQL 15 (the host's), the work tree's build, a throwaway cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
ROWS=${BENCH_ROWS:-10000000}
PORT=${BENCH_PORT:-55436}

"$ROOT/scripts/deps.sh"
DIR=$(mktemp -d /tmp/idem_gate_inbox.XXXXXX)
chmod 755 "$DIR"
cleanup() {
	"$ROOT/scripts/cluster.sh" stop "$DIR/cluster" || true
	rm -rf "$DIR"
}
trap cleanup EXIT
make -s -C "$ROOT" with_llvm=no >/dev/null
make -s -C "$ROOT" with_llvm=no install >/dev/null
"$ROOT/scripts/cluster.sh" start "$DIR/cluster" "$PORT" "shared_buffers = '2GB'" \
	"max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "idem_gate.naptime = '1h'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

q -c "CREATE EXTENSION idem_gate"
start=$(date +%s)
# the rows, written as the extension's owner would leave them: completed
# claims spread over 30 days, then the open ones
q <<SQL
SET synchronous_commit = off;
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
	created_at, claimed_at, updated_at, completed_at, token_issued)
SELECT 'wf_' || (g % 20), 'evt_' || g, 'completed', 1, g, '{"receipt": "r"}',
	t, t, t, t, true
  FROM (SELECT g, now() - make_interval(secs => (g % 2592000)) AS t
		  FROM generate_series(1, $ROWS - 2100) g) s;
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, last_error, payload,
	created_at, claimed_at, updated_at, token_issued)
SELECT 'wf_' || (g % 20), 'open_' || g,
	CASE WHEN g <= 40 THEN 'needs_review'
		 WHEN g <= 70 THEN 'processing'
		 WHEN g <= 100 THEN 'failed_retryable'
		 WHEN g <= 1100 THEN 'processing'
		 ELSE 'failed_retryable' END::idem_gate.state,
	CASE WHEN g BETWEEN 71 AND 100 THEN 5 WHEN g > 1100 THEN 1 + g % 3 ELSE 1 END,
	$ROWS + g, 'downstream said 503', '{"order": "A-17", "amount": 1999}',
	t, t, t, true
  FROM (SELECT g, CASE WHEN g <= 100 THEN now() - make_interval(mins => 20 + g)
					   ELSE now() - make_interval(secs => g % 60) END AS t
		  FROM generate_series(1, 2100) g) s;
SELECT setval('idem_gate.token_seq', $ROWS + 3000) \g /dev/null
VACUUM ANALYZE idem_gate.claims;
SQL
echo "loaded $(q -c "SELECT count(*) FROM idem_gate.claims") claims in $(( $(date +%s) - start )) s;" \
	"the inbox lists $(q -c "SELECT count(*) FROM idem_gate.inbox")" \
	"($(q -c "SELECT string_agg(reason || ' ' || n, ', ' ORDER BY reason) FROM (SELECT reason, count(*) n FROM idem_gate.inbox GROUP BY 1) r"))"

times=()
for i in 1 2 3 4 5; do
	out=$(q -c "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM idem_gate.inbox")
	[ "$i" = 1 ] && echo "$out"
	t=$(echo "$out" | awk '/^Execution Time:/ { print $3 }')
	echo "run $i: execution time $t ms"
	times+=("$t")
done
median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 3p)
echo "median of 5: $median ms (goal: under 5 ms)"
