#!/usr/bin/env bash
# The managed edition (managed/idem_gate.sql) on a "managed-like" server of
# the major under test: idem_gate is not preloaded, pg_cron is (as the
# services offer it), and the edition is installed with psql by a role that
# owns its database, may create roles and databases (like rds_superuser),
# and is no superuser.  Then the same suites as the C edition's, through an
# edition switch:
#   - installing: as that role; LANGUAGE C refused to it; the refusals of a
#     second install, of a database that holds the C extension, of a role
#     that may not create schemas (each SQLSTATE and message);
#   - the settings the C edition refuses at SET, refused at their first use
#     (a call, a janitor pass): SQLSTATE, message, the hint that says where
#     the value was set, nothing written;
#   - the janitor scheduled by pg_cron (idem_gate.schedule_janitor()): a
#     stuck claim is announced by the scheduled pass, and a gate nobody
#     scheduled still answers;
#   - the model test (test/model/run.sh --edition managed);
#   - both editions side by side (differential.py): the same catalog, and
#     the same answers to the same random calls;
#   - the isolation specs of test/isolation, each with the managed edition
#     installed in its setup, against the C edition's expected output;
#   - the canonical-JSON suite (test/suites/20_jcs.sh, IDEM_EDITION=managed);
#   - the pg_regress files of sql/ against expected/ (regress.sh), where
#     test/managed/expected/*.patch gives the differences by design;
#   - pgTAP's schema contract (test/pgtap/schema.sql skips, naming why,
#     what the managed edition does not have);
#   - the attack matrix's SQL cells (test/security/matrix.py --quick,
#     IDEM_EDITION=managed).
# The pg_tle package is not tested here: pg_tle is not in Debian; given its
# sources, test/managed/pg_tle.sh builds it and tests the package.
#
# Runs from the test command (test/suites/80_managed.sh) with the
# variables it sets (IDEM_PG_MAJOR, IDEM_PG_BIN, IDEM_PG_AS_POSTGRES,
# IDEM_PG_ROOT, PGPORT), or by hand on the host's 15:
#   test/managed/run.sh            # needs root, postgresql-15-cron, idem_gate installed
# IDEM_MANAGED_SECONDS sets the model's and the differential test's length
# (default 25 each); IDEM_MANAGED_KEEP=1 keeps the server's directory.  Ends with one line "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
MAJOR=${IDEM_PG_MAJOR:-15}
BIN=${IDEM_PG_BIN:-$(pg_config --bindir)}
AS_PG=${IDEM_PG_AS_POSTGRES:-runuser -u postgres --}
RDIR=${IDEM_PG_ROOT:-}
MPORT=$((${PGPORT:-55432} + 9))
SECONDS_EACH=${IDEM_MANAGED_SECONDS:-25}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_managed.XXXXXX")
chmod 755 "$DIR"
pass=0 fail=0

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (got '$2', expected '$3')"; fi; }
finish() {
	local rc=$?
	# a script that stops early with nothing failed (a syntax error further
	# down is only found when bash reaches it) must not pass: ended is set
	# on its last line
	[ -n "${ended:-}" ] || [ "$fail" -gt 0 ] || not_ok "the script stopped before its end (exit $rc)"
	PG_MAJOR=$MAJOR "$ROOT/scripts/cluster.sh" stop "$DIR/m" >/dev/null 2>&1
	if [ -n "${IDEM_MANAGED_KEEP:-}" ]; then echo "kept $DIR"; else rm -rf "$DIR"; fi
	echo "$pass passed, $fail failed"
	# in an EXIT trap a bare exit keeps the status from before the trap
	[ "$fail" -eq 0 ] && exit 0
	exit 1
}
trap finish EXIT
# the results of libpq programs, as the superuser and as the owner
export PGHOST=127.0.0.1 PGPORT=$MPORT PGUSER=postgres PGDATABASE=postgres
su_sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
owner_sql() { psql -X -q -At -v ON_ERROR_STOP=1 -U idem_owner "$@"; }
# the SQLSTATE and message of a failing statement, as "CODE message"
err_of() { psql -X -q -At -v VERBOSITY=sqlstate "$@" 2>&1 >/dev/null | sed -E 's/^(psql:.*:[0-9]+: )?ERROR: +//' | head -1; }
err_msg() { psql -X -q -At "$@" 2>&1 >/dev/null | sed -nE 's/^(psql:.*:[0-9]+: )?ERROR: +//p' | head -1; }

