#!/usr/bin/env bash
# The quick layers of idem_gate's tests, for the edit-test loop:
# pg_regress (sql/), isolation (test/isolation/) and pgTAP (test/pgtap/),
# all against one throwaway cluster of the PostgreSQL that PG_CONFIG names
# (default: the system PostgreSQL 15).
#
#   PG_CONFIG=/path/to/pg_config scripts/quick.sh
#
# Builds and installs idem_gate into that PostgreSQL first.  The cluster
# runs as user postgres and listens on a Unix socket in a private temporary
# directory only (no TCP port), so runs never collide.  Ends with one line
# "N passed, N failed"; the exit status is non-zero on any failure.
# IDEM_QUICK_KEEP=1 keeps the temporary directory (logs, diffs, cluster).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
PG_REGRESS=$PGXS_DIR/src/test/regress/pg_regress
PG_ISOLATION_REGRESS=$PGXS_DIR/src/test/isolation/pg_isolation_regress
PORT=5432	# only names the socket file inside the private directory

as_pg() { runuser -u postgres -- "$@"; }

if ! make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null ||
   ! make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null; then
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_quick.XXXXXX")
cleanup() {
	[ -d "$DATA" ] && { as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 30 stop ||
		  as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate -w stop; } >/dev/null 2>&1 || true
	if [ "${IDEM_QUICK_KEEP:-0}" = 1 ]; then
		echo "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
# The same layout as pg_regress's temporary instance (data/ and
# log/postmaster.log side by side): tests may read the server log.
DATA=$WORK/instance/data
LOG=$WORK/instance/log/postmaster.log
trap cleanup EXIT
trap 'exit 143' TERM INT

# The test files, in a tree the postgres user may write results into.
mkdir -p "$WORK/tree/test"
cp -a "$ROOT/sql" "$ROOT/expected" "$WORK/tree/"
cp -a "$ROOT/test/isolation" "$ROOT/test/pgtap" "$ROOT/test/preload.conf" "$WORK/tree/test/"
# the RFC 8785 number vectors that sql/canonical_vectors.sql reads
mkdir -p "$WORK/tree/test/jcs/vectors"
cp -a "$ROOT/test/jcs/vectors/numbers" "$WORK/tree/test/jcs/vectors/"
chmod 755 "$WORK"
chown -R postgres "$WORK"

mkdir -p "$WORK/instance/log"
chown -R postgres "$WORK/instance"
as_pg "$BIN/initdb" -D "$DATA" -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1 || {
	cat "$WORK/initdb.log"; echo "0 passed, 1 failed"; exit 1; }
{
	echo "listen_addresses = ''"
	echo "port = $PORT"
	echo "unix_socket_directories = '$WORK'"
	echo "fsync = off"
	echo "synchronous_commit = off"
	echo "full_page_writes = off"
	cat "$ROOT/test/preload.conf"
} >>"$DATA/postgresql.conf"
as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || {
	cat "$LOG"; echo "0 passed, 1 failed"; exit 1; }

total_pass=0
total_fail=0
summary=()

# record NAME PASSED FAILED
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-12s %4d passed, %d failed' "$1" "$2" "$3")")
}

# pg_regress and isolation end with "All N tests passed." or
# "M of N tests failed."
record_regress() {
	local name=$1 log=$2 diffs=$3 n m
	if n=$(grep -oE 'All [0-9]+ tests passed' "$log" | grep -oE '[0-9]+'); then
		record "$name" "$n" 0
	elif m=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log"); then
		record "$name" $(($(echo "$m" | awk '{print $3}') - $(echo "$m" | awk '{print $1}'))) \
			"$(echo "$m" | awk '{print $1}')"
		cat "$log"
		[ -f "$diffs" ] && cat "$diffs"
	else
		record "$name" 0 1
		cat "$log"
	fi
	return 0
}

regress_tests=$(cd "$ROOT/sql" && ls *.sql | sed 's/\.sql$//' | sort)
iso_tests=$(cd "$ROOT/test/isolation/specs" && ls *.spec | sed 's/\.spec$//' | sort)
common=(--bindir="$BIN" --host="$WORK" --port="$PORT" --user=postgres)

echo "== pg_regress"
(cd "$WORK/tree" && as_pg "$PG_REGRESS" "${common[@]}" --inputdir=. --outputdir=. \
	--dbname=contrib_regression $regress_tests) >"$WORK/regress.log" 2>&1 || true
grep -E '^(test| *ok| *FAILED|not ok)' "$WORK/regress.log" | sed 's/^/  /' || true
record_regress pg_regress "$WORK/regress.log" "$WORK/tree/regression.diffs"

echo "== isolation"
(cd "$WORK/tree" && as_pg "$PG_ISOLATION_REGRESS" "${common[@]}" --inputdir=test/isolation \
	--outputdir=output_iso --dbname=isolation_regression $iso_tests) >"$WORK/isolation.log" 2>&1 || true
grep -E '^(test|ok|not ok)' "$WORK/isolation.log" | sed 's/^/  /' || true
record_regress isolation "$WORK/isolation.log" "$WORK/tree/output_iso/regression.diffs"

echo "== pgTAP"
export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres PGDATABASE=idem_quick PATH=$BIN:$PATH
rc=0
if psql -X -q -d postgres -c "CREATE DATABASE idem_quick" >"$WORK/pgtap.log" 2>&1 &&
   psql -X -q -c "CREATE EXTENSION idem_gate" -c "CREATE EXTENSION pgtap" >>"$WORK/pgtap.log" 2>&1; then
	(cd "$WORK/tree" && pg_prove test/pgtap/*.sql) >>"$WORK/pgtap.log" 2>&1 || rc=$?
else
	rc=1
fi
n=$(grep -oE 'Files=[0-9]+, Tests=[0-9]+' "$WORK/pgtap.log" | tail -1 | sed 's/.*Tests=//' || true)
f=$({ grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$WORK/pgtap.log" || true; } |
	awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
if [ -z "$n" ]; then
	record pgTAP 0 1
	cat "$WORK/pgtap.log"
else
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	record pgTAP $((n - f)) "$f"
	[ "$f" -ne 0 ] && cat "$WORK/pgtap.log"
fi
grep -E '^test/pgtap' "$WORK/pgtap.log" | sed 's/^/  /' || true

echo "== summary"
printf '  %s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
