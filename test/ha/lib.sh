# test/ha/lib.sh: what pgaf.sh and patroni.sh share (sourced, not run).
#
# A drill sets DRILL (its name) and sources this file; ha_init then makes
# the work directory, runs setup.sh and arms the clean-up.  Every process a
# drill starts goes through ha_spawn, which records its pid (each is its
# own session, so that its process group can be signalled as one node),
# and ha_cleanup ends exactly those, by id.

HA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HA_REPO=$(cd "$HA_DIR/../.." && pwd)
HA_PREFIX=${IDEM_HA_PREFIX:-/var/cache/idem_gate/ha-pg15}
PGBIN=$HA_PREFIX/usr/lib/postgresql/15/bin
PY=/usr/bin/python3                 # Debian's, where python3-psycopg2 is
HA_SECONDS=${IDEM_HA_SECONDS:-150}
HA_CLIENTS=${IDEM_HA_CLIENTS:-8}
HA_KEEP=${IDEM_HA_KEEP:-0}
HA_PARTITION_S=${IDEM_HA_PARTITION_S:-10}
HA_CRASH_AT_S=${IDEM_HA_CRASH_AT_S:-7.5}  # partition_crash: the primary dies this far into the partition
HA_CRASH_WAIT_S=${IDEM_HA_CRASH_WAIT_S:-60}  # a crashed node's manager is restarted by then at the latest
HA_GAP_S=${IDEM_HA_GAP_S:-4}        # steady load between recovery and the next fault
HA_RECOVER_S=${IDEM_HA_RECOVER_S:-120}   # a fault not recovered by then is a failure
# the janitor's settings for the drill: alert fast, and delete the rows of
# one workflow (ha_short) a few seconds after completion
HA_NAPTIME=1s
HA_STUCK_AFTER=2s
HA_SHORT_RETENTION_S=4