# the committed files are what managed/build.py makes of the parts
if /usr/bin/python3 "$ROOT/managed/build.py" --check >"$DIR/build.log" 2>&1; then
	ok "managed/idem_gate.sql and the pg_tle package are what managed/build.py makes"
else
	cat "$DIR/build.log"
	not_ok "managed/idem_gate.sql and the pg_tle package are what managed/build.py makes"
fi

# pg_cron of this major: Debian's postgresql-N-cron, on the host (scripts/deps.sh)
# or in the major's root
if [ ! -f "$RDIR$BIN/../lib/pg_cron.so" ]; then
	if [ -n "$RDIR" ]; then
		chroot "$RDIR" sh -c "apt-get install -y -q --no-install-recommends postgresql-$MAJOR-cron ||
			{ apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-$MAJOR-cron; }" \
			>"$DIR/cron-apt.log" 2>&1
	else
		{ apt-get install -y -q --no-install-recommends "postgresql-$MAJOR-cron" ||
			{ apt-get update -q && apt-get install -y -q --no-install-recommends "postgresql-$MAJOR-cron"; }; } \
			>"$DIR/cron-apt.log" 2>&1
	fi
fi
if [ -f "$RDIR$BIN/../lib/pg_cron.so" ]; then
	ok "pg_cron of PostgreSQL $MAJOR (Debian's postgresql-$MAJOR-cron)"
else
	cat "$DIR/cron-apt.log" 2>/dev/null
	not_ok "pg_cron of PostgreSQL $MAJOR could not be installed"
	exit 1
fi

# the managed-like server: pg_cron preloaded, idem_gate not
PG_MAJOR=$MAJOR "$ROOT/scripts/cluster.sh" start "$DIR/m" "$MPORT" \
	"shared_preload_libraries = 'pg_cron'" "cron.database_name = 'idem_managed'" "cron.use_background_workers = on" "max_worker_processes = 16" "max_prepared_transactions = 2" >"$DIR/start.log" 2>&1 ||
	{ cat "$DIR/start.log" "$DIR/m/server.log" 2>/dev/null; not_ok "the managed-like server starts"; exit 1; }
check "idem_gate is not preloaded" "$(su_sql -d postgres -c "SELECT current_setting('shared_preload_libraries')")" "pg_cron"
su_sql -d postgres <<'SQL'
CREATE ROLE idem_owner LOGIN CREATEDB CREATEROLE;
CREATE ROLE idem_nocreate LOGIN;
CREATE DATABASE idem_managed OWNER idem_owner;
CREATE DATABASE idem_with_c;
SQL
su_sql -d idem_managed -c "ALTER SCHEMA public OWNER TO idem_owner" -c "CREATE EXTENSION pg_cron" \
	-c "GRANT USAGE ON SCHEMA cron TO idem_owner"

# installing
check "the owner is no superuser and may not use LANGUAGE C" \
	"$(err_of -U idem_owner -d idem_managed -c "CREATE FUNCTION f() RETURNS int AS 'idem_gate', 'idem_claim' LANGUAGE C")" \
	"42501"
if owner_sql -d idem_managed -f "$ROOT/managed/idem_gate.sql" >"$DIR/install.log" 2>&1; then
	ok "managed/idem_gate.sql installs with psql -f, as a role that is no superuser"
else
	cat "$DIR/install.log"
	not_ok "managed/idem_gate.sql installs with psql -f, as a role that is no superuser"
	exit 1
fi
check "its version" "$(owner_sql -d idem_managed -c 'SELECT idem_gate.managed_version()')" "1.3"
check "every object belongs to the installing role" \
	"$(su_sql -d idem_managed -c "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname IN ('idem_gate', 'idem_gate_call', 'public') AND p.proowner <> 'idem_owner'::regrole")" "0"
before=$(su_sql -d idem_managed -c "SELECT count(*) FROM pg_proc")
check "a second install is refused, naming what is there" \
	"$(err_msg -U idem_owner -d idem_managed -f "$ROOT/managed/idem_gate.sql")" \
	"this database already holds a schema idem_gate"
