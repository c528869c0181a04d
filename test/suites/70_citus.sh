#!/usr/bin/env bash
# The short Citus suite (docs/citus.md): a coordinator and two workers on
# loopback ports, idem_gate distributed over them, then
#   - distribute()'s refusals (no Citus, a worker, bad shard counts, rows
#     on a coordinator without workers) and its second call;
#   - the claim state machine of sql/claim.sql through the coordinator,
#     whose output must equal a single server's;
#   - push-down: the calls are delegated to the key's worker (DEBUG and
#     EXPLAIN on the coordinator) and the rows are in the workers' shards;
#   - idem_claim_many with keys on several shards;
#   - races: 8 clients take over the same keys through the coordinator;
#     no token is granted twice and tokens only grow per key.
# Uses the Citus installed for PG_CONFIG's server, or builds and caches it
# (test/citus/ensure_citus.sh).  The long fault run: test/citus/faults.sh.
set -euo pipefail
# The test command runs it on every major: 15 with Citus 12.1, 17 and 18
# with Citus 14.0 (built in their Debian roots).
here=$(cd "$(dirname "$0")/../citus" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -n "${IDEM_PG_ROOT:-}" ]; then
	# a major in a Debian root: its pg_config, run there by ensure_citus.sh
	export PG_CONFIG=$IDEM_PG_BIN/pg_config
fi
export PG_CONFIG=${PG_CONFIG:-pg_config}
export CITUS_BASE=${CITUS_BASE:-$(mktemp -d "${TMPDIR:-/tmp}/idem_citus.XXXXXX")}
# below Linux's ephemeral range (32768-60999): a port in it can be held by
# the local end of any outgoing connection, Citus's own among them, and the
# node then fails to start with "Address already in use"
COORD=${CITUS_PORT:-26801}
W1=$((COORD + 1))
W2=$((COORD + 2))
SOLO=$((COORD + 3))				# a server without Citus
LONE=$((COORD + 4))				# a coordinator without workers (then one: +9)
. "$here/lib.sh"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
# check NAME EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected [$2], got [$3]"; fi; }
finish() {
	local rc=$?
	[ "$rc" -eq 0 ] || { failed=$((failed + 1)); echo "not ok - the suite stopped (exit $rc): see the messages above"; }
	cluster_down "$COORD" "$W1" "$W2" "$SOLO" "$LONE" "$((COORD + 9))"
	echo "$passed passed, $failed failed"
}
trap finish EXIT

start=$(date +%s)
# Citus has no Debian package: where neither an installed Citus nor its
# source is at hand, there is nothing to test
rc=0
cv=$("$here/ensure_citus.sh") || rc=$?
if [ "$rc" = 3 ]; then
	echo "# no Citus installed and no Citus source at hand (CITUS_SRC): nothing to run"
	exit 0
fi
[ "$rc" = 0 ] || { not_ok "Citus could not be made available"; exit 1; }
echo "citus $cv for PostgreSQL $(as_pg "$CITUS_BIN/postgres" --version | awk '{print $3}') ($(( $(date +%s) - start )) s)"
cluster_up "$COORD" "$W1" "$W2"
node_init "$SOLO" idem_gate; node_start "$SOLO"
node_init "$LONE"; node_start "$LONE"
echo "cluster up ($(( $(date +%s) - start )) s)"

# try PORT SQL: "ok" or the SQLSTATE of the error
try() {
	local err
	err=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$1" -d postgres -Atq \
		-v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$2" 2>&1 >/dev/null || true)
	err=$(echo "$err" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1)
	echo "${err:-ok}"
}

# -- distribute(): refusals ---------------------------------------------
q "$SOLO" "CREATE EXTENSION idem_gate"
check "without Citus: 55000" 55000 "$(try "$SOLO" "SELECT idem_gate.distribute()")"
check "shard_count 0: 22023" 22023 "$(try "$COORD" "SELECT idem_gate.distribute(0)")"
check "shard_count NULL: 22004" 22004 "$(try "$COORD" "SELECT idem_gate.distribute(NULL)")"
check "on a worker: 55000" 55000 "$(try "$W1" "SELECT idem_gate.distribute()")"
q "$LONE" "CREATE EXTENSION citus" >/dev/null
q "$LONE" "SELECT citus_set_coordinator_host('127.0.0.1', $LONE)" >/dev/null
q "$LONE" "CREATE EXTENSION idem_gate"
q "$LONE" "SELECT idem_claim('k1', 'wf')" >/dev/null
check "rows on a coordinator without workers: 55000" 55000 "$(try "$LONE" "SELECT idem_gate.distribute()")"
check "... and nothing changed" "0 1" "$(q "$LONE" "SELECT (SELECT count(*) FROM pg_dist_partition), (SELECT count(*) FROM idem_gate.claims)" | tr '|' ' ')"
check "none of them distributed anything" 0 "$(q "$COORD" "SELECT count(*) FROM pg_dist_partition")"

