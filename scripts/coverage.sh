#!/usr/bin/env bash
# Line and branch coverage of idem_gate's C code (src/) by its tests.
#
#   PG_CONFIG=/path/to/private/pg_config scripts/coverage.sh [--layers LIST] [--html DIR]
#
# Builds a copy of the repository with gcc --coverage in a scratch directory
# that the postgres user may write into (the server processes write the
# .gcda counters next to the objects when they exit), installs it into
# PG_CONFIG (a private PostgreSQL: idem_gate is replaced there), runs the
# layers, and reports with lcov: the line, function and branch totals, a
# line per file, and every function no test entered.  At the end the
# normally built idem_gate is installed into PG_CONFIG again.
#
# --layers is a comma-separated list, run in order (default quick,tap):
#   quick  scripts/quick.sh: pg_regress, isolation, pgTAP
#   tap    the Perl TAP tests (test/t/: standby, worker)
#   full   scripts/test.sh on PG_CONFIG's major: every suite (pg_regress,
#          isolation, Perl TAP, pgTAP, stress, model, RFC 8785, n8n,
#          torture, Prometheus, Citus); test.sh builds its own copy, with
#          --coverage passed through PG_CFLAGS, and its servers count into
#          that copy's objects, which are read too
# --html DIR also writes lcov's HTML report to DIR.
# Needs lcov (installed with apt-get when missing).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAYERS=quick,tap
HTML=
while [ $# -gt 0 ]; do
	case "$1" in
	--layers) LAYERS=$2; shift 2 ;;
	--html) HTML=$(realpath -m "$2"); shift 2 ;;
	*) echo "usage: $0 [--layers quick,tap,full] [--html DIR]" >&2; exit 2 ;;
	esac
done
if [ -z "${PG_CONFIG:-}" ]; then
	echo "coverage.sh: set PG_CONFIG to a private PostgreSQL installation's pg_config" >&2
	exit 2
fi
BIN=$("$PG_CONFIG" --bindir)
command -v lcov >/dev/null || {
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lcov >/dev/null; }

SCRATCH=$(mktemp -d /tmp/idem_gate_coverage.XXXXXX)
chmod 755 "$SCRATCH"
mkdir -m 1777 "$SCRATCH/tmp"
TREE=$SCRATCH/tree
mkdir "$TREE"
tar -C "$ROOT" --exclude=.git --exclude=node_modules --exclude='tmp_*' --exclude='*.o' \
	--exclude='*.so' --exclude='*.gc*' -cf - . | tar -C "$TREE" -xf -
MAKE=(make -s -C "$TREE" PG_CONFIG="$PG_CONFIG" with_llvm=no)

reinstall_plain() {
	make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null 2>&1 &&
		make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1 ||
		echo "note: could not reinstall the normal build into $PG_CONFIG"
}
trap 'reinstall_plain; rm -rf "$SCRATCH"' EXIT

echo "== building with --coverage in $TREE"
"${MAKE[@]}" PG_CFLAGS="--coverage -O0" PG_LDFLAGS="--coverage" >"$SCRATCH/build.log" 2>&1 || {
	cat "$SCRATCH/build.log"; exit 1; }
"${MAKE[@]}" install >/dev/null
chown -R postgres "$TREE"
lcov --quiet --zerocounters --directory "$TREE/src"