ha_ts() { date +%H:%M:%S.%3N; }
ha_log() { echo "[$(ha_ts)] $DRILL: $*" | tee -a "${W:-/dev/null}/drill.log" >&2; }
# ha_die: the reason, the end of every log of the drill (the work
# directory is removed at exit unless IDEM_HA_KEEP=1), and a failed count
ha_die() {
	local f
	ha_log "ABORT: $*"
	for f in "${W:-/nonexistent}"/*.log "${W:-/nonexistent}"/*/log/*.log; do
		[ -f "$f" ] || continue
		echo "--- last lines of $f" >&2
		tail -n 8 "$f" | cut -c1-240 >&2
	done
	echo "0 passed, 1 failed"
	exit 1
}

# ha_event KIND [key=value ...]: one line of $W/events.jsonl, read by the
# checker (the faults, who was primary before and after, rejoin times)
ha_event() {
	local kind=$1; shift
	"$PY" - "$kind" "$@" >>"$W/events.jsonl" <<'EOF'
import json, sys, time
d = {"t": time.time(), "kind": sys.argv[1]}
for a in sys.argv[2:]:
    k, _, v = a.partition("=")
    try:
        v = json.loads(v)
    except ValueError:
        pass
    d[k] = v
print(json.dumps(d))
EOF
}

# as_pg CMD...: run as postgres with the private PostgreSQL first in PATH
# (pg_autoctl finds pg_basebackup, pg_rewind and psql through pg_ctl's
# directory, but looks pg_ctl itself up in PATH when not told)
as_pg() {
	runuser -u postgres -- env -i PATH="$PGBIN:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$W" LANG=C.UTF-8 \
		XDG_CONFIG_HOME="$W/xdg/config" XDG_DATA_HOME="$W/xdg/data" XDG_RUNTIME_DIR="$W/xdg/run" \
		"$@"
}

# ha_spawn NAME CMD...: start CMD as postgres in a session of its own,
# output to $W/NAME.log; its pid, which is its process group, in
# $W/pids/NAME.  (setsid as the first word of a background command calls
# setsid() in place, so $! is the session leader: runuser, whose child CMD
# and all CMD starts share the group, unless they make their own.)
ha_spawn() {
	local name=$1; shift
	setsid runuser -u postgres -- env -i PATH="$PGBIN:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$W" LANG=C.UTF-8 \
		XDG_CONFIG_HOME="$W/xdg/config" XDG_DATA_HOME="$W/xdg/data" XDG_RUNTIME_DIR="$W/xdg/run" \
		"$@" >>"$W/$name.log" 2>&1 </dev/null &
	echo $! >"$W/pids/$name"
	# not a job of this shell any more: a node killed on purpose is not
	# reported as "Killed" on the drill's output
	disown $!
}

# ha_pgid NAME: the process group of what ha_spawn started as NAME
ha_pgid() { cat "$W/pids/$1" 2>/dev/null; }


# q PORT SQL [DB]: one value, or nothing and status 1 when the server does
# not answer within 4 s
q() {
	PGCONNECT_TIMEOUT=2 timeout 4 "$PGBIN/psql" -X -w -h 127.0.0.1 -p "$1" -U postgres \
		-d "${3:-postgres}" -Atqc "$2" 2>/dev/null
}

# role PORT: primary (read-write), standby (streaming), recovering, or down
role() {
	local r
	r=$(q "$1" "SELECT CASE WHEN NOT pg_is_in_recovery() THEN
		CASE WHEN current_setting('default_transaction_read_only')::bool THEN 'readonly-primary' ELSE 'primary' END
		WHEN EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 'standby'
		ELSE 'recovering' END") || { echo down; return; }
	echo "${r:-down}"
}

# the read-write node among PORTS, or nothing
primary_of() {
	local p
	for p in "$@"; do
		[ "$(role "$p")" = primary ] && { echo "$p"; return 0; }
	done
	return 1
}

# synchronous standbys streaming from the primary on PORT
sync_count() {
	q "$1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')"
}

# postmaster pid of a data directory
pm_pid() { head -1 "$1/postmaster.pid" 2>/dev/null; }

# wait_for SECONDS WHAT CMD...: poll CMD every 0.5 s
wait_for() {
	local limit=$1 what=$2; shift 2
	local end=$((SECONDS + limit))
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.5
	done
	ha_log "timed out after ${limit}s waiting for $what"
	return 1
}

# the binary every postmaster of the drill runs must be the private copy's
check_binaries() {
	local d pid exe
	for d in "$@"; do
		pid=$(pm_pid "$d") || continue
		[ -n "$pid" ] || continue
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
		case "$exe" in
		"$PGBIN"/postgres) ;;
		"") ;;
		*) ha_die "postmaster of $d runs $exe, not $PGBIN/postgres" ;;
		esac
	done
}

# the idem_gate settings every node gets (written by each drill where its
# manager wants them).  log_directory is outside the data directory, as
# '../log' next to it: pg_basebackup and pg_rewind copy a data directory's
# log/ from the other node and remove files the other node lacks, which
# would lose each node's own history.
ha_pg_settings() {
	cat <<EOF
shared_preload_libraries = '${HA_PRELOAD:-idem_gate}'
idem_gate.naptime = '$HA_NAPTIME'
idem_gate.stuck_after = '$HA_STUCK_AFTER'
logging_collector = on
log_directory = '../log'
log_filename = 'postgresql-%Y%m%d-%H%M%S.log'
log_rotation_age = 0
log_line_prefix = '%n [%p] {%b} %a: '
log_min_messages = warning
shared_buffers = '128MB'
max_connections = 200
jit = off
wal_keep_size = '1GB'
EOF
}

ha_init() {
	[ "$(id -u)" -eq 0 ] || { echo "$DRILL: run as root (servers run as postgres via runuser)" >&2; echo "0 passed, 1 failed"; exit 1; }
	"$HA_DIR/setup.sh" >&2 || { echo "0 passed, 1 failed"; exit 1; }
	"$PY" -c 'import psycopg2' || { echo "0 passed, 1 failed"; exit 1; }
	W=$(mktemp -d "/tmp/idem-ha-$DRILL.XXXXXX")
	mkdir -p "$W/pids" "$W/xdg/config" "$W/xdg/data" "$W/xdg/run" "$W/out"
	chmod 700 "$W/xdg/run"
	chown -R postgres: "$W"
	chmod 755 "$W"
	trap ha_cleanup EXIT
	trap 'exit 130' INT TERM
	ha_log "work directory $W, idem_gate $(head -1 "$HA_PREFIX/.built")"
}

# every process a drill started, by the ids it recorded: a frozen node is
# thawed first, then each process group gets SIGTERM, then SIGKILL; a
# postmaster left over (a manager killed with -9 leaves its postgres
# running) is found through its data directory's postmaster.pid
ha_cleanup() {
	local rc=$?
	set +e
	trap - EXIT
	[ -n "${W:-}" ] && [ -d "$W/pids" ] || exit $rc
	[ -n "${HA_LOAD_PID:-}" ] && kill "$HA_LOAD_PID" 2>/dev/null
	ipt_flush
	local f p d
	for f in "$W"/pids/*; do
		p=$(cat "$f" 2>/dev/null) && [ -n "$p" ] || continue
		kill -CONT -- "-$p" 2>/dev/null
		kill -TERM -- "-$p" 2>/dev/null
	done
	sleep 2
	for d in "$W"/*/data "$W"/*/pgdata; do
		[ -f "$d/postmaster.pid" ] || continue
		p=$(pm_pid "$d")
		[ -n "$p" ] && [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$d" ] || continue
		kill -CONT "$p" $(pgrep -P "$p") 2>/dev/null
		as_pg "$PGBIN/pg_ctl" -D "$d" stop -m immediate -w -t 10 >/dev/null 2>&1 || kill -9 "$p" 2>/dev/null
	done
	for f in "$W"/pids/*; do
		p=$(cat "$f" 2>/dev/null) && [ -n "$p" ] || continue
		kill -KILL -- "-$p" 2>/dev/null
	done
	[ "$(type -t ha_cleanup_extra)" = function ] && ha_cleanup_extra
	if [ "$HA_KEEP" = 1 ]; then
		echo "$DRILL: kept $W (IDEM_HA_KEEP=1); its processes are stopped" >&2
	else
		rm -rf "$W"
	fi
	exit $rc
}

# --- the fault loop, shared by the drills ------------------------------------
# Each drill defines:
#   NODES (array of node names), PORT[name]
#   drill_healthy           status 0 when a primary is read-write with a
#                           synchronous standby streaming from it
#   drill_switchover        a clean switchover through the manager
#   drill_groups NAME       the process groups of that node (its manager,
#                           and its postmaster where the manager detaches it)
#   drill_restart NAME      start that node's manager again after a crash
#   drill_sync_standby      the name of a synchronous standby
#   drill_mgrlog NAME       that node's manager log (where pg_rewind shows)
#   drill_data NAME         its data directory

node_of_port() { local n; for n in "${NODES[@]}"; do [ "${PORT[$n]}" = "$1" ] && { echo "$n"; return 0; }; done; return 1; }
all_ports() { local n; for n in "${NODES[@]}"; do echo "${PORT[$n]}"; done; }
primary_node() { local p; p=$(primary_of $(all_ports)) && node_of_port "$p"; }
is_standby() { [ "$(role "${PORT[$1]}")" = standby ]; }
epoch() { date +%s.%N; }

# the order of the faults, repeated while the load runs
# signal_node SIG NAME: the signal to all of a node's processes at once:
# its manager's process group, and its postmaster with every child (each
# PostgreSQL child calls setsid(), so the postmaster's group is not enough)
signal_node() {
	local sig=$1 name=$2 g pm targets=()
	for g in $(drill_groups "$name"); do targets+=("-$g"); done
	pm=$(pm_pid "$(drill_data "$name")")
	if [ -n "$pm" ] && kill -0 "$pm" 2>/dev/null; then
		targets+=("$pm" $(pgrep -P "$pm" || true))
	fi
	kill "-$sig" -- "${targets[@]}" 2>/dev/null || true
	# a child forked between the listing and the signal
	if [ "$sig" = STOP ] && [ -n "$pm" ]; then
		kill -STOP $(pgrep -P "$pm" || true) 2>/dev/null || true
	fi
}

# --- a partition of one node on loopback ------------------------------------
# With iptables (IDEM_HA_PARTITION=iptables, the default where iptables
# works): every TCP packet to or from the node's PostgreSQL port and the
# local port of its walreceiver's connection is dropped, and its manager
# is frozen (SIGSTOP): the manager's own connections (to the monitor, to
# etcd) cannot be told apart by port from the other nodes', and a frozen
# manager is what a cut-off one looks like to the others.  Without
# iptables (IDEM_HA_PARTITION=sigstop): the whole node is frozen, postgres
# too; the kernel then still receives the primary's WAL into the frozen
# walreceiver's socket, which it reads when thawed, so that partition is a
# weaker one.
if [ -z "${IDEM_HA_PARTITION:-}" ]; then
	if command -v iptables >/dev/null && iptables -S INPUT >/dev/null 2>&1; then
		IDEM_HA_PARTITION=iptables
	else
		IDEM_HA_PARTITION=sigstop
	fi
fi

# the local port of the walreceiver's connection of the node
walreceiver_port() {
	local pid
	pid=$(q "${PORT[$1]}" "SELECT pid FROM pg_stat_wal_receiver") || return 1
	[ -n "$pid" ] || return 1
	ss -tnpH state established 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) { n = split($3, a, ":"); print a[n]; exit }'
}

ipt_tag() { echo "idem-ha-$(basename "$W")"; }
ipt_ports() {
	local op=$1 port; shift
	for port in "$@"; do
		iptables "$op" INPUT -i lo -p tcp --dport "$port" -m comment --comment "$(ipt_tag)" -j DROP
		iptables "$op" INPUT -i lo -p tcp --sport "$port" -m comment --comment "$(ipt_tag)" -j DROP
	done
}
# every rule this drill left (clean-up)
ipt_flush() {
	command -v iptables >/dev/null || return 0
	iptables -S INPUT 2>/dev/null | grep -F -- "--comment $(ipt_tag)" | sed 's/^-A /-D /' |
		while read -r rule; do eval "iptables $rule" 2>/dev/null || true; done
}

partition_start() {
	local name=$1 wr g
	if [ "$IDEM_HA_PARTITION" = iptables ]; then
		wr=$(walreceiver_port "$name" || true)
		echo "${PORT[$name]} $wr" >"$W/partition.ports"
		ipt_ports -I ${PORT[$name]} $wr
		for g in $(drill_groups "$name"); do kill -STOP -- "-$g" 2>/dev/null || true; done
		ha_log "partition: dropping loopback TCP of ports ${PORT[$name]} ${wr:-(no walreceiver?)}, manager of $name frozen"
	else
		signal_node STOP "$name"
	fi
}

partition_end() {
	local name=$1 g
	if [ "$IDEM_HA_PARTITION" = iptables ]; then
		ipt_ports -D $(cat "$W/partition.ports") 2>/dev/null || true
		for g in $(drill_groups "$name"); do kill -CONT -- "-$g" 2>/dev/null || true; done
	else
		signal_node CONT "$name"
	fi
}

# A crashed node is a machine that is down, kernel included, until its
# manager is started again: with iptables, every packet to or from its
# PostgreSQL port is dropped meanwhile.  Without that, the kernel of a
# machine whose processes were killed still retransmits what their
# sockets had not delivered yet (a walsender's last WAL, to a standby that
# was cut off), which no dead machine does.
machine_down() {
	[ "$IDEM_HA_PARTITION" = iptables ] || return 0
	echo "${PORT[$1]}" >"$W/down.ports"
	ipt_ports -I "${PORT[$1]}"
}
machine_up() {
	[ -f "$W/down.ports" ] || return 0
	ipt_ports -D $(cat "$W/down.ports") 2>/dev/null || true
	rm -f "$W/down.ports"
}

HA_FAULTS=${IDEM_HA_FAULTS:-switchover kill9 partition_crash partition crash}

# inject KIND: one fault, then wait for a read-write primary and for the
# old primary to come back as a standby; one event line with what happened
inject() {
	local kind=$1 n=$2
	local before victim t0 t_rw after failover rejoin=n/a rejoin_s="" rewind=false logsize g first
	before=$(primary_node) || before=""
	[ -n "$before" ] || { ha_log "no primary before fault #$n"; return 1; }
	victim=$before
	case "$kind" in partition*) victim=$(drill_sync_standby) ;; esac
	logsize=$(stat -c %s "$(drill_mgrlog "$before")" 2>/dev/null || echo 0)
	t0=$(epoch)
	case "$kind" in
	switchover)
		ha_log "fault #$n: switchover away from $before"
		# a switchover the manager refused does not move the primary:
		# then it is judged like the other faults (any primary will do)
		drill_switchover >>"$W/faults.log" 2>&1 || { ha_log "the switchover command failed (see faults.log)"; kind=switchover-failed; }
		;;
	kill9)
		ha_log "fault #$n: kill -9 of $before's postmaster (pid $(pm_pid "$(drill_data "$before")"))"
		kill -9 "$(pm_pid "$(drill_data "$before")")"
		;;
	crash)
		ha_log "fault #$n: crash of node $before (kill -9 of its manager and of postgres with all its processes)"
		signal_node KILL "$before"
		machine_down "$before"
		;;
	partition)
		[ -n "$victim" ] || { ha_log "fault #$n: no synchronous standby to partition"; return 1; }
		ha_log "fault #$n: partition ($IDEM_HA_PARTITION) of the synchronous standby $victim for ${HA_PARTITION_S}s"
		partition_start "$victim"
		sleep "$HA_PARTITION_S"
		partition_end "$victim"
		;;
	partition_crash)
		# the primary dies while its synchronous standby is cut off: what
		# it committed only locally meanwhile (a commit whose wait for the
		# standby was cancelled) must never have been acknowledged
		[ -n "$victim" ] || { ha_log "fault #$n: no synchronous standby to partition"; return 1; }
		local part1 part2
		# the crash comes after the clients' time-outs (5 s) and their
		# reconnection (up to 2 s when the cut-off standby is tried
		# first): their calls sent again are answered meanwhile
		part1=$("$PY" -c "print(min($HA_CRASH_AT_S, $HA_PARTITION_S))")
		part2=$("$PY" -c "print(max(0, $HA_PARTITION_S - $HA_CRASH_AT_S))")
		ha_log "fault #$n: partition ($IDEM_HA_PARTITION) of the synchronous standby $victim for ${HA_PARTITION_S}s, and ${part1}s into it a crash of the primary $before"
		partition_start "$victim"
		sleep "$part1"
		signal_node KILL "$before"
		machine_down "$before"
		sleep "$part2"
		partition_end "$victim"
		;;
	esac
	# the first read-write primary after the fault (the old one or another;
	# after a switchover or a crash, another)
	local end=$((SECONDS + HA_RECOVER_S)) first="" wait_end=$((SECONDS + HA_RECOVER_S))
	# a crashed node comes back after HA_CRASH_WAIT_S even if no other
	# node took over (a manager may rightly refuse to promote a standby
	# that is not in sync)
	case "$kind" in *crash) wait_end=$((SECONDS + HA_CRASH_WAIT_S)) ;; esac
	while [ $SECONDS -lt $wait_end ]; do
		first=$(primary_node) || first=""
		if [ -n "$first" ] && { [ "$kind" = kill9 ] || [ "$kind" = partition ] || [ "$kind" = switchover-failed ] || [ "$first" != "$before" ]; }; then
			break
		fi
		first=""
		sleep 0.3
	done
	t_rw=$(epoch)
	if [ "$kind" = crash ] || [ "$kind" = partition_crash ]; then
		# the machine comes back: its manager is started again, as by
		# systemd, once the others have moved on (or given up)
		ha_log "restarting $before's manager"
		machine_up "$before"
		drill_restart "$before"
	fi
	# then healthy for 3 s in a row: a primary with a synchronous standby
	# (a manager may still move the primary after a restart in place)
	local ok=0
	while [ $SECONDS -lt $end ] && [ $ok -lt 3 ]; do
		if drill_healthy; then ok=$((ok + 1)); else ok=0; fi
		sleep 1
	done
	after=$(primary_node) || after=""
	failover=false
	[ -n "$after" ] && [ "$after" != "$before" ] && failover=true
	if $failover; then
		if wait_for "$HA_RECOVER_S" "$before to rejoin as a standby" is_standby "$before"; then
			rejoin=ok
		else
			rejoin=timeout
		fi
		rejoin_s=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
		# pg_rewind was run (pg_auto_failover runs it even when "no rewind
		# required"; the event says which)
		local newlog
		newlog=$(tail -c +"$((logsize + 1))" "$(drill_mgrlog "$before")" 2>/dev/null || true)
		if grep -qiE 'bin/pg_rewind|running pg_rewind' <<<"$newlog"; then
			rewind='"ran"'
			grep -qi 'no rewind required' <<<"$newlog" && rewind='"not needed"'
			grep -qiE 'rewinding from last common checkpoint|pg_rewind: Done' <<<"$newlog" && rewind='"rewound"'
		fi
	elif [ "$kind" = partition ] || [ "$kind" = partition_crash ]; then
		# the partitioned standby must stream again
		if wait_for "$HA_RECOVER_S" "$victim to stream again" is_standby "$victim"; then
			rejoin=ok
		else
			rejoin=timeout
		fi
		rejoin_s=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
	fi
	local rw_s healthy_s
	rw_s=$("$PY" -c "print(round($t_rw - $t0, 1))")
	healthy_s=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
	ha_log "fault #$n $kind: primary $before -> ${after:-none}; read-write after ${rw_s}s (${first:-none}); healthy after ${healthy_s}s; old primary rejoin: $rejoin${rejoin_s:+ after ${rejoin_s}s}$([ "$rewind" != false ] && echo ", pg_rewind: $rewind")"
	ha_event fault t="$t0" n="$n" fault="$kind" before="\"$before\"" after="\"${after:-none}\"" victim="\"$victim\"" \
		first_rw="\"${first:-none}\"" failover="$failover" recovered_s="$rw_s" healthy_s="$healthy_s" rejoin="\"$rejoin\"" \
		rejoin_s="${rejoin_s:-null}" rewind="$rewind"
}

# ha_run_faults: faults in a loop while the load runs, each after the
# cluster is healthy again and HA_GAP_S seconds of steady load; none starts
# in the last 20 s of HA_SECONDS, unless a kind has not run yet.  Then the load goes on for at least 15 s
# of steady state (so that the janitor of the last primary can be judged)
# and at least until HA_SECONDS, and the drill tells it to stop.
ha_run_faults() {
	local start=$SECONDS n=0 kind
	local kinds=($HA_FAULTS)
	ha_event drill partition="\"$IDEM_HA_PARTITION\"" partition_s="$HA_PARTITION_S" faults="\"$HA_FAULTS\""
	sleep 8
	# every kind of fault runs at least once, even past HA_SECONDS
	while [ $((SECONDS - start)) -lt $((HA_SECONDS - 20)) ] || [ $n -lt ${#kinds[@]} ]; do
		if ! wait_for "$HA_RECOVER_S" "a healthy cluster before the next fault" drill_healthy; then
			ha_event unhealthy
			ha_log "the cluster is not healthy: no more faults"
			break
		fi
		sleep "$HA_GAP_S"
		kind=${kinds[$((n % ${#kinds[@]}))]}
		n=$((n + 1))
		inject "$kind" "$n" || sleep 2
	done
	local rest=$((HA_SECONDS - (SECONDS - start)))
	[ $rest -lt 15 ] && rest=15
	ha_log "last fault done; ${rest}s more of load"
	sleep "$rest"
	touch "$W/out/stop"
}

# ha_report_rejoins: what each node's manager did to rejoin, from its log
# (pg_autoctl logs each command line; Patroni logs "pg_rewind exit code"
# once per run and "trying to bootstrap from leader" once per clone)
ha_report_rejoins() {
	local n f
	for n in "${NODES[@]}"; do
		f=$(drill_mgrlog "$n")
		echo "rejoins: $n ran pg_rewind $(grep -cE 'bin/pg_rewind --target|pg_rewind exit code' "$f" || true) times" \
			"(rewound $(grep -c 'rewinding from last common checkpoint' "$f" || true)," \
			"'no rewind required' $(grep -c 'no rewind required' "$f" || true))," \
			"pg_basebackup $(grep -cE 'bin/pg_basebackup |trying to bootstrap from leader' "$f" || true) times"
	done
}

# ha_report_config: what each node runs with, after all the faults (for
# docs/failover.md: which settings the manager carried to which node)
ha_report_config() {
	local n
	for n in "${NODES[@]}"; do
		echo "config: $n $(q "${PORT[$n]}" "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_preload_libraries', 'idem_gate.naptime', 'idem_gate.stuck_after', 'idem_gate.batch_size', 'idem_gate.max_janitors', 'synchronous_standby_names', 'synchronous_commit')" || echo down)"
	done
}
