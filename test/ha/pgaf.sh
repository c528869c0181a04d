#!/usr/bin/env bash
# test/ha/pgaf.sh: the failover drill under pg_auto_failover (Debian 12's
# postgresql-15-auto-failover, pg_autoctl 2.0).  As root:
#
#   test/ha/pgaf.sh                       # about 4 minutes
#   IDEM_HA_SECONDS=300 IDEM_HA_KEEP=1 test/ha/pgaf.sh
#
# A monitor and two data nodes on 127.0.0.1 (ports 56940-56942), all on the
# private PostgreSQL of setup.sh, idem_gate preloaded on both data nodes.
# Two data nodes is pg_auto_failover's synchronous set-up as it makes it:
# number_sync_standbys stays 0 (the only value it accepts with one
# standby), the standby is in the replication quorum, and the primary runs
# with synchronous_standby_names = 'ANY 1 (pgautofailover_standby_N)' while
# the standby is healthy, and without synchronous replication (state
# wait_primary) while it is not.  Claim load from 8 clients through the
# multi-host URI pg_autoctl prints, faults in a loop, then the checks of
# load.py.  See test/ha/README.md.
set -euo pipefail
DRILL=pgaf
. "$(dirname "$0")/lib.sh"

MON=${IDEM_HA_PGAF_PORT:-56940}
NODES=(node1 node2)
declare -A PORT=([node1]=$((MON + 1)) [node2]=$((MON + 2)))
MONURI="postgres://autoctl_node@127.0.0.1:$MON/pg_auto_failover?sslmode=disable"

ha_init

pgaf() { as_pg pg_autoctl "$@"; }
data() { echo "$W/$1/data"; }

# the hooks of lib.sh's fault loop
drill_data() { data "$1"; }
drill_mgrlog() { echo "$W/$1.log"; }
# pg_autoctl keeps postgres in its own process group (no setsid): one group
drill_groups() { ha_pgid "$1"; }
drill_restart() { ha_spawn "$1" pg_autoctl run --pgdata "$(data "$1")"; }
drill_switchover() { as_pg timeout 120 pg_autoctl perform switchover --pgdata "$W/mon/data"; }
# the one standby (two data nodes)
drill_sync_standby() { local p n; p=$(primary_node) || return 1; for n in "${NODES[@]}"; do [ "$n" != "$p" ] && echo "$n"; done; }
drill_healthy() {
	local p
	p=$(primary_of $(all_ports)) || return 1
	[ "$(sync_count "$p")" -ge 1 ]
}

# --- the monitor ------------------------------------------------------------
mkdir -p "$W/mon" "$W/node1" "$W/node2"
chown -R postgres: "$W"
ha_log "creating the monitor on port $MON"
pgaf create monitor --pgdata "$W/mon/data" --pgport "$MON" --hostname 127.0.0.1 \
	--listen 127.0.0.1 --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" >>"$W/mon.log" 2>&1 ||
	ha_die "pg_autoctl create monitor failed (see $W/mon.log)"
# pg_auto_failover sizes shared_buffers for a machine of its own (a quarter
# of the memory); three servers share this one.  Health checks every 2 s
# instead of 5 and a node unhealthy after 8 s instead of 20 make a failover
# take about 10 s, so that the drill sees several in a few minutes.
cat >>"$W/mon/data/postgresql.conf" <<EOF
shared_buffers = '64MB'
pgautofailover.health_check_period = 2000
pgautofailover.health_check_timeout = 2000
pgautofailover.health_check_retry_delay = 1000
pgautofailover.node_considered_unhealthy_timeout = 8000
EOF
ha_spawn mon pg_autoctl run --pgdata "$W/mon/data"
wait_for 60 "the monitor" q "$MON" "SELECT 1" pg_auto_failover >/dev/null || ha_die "the monitor did not start"