# the same coordinator with a worker: its rows move into the shards
LONE_W=$((COORD + 9))
node_init "$LONE_W"; node_start "$LONE_W"
q "$LONE_W" "CREATE EXTENSION citus" >/dev/null
q "$LONE" "SELECT citus_add_node('127.0.0.1', $LONE_W)" >/dev/null
q "$LONE" "SELECT idem_claim('k2', 'wf')" >/dev/null
q "$LONE" "SELECT idem_release('k2', 'wf', 'before distributing')" >/dev/null
t1=$(q "$LONE" "SELECT token FROM idem_gate.claims WHERE key = 'k1'")
q "$LONE" "SELECT idem_gate.distribute(4)" >/dev/null
check "rows on a coordinator with a worker: moved into the shards" "1 1 0 0" \
	"$(q "$LONE" "SELECT (SELECT count(*) FROM idem_gate.claims), (SELECT count(*) FROM idem_gate.audit), pg_relation_size('idem_gate.claims'), pg_relation_size('idem_gate.audit')" | tr '|' ' ')"
q "$LONE" "SELECT idem_fail('k1', 'wf', NULL, 'failed before any side effect', true)" >/dev/null
check "a moved claim is granted again with a larger token" "new t" \
	"$(q "$LONE" "SELECT outcome, token > $t1 FROM idem_claim_ex('k1', 'wf')" | tr '|' ' ')"
# a token keeps the granting node's group id in its low 10 bits: a group
# id past 1023 is refused by name (a transaction, so the claim runs here)
check "a node group id of 1024 is refused: 54000" 54000 \
	"$(try "$LONE" "BEGIN; UPDATE pg_catalog.pg_dist_local_group SET groupid = 1024; SELECT idem_claim('kg', 'wf'); ROLLBACK")"
check "... and nothing changed" "0 0" \
	"$(q "$LONE" "SELECT (SELECT groupid FROM pg_catalog.pg_dist_local_group), (SELECT count(*) FROM idem_gate.claims WHERE key = 'kg')" | tr '|' ' ')"
node_stop "$LONE_W" immediate

# -- distribute() -------------------------------------------------------
out=$(q "$COORD" "SELECT idem_gate.distribute(8)")
echo "distribute: $out"
check "claims distributed by key, audit co-located, policies a reference table" \
	"audit|h|claims
claims|h|claims
policies|n|" \
	"$(q "$COORD" "SELECT c.relname, p.partmethod, (SELECT c2.relname FROM pg_dist_partition p2 JOIN pg_class c2 ON c2.oid = p2.logicalrelid WHERE p2.colocationid = p.colocationid AND p.partmethod = 'h' ORDER BY p2.logicalrelid LIMIT 1) FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid ORDER BY 1")"
check "12 API functions (the 1.2 overloads and history() too) delegated on their key, co-located with claims" 12 \
	"$(q "$COORD" "SELECT count(*) FROM pg_dist_object o JOIN pg_dist_partition p ON p.colocationid = o.colocationid AND p.logicalrelid = 'idem_gate.claims'::regclass WHERE o.distribution_argument_index = 0")"
check "a second call is harmless" "already distributed" "$(q "$COORD" "SELECT idem_gate.distribute()")"
check "the workers see the claims table distributed" "t
t" "$(q "$COORD" "SELECT result FROM run_command_on_workers(\$\$SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'idem_gate.claims'::regclass)\$\$) ORDER BY nodeport")"

# -- the state machine: the coordinator answers as one server does --------
cut=$(grep -n '^-- a table the DBA changed' "$repo/sql/claim.sql" | cut -d: -f1)
# Citus plans no parameters in SQL functions, nor a STABLE timestamptz -
# interval of a column in an UPDATE: the test's age_claim() helper becomes
# PL/pgSQL computing the times first, on both servers
head -n $((cut - 2)) "$repo/sql/claim.sql" | awk '
	/^CREATE FUNCTION age_claim/ { skip = 1 }
	skip && /\$\$;$/ { skip = 0
		print "CREATE FUNCTION age_claim(k text, w text, by interval) RETURNS void"
		print "LANGUAGE plpgsql AS $$ DECLARE a timestamptz; b timestamptz; c timestamptz; d timestamptz; BEGIN"
		print "	SELECT created_at - by, claimed_at - by, updated_at - by, completed_at - by"
		print "	  INTO a, b, c, d FROM idem_gate.claims WHERE workflow = w AND key = k;"
		print "	UPDATE idem_gate.claims SET created_at = a, claimed_at = b, updated_at = c,"
		print "	       completed_at = d WHERE workflow = w AND key = k;"
		print "END $$;"
		next }
	!skip' >"$CITUS_BASE/claim.sql"
grep -q 'INTO a, b, c, d' "$CITUS_BASE/claim.sql"
chmod 644 "$CITUS_BASE/claim.sql"
run_claim() { as_pg "$CITUS_BIN/psql" -X -a -q -h "$CITUS_BASE" -p "$1" -d postgres -f "$CITUS_BASE/claim.sql" 2>&1 | sed 's/^psql:[^:]*:[0-9]*: //'; }
run_claim "$SOLO" >"$CITUS_BASE/claim.solo"
run_claim "$COORD" >"$CITUS_BASE/claim.citus"
if diff -u "$CITUS_BASE/claim.solo" "$CITUS_BASE/claim.citus" >"$CITUS_BASE/claim.diff"; then
	ok "sql/claim.sql through the coordinator: the output of one server ($(wc -l <"$CITUS_BASE/claim.solo") lines)"
