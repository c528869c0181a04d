#!/usr/bin/env bash
# idem_gate's fuzzers (test/fuzz/README.md).
#
#   run.sh jcs [MINUTES]     the coverage-guided fuzzer of the canonical-JSON
#                            toolkit (libFuzzer, AddressSanitizer and
#                            UndefinedBehaviorSanitizer) for MINUTES (default
#                            30), from the committed seeds and what earlier
#                            runs kept; then every input it kept through the
#                            differential test against npm canonicalize
#   run.sh replay            the committed seeds and regressions through the
#                            same checks (gcc and ASan, no clang needed) and
#                            the differential test: the test command's
#                            suite 22_fuzz_corpus
#   run.sh sql [MINUTES]     the SQL-level fuzzer of every API function's
#                            arguments (sql_fuzz.py) against the
#                            assert-enabled server (scripts/pgbuild.sh 15)
#
# Work files (binaries, the growing corpus, findings) go under
# ${IDEM_FUZZ_DIR:-/var/tmp/idem_gate_fuzz}.  A finding is saved there as
# findings/jcs/crash-*; copy it into regress/jcs/ with a name that says what
# it was, and it is replayed by every test run from then on.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${IDEM_FUZZ_DIR:-/var/tmp/idem_gate_fuzz}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
MODE=${1:-}
MINUTES=${2:-30}
SECONDS_RUN=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
mkdir -p "$WORK"

INC=$("$PG_CONFIG" --includedir-server)
LIB=$("$PG_CONFIG" --pkglibdir)
SRCS=("$HERE/jcs_fuzz.c" "$HERE/pg_runtime.c" "$ROOT/src/jcs.c" "$ROOT/src/jcs_json.c"
	  "$ROOT/src/jcs_json_lex.c" "$ROOT/src/jcs_number.c")
# the toolkit's Assert()s are on, whatever the server was built with
CFLAGS=(-g -O1 -DUSE_ASSERT_CHECKING -I"$INC" -I"$ROOT/src" -I"$HERE")
LIBS=("$LIB/libpgcommon.a" "$LIB/libpgport.a" -lcrypto -lm)

# the test dependencies the differential test reads (canonicalize)
npm_deps() {
	[ -d "$ROOT/test/jcs/node_modules/canonicalize" ] && return 0
	(cd "$ROOT/test/jcs" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

# replay DIR...: the checks and the differential test over saved inputs;
# ends with "N passed, N failed" (an input passes when it breaks no check
# and the oracle agrees)
replay() {
	local bin=$WORK/jcs_replay out rc=0 n bad
	gcc "${CFLAGS[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-DJCS_REPLAY "${SRCS[@]}" "${LIBS[@]}" -o "$bin"
	out=$(mktemp)
	"$bin" --print "$@" >"$out" 2>"$out.err" || rc=$?
	grep -v '^jcs_replay:' "$out.err" || true
	n=$(sed -n 's/^jcs_replay: \([0-9]*\) inputs checked, \([0-9]*\) violations/\1 \2/p' "$out.err")
	echo "checks: ${n% *} inputs, ${n#* } violations (exit $rc)"
	npm_deps
	node "$HERE/oracle.mjs" <"$out" | tee "$out.oracle" | tail -12
	bad=$(sed -n 's/^[0-9]* agreed, \([0-9]*\) disagreed$/\1/p' "$out.oracle")
	rm -f "$out" "$out.err" "$out.oracle"
	[ -n "$n" ] && [ -n "$bad" ] || { echo "0 passed, 1 failed"; return 1; }
	echo "$(( ${n% *} - ${n#* } )) passed, $(( ${n#* } + bad + (rc > 1 ? 1 : 0) )) failed"
	[ "${n#* }" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$rc" -le 1 ]
}

case "$MODE" in
jcs)
	# libFuzzer comes with Debian's clang
	if ! command -v clang >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang >/dev/null
	fi
	bin=$WORK/jcs_fuzz
	clang "${CFLAGS[@]}" -Wno-ignored-attributes -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined "${SRCS[@]}" "${LIBS[@]}" -o "$bin"
	mkdir -p "$WORK/corpus/jcs" "$WORK/findings/jcs"
	echo "== libFuzzer for $MINUTES min; kept inputs in $WORK/corpus/jcs"
	rc=0
	"$bin" -max_total_time=$SECONDS_RUN -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$WORK/findings/jcs/" \
		"$WORK/corpus/jcs" "$HERE/corpus/jcs" "$HERE/regress/jcs" 2>&1 |
		tee "$WORK/jcs_fuzz.log" | grep -E '^#[0-9]+ +(pulse|DONE|REDUCE|NEW)' | awk 'NR % 200 == 1' || rc=$?
	grep -E '^(#[0-9]+ +DONE|stat::|==[0-9]+==ERROR|SUMMARY|idem_gate jcs_fuzz)' "$WORK/jcs_fuzz.log" || true
	ls "$WORK/findings/jcs" | sed 's/^/finding: /'
	echo "== the kept inputs through the checks and the differential test"
	replay "$WORK/corpus/jcs" "$HERE/corpus/jcs" "$HERE/regress/jcs"
	;;
replay)
	replay "$HERE/corpus/jcs" "$HERE/regress/jcs"
	;;
sql)
	exec "$HERE/sql_fuzz.sh" "$MINUTES"
	;;
*)
	sed -n '/^#   run.sh/,/^$/p' "$0" >&2
	exit 2
	;;
esac