check "... and changes nothing" "$(su_sql -d idem_managed -c "SELECT count(*) FROM pg_proc")" "$before"
if su_sql -d idem_with_c -c "CREATE EXTENSION idem_gate" 2>"$DIR/c.log"; then
	check "a database holding the C extension is refused" \
		"$(err_msg -d idem_with_c -f "$ROOT/managed/idem_gate.sql")" \
		"this database already holds idem_gate, the C extension"
else
	cat "$DIR/c.log"
	not_ok "the C extension installs beside, for the refusal and the differential test"
fi
su_sql -d postgres -c "CREATE DATABASE idem_nocreate_db"
check "a role that may not create schemas is refused, named" \
	"$(err_msg -U idem_nocreate -d idem_nocreate_db -f "$ROOT/managed/idem_gate.sql")" \
	'role "idem_nocreate" may not create schemas in database "idem_nocreate_db"'

# a gate nobody scheduled answers; pg_cron's job then announces a stuck claim
check "without a schedule the gate answers" \
	"$(owner_sql -d idem_managed -c "SELECT idem_claim('stuck_1', 'cron_wf')" -c "SELECT idem_claim('stuck_1', 'cron_wf')")" \
	"$(printf 'new\nin_flight')"
su_sql -d postgres -c "CREATE DATABASE idem_nocron OWNER idem_owner"
su_sql -d idem_nocron -c "ALTER SCHEMA public OWNER TO idem_owner"
owner_sql -d idem_nocron -f "$ROOT/managed/idem_gate.sql" >/dev/null 2>&1
check "schedule_janitor() where pg_cron is not: 55000" \
	"$(err_of -U idem_owner -d idem_nocron -c "SELECT idem_gate.schedule_janitor()")" "55000"
check "... naming what is missing" \
	"$(err_msg -U idem_owner -d idem_nocron -c "SELECT idem_gate.schedule_janitor()")" \
	'pg_cron is not installed in database "idem_nocron"'
# per-workflow access, turned on by the owner, who may not attach an
# idem_gate.* setting to a role (PostgreSQL 15 and later: only superusers
# may attach a parameter no loaded library defines)
check "the owner may not ALTER ROLE ... SET idem_gate.workflow_acl" \
	"$(err_of -U idem_owner -d idem_nocron -c "ALTER ROLE idem_nocreate SET idem_gate.workflow_acl = on")" "42501"
owner_sql -d idem_nocron >/dev/null <<'SQL'
CREATE ROLE acl_team;
CREATE ROLE acl_alice LOGIN IN ROLE acl_team;
CREATE ROLE acl_gone;
GRANT USAGE ON SCHEMA idem_gate TO acl_team;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval) TO acl_team;
SELECT idem_gate.grant_workflow('acl_team', 'orders');
SQL
alice_claim() { psql -X -q -At -U acl_alice -d idem_nocron -v VERBOSITY=sqlstate -c "SELECT idem_claim('$1', '$2')" 2>&1 | sed -E 's/^(psql:.*:[0-9]+: )?ERROR: +//'; }
check "before set_workflow_acl(): a member of the team claims any workflow" "$(alice_claim a1 billing)" "new"
owner_sql -d idem_nocron -c "SELECT idem_gate.set_workflow_acl('acl_team', true)" -c "SELECT idem_gate.set_workflow_acl('acl_gone', true)" >/dev/null
check "after set_workflow_acl('acl_team', true): its member is refused another workflow" "$(alice_claim a2 billing)" "42501"
check "... and claims its granted one" "$(alice_claim a3 orders)" "new"
# what pg_dump writes of the restricted roles (its COPY ... TO stdout):
# names, which a restore into another cluster reads as the same roles
check "a dump names the restricted roles, not their oids" \
	"$(su_sql -d idem_nocron -c "COPY idem_gate_call.workflow_acl_roles TO stdout" | sort | tr '\n' ' ')" \
	"acl_gone acl_team "
check "only the owner may call set_workflow_acl()" \
	"$(err_of -U acl_alice -d idem_nocron -c "SELECT idem_gate.set_workflow_acl('acl_alice', false)")" "42501"
check "set_workflow_acl(NULL, true): 22004" \
	"$(err_of -U idem_owner -d idem_nocron -c "SELECT idem_gate.set_workflow_acl(NULL, true)")" "22004"