else
	not_ok "sql/claim.sql through the coordinator differs from one server"
	head -80 "$CITUS_BASE/claim.diff"
fi
check "the coordinator's shell of idem_gate.claims is empty" 0 "$(q "$COORD" "SELECT pg_relation_size('idem_gate.claims')")"
total=$(q "$COORD" "SELECT count(*) FROM idem_gate.claims")
in_shards=$(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_shards('idem_gate.claims', 'SELECT count(*) FROM %s')")
check "every row is in a worker's shard ($total rows)" "$total" "$in_shards"
check "both workers hold rows" "$W1 $W2" "$(q "$COORD" "SELECT string_agg(DISTINCT n.nodeport::text, ' ') FROM run_command_on_shards('idem_gate.claims', 'SELECT count(*) FROM %s') r JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid) WHERE r.result::int > 0")"

# -- bad input through the coordinator: the SQLSTATE of one server, no crash
# (Citus hashes a NULL distribution argument of a delegated call without
# looking at it, and its backend dies: idem_gate keeps such a call from
# being delegated, see src/citus_guard.c)
cpid=$(q "$COORD" "SELECT pg_postmaster_start_time()")
bad=0
while IFS= read -r sql; do
	[ -n "$sql" ] || continue
	solo=$(try "$SOLO" "$sql")
	coord=$(try "$COORD" "$sql")
	if [ "$solo" != "$coord" ] || [ "$solo" = ok ]; then
		not_ok "bad input through the coordinator: $sql: one server $solo, coordinator $coord"
		bad=$((bad + 1))
	fi
done <<'SQL'
SELECT idem_claim(NULL, 'wf', NULL)
SELECT * FROM idem_claim_ex(NULL, 'wf', NULL, NULL, NULL)
SELECT outcome FROM idem_claim_ex(NULL, 'wf')
SELECT * FROM idem_status(NULL, 'wf')
SELECT idem_status(NULL, 'wf')
SELECT idem_heartbeat(NULL, 'wf', 1)
SELECT idem_complete(NULL, 'wf', 1, NULL)
SELECT idem_fail(NULL, 'wf', 1, 'x', true)
SELECT idem_resolve(NULL, 'wf', 'retry')
SELECT idem_resolve(NULL, 'wf', 'bogus')
SELECT idem_release(NULL, 'wf')
SELECT idem_claim(NULL::text || 'x', 'wf')
PREPARE bad_p(text) AS SELECT * FROM idem_claim_ex($1, 'wf', interval '10 minutes', NULL, 'run'); EXECUTE bad_p(NULL)
SELECT idem_claim('k', NULL)
SELECT idem_claim('', 'wf')
SELECT idem_claim('k', '')
SELECT idem_claim(repeat('k', 256), 'wf')
SELECT idem_claim('k', 'wf', '-1 s')
SELECT idem_claim('k', 'wf', '0 s')
SELECT idem_heartbeat('bad_k', 'wf', NULL)
SELECT idem_complete('bad_never_claimed', 'wf', 1, NULL)
SELECT idem_resolve('bad_k', 'wf', NULL)
SELECT idem_resolve('bad_k', 'wf', 'bogus')
SELECT * FROM idem_claim_many(ARRAY['a', NULL], 'wf')
SELECT * FROM idem_claim_many(NULL, 'wf')
SQL
[ "$bad" = 0 ] && ok "every bad input of the contract gives one server's SQLSTATE through the coordinator (25 statements)"
check "... and the coordinator never crashed" "$cpid" "$(q "$COORD" "SELECT pg_postmaster_start_time()")"
check "a call with a key is still pushed down" 1 \
	"$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq \
		-c "SET client_min_messages = debug1" -c "SELECT idem_claim('push_0', 'wf_push')" 2>&1 | grep -c 'pushing down the function call')"

# key_node(key): the port of the node holding the key's shard (citus_shards
# does not list the shards of an extension's tables)
KEY_NODE="SET client_min_messages = error; CREATE FUNCTION pg_temp.key_node(k text) RETURNS int LANGUAGE sql AS \$\$
	SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	 WHERE p.shardid = get_shard_id_for_distribution_column('idem_gate.claims', k) \$\$;"
qk() { as_pg "$CITUS_BIN/psql" -X -v ON_ERROR_STOP=1 -h "$CITUS_BASE" -p "$1" -d postgres -Atq -c "$KEY_NODE" -c "$2"; }

# -- push-down ----------------------------------------------------------
dbg=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq \
	-c "SET client_min_messages = debug1" -c "SELECT idem_claim('push_1', 'wf_push')" 2>&1)
