#!/usr/bin/env bash
# Run every idem_gate test suite:
#   pg_regress (sql/), isolation (test/isolation/), Perl TAP (test/t/),
#   pgTAP (test/pgtap/) and the suites under test/suites/ (stress, canonical
#   JSON vectors and differential test, the n8n driver test).
# Installs what it needs, builds and installs idem_gate, runs the servers as
# user postgres on private loopback ports, and ends with one line
# "N passed, N failed".  Exit status is non-zero on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
export IDEM_SHARED=${IDEM_SHARED:-$(cd "$ROOT/../shared" 2>/dev/null && pwd || true)}
PORT=${IDEM_TEST_PORT:-55432}

"$ROOT/scripts/deps.sh" --with-node || exit 1
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null || {
	echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

WORK=$(mktemp -d /tmp/idem_gate_test.XXXXXX)
chmod 755 "$WORK"
mkdir "$WORK/tree"
tar -C "$ROOT" --exclude=.git --exclude=node_modules --exclude='tmp_*' -cf - . | tar -C "$WORK/tree" -xf -
chown -R postgres "$WORK"
LOGS="$WORK/logs"
mkdir -p "$LOGS"

total_pass=0
total_fail=0
summary=()

# record SUITE PASSED FAILED
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-28s %5d passed, %d failed' "$1" "$2" "$3")")
}

# pg_regress and isolation: "All N tests passed." / "M of N tests failed."
record_regress() {
	local name=$1 log=$2 n m
	if n=$(grep -oE 'All [0-9]+ tests passed' "$log" | grep -oE '[0-9]+'); then
		record "$name" "$n" 0
	elif grep -qE '[0-9]+ of [0-9]+ tests failed' "$log"; then
		m=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
		n=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $3}')
		record "$name" $((n - m)) "$m"
		cat "$log"
		find "$WORK/tree" -name regression.diffs -exec cat {} \;
	else
		record "$name" 0 1
		cat "$log"
	fi
}

# prove / pg_prove: "Files=F, Tests=N" and "Failed X/Y subtests"
record_prove() {
	local name=$1 log=$2 rc=$3 n f
	n=$(grep -oE 'Files=[0-9]+, Tests=[0-9]+' "$log" | tail -1 | sed 's/.*Tests=//')
	f=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$log" | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
	if [ -z "$n" ]; then
		record "$name" 0 1
		cat "$log"
		return
	fi
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	record "$name" $((n - f)) "$f"
	[ "$f" -ne 0 ] && cat "$log"
}

run_make_check() {
	(cd "$WORK/tree" && runuser -u postgres -- make -s installcheck "$@" 2>&1)
}

echo "== pg_regress"
run_make_check ISOLATION= TAP_TESTS= >"$LOGS/regress.log"
grep -E '^(test| *ok| *FAILED)' "$LOGS/regress.log" | sed 's/^/  /'
record_regress "pg_regress" "$LOGS/regress.log"

echo "== isolation"
run_make_check REGRESS= TAP_TESTS= >"$LOGS/isolation.log"
grep -E '^(test|ok|not ok)' "$LOGS/isolation.log" | sed 's/^/  /'
record_regress "isolation" "$LOGS/isolation.log"

echo "== Perl TAP"
run_make_check REGRESS= ISOLATION= PROVE_FLAGS=-v >"$LOGS/tap.log"
rc=$?
grep -E '^(ok|not ok|test/t/)' "$LOGS/tap.log" | sed 's/^/  /'
record_prove "Perl TAP" "$LOGS/tap.log" $rc

# One server for pgTAP and the suites.
"$ROOT/scripts/cluster.sh" start "$WORK/pg" "$PORT" || {
	cat "$WORK/pg/server.log"; echo "0 passed, 1 failed"; exit 1; }
trap '"$ROOT/scripts/cluster.sh" stop "$WORK/pg"' EXIT
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=idem_test
psql -q -d postgres -c "CREATE DATABASE idem_test" &&
	psql -q -c "CREATE EXTENSION idem_gate" -c "CREATE EXTENSION pgtap"

echo "== pgTAP"
(cd "$WORK/tree" && pg_prove -v test/pgtap/*.sql) >"$LOGS/pgtap.log" 2>&1
rc=$?
grep -E '^(ok|not ok|test/pgtap)' "$LOGS/pgtap.log" | sed 's/^/  /'
record_prove "pgTAP" "$LOGS/pgtap.log" $rc

for suite in "$WORK"/tree/test/suites/*.sh; do
	[ -e "$suite" ] || continue
	name=$(basename "$suite" .sh)
	echo "== $name"
	(cd "$WORK/tree" && bash "$suite") >"$LOGS/$name.log" 2>&1
	rc=$?
	sed 's/^/  /' "$LOGS/$name.log" | tail -40
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOGS/$name.log" | tail -1)
	if [ -z "$last" ]; then
		record "$name" 0 1
	else
		p=$(echo "$last" | awk '{print $1}')
		f=$(echo "$last" | awk '{print $3}')
		[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
		record "$name" "$p" "$f"
	fi
done

echo
echo "== summary (logs in $LOGS)"
printf '  %s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
