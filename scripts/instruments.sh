#!/usr/bin/env bash
# idem_gate's quick layer on an assert-enabled PostgreSQL (scripts/pgbuild.sh),
# then the server log searched for what the assertions and the memory
# checks report: a failed Assert() (TRAP:), a process ended by a signal, a
# PANIC, leaked references and buffers, a corrupt memory chunk.  Those
# never reach a test's expected output; the production server of Debian
# lets them pass.
#
#   instruments.sh MAJOR                      the quick layer, then the log
#   instruments.sh MAJOR --discard-caches [MINUTES]
#                                             pg_regress alone with
#                                             debug_discard_caches = 1 (every
#                                             catalog cache entry dropped at
#                                             each chance: a stale pointer into
#                                             one shows), stopped after MINUTES
#                                             (default 15), then the log
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
case "$MODE" in quick|--discard-caches) ;; *) echo "instruments.sh: unknown mode $MODE" >&2; exit 2 ;; esac

PG_CONFIG=$("$ROOT/scripts/pgbuild.sh" "$MAJOR" | tail -1)
BIN=$("$PG_CONFIG" --bindir)
export PG_CONFIG

# What the server log of an assert build says when something is wrong.
PATTERNS=(
	'TRAP: '
	'terminated by signal'
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

# --discard-caches: pg_regress alone, on a cluster set up like quick.sh's
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no clean >/dev/null
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null
PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_discard.XXXXXX")
DATA=$WORK/instance/data
LOG=$WORK/instance/log/postmaster.log
as_pg() { runuser -u postgres -- "$@"; }
stop() {
	as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
	echo "kept $WORK"
}
trap stop EXIT
mkdir -p "$WORK/tree/test/jcs/vectors" "$WORK/instance/log"
cp -a "$ROOT/sql" "$ROOT/expected" "$WORK/tree/"
cp -a "$ROOT/test/preload.conf" "$WORK/tree/test/"
cp -a "$ROOT/test/jcs/vectors/numbers" "$WORK/tree/test/jcs/vectors/"
chmod 755 "$WORK"
chown -R postgres "$WORK"
as_pg "$BIN/initdb" -D "$DATA" -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1
{
	echo "listen_addresses = ''"
	echo "port = 5432"
	echo "unix_socket_directories = '$WORK'"
	echo "fsync = off"
	echo "synchronous_commit = off"
	echo "full_page_writes = off"
	cat "$ROOT/test/preload.conf"
	echo "debug_discard_caches = 1"
} >>"$DATA/postgresql.conf"
as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 600 start >/dev/null
mapfile -t tests < <(cd "$ROOT/sql" && find . -maxdepth 1 -name '*.sql' | sed 's|^\./||; s/\.sql$//' | sort)
echo "== pg_regress with debug_discard_caches = 1, at most $MINUTES min"
start=$(date +%s)
rc=0
(cd "$WORK/tree" && timeout -s TERM "$((MINUTES * 60))" runuser -u postgres -- \
	"$PGXS_DIR/src/test/regress/pg_regress" --bindir="$BIN" --host="$WORK" --port=5432 \
	--user=postgres --inputdir=. --outputdir=. --dbname=contrib_regression \
	"${tests[@]}") >"$WORK/regress.log" 2>&1 || rc=$?
grep -E '^(test| *ok| *FAILED|not ok|ok)' "$WORK/regress.log" | sed 's/^/  /' || true
done_n=$(grep -cE '^(test|ok|not ok) .*[0-9]+ ms$' "$WORK/regress.log" || true)
total=${#tests[@]}
if [ "$rc" -eq 124 ]; then
	echo "stopped after $MINUTES min: $done_n of $total tests done"
else
	echo "$done_n of $total tests done in $(( ($(date +%s) - start) / 60 )) min"
	tail -3 "$WORK/regress.log"
fi
scan "$LOG"
echo "$FINDINGS findings"
[ "$rc" -eq 0 ] && [ "$FINDINGS" -eq 0 ]
