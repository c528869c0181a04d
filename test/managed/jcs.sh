#!/usr/bin/env bash
# Canonical JSON of the managed edition (managed/parts/30_canonical.sql and
# 31_canonical_number.sql) against the C edition's tests, in a throwaway
# "managed-like" cluster: no shared_preload_libraries, no C, the part
# installed by a role that is not a superuser (LOGIN CREATEDB CREATEROLE,
# like rds_superuser) into its own database, with @extschema@ replaced by
# public; the tests call it as another role, with no right on the part.
#
#  1. test/suites/20_jcs.sh with IDEM_EDITION=managed: the RFC 8785
#     vectors, the ES6 number files, the differential test against
#     canonicalize and the 'safe' oracle (the memory checks measure the C
#     edition's streaming and are skipped, see test/jcs/run.mjs).
#  2. The pg_regress files about canonical JSON, run with psql as
#     pg_regress runs them, diffed against expected/*.out.  Both sides go
#     through the same substitution: the file's CREATE EXTENSION and DROP
#     EXTENSION become \set lines (the part is already there), and in the
#     LATIN1 database of canonical_encoding the part is loaded instead.
#     psql runs with SHOW_CONTEXT=never: an error raised in PL/pgSQL
#     carries a CONTEXT line that the C edition's does not.
#
# Usage: test/managed/jcs.sh [bindir]   (default: pg_config's bindir)
# Env: JCS_PORT (default 56150), JCS_DOCS (passed to run.mjs),
#      JCS_SKIP_SUITE=1 to run only the pg_regress files, JCS_KEEP=1 to
#      keep the work directory (outputs and diffs).
# Run as root (servers run as postgres) or as postgres.  Ends with one line
# "N passed, N failed".
set -uo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
bindir="${1:-$(pg_config --bindir)}"
port="${JCS_PORT:-56150}"
work="$(mktemp -d /tmp/idem_managed_jcs.XXXXXX)"
passed=0
failed=0

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
check() {
	if [ "$1" = 0 ]; then
		passed=$((passed + 1)); echo "ok - $2"
	else
		failed=$((failed + 1)); echo "not ok - $2"
	fi
}
cleanup() {
	as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1
	if [ "${JCS_KEEP:-0}" = 1 ]; then echo "# kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

chmod 755 "$work"
[ "$(id -u)" = 0 ] && chown postgres "$work"
as_pg "$bindir/initdb" -D "$work/data" -E UTF8 --locale=C -A trust >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; echo "0 passed, 1 failed"; exit 1; }
as_pg "$bindir/pg_ctl" -D "$work/data" -w -l "$work/server.log" \
	-o "-p $port -k $work -c listen_addresses='' -c shared_preload_libraries=''" start >/dev/null ||
	{ cat "$work/server.log"; echo "0 passed, 1 failed"; exit 1; }

export PGHOST="$work" PGPORT="$port"
psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" -U postgres -d postgres \
	-c "CREATE ROLE jcs_owner LOGIN NOSUPERUSER CREATEDB CREATEROLE" \
	-c "CREATE DATABASE jcs_managed OWNER jcs_owner" >/dev/null
# The caller of the tests, and what the test files themselves need, not
# the part: canonical_vectors reads the vector files with COPY,
# canonical_errors lowers max_stack_depth, canonical_encoding creates a
# LATIN1 database.
"${psql[@]}" -U postgres -d postgres -c "CREATE ROLE jcs_caller LOGIN CREATEDB" \
	-c "GRANT pg_read_server_files TO jcs_caller" >/dev/null
if [ "$("$bindir/psql" -X -At -U postgres -d postgres -c "SHOW server_version_num")" -ge 150000 ]; then
	"${psql[@]}" -U postgres -d postgres -c "GRANT SET ON PARAMETER max_stack_depth TO jcs_caller" >/dev/null
fi
export PGUSER=jcs_owner PGDATABASE=jcs_managed

# The part as the generator will give it, schema idem_gate first.
{
	echo "CREATE SCHEMA idem_gate;"
	sed 's/@extschema@/public/g' "$here"/managed/parts/3[01]_canonical*.sql
} >"$work/part.sql"
"${psql[@]}" -f "$work/part.sql" >"$work/load.log" 2>&1
check $? "the part loads as a role that is neither superuser nor allowed C"
"${psql[@]}" -At -c "SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
	WHERE l.lanname NOT IN ('sql', 'plpgsql') AND p.pronamespace IN
	('public'::regnamespace, 'idem_gate'::regnamespace)" | grep -qx 0
check $? "no function of the part is in C"
"${psql[@]}" -At -c "SELECT count(*) FROM pg_proc p WHERE p.pronamespace IN
	('public'::regnamespace, 'idem_gate'::regnamespace)
	AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c = 'search_path=pg_catalog, pg_temp')" |
	grep -qx 0
