#!/usr/bin/env bash
# The C edition's pg_regress files (sql/*.sql) against the managed edition,
# diffed against the same expected/*.out.
#
# Each file runs in a database of its own, where the role that stands for
# rds_superuser (no superuser, CREATEDB, CREATEROLE) has installed
# managed/idem_gate.sql with psql -f; the file's CREATE EXTENSION and DROP
# EXTENSION lines become \set lines on both sides, and the file runs as
# pg_regress runs it (psql -a -q, pg_regress's time zone, date and
# interval styles) as the superuser, since the files play every role
# themselves.  psql runs with SHOW_CONTEXT=never: an error raised in
# PL/pgSQL carries a CONTEXT line that the C edition's does not.
#
# Where the editions differ by design, test/managed/expected/FILE.patch
# turns the C edition's expected output into the managed edition's, and
# each hunk says why in docs/managed.md's table.  The files that test what
# the managed edition does not have are listed in SKIP below, with why.
#
# Usage: test/managed/regress.sh BINDIR OWNER [FILE...]
#   against the server of PGHOST/PGPORT (PGUSER a superuser), OWNER the
#   installing role; default every file of sql/.  REGRESS_KEEP=DIR keeps
#   outputs and diffs in DIR.  Ends with one line "N passed, N failed".
set -uo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
bindir="$1"
owner="$2"
shift 2
work="${REGRESS_KEEP:-$(mktemp -d /tmp/idem_managed_regress.XXXXXX)}"
mkdir -p "$work"
passed=0
failed=0
skipped=0

# What the managed edition does not have (docs/managed.md, "What the
# managed edition does not do"), so its file has nothing to run against.
declare -A SKIP=(
	[keyed]="keyed keys need a secret no other role can read: a server file the C edition loads"
	[stats]="the counters live in shared memory, which only a preloaded library has"
	[worker]="the background worker: the managed edition's janitor is idem_gate.janitor_run(), scheduled (run.sh checks it under pg_cron)"
	[upgrade]="the C extension's update scripts (ALTER EXTENSION UPDATE); the managed edition starts at 1.3"
)

check() {
	if [ "$1" = 0 ]; then
		passed=$((passed + 1)); echo "ok - $2"
	else
		failed=$((failed + 1)); echo "not ok - $2"
	fi
}

subst() {
	sed -e "s|^CREATE EXTENSION IF NOT EXISTS idem_gate;|\\\\set managed_edition on|" \
		-e "s|^DROP EXTENSION idem_gate;|\\\\set managed_edition off|" \
		-e "s|^CREATE EXTENSION idem_gate;|\\\\i $work/load_quiet.sql|"
}
# a file that creates a database of its own (canonical_encoding's LATIN1
# one) installs the edition there as itself; the file echoes only its
# first line
{
	echo "\\set ECHO none"
	cat "$here/managed/idem_gate.sql"
	echo "\\set ON_ERROR_STOP off"
	echo "\\set ECHO all"
} >"$work/load_quiet.sql"

psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)
if ! "${psql[@]}" -d postgres -c "SELECT 1" >/dev/null; then
	echo "not ok - the server of PGHOST/PGPORT answers"
	echo "0 passed, 1 failed"
	exit 1
fi
# janitor_edges reads the C janitor's WARNING from the server's log,
# where pg_regress keeps it, beside the data directory.  The managed
# janitor writes none (docs/managed.md), so an empty file stands there:
# the whole log of this server, hundreds of megabytes after the model
# test, is more than pg_read_file() reads at once.
datadir=$("$bindir/psql" -X -At -d postgres -c "SHOW data_directory")
if [ ! -e "$datadir/../log/postmaster.log" ]; then
	mkdir -p "$datadir/../log" && : >"$datadir/../log/postmaster.log"
	[ "$(id -u)" = 0 ] && chown -R postgres "$datadir/../log"
fi

# the janitor's receipt pass moves its watermarks only when its owner can
# see every backend's transaction start (docs/managed.md, "Install")
"${psql[@]}" -d postgres -c "GRANT pg_read_all_stats TO $owner" >/dev/null

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	for f in "$here"/sql/*.sql; do files+=("$(basename "$f" .sql)"); done
fi
for t in "${files[@]}"; do
	if [ -n "${SKIP[$t]:-}" ]; then
		skipped=$((skipped + 1)); echo "# skipped $t: ${SKIP[$t]}"
		continue
	fi
	db="regress_$t"
	"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db OWNER $owner TEMPLATE template0" >/dev/null &&
	"${psql[@]}" -d "$db" -c "ALTER SCHEMA public OWNER TO $owner" \
		-c "ALTER DATABASE $db SET lc_messages TO 'C'" \
		-c "ALTER DATABASE $db SET lc_monetary TO 'C'" \
		-c "ALTER DATABASE $db SET lc_numeric TO 'C'" \
		-c "ALTER DATABASE $db SET lc_time TO 'C'" \
		-c "ALTER DATABASE $db SET bytea_output TO 'hex'" \
		-c "ALTER DATABASE $db SET timezone_abbreviations TO 'Default'" >/dev/null &&
	"${psql[@]}" -U "$owner" -d "$db" -f "$here/managed/idem_gate.sql" >"$work/$t.install.log" 2>&1
	if [ $? -ne 0 ]; then
		check 1 "managed/idem_gate.sql installs for $t"
		sed 's/^/  # /' "$work/$t.install.log" | head -20
		continue
	fi
	subst <"$here/sql/$t.sql" >"$work/$t.sql"
	subst <"$here/expected/$t.out" |
		sed "s|^\\\\i $work/load_quiet.sql\$|&\\n\\\\set ECHO none|" >"$work/$t.expected"
	if [ -f "$here/test/managed/expected/$t.patch" ]; then
		patch -s "$work/$t.expected" <"$here/test/managed/expected/$t.patch" ||
			check 1 "test/managed/expected/$t.patch applies"
	fi
	PG_ABS_SRCDIR="$here" PGTZ=PST8PDT PGDATESTYLE="Postgres, MDY" \
		PGOPTIONS="-c intervalstyle=postgres_verbose" \
		"$bindir/psql" -X -a -q -d "$db" -v HIDE_TABLEAM=on -v HIDE_TOAST_COMPRESSION=on \
		-v SHOW_CONTEXT=never <"$work/$t.sql" >"$work/$t.out" 2>&1
	if diff -u "$work/$t.expected" "$work/$t.out" >"$work/$t.diff"; then
		check 0 "pg_regress file $t against expected/$t.out"
	else
		check 1 "pg_regress file $t against expected/$t.out"
		head -n 40 "$work/$t.diff" | sed 's/^/  # /'
	fi
	"${psql[@]}" -d postgres -c "DROP DATABASE $db" >/dev/null 2>&1
done

echo "# $skipped files skipped, each with why"
[ -z "${REGRESS_KEEP:-}" ] && rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
