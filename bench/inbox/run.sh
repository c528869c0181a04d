#!/usr/bin/env bash
# The inbox at size, as an operator meets it: 1,000,000 claims of 5
# workflows with keys like 'orders:evt-000123', 10,000 of them in the inbox
# (4,000 needs_review, 3,000 stuck, 3,000 failing), beside 10,000 fresh
# processing claims, 10,000 failed_retryable ones below
# idem_gate.max_attempts and 970,000 completed ones.  idem_gate.stuck_after
# is 1 day, so that the fresh processing claims stay out of the inbox
# however long the run takes (at the default 15 minutes they join it, and
# a slow run would time a page of an inbox of 20,000).  Measures, as the
# operator role of docs/n8n.md (n8n_inbox, granted the 5 workflows):
#
#   1. the first page of the inbox,
#   2. a key search,
#   3. a key-prefix search,
#      each through the real n8n page (examples/n8n/inbox.json, imported and
#      published with docs/n8n.md's run:inbox-import; curl's time to first
#      byte, median and p95 of BENCH_N requests, sent with the sign-in
#      proxy's headers straight to n8n) and, side by side, the same SQL in
#      psql (EXPLAIN ANALYZE execution time, median of 5): the page's list
#      query, and the queries of docs/inbox-without-n8n.md;
#   4. a bulk retry of 1,000 needs_review claims: with idem_resolve_many
#      (wall time in psql), and through the page's bulk form by filter
#      (bulk_page.py: the confirmation's submit, time to first byte).
#
# Beside the page, n8n's floor (floor.mjs): the same list query answered
# by the least an n8n workflow can be, with and without the page's sign-in.
#
# The page's parameters are those of the page's filters (workflow, reason,
# key, prefix, older_than, after, limit).  A page that does not filter by
# one of them yet answers its default list: the script checks each answer,
# and reports a filter the page ignores instead of timing it.
#
#   bench/inbox/run.sh                     as root; PostgreSQL of PG_CONFIG
#   BENCH_CLAIMS (1000000), BENCH_INBOX (10000), BENCH_N (30),
#   BENCH_WARMUP (5: untimed requests before each page's),
#   BENCH_PORT (55437), BENCH_N8N_PORT (5721), BENCH_BROKER_PORT (5722),
#   BENCH_HOLD (1: the cluster and n8n kept up at the end),
#   BENCH_NODES (1: the page's time node by node, bench/inbox/nodes.mjs),
#   BENCH_N8N_ENV (n8n settings to try, NAME=value separated by spaces),
#   N8N_VERSION (the newest pin of test/n8n/install_n8n.sh)
#
# A throwaway cluster and n8n home under /tmp, removed at the end.  Prints
# the EXPLAIN ANALYZE output of each SQL query once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
CLAIMS=${BENCH_CLAIMS:-1000000}
INBOX=${BENCH_INBOX:-10000}
N=${BENCH_N:-30}
WARMUP=${BENCH_WARMUP:-5}
PORT=${BENCH_PORT:-55437}
N8N_PORT=${BENCH_N8N_PORT:-5721}
BROKER_PORT=${BENCH_BROKER_PORT:-5722}
[ "$(id -u)" = 0 ] || { echo "run as root (PostgreSQL runs as user postgres)" >&2; exit 2; }
[ $((CLAIMS / 100)) -ge "$INBOX" ] || { echo "BENCH_INBOX must be at most 1% of BENCH_CLAIMS" >&2; exit 2; }
. "$ROOT/test/n8n/n8n_lib.sh"
log() { printf '[inbox bench] %s\n' "$*" >&2; }

for p in "$PORT" "$N8N_PORT" "$BROKER_PORT"; do
	! ss -ltn | grep -q "127.0.0.1:$p " || { echo "port $p is taken (BENCH_PORT, BENCH_N8N_PORT, BENCH_BROKER_PORT)" >&2; exit 2; }