case "$dbg" in
*"pushing down the function call"*) ok "the coordinator pushes idem_claim down (DEBUG)";;
*) not_ok "no push-down in: $dbg";;
esac
node=$(qk "$COORD" "SELECT pg_temp.key_node('push_2')")
plan=$(q "$COORD" "EXPLAIN (COSTS OFF) SELECT * FROM idem_claim_ex('push_2', 'wf_push')")
case "$plan" in
*"Custom Scan (Citus Adaptive)"*"port=$node"*) ok "EXPLAIN: one task on the key's node ($node)";;
*) not_ok "EXPLAIN did not show a task on port $node: $plan";;
esac
before=$(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_workers('SELECT claims_new FROM idem_gate.stats_counters()')")
cbefore=$(q "$COORD" "SELECT claims_new FROM idem_gate.stats_counters()")
for i in $(seq 1 20); do echo "SELECT idem_claim('push_many_$i', 'wf_push');"; done |
	as_pg "$CITUS_BIN/psql" -X -q -h "$CITUS_BASE" -p "$COORD" -d postgres >/dev/null
after=$(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_workers('SELECT claims_new FROM idem_gate.stats_counters()')")
cafter=$(q "$COORD" "SELECT claims_new FROM idem_gate.stats_counters()")
check "20 claims ran on the workers, none on the coordinator" "20 0" "$((after - before)) $((cafter - cbefore))"
# on the node holding the key, the gate's SQL goes through the distributed
# table, which Citus executes locally (and reports with log_local_commands)
kn=$(qk "$COORD" "SELECT pg_temp.key_node('push_1')")
local_run() {
	as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$kn" -d postgres -Atq \
		-c "SET citus.log_local_commands = on" -c "SET client_min_messages = log" \
		-c "SELECT idem_claim('$1', 'wf_push')" \
		-c "SELECT idem_complete('$1', 'wf_push')" \
		-c "SELECT state FROM idem_gate.claims WHERE workflow = 'wf_push' AND key = '$1'" 2>&1
}
loc=$(local_run push_1)
n=$(echo "$loc" | grep -c 'executing the command locally')
check "on the key's node the calls run on the local shard through Citus ($n statements)" \
	"yes completed" "$([ "$n" -gt 1 ] && echo yes || echo no) $(echo "$loc" | tail -1)"
# prepared, as n8n sends it: still delegated
dbg=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq \
	-c "PREPARE c(text, text) AS SELECT * FROM idem_claim_ex(\$1, \$2)" \
	-c "SET client_min_messages = debug1" -c "EXECUTE c('push_3', 'wf_push')" 2>&1)
case "$dbg" in
*"pushing down the function call"*) ok "a prepared idem_claim_ex with \$n parameters is pushed down";;
*) not_ok "prepared: no push-down in: $dbg";;
esac

# -- idem_claim_many across shards ----------------------------------------
many=$(q "$COORD" "SELECT string_agg(ord || ':' || outcome || ':' || (token IS NOT NULL), ' ' ORDER BY ord) FROM idem_claim_many(ARRAY['m1','m2','m3','m4','m5','m6','m1'], 'wf_many')")
check "idem_claim_many through the coordinator" "1:new:true 2:new:true 3:new:true 4:new:true 5:new:true 6:new:true 7:in_flight:false" "$many"
check "... its rows on both workers" "$W1 $W2" "$(qk "$COORD" "WITH k AS MATERIALIZED (SELECT c.key FROM idem_gate.claims c WHERE c.workflow = 'wf_many') SELECT string_agg(DISTINCT pg_temp.key_node(k.key)::text, ' ') FROM k")"
many=$(q "$COORD" "SELECT string_agg(outcome::text, ' ' ORDER BY ord) FROM idem_claim_many(ARRAY['m6','m1','m9'], 'wf_many')")
check "idem_claim_many again: duplicates in flight, a new key new" "in_flight in_flight new" "$many"
check "... 7 rows with 7 tokens" "7 7" "$(q "$COORD" "SELECT count(*), count(DISTINCT token) FROM idem_gate.claims WHERE workflow = 'wf_many'" | tr '|' ' ')"
# the inbox through the coordinator: the 7 claims in flight are stuck once
# a policy (a reference table) says a second is long; the view's bound,
# a subquery of the policies, is planned by Citus like its join
q "$COORD" "INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('wf_many', '1 second')" >/dev/null
sleep 1.2
check "the inbox through the coordinator lists the stuck claims of a distributed table" "7 stuck" \
	"$(q "$COORD" "SELECT count(*), min(reason) FROM idem_gate.inbox WHERE workflow = 'wf_many'" | tr '|' ' ')"
q "$COORD" "DELETE FROM idem_gate.policies WHERE workflow = 'wf_many'" >/dev/null
# one delegated call per shard group: 12 keys, as many push-downs as shards
groups=$(q "$COORD" "SELECT count(DISTINCT get_shard_id_for_distribution_column('idem_gate.claims', 'g' || i)) FROM generate_series(1, 12) i")
wbefore=$(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_workers('SELECT claims_new FROM idem_gate.stats_counters()')")
cbefore=$(q "$COORD" "SELECT claims_new FROM idem_gate.stats_counters()")
dbg=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq \
	-c "SET client_min_messages = debug1" \
	-c "SELECT string_agg(ord || ':' || key || ':' || outcome, ' ' ORDER BY ord) FROM idem_claim_many(ARRAY(SELECT 'g' || i FROM generate_series(1, 12) i) || ARRAY['g3'], 'wf_groups')" 2>&1)
