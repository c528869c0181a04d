#!/usr/bin/env bash
# idem_gate's quick layer on an assert-enabled PostgreSQL (scripts/pgbuild.sh),
# then the server log searched for what the assertions and the memory
# checks report: a failed Assert() (TRAP:), a process ended by a signal, a
# PANIC, leaked references and buffers, a corrupt memory chunk.  Those
# never reach a test's expected output; the production server of Debian
# lets them pass.
#
#   instruments.sh MAJOR                      the quick layer, then the log
#   instruments.sh MAJOR --all                every suite of the test command
#                                             (scripts/test.sh) on that build,
#                                             then every server log it left
#   instruments.sh MAJOR --discard-caches [MINUTES]
#                                             pg_regress, then isolation, with
#                                             debug_discard_caches = 1 (every
#                                             catalog cache entry dropped at
#                                             each chance: a stale pointer into
#                                             one shows), stopped after MINUTES
#                                             (default 15), then the log
#   instruments.sh MAJOR --sql-fuzz [MINUTES] the SQL-level fuzzer of every API
#                                             function's arguments
#                                             (test/fuzz/sql_fuzz.py) for
#                                             MINUTES (default 30), then the log
#   instruments.sh MAJOR --valgrind [MINUTES] the server under Valgrind's
#                                             memcheck (the --valgrind build,
#                                             PostgreSQL's valgrind.supp):
#                                             pg_regress, isolation and the
#                                             model for 60 s, stopped after
#                                             MINUTES (default 120); then the
#                                             errors whose stack passes through
#                                             idem_gate, and the log
#
# IDEM_INSTRUMENT_TESTS="FILE..." and IDEM_INSTRUMENT_SPECS="SPEC..." limit
# the pg_regress files and isolation specs that --discard-caches and
# --valgrind run (either empty: that suite is skipped), for a run after a
# change that those files test.
#
# In the long modes the server may dump core: a process ended by a signal
# leaves a core file in the data directory, and the end prints its
# backtrace (gdb), with the log's findings.
#
# Ends with "N findings" and exits non-zero on a finding or a failed test.
# The temporary directory (cluster, logs, diffs) is kept and named.  Needs
# root, like scripts/quick.sh; builds the server first if it is missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAJOR=${1:-}
MODE=${2:-quick}
MINUTES=${3:-15}
case "$MAJOR" in [0-9]*) ;; *) sed -n '/^#   instruments.sh/,/^$/p' "$0" >&2; exit 2 ;; esac
case "$MODE" in
quick | --discard-caches | --all) ;;
--sql-fuzz) MINUTES=${3:-30} ;;
--valgrind) MINUTES=${3:-120} ;;
*) echo "instruments.sh: unknown mode $MODE" >&2; exit 2 ;;
esac

if [ "$MODE" = --valgrind ]; then
	PG_CONFIG=$("$ROOT/scripts/pgbuild.sh" "$MAJOR" --valgrind | tail -1)
else
	PG_CONFIG=$("$ROOT/scripts/pgbuild.sh" "$MAJOR" | tail -1)
fi
BIN=$("$PG_CONFIG" --bindir)
export PG_CONFIG

# What the server log of an assert build says when something is wrong.
PATTERNS=(
	'TRAP: '
	'terminated by signal (4|6|7|8|11)'
	'PANIC:'
	'WARNING:  .*leak'
	'WARNING:  .*(not closed|still referenced|still active|was not released)'
	'problem in alloc set'
	'detected write past chunk end'
	'WARNING:  .*(resource|buffer refcount|pin count)'
)

# scan LOG: print each finding once with how often it occurred, and the
# line of the log before its first occurrence (usually the statement);
# sets FINDINGS
FINDINGS=0
scan() {
	local log=$1 re
	re=$(IFS='|'; echo "${PATTERNS[*]}")
	echo "== findings in $log"
	if ! grep -qE "$re" "$log"; then
		echo "  none"
		return 0
	fi
	# one line per kind: the PIDs, times and addresses taken out
	grep -E "$re" "$log" |
		sed -E 's/^[0-9-]+ [0-9:.]+ [A-Z]+ \[[0-9]+\] //; s/PID:? [0-9]+//; s/\(PID [0-9]+\)//' |
		sort | uniq -c | sed 's/^/  /'
	FINDINGS=$(grep -cE "$re" "$log")
	# the backtraces of failed assertions, the first of each kind
	grep -n 'TRAP: ' "$log" | sed -E 's/PID: [0-9]+//' | sort -t: -k2 -u | while IFS=: read -r n _; do
		echo "  -- backtrace at line $n of the log, with the source lines:"
		sed -n "$((n + 1)),$((n + 12))p" "$log" | while IFS= read -r frame; do
			echo "     $frame"
			resolve "$frame"
		done
	done
}