# --- node1, the first primary ------------------------------------------------
# Created without --run, so that idem_gate's settings are in its
# postgresql.conf before its first start.  pg_autoctl's own settings are an
# include on the first line of postgresql.conf, and among them is
# shared_preload_libraries = pg_stat_statements: a setting appended to
# postgresql.conf comes later and wins, so it keeps pg_stat_statements.
ha_log "creating node1 (port ${PORT[node1]})"
pgaf create postgres --pgdata "$(data node1)" --pgport "${PORT[node1]}" --hostname 127.0.0.1 \
	--listen 127.0.0.1 --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" \
	--monitor "$MONURI" --dbname app --name node1 >>"$W/node1.log" 2>&1 ||
	ha_die "pg_autoctl create postgres (node1) failed (see $W/node1.log)"
{ echo "# idem_gate HA drill"; HA_PRELOAD=pg_stat_statements,idem_gate ha_pg_settings; } >>"$(data node1)/postgresql.conf"
ha_spawn node1 pg_autoctl run --pgdata "$(data node1)"
wait_for 60 "node1 read-write" primary_of "${PORT[node1]}" >/dev/null || ha_die "node1 did not start"

q "${PORT[node1]}" "CREATE EXTENSION idem_gate" app >/dev/null || ha_die "CREATE EXTENSION failed"
q "${PORT[node1]}" "INSERT INTO idem_gate.policies (workflow, retention) VALUES ('ha_short', '${HA_SHORT_RETENTION_S}s')" app >/dev/null ||
	ha_die "the policy row failed"

# --- node2, the standby: pg_basebackup of node1 by pg_autoctl ---------------
ha_log "creating node2 (port ${PORT[node2]})"
ha_spawn node2 pg_autoctl create postgres --pgdata "$(data node2)" --pgport "${PORT[node2]}" \
	--hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" \
	--monitor "$MONURI" --dbname app --name node2 --run
wait_for 120 "node2 as synchronous standby" drill_healthy || ha_die "node2 did not become a synchronous standby"
ha_log "cluster up: $(pgaf show state --pgdata "$W/mon/data" 2>&1 | tail -n +3 | awk '{print $1, $NF}' | tr '\n' ' ')"
check_binaries "$W/mon/data" "$(data node1)" "$(data node2)"

if [ "${IDEM_HA_SETUP_ONLY:-0}" = 1 ]; then
	ha_log "IDEM_HA_SETUP_ONLY=1: stopping here"
	HA_KEEP=1
	trap - EXIT
	exit 0
fi

# A setting changed with ALTER SYSTEM on the primary once the standby
# exists: postgresql.auto.conf is a file, not WAL, so whether it reaches
# the other node depends on what the manager copies (pg_rewind copies the
# source's configuration files; see ha_report_config at the end)
q "${PORT[node1]}" "ALTER SYSTEM SET idem_gate.batch_size = 500" >/dev/null
q "${PORT[node1]}" "SELECT pg_reload_conf()" >/dev/null

# --- load and faults -----------------------------------------------------------
URI=$(pgaf show uri --formation default --pgdata "$W/mon/data" | tail -1)
DSN="$URI&user=postgres&connect_timeout=2&application_name=idem_ha_load"
ha_log "load: $HA_CLIENTS clients for ${HA_SECONDS}s through $DSN"
"$PY" "$HA_DIR/load.py" load --dsn "$DSN" --out "$W/out" --seconds $((HA_SECONDS + 300)) --stop-file "$W/out/stop" \
	--clients "$HA_CLIENTS" --seed "${IDEM_HA_SEED:-1}" 2>>"$W/load.log" &
HA_LOAD_PID=$!
ha_run_faults
ha_log "waiting for the load to end"
wait "$HA_LOAD_PID" || ha_log "the load exited with status $?"
HA_LOAD_PID=""

wait_for "$HA_RECOVER_S" "a healthy cluster at the end" drill_healthy || ha_log "not healthy at the end"
check_binaries "$(data node1)" "$(data node2)"
ha_log "state at the end: $(pgaf show state --pgdata "$W/mon/data" 2>&1 | tail -n +3 | awk -F'|' '{gsub(/ /,""); print $1, $6}' | tr '\n' ' ')"
ha_report_config
ha_report_rejoins

set +e
"$PY" "$HA_DIR/load.py" check --name pg_auto_failover --dir "$W" --dsn "$DSN" --retention "$HA_SHORT_RETENTION_S" \
	--node "node1=${PORT[node1]}=$W/node1/log" --node "node2=${PORT[node2]}=$W/node2/log"
rc=$?
set -e
exit $rc