check "idem_claim_many: one delegated call per shard group ($groups groups for 12 keys)" \
	"$groups" "$(echo "$dbg" | grep -c 'pushing down the function call')"
check "... rows in input order, the repeated key in_flight" \
	"1:g1:new 2:g2:new 3:g3:new 4:g4:new 5:g5:new 6:g6:new 7:g7:new 8:g8:new 9:g9:new 10:g10:new 11:g11:new 12:g12:new 13:g3:in_flight" \
	"$(echo "$dbg" | grep -v DEBUG)"
check "... the groups ran on the workers: 12 new claims there, none on the coordinator" "12 0" \
	"$(( $(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_workers('SELECT claims_new FROM idem_gate.stats_counters()')") - wbefore )) $(( $(q "$COORD" "SELECT claims_new FROM idem_gate.stats_counters()") - cbefore ))"
dbg=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq \
	-c "BEGIN" -c "SET client_min_messages = debug1" \
	-c "SELECT count(*) FROM idem_claim_many(ARRAY['tx1','tx2','tx3','tx4'], 'wf_groups')" -c "ROLLBACK" 2>&1)
check "inside BEGIN ... ROLLBACK: claimed key by key in the transaction, nothing kept" \
	"0 4 0" "$(echo "$dbg" | grep -c 'pushing down the function call') $(echo "$dbg" | grep -v DEBUG | head -1) $(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE key LIKE 'tx%'")"
q "$COORD" "SELECT count(*) FROM idem_claim_many(ARRAY['h1','h2'], 'wf_groups', NULL, ARRAY['fp-a','fp-a'])" >/dev/null
err=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq -v VERBOSITY=verbose \
	-c "SELECT * FROM idem_claim_many(ARRAY['h3','h1','h4'], 'wf_groups', NULL, ARRAY['fp-a','fp-b','fp-a'])" 2>&1 || true)
check "a group's error names the element's position in the whole array" "IG001 element 2 of keys" \
	"$(echo "$err" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p') $(echo "$err" | sed -n 's/^CONTEXT:  \(element [0-9]* of keys\).*/\1/p')"
# a group that runs on the receiving node itself (here: claim_many_group
# not registered, as in a gate distributed before it existed) is one
# transaction there: an error in it keeps none of its claims
q "$COORD" "DELETE FROM pg_dist_object WHERE objid = 'idem_gate.claim_many_group(text[], text, interval, text[], text, text, integer[], name)'::regprocedure" >/dev/null
err=$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -Atq -v VERBOSITY=verbose \
	-c "SET client_min_messages = debug1" \
	-c "SELECT * FROM idem_claim_many(ARRAY['loc_1', 'loc_1'], 'wf_groups', NULL, ARRAY['fp-a', 'fp-b'])" 2>&1 || true)
check "a group not delegated runs in one transaction: its error keeps nothing" "0 IG001 0" \
	"$(echo "$err" | grep -c 'pushing down the function call') $(echo "$err" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p') $(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE key = 'loc_1'")"
check "a second distribute() registers claim_many_group again" "idem_gate.claim_many_group delegated by shard group" \
	"$(q "$COORD" "SELECT idem_gate.distribute()")"
q "$COORD" "CREATE ROLE batcher LOGIN; GRANT EXECUTE ON FUNCTION idem_claim_many(text[], text, interval, text[], text) TO batcher; GRANT USAGE ON SCHEMA idem_gate TO batcher" >/dev/null
asb() { as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -U batcher -Atq -v VERBOSITY=verbose -c "$1" 2>&1 || true; }
check "a role granted idem_claim_many batches through the coordinator" "new new in_flight" \
	"$(asb "SELECT string_agg(outcome::text, ' ' ORDER BY ord) FROM idem_claim_many(ARRAY['b1','b2','b1'], 'wf_roles')")"
check "... but cannot call claim_many_group itself" 42501 \
	"$(asb "SELECT * FROM idem_gate.claim_many_group(ARRAY['b9'], 'wf_roles', NULL, NULL, NULL, 'b9', ARRAY[1], 'postgres')" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p')"
# per-workflow grants are checked for the calling role on the groups' nodes
# (ALTER SYSTEM: Citus 14 refuses ALTER DATABASE on a worker)
acl_setting() { for p in "$COORD" "$W1" "$W2"; do q "$p" "ALTER SYSTEM $1" >/dev/null; q "$p" "SELECT pg_reload_conf()" >/dev/null; done; sleep 0.5; }
acl_setting "SET idem_gate.workflow_acl = on"
q "$COORD" "SELECT idem_gate.grant_workflow('batcher', 'wf_roles')" >/dev/null
err=$(asb "SELECT * FROM idem_claim_many(ARRAY['b3','b4','b5','b6'], 'wf_roles')")
check "granted on the coordinator only: the workers refuse the groups (42501, naming the role)" "42501 yes 0" \
	"$(echo "$err" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1) $(case "$err" in *batcher*) echo yes;; *) echo no;; esac) $(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE key IN ('b3','b4','b5','b6')")"