check $? "every function pins search_path"
"${psql[@]}" -At -c "SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY 1) FROM pg_proc p
	WHERE p.pronamespace = 'public'::regnamespace AND p.provolatile = 'i' AND NOT p.proisstrict
	AND p.proparallel = 's' AND p.prosecdef AND has_function_privilege('public', p.oid, 'EXECUTE')" >"$work/api"
grep -qx "idem_canonical(json,text) idem_canonical(jsonb,text) idem_hash(json,text) idem_hash(jsonb,text) idem_hash(jsonb,text\[\],text)" "$work/api"
check $? "the five functions: IMMUTABLE, CALLED ON NULL INPUT, PARALLEL SAFE, SECURITY DEFINER, executable by PUBLIC"
"${psql[@]}" -At -c "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'idem_gate'::regnamespace
	AND has_function_privilege('public', p.oid, 'EXECUTE')" | grep -qx 0
check $? "no helper in idem_gate is executable by PUBLIC"
# Another role, with no right on anything of the part, calls the five as
# the C edition's users do, and cannot call a helper.
"${psql[@]}" -U jcs_caller -At -c "SELECT idem_canonical('{\"b\":[1E30,4.50,-0],\"a\":\"x\"}'::jsonb)
	|| idem_canonical('{\"b\":1,\"a\":2}'::json) || idem_hash('{\"a\":1}'::jsonb)
	|| idem_hash('{\"a\":1}'::json) || idem_hash('{\"a\":1}'::jsonb, ARRAY['a'])" >"$work/caller" 2>&1
grep -qx '{"a":"x","b":\[1e+30,4.5,0\]}{"a":2,"b":1}015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862' "$work/caller"
check $? "a role without rights on the part calls the five functions"
"${psql[@]}" -U jcs_caller -At -c "SELECT idem_gate.jcs_number('1', 'rfc')" >"$work/helper" 2>&1
grep -q 'permission denied for schema idem_gate' "$work/helper"
check $? "that role cannot call a helper"

# 1. The canonical JSON suite.
if [ "${JCS_SKIP_SUITE:-0}" != 1 ]; then
	PGUSER=jcs_caller IDEM_EDITION=managed "$here/test/suites/20_jcs.sh" >"$work/suite.log" 2>&1
	sed 's/^/  # /' "$work/suite.log" | grep -v '^  # ok - ' | grep -v '^  # [0-9]* passed'
	last="$(tail -n 1 "$work/suite.log")"
	sp="$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' <<<"$last")"
	sf="$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' <<<"$last")"
	if [ -z "$sp" ]; then
		check 1 "test/suites/20_jcs.sh ran to its count line"
	else
		echo "# test/suites/20_jcs.sh: $last"
		passed=$((passed + sp)); failed=$((failed + sf))
	fi
fi

# 2. The pg_regress files.
{
	echo "\\set ECHO none"
	echo "CREATE SCHEMA idem_gate;"
	sed 's/@extschema@/public/g' "$here"/managed/parts/3[01]_canonical*.sql
	echo "\\set ECHO all"
} >"$work/load_quiet.sql"
subst() {
	sed -e "s|^CREATE EXTENSION IF NOT EXISTS idem_gate;|\\\\set managed_edition on|" \
		-e "s|^DROP EXTENSION idem_gate;|\\\\set managed_edition off|" \
		-e "s|^CREATE EXTENSION idem_gate;|\\\\i $work/load_quiet.sql|"
}
for t in canonical canonical_encoding canonical_errors canonical_sink canonical_vectors json_text_edges; do
	subst <"$here/sql/$t.sql" >"$work/$t.sql"
	# the loaded file echoes only its first line, \set ECHO none
	subst <"$here/expected/$t.out" |
		sed "s|^\\\\i $work/load_quiet.sql\$|&\\n\\\\set ECHO none|" >"$work/$t.expected"
	# where the editions differ by design (each patch says why)
	if [ -f "$here/test/managed/expected/$t.patch" ]; then
		patch -s "$work/$t.expected" <"$here/test/managed/expected/$t.patch" ||
			check 1 "test/managed/expected/$t.patch applies"
	fi
	PG_ABS_SRCDIR="$here" PGOPTIONS="-c intervalstyle=postgres_verbose" \
		"$bindir/psql" -X -a -q -U jcs_caller -d jcs_managed -v HIDE_TABLEAM=on -v HIDE_TOAST_COMPRESSION=on \
		-v SHOW_CONTEXT=never <"$work/$t.sql" >"$work/$t.out" 2>&1
	if diff -u "$work/$t.expected" "$work/$t.out" >"$work/$t.diff"; then
		check 0 "pg_regress file $t against expected/$t.out"
	else
		check 1 "pg_regress file $t against expected/$t.out"
		head -n 60 "$work/$t.diff" | sed 's/^/  # /'
	fi
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