export PG_CONFIG TMPDIR=$SCRATCH/tmp PATH=$BIN:$PATH
status=0
IFS=, read -r -a layers <<<"$LAYERS"
objdirs=("$TREE/src")
for layer in "${layers[@]}"; do
	echo "== layer $layer"
	case "$layer" in
	quick) (cd "$TREE" && scripts/quick.sh) >"$SCRATCH/$layer.log" 2>&1 || status=1 ;;
	tap) (cd "$TREE" && runuser -u postgres -- make -s installcheck REGRESS= ISOLATION= \
			PG_CONFIG="$PG_CONFIG") >"$SCRATCH/$layer.log" 2>&1 || status=1 ;;
	full)
		(cd "$TREE" && PG_MAJORS=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/') \
			PG_CFLAGS="--coverage -O0" PG_LDFLAGS="--coverage" scripts/test.sh) \
			>"$SCRATCH/$layer.log" 2>&1 || status=1
		work=$(sed -nE 's/^== summary \(logs in (.*)\/logs;.*/\1/p' "$SCRATCH/$layer.log")
		for d in "$work"/*/build/src; do
			[ -d "$d" ] && objdirs+=("$d")
		done
		;;
	*) echo "unknown layer $layer" >&2; exit 2 ;;
	esac
	grep -E '^[0-9]+ passed, [0-9]+ failed|^Result:|^All [0-9]+ tests|tests failed' "$SCRATCH/$layer.log" |
		sed 's/^/  /' || true
	if grep -qE 'Result: FAIL|[1-9][0-9]* failed|tests failed' "$SCRATCH/$layer.log"; then
		grep -E '^not ok|^# +Failed|Failed test|^t/|^test/t/.*(ok|Dubious)|FAILED' "$SCRATCH/$layer.log" |
			head -20 | sed 's/^/    /' || true
	fi
done
[ "$status" -eq 0 ] || echo "note: a layer had failures; coverage is still reported"

# the objects' own .gcda files (the servers ran as postgres), from each
# build; the source paths are made the same so that lcov adds them up
adds=()
for d in "${objdirs[@]}"; do
	n=${#adds[@]}
	lcov --quiet --capture --rc lcov_branch_coverage=1 --directory "$d" \
		--base-directory "$(dirname "$d")" --output-file "$SCRATCH/cap$n.info" 2>"$SCRATCH/lcov.err" || {
		cat "$SCRATCH/lcov.err"; exit 1; }
	lcov --quiet --rc lcov_branch_coverage=1 --extract "$SCRATCH/cap$n.info" "$d/*" \
		--output-file "$SCRATCH/ext$n.info"
	sed "s|^SF:$d/|SF:$TREE/src/|" "$SCRATCH/ext$n.info" >"$SCRATCH/src$n.info"
	adds+=(--add-tracefile "$SCRATCH/src$n.info")
done
lcov --quiet --rc lcov_branch_coverage=1 "${adds[@]}" --output-file "$SCRATCH/src.info"

echo
echo "== coverage of src/ by: $LAYERS"
lcov --rc lcov_branch_coverage=1 --summary "$SCRATCH/src.info" 2>&1 | grep -E 'lines|functions|branches' | sed 's/^ */  /'
echo
echo "== per file (lines, branches)"
awk -v tree="$TREE/" '
	/^SF:/ { f = substr($0, 4); sub(tree, "", f) }
	/^LF:/ { lf = substr($0, 4) } /^LH:/ { lh = substr($0, 4) }
	/^BRF:/ { bf = substr($0, 5) } /^BRH:/ { bh = substr($0, 5) }
	/^end_of_record/ {
		printf "  %-20s lines %5.1f%% (%d/%d)   branches %5.1f%% (%d/%d)\n", f,
			lf ? 100 * lh / lf : 100, lh, lf, bf ? 100 * bh / bf : 100, bh, bf
		bf = bh = 0
	}' "$SCRATCH/src.info" | sort
echo
echo "== functions no test entered"
awk -v tree="$TREE/" '
	/^SF:/ { f = substr($0, 4); sub(tree, "", f) }
	/^FN:/ { split(substr($0, 4), a, ","); line[a[2]] = a[1] }
	/^FNDA:0,/ { n = substr($0, 8); printf "  %s:%s %s\n", f, line[n], n }
	/^end_of_record/ { delete line }' "$SCRATCH/src.info" | sort -t: -k1,1 -k2,2n
if [ -n "$HTML" ]; then
	genhtml --quiet --branch-coverage --prefix "$TREE" --output-directory "$HTML" "$SCRATCH/src.info"
	echo "HTML report in $HTML"
fi