for p in "$W1" "$W2"; do q "$p" "SELECT idem_gate.grant_workflow('batcher', 'wf_roles')" >/dev/null; done
check "granted on every node: the batch runs" "new new new new" \
	"$(asb "SELECT string_agg(outcome::text, ' ' ORDER BY ord) FROM idem_claim_many(ARRAY['b3','b4','b5','b6'], 'wf_roles')")"
acl_setting "RESET idem_gate.workflow_acl"

# -- keyed keys: the keyed workflows are read from the reference table in
# every transaction, and each node hashes with its own copy of the secrets
for p in "$COORD" "$W1" "$W2"; do
	q "$p" "COPY (SELECT 's1 ' || repeat('a1', 32)) TO PROGRAM 'umask 077 && cat > idem_gate_citus_secrets'"
	q "$p" "ALTER SYSTEM SET idem_gate.secret_file = 'idem_gate_citus_secrets'"
	q "$p" "SELECT pg_reload_conf()" >/dev/null
done
sleep 1
q "$COORD" "INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('kc_a', true), ('kc_b', true)"
check "a claim in a keyed workflow (the second of two)" new \
	"$(q "$COORD" "SELECT outcome FROM idem_claim_ex('ann@example.com', 'kc_b')")"
# (idem_key() in its own statement: in a query over the claims, Citus would
# run it on the workers, where reading the policies is a nested
# distributed query, which Citus refuses)
form=$(q "$COORD" "SELECT idem_key('kc_b', 'ann@example.com')")
check "... stores the key's form, which idem_key() gives, and never the key" "s1 1 0" \
	"$(q "$COORD" "SELECT split_part('$form', ':', 1), (SELECT count(*) FROM idem_gate.claims WHERE workflow = 'kc_b' AND key = '$form'), (SELECT count(*) FROM idem_gate.claims WHERE key LIKE '%ann%')" | tr '|' ' ')"
check "... and the same key again finds it" in_flight \
	"$(q "$COORD" "SELECT outcome FROM idem_claim_ex('ann@example.com', 'kc_b')")"
# a transaction that read the keyed workflows and rolled back leaves none
# of them behind: a workflow made keyed after it is keyed at the next call
check "a workflow made keyed after a rolled-back read is keyed" "x s1" \
	"$(q "$COORD" "BEGIN; SELECT idem_key('kc_c', 'x'); ROLLBACK; INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('kc_c', true); SELECT split_part(idem_key('kc_c', 'x'), ':', 1)" | tr '\n' ' ' | sed 's/ $//')"
q "$COORD" "DELETE FROM idem_gate.claims WHERE workflow LIKE 'kc\\_%'; DELETE FROM idem_gate.policies WHERE workflow LIKE 'kc\\_%'"

# -- races through the coordinator ----------------------------------------
# 8 clients, each 150 takeovers (a stale interval of 1 microsecond) of 5
# keys, as statements the coordinator delegates; line i of a client's
# output answers its i-th call, on key race_(i % 5).
for c in $(seq 1 8); do
	for i in $(seq 1 150); do
		echo "SELECT * FROM idem_claim_ex('race_$((i % 5))', 'wf_race', '1 microsecond', NULL, 'client_${c}_$i');"
	done >"$CITUS_BASE/race_$c.sql"
done
chmod 644 "$CITUS_BASE"/race_*.sql
for c in $(seq 1 8); do
	as_pg "$CITUS_BIN/psql" -X -Atq -F ' ' -h "$CITUS_BASE" -p "$COORD" -d postgres -f "$CITUS_BASE/race_$c.sql" 2>&1 |
		awk -v c="$c" '{ print c, NR, "race_" (NR % 5), $0 }' >"$CITUS_BASE/race_$c.out" &
done
wait
cat "$CITUS_BASE"/race_*.out >"$CITUS_BASE/race.all"
grants=$(awk '$4 == "new" || $4 == "stale_taken"' "$CITUS_BASE/race.all" | wc -l)
errors=$(grep -c ERROR "$CITUS_BASE/race.all" || true)
check "races: 1200 calls answered without an error ($grants grants)" "1200 0" "$(wc -l <"$CITUS_BASE/race.all" | tr -d ' ') $errors"
check "races: no token granted twice" "" "$(awk '$4 == "new" || $4 == "stale_taken" {print $5}' "$CITUS_BASE/race.all" | sort | uniq -d | head -3)"
check "races: tokens only grow per key and client" "" "$(awk '$4 == "new" || $4 == "stale_taken" { k = $1 " " $3; if (k in last && $5 <= last[k]) print; last[k] = $5 }' "$CITUS_BASE/race.all" | head -3)"
final=$(q "$COORD" "SELECT string_agg(key || '=' || token, ' ' ORDER BY key) FROM idem_gate.claims WHERE workflow = 'wf_race'")
want=$(awk '$4 == "new" || $4 == "stale_taken" { if ($5 > m[$3]) m[$3] = $5 } END { for (k in m) print k "=" m[k] }' "$CITUS_BASE/race.all" | sort | tr '\n' ' ' | sed 's/ $//')
check "races: each key holds its largest granted token" "$want" "$final"

