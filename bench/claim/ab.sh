#!/usr/bin/env bash
# Two builds of idem_gate side by side on one cluster: for each revision
# the new-key claim against the raw INSERT ... ON CONFLICT DO NOTHING of
# bench/baseline/, in alternating rounds, so that a change's cost shows as
# the difference of two ratios measured in the same minutes.
#   bench/claim/ab.sh REV_A [REV_B]       (REV_B defaults to the work tree)
#   BENCH_SECONDS (10), BENCH_ROUNDS (4), BENCH_SYNC ("off on"),
#   BENCH_SCRIPT (idem_new.pgb; its baseline is raw_new.pgb, idem_dup.pgb's
#   raw_dup.pgb, idem_cycle.pgb's raw_cycle.pgb),
#   BENCH_STANDBY=1: a streaming standby of the cluster on the same machine,
#   named in synchronous_standby_names and caught up before each round (the
#   gate then waits for it before answering from a row, as 1.2 does)
# PostgreSQL 15 (the host's) only.  Each revision's library, control file
# and scripts are installed in turn and the server restarted; each has its
# own database, the other one closed to connections so that the other
# build's janitors never see it.  The work tree's build is installed again
# at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BASE=$ROOT/bench/baseline
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-4}
SYNCS=${BENCH_SYNC:-off on}
SCRIPT=${BENCH_SCRIPT:-idem_new.pgb}
RAW=${SCRIPT/idem_/raw_}
STANDBY=${BENCH_STANDBY:-0}
PORT=${BENCH_PORT:-55435}
REV_A=${1:?usage: $0 REV_A [REV_B]}
REV_B=${2:-}

"$ROOT/scripts/deps.sh"
BIN=$(pg_config --bindir)
DIR=$(mktemp -d /tmp/idem_gate_ab.XXXXXX)
chmod 755 "$DIR"
cleanup() {
	[ -f "$DIR/cluster/server.log" ] && [ "$1" != 0 ] && tail -20 "$DIR/cluster/server.log" >&2
	[ -f "$DIR/standby/postmaster.pid" ] &&
		runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/standby" -m immediate -w stop >/dev/null 2>&1
	"$ROOT/scripts/cluster.sh" stop "$DIR/cluster" || true
	make -s -C "$ROOT" with_llvm=no install >/dev/null || true
	rm -rf "$DIR"
}
trap 'cleanup $?' EXIT

# build NAME REV: the revision's tree in $DIR/NAME, built (REV "" = work tree)
build() {
	mkdir -p "$DIR/$1"
	if [ -z "$2" ]; then
		tar -C "$ROOT" --exclude=.git --exclude=node_modules -cf - . | tar -C "$DIR/$1" -xf -
	else
		git -C "$ROOT" archive "$2" | tar -C "$DIR/$1" -xf -
	fi
	make -s -C "$DIR/$1" clean >/dev/null 2>&1 || true
	make -s -C "$DIR/$1" with_llvm=no >/dev/null 2>&1
}
build a "$REV_A"
build b "$REV_B"

export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

make -s -C "$DIR/a" with_llvm=no install >/dev/null
"$ROOT/scripts/cluster.sh" start "$DIR/cluster" "$PORT" "shared_buffers = '1GB'" \
	"max_wal_size = '8GB'" "checkpoint_timeout = '30min'"
q -d postgres -c "CREATE DATABASE a" -c "CREATE DATABASE b"

# the synchronous standby: without idem_gate loaded (replay needs none, and
# the builds' installs replace the library under it)
if [ "$STANDBY" = 1 ]; then
	install -d -o postgres -m 700 "$DIR/standby"
	runuser -u postgres -- "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres \
		-D "$DIR/standby" -R -X stream -c fast
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/standby" -l "$DIR/standby/standby.log" -w -t 60 \
		-o "-c port=$((PORT + 1)) -c shared_preload_libraries='' -c hot_standby=on" start >/dev/null
	q -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
fi

# caught_up: with a standby, wait until it streams synchronously again
caught_up() {
	[ "$STANDBY" = 1 ] || return 0
	for _ in $(seq 120); do
		[ "$(q -d postgres -c "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND replay_lsn = pg_current_wal_lsn()")" = 1 ] && return 0
		sleep 0.5
	done
	echo "the standby did not catch up" >&2
	exit 1
}

# use NAME: NAME's build installed and loaded, its database the only open one
use() {
	local other=a
	[ "$1" = a ] && other=b
	make -s -C "$DIR/$1" with_llvm=no install >/dev/null
	q -d postgres -c "ALTER DATABASE $other ALLOW_CONNECTIONS false" \
		-c "ALTER DATABASE $1 ALLOW_CONNECTIONS true"
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/cluster/data" -l "$DIR/cluster/server.log" \
		-w -t 60 -m fast restart >/dev/null
	caught_up
	if [ "$(q -d "$1" -c "SELECT count(*) FROM pg_extension WHERE extname = 'idem_gate'")" = 0 ]; then
		q -d "$1" -f "$BASE/schema.sql" >/dev/null 2>&1
		q -d "$1" -f "$here/setup.sql" >/dev/null
	fi
}

tps() {
	PGOPTIONS="-c synchronous_commit=$2" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" \
		-f "$1" "$3" 2>&1 | awk '/^tps = / { print $3 }'
}
ratio() { printf '%.3f' "$(echo "$1 / $2" | bc -l)"; }

declare -A per sum
echo "A = ${REV_A}, B = ${REV_B:-work tree}; $SCRIPT vs $RAW; standby: $STANDBY;" \
	"pgbench -M prepared -c 8 -j 2 -T $SECS, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	order="a b"
	[ $((r % 2)) = 0 ] && order="b a"
	for v in $order; do
		use "$v"
		for s in $SYNCS; do
			caught_up
			bt=$(tps "$BASE/$RAW" "$s" "$v")
			caught_up
			it=$(tps "$here/$SCRIPT" "$s" "$v")
			x=$(ratio "$it" "$bt")
			per[$v:$s]="${per[$v:$s]:-} $x"
			sum[$v:$s]=$(echo "${sum[$v:$s]:-0} + $x" | bc -l)
			echo "round $r $v sync=$s raw=$bt idem=$it ratio=$x"
		done
	done
done
echo
printf '%-5s %-4s %9s  %s\n' rev sync mean rounds
for s in $SYNCS; do
	for v in a b; do
		printf '%-5s %-4s %9.3f  %s\n' "$v" "$s" "$(echo "${sum[$v:$s]} / $ROUNDS" | bc -l)" "${per[$v:$s]}"
	done
done