check "set_workflow_acl(role, NULL): 22004" \
	"$(err_of -U idem_owner -d idem_nocron -c "SELECT idem_gate.set_workflow_acl('acl_team', NULL)")" "22004"
check "set_workflow_acl() of a role that does not exist: 42704, named" \
	"$(err_msg -U idem_owner -d idem_nocron -c "SELECT idem_gate.set_workflow_acl('acl_nobody', true)")" \
	'role "acl_nobody" does not exist'
owner_sql -d idem_nocron -c "DROP ROLE acl_gone" >/dev/null
check "a restricted role dropped since changes nothing" "$(alice_claim a4 orders)" "new"
owner_sql -d idem_nocron -c "SELECT idem_gate.set_workflow_acl('acl_team', false)" >/dev/null
check "set_workflow_acl('acl_team', false) lifts it" "$(alice_claim a5 billing)" "new"
# a session may restrict itself, in any spelling PostgreSQL reads as on
for v in ON True yes 1; do
	check "a session that sets idem_gate.workflow_acl = '$v' restricts itself" \
		"$(psql -X -q -At -U acl_alice -d idem_nocron -v VERBOSITY=sqlstate -c "SET idem_gate.workflow_acl = '$v'" \
			-c "SELECT idem_claim('a6', 'billing')" 2>&1 | sed -E 's/^(psql:.*:[0-9]+: )?ERROR: +//')" "42501"
done
# idem_key_forms() takes the personal value a keyed key is made from: as in
# the C edition, a too-long one stays out of the message, which a claim's
# key does not
check "idem_key_forms() refuses a too-long key without quoting it" \
	"$(err_msg -U idem_owner -d idem_nocron -c "SELECT * FROM idem_key_forms(repeat('p', 300))")" \
	'key is too long'
check "... where idem_claim() quotes it" \
	"$(err_msg -U idem_owner -d idem_nocron -c "SELECT idem_claim(repeat('p', 300), 'orders')" | cut -c1-8)" \
	'key "ppp'
# a setting the C edition refuses at SET is taken here and refused at its
# first use: PostgreSQL's SQLSTATE and message, a hint that says where the
# value comes from, and nothing written.  Each row: setting, value, the
# call that first uses it, the message.  st_f is in flight, st_c completed
# and expired under any retention
owner_sql -d idem_nocron -o /dev/null <<'SQL'
SELECT idem_claim('st_f', 'st_wf');
SELECT idem_claim('st_c', 'st_wf');
SELECT idem_complete('st_c', 'st_wf', NULL, '{}');
UPDATE idem_gate.claims SET created_at = created_at - interval '400 days',
	claimed_at = claimed_at - interval '400 days', updated_at = updated_at - interval '400 days',
	completed_at = completed_at - interval '400 days' WHERE key = 'st_c';
SQL
st_rows() { owner_sql -d idem_nocron -c "SELECT string_agg(key || ':' || state || ':' || attempt || ':' || coalesce(last_error, '') || ':' || (payload IS NULL), ',' ORDER BY key) FROM idem_gate.claims WHERE workflow = 'st_wf'"; }
st_before=$(st_rows)
st_fail="SELECT idem_fail('st_f', 'st_wf', NULL, 'x', true)"
st_pay="SELECT outcome FROM idem_claim_ex('st_p', 'st_wf', NULL, NULL, NULL, '{\"a\": 1}')"
st_jan="SELECT deleted_completed FROM idem_gate.janitor_run()"
st_new="SELECT idem_claim('st_n', 'st_wf')"
while IFS='|' read -r setting value call message; do
	out=$(psql -X -q -At -U idem_owner -d idem_nocron -v VERBOSITY=verbose \
		-c "SET $setting = '$value'" -c "$call" 2>&1 >/dev/null)
	check "$setting = '$value' is refused at its first use: 22023, named" \
		"$(echo "$out" | sed -nE 's/^(psql:.*:[0-9]+: )?ERROR: +//p' | head -1)" "22023: $message"
	check "... with a hint that says where it was set" \
		"$(echo "$out" | grep -c "^HINT: .*reads $setting where it is used, not at SET: correct or RESET it where it was set")" 1
	check "... and nothing written" "$(st_rows)" "$st_before"