# resolve FRAME: the file:line of a backtrace frame of the server or of a
# shared library, from its debugging information (one before the return
# address: the call itself)
resolve() {
	local file sym hex at
	if [[ $1 =~ ^(/[^\ \(]+\.so)\(([^\)]*)\+0x([0-9a-f]+)\) ]]; then
		file=${BASH_REMATCH[1]} sym=${BASH_REMATCH[2]} hex=${BASH_REMATCH[3]}
	elif [[ $1 =~ ^postgres:\ .*\(([^\)]*)\+0x([0-9a-f]+)\)\[ ]]; then
		file=$BIN/postgres sym=${BASH_REMATCH[1]} hex=${BASH_REMATCH[2]}
	else
		return 0
	fi
	at=$(printf '%s%s0x%x' "$sym" "${sym:++}" $((0x$hex - 1)))
	addr2line -e "$file" -f -i -p "$at" 2>/dev/null | grep -v '^??' |
		sed -E 's/^ \(inlined by\) /           inlined in /; t; s/^/         at /' || true
}

if [ "$MODE" = quick ]; then
	# the objects of a build against another PostgreSQL would be linked
	# as they are: build afresh
	make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no clean >/dev/null
	rc=0
	out=$(IDEM_QUICK_KEEP=1 "$ROOT/scripts/quick.sh" 2>&1) || rc=$?
	echo "$out"
	work=$(echo "$out" | sed -n 's/^kept //p' | tail -1)
	[ -n "$work" ] || { echo "instruments.sh: quick.sh kept no directory"; exit 1; }
	scan "$work/instance/log/postmaster.log"
	echo "$FINDINGS findings"
	[ "$rc" -eq 0 ] && [ "$FINDINGS" -eq 0 ]
	exit
fi

if [ "$MODE" = --all ]; then
	# the test command with this build as the host's PostgreSQL (the
	# Debian package step left out: it builds against Debian's server)
	rc=0
	PG_CONFIG="$PG_CONFIG" PG_MAJORS="$MAJOR" IDEM_TEST_DEB=0 "$ROOT/scripts/test.sh" \
		>"${TMPDIR:-/tmp}/idem_gate_instruments_all.log" 2>&1 || rc=$?
	out=${TMPDIR:-/tmp}/idem_gate_instruments_all.log
	sed -n '/^== summary/,$p' "$out"
	logs=$(sed -n 's/^== summary (logs in \([^;]*\);.*/\1/p' "$out")
	[ -n "$logs" ] || { tail -40 "$out"; exit 1; }
	work=$(dirname "$logs")
	# every server log the run left: the temporary instances of
	# pg_regress, isolation and the Perl TAP tests, and the suites' servers
	all=$(mktemp)
	find "$work" -type f \( -name '*.log' -o -name 'postmaster.log' -o -name 'logfile' \) \
		-exec cat {} + >"$all" 2>/dev/null || true
	echo "== $(find "$work" -type f -name '*.log' | wc -l) logs searched ($(wc -l <"$all") lines)"
	scan "$all"
	rm -f "$all"
	echo "$FINDINGS findings"
	[ "$rc" -eq 0 ] && [ "$FINDINGS" -eq 0 ]
	exit
fi