# -- the isolation specs' interleavings, through the coordinator ----------
# (test/citus/steps.sh).  s1 works in BEGIN ... COMMIT (not delegated: the
# coordinator holds the row lock on the worker's shard); s2's call is a
# delegated statement that must wait for it.
. "$here/steps.sh"
# iso NAME S1_FIRST S1_END S2_CALL EXPECTED: s1 begins and runs S1_FIRST;
# s2's call then waits; s1 ends with S1_END; s2 answers EXPECTED
iso() {
	s_open s1; s_open s2
	s_send s1 "BEGIN;"
	s_send s1 "$2"
	s_wait s1 1 || true
	s_send s2 "$4"
	sleep 1.5
	local waited=$(s_lines s2)
	s_send s1 "$3"
	s_send s1 "SELECT 'ended';"
	s_wait s1 2 || true
	s_wait s2 1 || true
	check "$1" "0 $5" "$waited $(s_answer s2 1)"
	s_close s1; s_close s2
	wait
}
iso "new-key race: the second claim waits for the first, in_flight once it commits" \
	"SELECT outcome FROM idem_claim_ex('iso_1', 'wf_iso', NULL, NULL, 'run-1');" "COMMIT;" \
	"SELECT outcome FROM idem_claim_ex('iso_1', 'wf_iso', NULL, NULL, 'run-2');" in_flight
iso "new-key race: the first rolls back, the waiter gets the claim" \
	"SELECT outcome FROM idem_claim_ex('iso_2', 'wf_iso', NULL, NULL, 'run-1');" "ROLLBACK;" \
	"SELECT outcome || ' ' || token % 1024 FROM idem_claim_ex('iso_2', 'wf_iso', NULL, NULL, 'run-2');" \
	"new $(q "$COORD" "SELECT groupid FROM pg_dist_placement WHERE shardid = get_shard_id_for_distribution_column('idem_gate.claims', 'iso_2')")"
t3=$(q "$COORD" "SELECT token FROM idem_claim_ex('iso_3', 'wf_iso', NULL, NULL, 'run-1')")
q "$COORD" "UPDATE idem_gate.claims SET created_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour', updated_at = now() - interval '1 hour' WHERE workflow = 'wf_iso' AND key = 'iso_3'" >/dev/null
iso "a takeover waits for a completion in progress, then answers completed" \
	"SELECT idem_complete('iso_3', 'wf_iso', $t3, '{\"paid\": true}');" "COMMIT;" \
	"SELECT outcome || ' ' || (result->>'paid') FROM idem_claim_ex('iso_3', 'wf_iso', '1 minute');" "completed true"
t4=$(q "$COORD" "SELECT token FROM idem_claim_ex('iso_4', 'wf_iso', NULL, NULL, 'run-1')")
q "$COORD" "UPDATE idem_gate.claims SET created_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour', updated_at = now() - interval '1 hour' WHERE workflow = 'wf_iso' AND key = 'iso_4'" >/dev/null
iso "a completion waits for a takeover in progress, then is fenced off" \
	"SELECT outcome FROM idem_claim_ex('iso_4', 'wf_iso', '1 minute', NULL, 'run-2');" "COMMIT;" \
	"SELECT idem_complete('iso_4', 'wf_iso', $t4, '{}');" \
	"ERROR:  token $t4 no longer owns key \"iso_4\" in workflow \"wf_iso\""
q "$COORD" "SELECT idem_claim('iso_5', 'wf_iso')" >/dev/null
iso "a completion waits for an operator's release, then finds no claim" \
	"SELECT idem_release('iso_5', 'wf_iso', 'stuck run');" "COMMIT;" \
	"SELECT idem_complete('iso_5', 'wf_iso', NULL, '{}');" \
	"ERROR:  cannot complete key \"iso_5\" in workflow \"wf_iso\": no claim exists"
check "... and the key is new again" new "$(q "$COORD" "SELECT outcome FROM idem_claim_ex('iso_5', 'wf_iso')")"
iso "idem_claim_many waits for a claim in progress on one of its keys" \
	"SELECT outcome FROM idem_claim_ex('iso_6', 'wf_iso', NULL, NULL, 'run-1');" "COMMIT;" \
	"SELECT string_agg(outcome::text, ' ' ORDER BY ord) FROM idem_claim_many(ARRAY['iso_7', 'iso_6', 'iso_8'], 'wf_iso');" \
	"new in_flight new"

# -- the janitor: each node cleans the shards it holds --------------------
# counters NAME: the sum over the workers, and the coordinator's
counters() {
	echo "$(q "$COORD" "SELECT sum(result::bigint) FROM run_command_on_workers('SELECT $1 FROM idem_gate.stats_counters()')") $(q "$COORD" "SELECT $1 FROM idem_gate.stats_counters()")"
}
q "$COORD" "INSERT INTO idem_gate.policies (workflow, retention, stuck_after) VALUES ('wf_jan', '1 hour', '1 hour')" >/dev/null
for i in $(seq 1 20); do
	echo "SELECT idem_claim('jan_$i', 'wf_jan');"
	echo "SELECT idem_complete('jan_$i', 'wf_jan', NULL, '{}');"