done <<EOF
idem_gate.max_attempts|0|$st_fail|0 is outside the valid range for parameter "idem_gate.max_attempts" (1 .. 1000000)
idem_gate.max_attempts|many|$st_fail|invalid value for parameter "idem_gate.max_attempts": "many"
idem_gate.max_attempts|5kB|$st_fail|invalid value for parameter "idem_gate.max_attempts": "5kB"
idem_gate.max_payload_bytes|-1|$st_pay|-1 is outside the valid range for parameter "idem_gate.max_payload_bytes" (0 .. 268435456)
idem_gate.max_payload_bytes|2 XB|$st_pay|invalid value for parameter "idem_gate.max_payload_bytes": "2 XB"
idem_gate.retention|0|$st_jan|0 is outside the valid range for parameter "idem_gate.retention" (1 .. 2147483647)
idem_gate.retention|30 days|$st_jan|invalid value for parameter "idem_gate.retention": "30 days"
idem_gate.stuck_action|delete|$st_jan|invalid value for parameter "idem_gate.stuck_action": "delete"
idem_gate.max_key_length|0|$st_new|0 is outside the valid range for parameter "idem_gate.max_key_length" (1 .. 1000)
idem_gate.max_key_length|5000|$st_new|5000 is outside the valid range for parameter "idem_gate.max_key_length" (1 .. 1000)
idem_gate.max_key_length|long|$st_new|invalid value for parameter "idem_gate.max_key_length": "long"
EOF
check "with the settings mended, the same calls go through" \
	"$(owner_sql -d idem_nocron -c "$st_fail" -c "$st_pay" -c "$st_jan" -c "$st_new")" "$(printf 'failed_retryable\nnew\n1\nnew')"
cron_version=$(su_sql -d idem_managed -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")
case "$cron_version" in 1.[0-4]*) every='* * * * *' wait=75 ;; *) every='2 seconds' wait=20 ;; esac
owner_sql -d idem_managed -c "INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('cron_wf', '1 second')" \
	-c "SELECT idem_gate.schedule_janitor('$every')" >/dev/null
alerted=
for _ in $(seq 1 "$wait"); do
	alerted=$(owner_sql -d idem_managed -c "SELECT alerted_token IS NOT NULL FROM idem_gate.claims WHERE key = 'stuck_1'")
	[ "$alerted" = t ] && break
	sleep 1
done
check "pg_cron $cron_version runs idem_gate.janitor_run() ('$every'), which announces the stuck claim" "$alerted" "t"
check "... as the installing role, and it succeeded" \
	"$(su_sql -d idem_managed -c "SELECT DISTINCT j.username || ' ' || d.status FROM cron.job_run_details d
		JOIN cron.job j USING (jobid) WHERE d.command = 'SELECT idem_gate.janitor_run()' AND d.status <> 'running'" | sort -u | head -1)" \
	"idem_owner succeeded"
owner_sql -d idem_managed -c "SELECT cron.unschedule('idem_gate_janitor_idem_managed')" >/dev/null

# the model test and both editions side by side, against this server
bash "$ROOT/test/model/run.sh" --seconds "$SECONDS_EACH" --edition managed >"$DIR/model.log" 2>&1
rc=$?
tail -3 "$DIR/model.log" | sed 's/^/  /'
if [ $rc -eq 0 ] && grep -q '^1 passed, 0 failed' "$DIR/model.log"; then ok "the model test, managed edition"; else
	grep -B2 -A12 '^FAIL' "$DIR/model.log" | head -40; not_ok "the model test, managed edition"; fi
/usr/bin/python3 "$here/differential.py" --seconds "$SECONDS_EACH" >"$DIR/diff.log" 2>&1
rc=$?
grep -E '^(CATALOG|DIFFERENT|  C:|  managed:|catalog:|[0-9]+ calls at the edges)' "$DIR/diff.log" | head -40 | sed 's/^/  /'
tail -1 "$DIR/diff.log" | sed 's/^/  /'
if [ $rc -eq 0 ]; then ok "both editions: the same catalog and the same answers"; else
	not_ok "both editions: the same catalog and the same answers"; fi