# The long modes: one cluster set up like quick.sh's, on the build
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no clean >/dev/null
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null
PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_instruments.XXXXXX")
DATA=$WORK/instance/data
LOG=$WORK/instance/log/postmaster.log
VGLOGS=$WORK/valgrind
as_pg() { runuser -u postgres -- "$@"; }
stop() {
	as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 300 stop >/dev/null 2>&1 ||
		as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
	echo "kept $WORK"
}
trap stop EXIT
mkdir -p "$WORK/tree/test/jcs/vectors" "$WORK/instance/log" "$VGLOGS"
cp -a "$ROOT/sql" "$ROOT/expected" "$WORK/tree/"
cp -a "$ROOT/test/preload.conf" "$ROOT/test/isolation" "$ROOT/test/model" "$ROOT/test/fuzz" "$WORK/tree/test/"
cp -a "$ROOT/test/jcs/vectors/numbers" "$WORK/tree/test/jcs/vectors/"
chmod 755 "$WORK"
chown -R postgres "$WORK"
as_pg "$BIN/initdb" -D "$DATA" -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1
# one secret, so that keyed workflows answer the SQL fuzzer
echo "s1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$WORK/secrets"
chown postgres "$WORK/secrets"
chmod 600 "$WORK/secrets"
{
	echo "listen_addresses = ''"
	echo "port = 5432"
	echo "unix_socket_directories = '$WORK'"
	echo "fsync = off"
	echo "synchronous_commit = off"
	echo "full_page_writes = off"
	echo "max_connections = 40"
	cat "$ROOT/test/preload.conf"
	# pg_regress's keyed test starts without a secret
	[ "$MODE" = --sql-fuzz ] && echo "idem_gate.secret_file = '$WORK/secrets'"
	[ "$MODE" = --discard-caches ] && echo "debug_discard_caches = 1"
} >>"$DATA/postgresql.conf"
if [ "$MODE" = --valgrind ]; then
	# PostgreSQL's own way (src/tools/valgrind.supp, the buildfarm's skink):
	# every process of the server under memcheck, one log per process
	SUPP=$(ls "${IDEM_PGBUILD_CACHE:-/var/cache/idem_gate}"/pgsrc/"$MAJOR"/*/src/tools/valgrind.supp | head -1)
	as_pg bash -c "exec valgrind --quiet --trace-children=yes --track-origins=yes \
		--read-var-info=yes --num-callers=30 --leak-check=no --gen-suppressions=all \
		--suppressions='$SUPP' --error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
		--log-file='$VGLOGS/%p.log' '$BIN/postgres' -D '$DATA' >>'$LOG' 2>&1" &
	for _ in $(seq 1 300); do
		"$BIN/pg_isready" -q -h "$WORK" -p 5432 && break
		sleep 1
	done
else
	# core files allowed: a process ended by a signal leaves one in the data
	# directory (a core_pattern of "core"), whose backtrace the end prints
	as_pg bash -c "ulimit -c unlimited; exec '$BIN/pg_ctl' -D '$DATA' -l '$LOG' -w -t 600 start" >/dev/null
fi
"$BIN/pg_isready" -q -h "$WORK" -p 5432 || { cat "$LOG"; echo "the server did not start"; exit 1; }
start=$(date +%s)
deadline=$((start + MINUTES * 60))
# the fuzzer stops itself; the deadline only guards against a hang
[ "$MODE" = --sql-fuzz ] && deadline=$((deadline + 600))
left() { echo $((deadline - $(date +%s))); }
rc=0

# pg_regress and isolation against the running server, each given what is
# left of the time
common=(--bindir="$BIN" --host="$WORK" --port=5432 --user=postgres)
mapfile -t tests < <(cd "$ROOT/sql" && find . -maxdepth 1 -name '*.sql' | sed 's|^\./||; s/\.sql$//' | sort)
mapfile -t specs < <(cd "$ROOT/test/isolation/specs" && ls *.spec | sed 's/\.spec$//' | sort)
[ -n "${IDEM_INSTRUMENT_TESTS+set}" ] && read -r -a tests <<<"$IDEM_INSTRUMENT_TESTS"
[ -n "${IDEM_INSTRUMENT_SPECS+set}" ] && read -r -a specs <<<"$IDEM_INSTRUMENT_SPECS"
suite() {
	local name=$1 log=$WORK/$1.log t
	shift
	t=$(left)
	if [ "$t" -le 0 ]; then
		echo "== $name: no time left"
		rc=1
		return
	fi
	echo "== $name ($MODE), at most $((t / 60)) min"
	local r=0
	(cd "$WORK/tree" && timeout -s TERM "$t" runuser -u postgres -- "$@") >"$log" 2>&1 || r=$?
	grep -E '^(test|ok|not ok| +ok| +FAILED)' "$log" | sed 's/^/  /' || true
	tail -3 "$log" | sed 's/^/  /'
	if [ "$r" -eq 124 ]; then
		echo "  stopped: out of time"
	fi
	[ "$r" -eq 0 ] || rc=1
}

case "$MODE" in
--discard-caches | --valgrind)
	[ "${#tests[@]}" -eq 0 ] ||
		suite pg_regress "$PGXS_DIR/src/test/regress/pg_regress" "${common[@]}" \
			--inputdir=. --outputdir=. --dbname=contrib_regression "${tests[@]}"
	[ "${#specs[@]}" -eq 0 ] ||
		suite isolation "$PGXS_DIR/src/test/isolation/pg_isolation_regress" "${common[@]}" \
			--inputdir=test/isolation --outputdir=output_iso --dbname=isolation_regression "${specs[@]}"
	if [ "$MODE" = --valgrind ]; then
		as_pg "$BIN/psql" -X -q -h "$WORK" -p 5432 -d postgres -c "CREATE DATABASE idem_model" >/dev/null
		as_pg "$BIN/psql" -X -q -h "$WORK" -p 5432 -d idem_model -c "CREATE EXTENSION idem_gate" >/dev/null
		suite model env PGHOST="$WORK" PGPORT=5432 PGUSER=postgres PGDATABASE=idem_model \
			test/model/run.sh --seconds 60
	fi
	;;
--sql-fuzz)
	as_pg "$BIN/psql" -X -q -h "$WORK" -p 5432 -d postgres -c "CREATE DATABASE idem_fuzz" >/dev/null
	as_pg "$BIN/psql" -X -q -h "$WORK" -p 5432 -d idem_fuzz -c "CREATE EXTENSION idem_gate" >/dev/null
	suite sql_fuzz env PGHOST="$WORK" PGPORT=5432 PGUSER=postgres PGDATABASE=idem_fuzz \
		/usr/bin/python3 test/fuzz/sql_fuzz.py --seconds "$((MINUTES * 60))"
	sed -n '/^  [a-z_]*(/p; /^FINDING/,/^  /p' "$WORK/sql_fuzz.log" | head -80
	;;
esac
echo "== $(( ($(date +%s) - start) / 60 )) min"

if [ "$MODE" = --valgrind ]; then
	as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 600 stop >/dev/null 2>&1 || true
	# an error counts against idem_gate when its stack passes through it:
	# a frame in idem_gate.so, which Valgrind names only where it has no
	# debug information, or one of idem_gate's functions (ig_, idem_, jcs_),
	# as it names them where it has (the library is built with -g)
	total=$(cat "$VGLOGS"/*.log 2>/dev/null | grep -c VALGRINDERROR-BEGIN || true)
	ours=0
	for f in "$VGLOGS"/*.log; do
		[ -s "$f" ] || continue
		awk '/VALGRINDERROR-BEGIN/ { e = ""; on = 1 } on { e = e $0 "\n" }
			/VALGRINDERROR-END/ { on = 0
				if (e ~ /idem_gate\.so|(at|by) 0x[0-9A-Fa-f]+: (ig|idem|jcs)_/) printf "%s", e }' "$f"
	done >"$WORK/valgrind-idem_gate.txt"
	ours=$(grep -c VALGRINDERROR-BEGIN "$WORK/valgrind-idem_gate.txt" || true)
	echo "== valgrind: $total errors in all, $ours through idem_gate ($(ls "$VGLOGS" | wc -l) processes)"
	head -60 "$WORK/valgrind-idem_gate.txt"
	[ "$ours" -eq 0 ] || rc=1
	FINDINGS=$ours
fi
found=$FINDINGS
scan "$LOG"
FINDINGS=$((FINDINGS + found))
# the backtrace of each process that left a core file (with a core_pattern
# that pipes cores elsewhere, such as systemd-coredump's, there are none
# here: coredumpctl has them)
for core in $(find "$DATA" -maxdepth 1 -name 'core*' -type f 2>/dev/null); do
	echo "== backtrace of $core"
	gdb -q -batch -ex 'bt 40' "$BIN/postgres" "$core" 2>/dev/null | grep -E '^#' | sed 's/^/  /' | head -40
done
echo "$FINDINGS findings"
[ "$rc" -eq 0 ] && [ "$FINDINGS" -eq 0 ]