done
n8n_install
DIR=$(mktemp -d /tmp/idem_gate_inbox_page.XXXXXX)
chmod 755 "$DIR"
cleanup() {
	set +e
	n8n_stop
	! ss -ltn | grep -q "127.0.0.1:$N8N_PORT " || echo "n8n still listens on $N8N_PORT after its stop" >&2
	"$ROOT/scripts/cluster.sh" stop "$DIR/cluster"
	rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
make -s -C "$ROOT" with_llvm=no >/dev/null
make -s -C "$ROOT" with_llvm=no install >/dev/null
"$ROOT/scripts/cluster.sh" start "$DIR/cluster" "$PORT" "shared_buffers = '512MB'" \
	"max_wal_size = '4GB'" "idem_gate.naptime = '1h'" "idem_gate.stuck_after = '1d'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=app
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -d postgres -c "CREATE DATABASE app"
q -c "CREATE EXTENSION idem_gate"

# the operator role, docs/n8n.md's block as written (the cluster trusts
# loopback: the password is not asked), granted the bench's workflows, and
# the bulk decisions as docs/inbox-without-n8n.md's DBA block grants them
WORKFLOWS="orders payments shipping crm billing"
node "$ROOT/test/n8n/doc_block.mjs" "$ROOT/docs/n8n.md" operator-role | q >/dev/null
node "$ROOT/test/n8n/doc_block.mjs" "$ROOT/docs/inbox-without-n8n.md" runbook-dba |
	sed -e '/CREATE ROLE alice/d' -e '/GRANT n8n_inbox TO alice/d' | q >/dev/null
for w in $WORKFLOWS; do q -c "SELECT idem_gate.grant_workflow('n8n_inbox', '$w')" >/dev/null; done

start=$(date +%s)
# claim g (1..CLAIMS) is of workflow (g + g / 100) % 5, its key
# '<workflow>:evt-<g>'; every 100th is in the inbox (4 in 10 needs_review,
# 3 stuck, 3 failing, spread over the last 7 days and the 5 workflows),
# those with g % 100 = 1 and 2 are open but not in it (processing for
# seconds, failed_retryable below max_attempts), the rest completed
log "loading $CLAIMS claims"
q <<SQL
-- one transaction: committed synchronously, so that VACUUM can set every
-- page all-visible (an asynchronous commit leaves the hint bits unset, and
-- the inbox index's reads would fetch every row)
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result, last_error, payload,
	created_at, claimed_at, updated_at, completed_at, token_issued)
SELECT w, w || ':evt-' || lpad(g::text, 7, '0'), st::idem_gate.state,
	CASE WHEN st = 'failed_retryable' AND g % 100 = 0 THEN 5 WHEN st = 'failed_retryable' THEN 1 + g % 3 ELSE 1 END,
	g, CASE WHEN st = 'completed' THEN '{"effect_id": "r"}'::jsonb END,
	CASE WHEN st <> 'completed' THEN 'downstream said 503' END,
	CASE WHEN st <> 'completed' THEN '{"order": "A-17", "amount": 1999}'::jsonb END,
	t, t, t, CASE WHEN st = 'completed' THEN t END, true
  FROM (SELECT g, (ARRAY['orders', 'payments', 'shipping', 'crm', 'billing'])[1 + (g + g / 100) % 5] AS w,
			   CASE WHEN g % 100 = 0 AND g / 100 <= $INBOX THEN
						CASE WHEN g / 100 % 10 < 4 THEN 'needs_review' WHEN g / 100 % 10 < 7 THEN 'processing'
							 ELSE 'failed_retryable' END
					WHEN g % 100 = 1 THEN 'processing'
					WHEN g % 100 = 2 THEN 'failed_retryable'
					ELSE 'completed' END AS st,
			   CASE WHEN g % 100 = 0 AND g / 100 <= $INBOX THEN now() - interval '7 days' + make_interval(secs => g / 2)
					WHEN g % 100 IN (1, 2) THEN now() - make_interval(secs => g % 60)
					ELSE now() - make_interval(secs => g % 2592000) END AS t
		  FROM generate_series(1, $CLAIMS) g) s;
SELECT setval('idem_gate.token_seq', $CLAIMS + 1);
VACUUM ANALYZE idem_gate.claims;
SQL
log "loaded $(q -c "SELECT count(*) FROM idem_gate.claims") claims in $(($(date +%s) - start)) s;" \
	"the inbox lists $(q -c "SELECT count(*) FROM idem_gate.inbox")" \
	"($(q -c "SELECT string_agg(reason || ' ' || n, ', ' ORDER BY reason) FROM (SELECT reason, count(*) n FROM idem_gate.inbox GROUP BY 1) r"))"

# a key and a prefix that the inbox holds: the 1,000th orders claim in it
# (of 2,000)
KEY=$(q -c "SELECT key FROM idem_gate.inbox WHERE workflow = 'orders' ORDER BY since, key OFFSET $((INBOX / 10 - 1)) LIMIT 1")
PREFIX=${KEY%??}
log "key search: orders $KEY; prefix search: $PREFIX ($(q -c "SELECT count(*) FROM idem_gate.inbox WHERE starts_with(key, '$PREFIX')") in the inbox)"

# --- SQL, as the operator role ------------------------------------------------
# 5 EXPLAIN ANALYZE in one session, as the page's pooled connection runs
# its queries: the first in a new session (whose first touch of each
# shared buffer costs a page fault), then the median of the other 4; the
# first plan printed
explain() {
	local label=$1 sql=$2 user=${3:-n8n_inbox} out t times=() args=()
	for i in 1 2 3 4 5; do args+=(-c "EXPLAIN (ANALYZE, BUFFERS) $sql"); done
	out=$(q -U "$user" "${args[@]}")
	echo "--- $label"
	echo "$out" | awk 'done { next } { print } /^Execution Time:/ { done = 1 }'
	mapfile -t times < <(echo "$out" | awk '/^Execution Time:/ { print $3 }')
	SQL_MS[$label]="$(printf '%s\n' "${times[@]:1}" | sort -g | sed -n 2p) ms warm (median of 4), ${times[0]} ms in a new session"
}
declare -A SQL_MS PAGE
PAGE_ORDER=()
list_sql=$(node -e "import('$ROOT/test/n8n/build-inbox.mjs').then((m) => process.stdout.write(m.INBOX_SQL.list))")
item_sql=$(node -e "import('$ROOT/test/n8n/build-inbox.mjs').then((m) => process.stdout.write(m.INBOX_SQL.item))")
# sub SQL V1 V2: the page's query with its parameters $1 and $2 written in
sub() { local s=$1; s=${s//\$1::text/$2}; s=${s//\$2::text/$3}; printf '%s' "${s%;}"; }
# list_q WORKFLOW KEY PREFIX: the page's list query as the page sends it
# for a first page of 100 (its parameters: workflow, reason, the keys as a
# JSON array, the prefix and its upper bound, an age, the cursor, the size)
list_q() {
	local s=$list_sql keys="'[]'" end=""
	[ -n "$2" ] && keys="'[\"$2\"]'"
	[ -n "$3" ] && end="${3%?}$(printf "\\$(printf '%03o' $(( $(printf '%d' "'${3: -1}") + 1 )))")"
	s=${s//\$10::int/100}
	s=${s//\$1::text/\'$1\'}; s=${s//\$2::text/\'\'}; s=${s//\$3::jsonb/$keys::jsonb}
	s=${s//\$4::text/\'$3\'}; s=${s//\$5::text/\'$end\'}; s=${s//\$6::text/\'\'}
	s=${s//\$7::text/\'\'}; s=${s//\$8::text/\'\'}; s=${s//\$9::text/\'\'}
	printf '%s' "${s%;}"
}
# the runbook's list (docs/inbox-without-n8n.md run:runbook-list, its first
# query) with its filters set as psql would: f_workflow, f_key, f_prefix
runbook_list() {
	local s
	s=$(node "$ROOT/test/n8n/doc_block.mjs" "$ROOT/docs/inbox-without-n8n.md" runbook-list | awk '/LIMIT 50;/ { print; exit } { print }')
	s=${s//:\'f_workflow\'/\'$1\'}; s=${s//:\'f_reason\'/\'\'}; s=${s//:\'f_older_than\'/\'0\'}
	s=${s//:\'f_key\'/\'$2\'}; s=${s//:\'f_prefix\'/\'$3\'}
	s=${s//:\'after_since\'/\'-infinity\'}; s=${s//:\'after_workflow\'/\'\'}; s=${s//:\'after_key\'/\'\'}
	printf '%s' "${s%;}"
}
explain "page list query (first page of 100 + counts)" "$(list_q '' '' '')"
explain "runbook first page (50)" "$(runbook_list '' '' '')"
# the same two as the superuser, whom per-workflow access does not filter:
# what idem_gate.workflow_visible() costs on each row the view reads
explain "page list query, as the superuser" "$(list_q '' '' '')" postgres
explain "runbook first page (50), as the superuser" "$(runbook_list '' '' '')" postgres
explain "page claim query (orders, key)" "$(sub "$item_sql" "'$KEY'" "'orders'")"
explain "page key search (any workflow)" "$(list_q '' "$KEY" '')"
explain "page prefix search (any workflow)" "$(list_q '' '' "$PREFIX")"
explain "runbook key search (orders, key)" "$(runbook_list orders "$KEY" '')"
explain "runbook prefix search (orders, starts_with)" "$(runbook_list orders '' "$PREFIX")"
explain "runbook prefix search (any workflow, starts_with)" "$(runbook_list '' '' "$PREFIX")"
explain "prefix search with LIKE (any workflow)" "SELECT * FROM idem_gate.inbox WHERE key LIKE '$PREFIX%' ORDER BY since, workflow, key LIMIT 50"

# --- the page -------------------------------------------------------------------
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$DIR/copy/examples"
cp -r "$ROOT/examples/n8n" "$DIR/copy/examples/"
cred="$DIR/copy/examples/n8n/credentials.inbox.json"
for pair in '"change-me-too"|"'$SECRET'"' '"port": 5432|"port": '$PORT; do
	grep -q "${pair%%|*}" "$cred" || { echo "credentials.inbox.json lost ${pair%%|*}" >&2; exit 1; }
	sed -i "s/${pair%%|*}/${pair#*|}/" "$cred"
done
n8n_setup "$DIR" "$N8N_PORT" "$BROKER_PORT"
# BENCH_N8N_ENV: n8n settings to try, NAME=value separated by spaces
n8n_env_add BENCH_N8N_ENV ${BENCH_N8N_ENV:-} || exit 2
log "n8n $N8N_VERSION: docs/n8n.md run:inbox-import"
(cd "$DIR/copy" && n8n_doc_sh inbox-import) >"$DIR/import.log" 2>&1 || { cat "$DIR/import.log"; exit 1; }
# n8n's floor beside the page (bench/inbox/floor.mjs)
mkdir -p "$DIR/floor"
node "$here/floor.mjs" "$DIR/floor" >"$DIR/floor/list"
while read -r id f; do
	n8n_cli import:workflow --input="$f" >>"$DIR/import.log" 2>&1 &&
		n8n_cli publish:workflow --id="$id" >>"$DIR/import.log" 2>&1 ||
		{ cat "$DIR/import.log"; exit 1; }
done <"$DIR/floor/list"
n8n_start
URL="http://127.0.0.1:$N8N_PORT/webhook/idem-gate/inbox"
H=(-H "X-Idem-Gate-Proxy: $SECRET" -H "X-Forwarded-User: bench")
n8n_wait_url "$URL" "${H[@]}"
log "n8n answers the inbox page"

# page LABEL QUERY: N requests' time to first byte, after WARMUP untimed
# ones (n8n's first answers after its start, and a new pooled session's
# first reads of the inbox, are slower than any operator's next page);
# the last answer kept
page() {
	local label=$1 query=$2 times=() t
	PAGE_ORDER+=("$label")
	for i in $(seq "$WARMUP"); do curl -s -o /dev/null "${H[@]}" "$URL$query"; done
	for i in $(seq "$N"); do
		t=$(curl -s -o "$DIR/answer.html" -w '%{http_code} %{time_starttransfer}' "${H[@]}" "$URL$query")
		[ "${t%% *}" = 200 ] || { echo "$label: HTTP ${t%% *}" >&2; head -c 500 "$DIR/answer.html" >&2; return 1; }
		times+=("$(echo "${t#* } * 1000" | bc -l)")
	done
	PAGE[$label]=$(printf '%s\n' "${times[@]}" | sort -g | awk -v n="$N" '{ a[NR] = $1 } END {
		printf "median %.1f ms, p95 %.1f ms", a[int((n + 1) / 2)], a[int(n * 0.95 + 0.999)] }')
}
# keys of the bench's workflows shown in the last answer, and whether any is
# outside what the filter asks for (the page ignores the filter)
shown() { grep -o '[a-z]*:evt-[0-9]\{6\}' "$DIR/answer.html" | sort -u; }
page "first page" "?limit=100"
echo "first page: $(shown | wc -l) keys shown"
page "key search" "?key=$KEY"
echo "key search: $(shown | grep -c -v "^$KEY\$" || true) other keys shown"
page "claim page" "?workflow=orders&key=$KEY"
page "prefix search" "?prefix=$PREFIX&limit=50"
# n8n's floor: the same list query with nothing around it, one step at a time
FLOOR_URL="http://127.0.0.1:$N8N_PORT/webhook"
URL=$FLOOR_URL/bench-bare page "n8n floor: webhook, respond" ""
URL=$FLOOR_URL/bench-set page "n8n floor: webhook, a Set node, respond" ""
URL=$FLOOR_URL/bench-code page "n8n floor: webhook, a Code node, respond" ""
URL=$FLOOR_URL/bench-sql page "n8n floor: webhook, list query, respond" ""
URL=$FLOOR_URL/bench-sql page "n8n floor: webhook, list query (key), respond" "?key=$KEY"
URL=$FLOOR_URL/bench-auth page "n8n floor: signed-in webhook, list query, respond" ""
URL=$FLOOR_URL/bench-auth page "n8n floor: signed-in webhook, list query (key), respond" "?key=$KEY"
others=$(shown | grep -c -v "^$PREFIX" || true)
if [ "$others" -gt 0 ]; then
	PAGE["prefix search"]="not filtered by the page yet ($others other keys shown): ${PAGE["prefix search"]} for its default list"
fi
# a bulk retry through the page, as an operator makes it: the list of one
# workflow's needs_review claims, its form by filter (the oldest 1,000),
# the decision and its confirmation; the submit timed (bulk_page.py)
BULK_PAGE=$(python3 "$here/bulk_page.py" "$URL" "$SECRET" bench orders needs_review)

# --- 4. bulk retry of 1,000 claims ---------------------------------------------
keys=$(q -c "SELECT count(*) FROM (SELECT key FROM idem_gate.inbox WHERE workflow = 'payments' AND reason = 'needs_review' ORDER BY since, key LIMIT 1000) k")
t0=$(date +%s.%N)
bulk=$(q -U n8n_inbox <<SQL
SELECT outcome || ' ' || count(*) FROM idem_resolve_many(
	ARRAY(SELECT key FROM idem_gate.inbox WHERE workflow = 'payments' AND reason = 'needs_review'
		   ORDER BY since, key LIMIT 1000),
	'payments', 'retry', NULL, 'bench: bulk retry', 'bench') GROUP BY outcome;
SQL
)
t1=$(date +%s.%N)
BULK_MS=$(echo "($t1 - $t0) * 1000" | bc -l | xargs printf '%.0f')
log "bulk retry of $keys claims: $bulk, $BULK_MS ms"

# --- a proposal, tried on this throwaway database only ---------------------------
# the inbox in its own order.  An index alone does not do: the view is a
# UNION ALL of three parts, each a subquery with its own reason, so its
# ORDER BY sorts every row of the inbox before the first page.  Tried: one
# index of the open claims in the inbox's order, and the same view as one
# scan of the claims (public.bench_inbox), which reads a page's rows in
# that order.  1.3 took the index's other form instead (claims_inbox_since,
# the inbox's open claims by state): BENCH_PROPOSAL=1 measures this one
# beside it.
if [ "${BENCH_PROPOSAL:-0}" = 1 ]; then
	q <<SQL >/dev/null
CREATE INDEX bench_inbox_order ON idem_gate.claims (updated_at, workflow, key)
	WHERE state IN ('needs_review', 'processing', 'failed_retryable');
CREATE VIEW public.bench_inbox WITH (security_barrier) AS
SELECT c.workflow, c.key,
	   CASE c.state WHEN 'needs_review' THEN 'needs_review' WHEN 'processing' THEN 'stuck' ELSE 'failing' END AS reason,
	   c.updated_at AS since, c.state, c.attempt, c.execution_id, c.last_error, c.payload,
	   c.payload_dropped_bytes, c.fingerprint, c.claimed_at, c.updated_at
  FROM ONLY idem_gate.claims c
 WHERE c.state IN ('needs_review', 'processing', 'failed_retryable')
   AND CASE c.state
		 WHEN 'needs_review' THEN true
		 WHEN 'processing' THEN c.updated_at <= now() - coalesce(
			 (SELECT p.stuck_after FROM ONLY idem_gate.policies p WHERE p.workflow = c.workflow),
			 current_setting('idem_gate.stuck_after')::interval)
		 ELSE c.attempt >= current_setting('idem_gate.max_attempts')::int END
   AND idem_gate.workflow_visible(c.workflow)
 ORDER BY c.updated_at, c.workflow, c.key;
GRANT SELECT ON public.bench_inbox TO n8n_inbox;
ANALYZE idem_gate.claims;
SQL
	[ "$(q -c "SELECT count(*) FROM public.bench_inbox")" = "$(q -c "SELECT count(*) FROM idem_gate.inbox")" ] ||
		{ echo "public.bench_inbox does not list what idem_gate.inbox lists" >&2; exit 1; }
	# JIT off: the one-scan view's estimated cost passes jit_above_cost, and
	# compiling then takes a second (measured), more than the query
	one() { runbook_list "$@" | sed 's/idem_gate\.inbox/public.bench_inbox/'; }
	PGOPTIONS='-c jit=off' explain "proposal: index, the view as it is: runbook first page (50)" "$(runbook_list '' '' '')"
	PGOPTIONS='-c jit=off' explain "proposal: index and one-scan view: runbook first page (50)" "$(one '' '' '')"
	# the same without the query's own ORDER BY: the planner then passes the
	# LIMIT down into the view and reads the index in order
	PGOPTIONS='-c jit=off' explain "proposal: index and one-scan view, its order: runbook first page (50)" \
		"$(one '' '' '' | sed '/^ ORDER BY since, workflow, key$/d')"
	PGOPTIONS='-c jit=off' explain "proposal: index and one-scan view: runbook prefix search (any workflow)" "$(one '' '' "$PREFIX")"
fi

# BENCH_NODES=1: where the page's time goes, node by node, as n8n records
# it (bench/inbox/nodes.mjs): the page again, with a copy of its workflow
# that keeps its runs' data, after the bulk retries above (2,000 fewer
# items); the first 3 requests of each are warm-up
NODES=()
if [ "${BENCH_NODES:-0}" = 1 ]; then
	n8n_stop
	node "$here/nodes.mjs" copy "$DIR/copy/examples/n8n/inbox.json" "$DIR/inbox-nodes.json"
	{ n8n_cli import:workflow --input="$DIR/inbox-nodes.json" &&
		n8n_cli publish:workflow --id="$(node -p "JSON.parse(require('fs').readFileSync('$DIR/inbox-nodes.json', 'utf8')).id")"; } \
		>>"$DIR/import.log" 2>&1 || { cat "$DIR/import.log"; exit 1; }
	n8n_start
	n8n_wait_url "$URL" "${H[@]}"
	runs_db="$DIR/n8n-home/.n8n/database.sqlite"
	for pair in "first page|?limit=100" "key search|?key=$KEY"; do
		python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM execution_data"); c.execute("DELETE FROM execution_entity"); c.commit()' "$runs_db"
		for i in $(seq $((N + 3))); do curl -s -o /dev/null "${H[@]}" "$URL${pair#*|}"; done
		# n8n writes a run's record after its answer: wait for all of them
		for i in $(seq 50); do
			[ "$(python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM execution_data").fetchone()[0])' "$runs_db")" -ge $((N + 3)) ] && break
			sleep 0.2
		done
		python3 -c 'import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(json.dumps([{"data": d, "startedAt": s, "stoppedAt": e} for d, s, e in c.execute(
    "SELECT d.data, e.startedAt, e.stoppedAt FROM execution_entity e JOIN execution_data d ON d.executionId = e.id ORDER BY e.id")]))' \
			"$runs_db" >"$DIR/runs.json"
		# a run record n8n did not write is said, and the rest of the
		# bench's report stands
		NODES+=("${pair%%|*}, node by node:" "$(node "$here/nodes.mjs" report "$DIR/runs.json" "$N8N_CACHE/node_modules/flatted" 3 2>/dev/null ||
			echo "  not read: n8n $N8N_VERSION recorded no run of the page in its SQLite execution_data")")
	done
fi

echo
echo "== inbox with $INBOX items among $CLAIMS claims (n8n $N8N_VERSION${BENCH_N8N_ENV:+ with $BENCH_N8N_ENV}, PostgreSQL $(q -c 'SHOW server_version'))"
for label in "${PAGE_ORDER[@]}"; do
	printf '%s, page (TTFB, %s requests): %s\n' "$label" "$N" "${PAGE[$label]}"
done
for label in "${!SQL_MS[@]}"; do printf '  SQL %-52s %s\n' "$label" "${SQL_MS[$label]}"; done | sort
echo "bulk retry of $keys claims (idem_resolve_many, psql): $BULK_MS ms ($bulk)"
echo "$BULK_PAGE"
[ ${#NODES[@]} -eq 0 ] || printf '%s\n' "${NODES[@]}"
# BENCH_HOLD=1: keep the cluster and n8n up for a closer look, until
# $DIR/hold is removed
if [ "${BENCH_HOLD:-0}" = 1 ]; then
	touch "$DIR/hold"
	log "held: PGPORT=$PORT, n8n on $N8N_PORT, proxy secret $SECRET; rm $DIR/hold to end"
	while [ -e "$DIR/hold" ]; do sleep 5; done
fi