# the isolation specs, the managed edition installed in each setup by the
# owner (pg_read_file of the statements, as the superuser the specs run as)
mkdir -p "$DIR/iso/specs" "$DIR/iso/expected" "$DIR/iso/out"
/usr/bin/python3 "$ROOT/managed/build.py" --body >"$DIR/iso/managed.sql"
# the C edition's expected output, and where the editions differ as
# docs/managed.md says (token numbers after a wait; PostgreSQL's own
# message for a write under REPEATABLE READ), the managed one beside it
cp "$ROOT"/test/isolation/expected/*.out "$ROOT"/test/managed/isolation/expected/*.out "$DIR/iso/expected/"
install_sql="DO \$m\$ DECLARE body text := pg_catalog.pg_read_file('$DIR/iso/managed.sql'); BEGIN EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %I TO idem_owner', pg_catalog.current_database()); GRANT CREATE ON SCHEMA public TO idem_owner; SET ROLE idem_owner; EXECUTE body; RESET ROLE; RESET search_path; RESET check_function_bodies; RESET client_min_messages; END \$m\$;"
uninstall_sql="DROP SCHEMA idem_gate, idem_gate_call CASCADE; DO \$m\$ DECLARE f regprocedure; BEGIN FOR f IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'idem\\_%' LOOP EXECUTE 'DROP FUNCTION ' || f; END LOOP; END \$m\$;"
specs=()
for spec in "$ROOT"/test/isolation/specs/*.spec; do
	name=$(basename "$spec" .spec)
	# keyed workflows need the C edition's secret file (docs/managed.md)
	grep -q 'keyed' "$spec" && continue
	specs+=("$name")
	awk -v ins="$install_sql" -v un="$uninstall_sql" '
		/CREATE EXTENSION idem_gate;/ { sub(/CREATE EXTENSION idem_gate;/, ins) }
		/DROP EXTENSION idem_gate;/ { sub(/DROP EXTENSION idem_gate;/, un) }
		{ print }' "$spec" >"$DIR/iso/specs/$name.spec"
done
chown -R postgres "$DIR"
chmod -R a+rX "$DIR"
$AS_PG "$BIN/../lib/pgxs/src/test/isolation/pg_isolation_regress" \
	--host=127.0.0.1 --port="$MPORT" --user=postgres --inputdir="$DIR/iso" --outputdir="$DIR/iso/out" \
	--dbname=idem_iso_managed "${specs[@]}" >"$DIR/iso.log" 2>&1
grep -E '^(test|ok|not ok)' "$DIR/iso.log" | sed 's/^/  /'
# "test NAME ... ok" (15) or TAP's "ok N - NAME" (16 and later)
n=$(grep -cE '^(ok|not ok) |^test .*\.\.\. *(ok|FAILED)' "$DIR/iso.log")
bad=$(grep -cE '^not ok |^test .*\.\.\. *FAILED' "$DIR/iso.log")
if [ "$n" -eq "${#specs[@]}" ] && [ "$bad" -eq 0 ]; then ok "the isolation specs (${#specs[@]}), managed edition"; else
	cat "$DIR/iso/out/regression.diffs" 2>/dev/null | head -80
	not_ok "the isolation specs, managed edition ($bad of ${#specs[@]} differ)"; fi

# the n8n recipe's SQL, as n8n's Postgres node sends it, as the role the
# README's block creates (test/suites/30_n8n_pg.sh's queries), against the
# managed edition
if [ -x "$(command -v node)" ]; then
	(cd "$ROOT/test/n8n" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1; })
	role=idem_n8n_managed pw="m-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	if (cd "$ROOT/test/n8n" && ./doc_grants.sh "$role" "$pw") | su_sql -d idem_managed -f - >"$DIR/grants.log" 2>&1 &&
		(cd "$ROOT/test/n8n" && PGDATABASE=idem_managed IDEM_N8N_ROLE=$role IDEM_N8N_PASSWORD=$pw \
			node queries.test.mjs) >"$DIR/n8n.log" 2>&1; then
		ok "the n8n recipe's SQL, as the documented role, managed edition ($(tail -1 "$DIR/n8n.log"))"
	else
		cat "$DIR/grants.log"; grep -vE '^ok' "$DIR/n8n.log" | head -30
		not_ok "the n8n recipe's SQL, as the documented role, managed edition"
	fi
else
	not_ok "node is needed for the n8n recipe's SQL (scripts/deps.sh --with-node)"
fi

# canonical JSON: the C edition's suite, against the managed edition
if [ -x "$(command -v node)" ]; then
	PGDATABASE=idem_managed PGUSER=idem_owner IDEM_EDITION=managed bash "$ROOT/test/suites/20_jcs.sh" >"$DIR/jcs.log" 2>&1
	rc=$?
	tail -3 "$DIR/jcs.log" | sed 's/^/  /'
	if [ $rc -eq 0 ]; then ok "the canonical-JSON suite, managed edition"; else
		grep -E '^not ok' "$DIR/jcs.log" | head -20; not_ok "the canonical-JSON suite, managed edition"; fi
else
	not_ok "node is needed for the canonical-JSON suite (scripts/deps.sh --with-node)"
fi

# the schema contract (test/pgtap/schema.sql): the same file, which skips
# what the managed edition does not have, with why
su_sql -d postgres -c "CREATE DATABASE idem_tap OWNER idem_owner" >/dev/null
su_sql -d idem_tap -c "ALTER SCHEMA public OWNER TO idem_owner" -c "CREATE EXTENSION pgtap" >"$DIR/tap.log" 2>&1 &&
	owner_sql -d idem_tap -f "$ROOT/managed/idem_gate.sql" >>"$DIR/tap.log" 2>&1 &&
	(cd "$ROOT" && PGDATABASE=idem_tap pg_prove -v test/pgtap/schema.sql) >>"$DIR/tap.log" 2>&1
rc=$?
grep -E '^ok [0-9]+ .*# skip' "$DIR/tap.log" | sed 's/^/  /'
grep -E '^(Files|Result)' "$DIR/tap.log" | sed 's/^/  /'
if [ $rc -eq 0 ] && grep -q '^Result: PASS' "$DIR/tap.log"; then ok "pgTAP's schema contract, managed edition"; else
	grep -E '^(not ok|#|psql|ERROR)' "$DIR/tap.log" | head -30; not_ok "pgTAP's schema contract, managed edition"; fi

# the attack matrix's SQL cells (test/security/matrix.py --quick): every
# actor x lever x entry point x table x kind of attached code, and the 1.3
# levers, against the edition installed by a role that is no superuser
IDEM_EDITION=managed PGDATABASE=postgres /usr/bin/python3 "$ROOT/test/security/matrix.py" --quick >"$DIR/matrix.log" 2>&1
rc=$?
grep -E '^# ' "$DIR/matrix.log" | sed 's/^/  /'
tail -1 "$DIR/matrix.log" | sed 's/^/  /'
if [ $rc -eq 0 ] && grep -qE '^[0-9]+ passed, 0 failed' "$DIR/matrix.log"; then ok "the attack matrix, managed edition"; else
	grep -E '^not ok' "$DIR/matrix.log" | head -20; not_ok "the attack matrix, managed edition"; fi

# the pg_regress files of sql/, each in a database of its own where the
# owner installed the edition, against expected/ (test/managed/regress.sh;
# the differences by design in test/managed/expected/*.patch).  A major in
# its root runs the server there: the repository is bound in, for the
# files the server itself reads (the JCS vectors)
bound=
if [ -n "$RDIR" ] && [ ! -f "$RDIR$ROOT/managed/idem_gate.sql" ]; then
	"$ROOT/scripts/roots.sh" bind "$MAJOR" "$ROOT" >/dev/null 2>&1 && bound=1
fi
bash "$here/regress.sh" "$(dirname "$(command -v psql)")" idem_owner >"$DIR/regress.log" 2>&1
rc=$?
[ -n "$bound" ] && "$ROOT/scripts/roots.sh" unbind "$MAJOR" "$ROOT" >/dev/null 2>&1
grep -E '^# (skipped|[0-9]+ files)' "$DIR/regress.log" | sed 's/^/  /'
tail -1 "$DIR/regress.log" | sed 's/^/  /'
if [ $rc -eq 0 ]; then ok "the pg_regress files, managed edition"; else
	grep -E -A20 '^not ok' "$DIR/regress.log" | head -60; not_ok "the pg_regress files, managed edition"; fi

# moving to the C extension (managed/to_extension.sql), from a filled
# database: every claim, audit row and grant arrives, tokens keep growing
su_sql -d idem_managed -c "CREATE ROLE idem_n8n LOGIN" -c "GRANT USAGE ON SCHEMA idem_gate TO idem_n8n" \
	-c "GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text) TO idem_n8n" \
	-c "GRANT SELECT (workflow, key, state) ON idem_gate.claims TO idem_n8n" >/dev/null
owner_sql -d idem_managed >/dev/null <<'SQL'
SELECT idem_claim('mv_new', 'move');
SELECT idem_claim('mv_done', 'move'); SELECT idem_complete('mv_done', 'move', NULL, '{"charge": "ch_1"}');
SELECT idem_claim('mv_failed', 'move'); SELECT idem_fail('mv_failed', 'move', NULL, 'before', true);
SELECT idem_claim('mv_review', 'move'); SELECT idem_fail('mv_review', 'move', NULL, 'after', false);
SELECT idem_resolve('mv_review', 'move', 'completed', '{"by": "ops"}', 'checked', 'ann');
SELECT idem_claim('mv_gone', 'move'); SELECT idem_release('mv_gone', 'move', 'mistake', 'bob');
SELECT token FROM idem_claim_ex('mv_fenced', 'move', NULL, 'fp', 'run-1', '{"a": 1}');
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention) VALUES ('move', '40 days', '10 days');
SELECT idem_gate.grant_workflow('idem_n8n', 'move%');
SELECT idem_gate.set_workflow_acl('idem_n8n', true);
SQL
claims_q="SELECT string_agg(format('%s/%s %s a%s t%s %s %s %s %s %s %s', workflow, key, state, attempt, token, result,
	last_error, token_issued, fingerprint, execution_id, payload), E'\n' ORDER BY workflow, key) FROM idem_gate.claims"
audit_q="SELECT string_agg(format('%s %s %s %s %s %s %s %s %s', id, at, action, workflow, key, state_before, state_after,
	reason, actor), E'\n' ORDER BY id) FROM idem_gate.audit"
rest_q="SELECT (SELECT string_agg(format('%s %s %s', workflow, retention, receipt_retention), ',') FROM idem_gate.policies),
	(SELECT string_agg(format('%s %s', role, pattern), ',') FROM idem_gate.workflow_acl)"
claims_before=$(su_sql -d idem_managed -c "$claims_q")
audit_before=$(su_sql -d idem_managed -c "$audit_q")
rest_before=$(su_sql -d idem_managed -c "$rest_q")
max_token=$(su_sql -d idem_managed -c "SELECT max(token) FROM idem_gate.claims")
if su_sql -d idem_managed -f "$ROOT/managed/to_extension.sql" >"$DIR/move.log" 2>&1; then
	ok "managed/to_extension.sql moves the database to the C extension"
else
	cat "$DIR/move.log"
	not_ok "managed/to_extension.sql moves the database to the C extension"
fi
check "... which is installed, at 1.3" "$(su_sql -d idem_managed -c "SELECT extversion FROM pg_extension WHERE extname = 'idem_gate'")" "1.3"
check "... with no managed function left" "$(su_sql -d idem_managed -c "SELECT count(*) FROM pg_namespace WHERE nspname IN ('idem_gate_call', 'idem_gate_moving')")" "0"
check "every claim, as it was" "$(su_sql -d idem_managed -c "$claims_q")" "$claims_before"
check "every audit row, as it was" "$(su_sql -d idem_managed -c "$audit_q")" "$audit_before"
check "the policies and workflow grants" "$(su_sql -d idem_managed -c "$rest_q")" "$rest_before"
check "the next token is larger than every one handed out" \
	"$(su_sql -d idem_managed -c "SELECT token > $max_token FROM idem_claim_ex('mv_after', 'move')")" "t"
check "a role's grants are given again on the extension's objects" \
	"$(psql -X -q -At -U idem_n8n -d idem_managed -c "SELECT outcome FROM idem_claim_ex('mv_done', 'move')" \
		-c "SELECT count(*) FROM idem_gate.claims WHERE workflow = 'move'")" "$(printf 'completed\n6')"
check "a role restricted with set_workflow_acl() is restricted by the catalog setting" \
	"$(su_sql -d idem_managed -c "SELECT s.setconfig::text FROM pg_db_role_setting s
		WHERE s.setrole = 'idem_n8n'::regrole AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = 'idem_managed')")" \
	"{idem_gate.workflow_acl=on}"
check "a second move is refused" "$(err_msg -d idem_managed -f "$ROOT/managed/to_extension.sql")" \
	"this database holds idem_gate, the C extension, already"
ended=1