done | as_pg "$CITUS_BIN/psql" -X -q -h "$CITUS_BASE" -p "$COORD" -d postgres >/dev/null
# 10 stuck claims over 8 shards: at least one shard holds two, which its
# node's one batch must announce both of
for i in $(seq 1 10); do
	echo "SELECT idem_claim('jan_stuck_$i', 'wf_jan');"
done | as_pg "$CITUS_BIN/psql" -X -q -h "$CITUS_BASE" -p "$COORD" -d postgres >/dev/null
set -- $(counters deleted_completed); del_w=$1; del_c=$2
set -- $(counters alerts); al_w=$1; al_c=$2
# a listener on the coordinator, where the alerts of the workers arrive
listen_out=$CITUS_BASE/listen.out
{ echo "LISTEN idem_gate_alert;"; for i in $(seq 1 120); do echo "SELECT pg_sleep(0.5);"; done; } |
	as_pg "$CITUS_BIN/psql" -X -q -h "$CITUS_BASE" -p "$COORD" -d postgres >"$listen_out" 2>&1 &
listener=$!
sleep 1
q "$COORD" "UPDATE idem_gate.claims SET created_at = '2000-01-01', claimed_at = '2000-01-01', updated_at = '2000-01-01', completed_at = CASE WHEN state = 'completed' THEN '2000-01-01'::timestamptz END WHERE workflow = 'wf_jan'" >/dev/null
for i in $(seq 1 30); do
	left=$(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE workflow = 'wf_jan' AND state = 'completed'")
	[ "$left" = 0 ] && break
	sleep 1
done
sleep 3	# more passes: nothing is deleted or alerted twice
set -- $(counters deleted_completed)
check "the janitors deleted the 20 expired rows, on the workers" "20 0" "$(( $1 - del_w )) $(( $2 - del_c ))"
set -- $(counters alerts)
check "the 10 stuck claims were alerted once each, across the cluster" "10 0" "$(( $1 - al_w )) $(( $2 - al_c ))"
check "the stuck claims are kept" 10 "$(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE workflow = 'wf_jan'")"
for i in $(seq 1 20); do
	[ "$(grep -c '"workflow":"wf_jan","reason":"stuck"' "$listen_out")" -ge 10 ] && break
	sleep 1
done
kill "$listener" 2>/dev/null || true
wait "$listener" 2>/dev/null || true
# the payload names the workflow, never the key: ten alerts for ten claims
check "a listener on the coordinator got each worker's alert once" "10 0" \
	"$(grep -c '"workflow":"wf_jan","reason":"stuck"' "$listen_out") $(grep -c 'jan_stuck_' "$listen_out")"

# -- the views on the coordinator show the whole cluster -------------------
check "workflow_stats on the coordinator counts every shard" "wf_jan|10|0|0|0" \
	"$(q "$COORD" "SELECT workflow, rows_processing, rows_failed_retryable, rows_needs_review, rows_completed_estimate FROM idem_gate.workflow_stats WHERE workflow = 'wf_jan'")"
check "stats on the coordinator counts processing rows on every shard" \
	"$(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE state = 'processing'")" \
	"$(q "$COORD" "SELECT rows_processing FROM idem_gate.stats")"
check "stats on the coordinator sums the counters of every node" \
	"$(q "$COORD" "SELECT sum((result::json->>'claims_new')::bigint) || ' ' || sum((result::json->>'alerts')::bigint) FROM run_command_on_all_nodes('SELECT row_to_json(c) FROM idem_gate.stats_counters() c')")" \
	"$(q "$COORD" "SELECT claims_new || ' ' || alerts FROM idem_gate.stats")"
q "$COORD" "ANALYZE idem_gate.claims" >/dev/null
check "... and estimates the completed rows from every shard's statistics" \
	"$(q "$COORD" "SELECT count(*) FROM idem_gate.claims WHERE state = 'completed'")" \
	"$(q "$COORD" "SELECT rows_completed_estimate FROM idem_gate.stats")"
q "$COORD" "CREATE ROLE watcher LOGIN; GRANT USAGE ON SCHEMA idem_gate TO watcher; GRANT SELECT ON idem_gate.stats TO watcher; GRANT EXECUTE ON FUNCTION idem_gate.cluster_counters() TO watcher" >/dev/null
check "a role granted the view reads the cluster's counters" "t" \
	"$(as_pg "$CITUS_BIN/psql" -X -h "$CITUS_BASE" -p "$COORD" -d postgres -U watcher -Atq -c "SELECT available AND claims_new > 0 FROM idem_gate.stats" 2>&1)"

# the probe of a Citus table reads the row through SQL: an answer about a
# row that exists carries that row's claim time and attempt
q "$COORD" "SELECT outcome FROM idem_claim_ex('probe_1', 'wf_probe')" >/dev/null
at=$(q "$COORD" "SELECT claimed_at FROM idem_gate.claims WHERE workflow = 'wf_probe' AND key = 'probe_1'")
check "an in_flight answer through the coordinator carries the row's claimed_at and attempt" "in_flight|$at|1" \
	"$(q "$COORD" "SELECT outcome, claimed_at, attempt FROM idem_claim_ex('probe_1', 'wf_probe')")"
