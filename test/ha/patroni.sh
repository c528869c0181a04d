#!/usr/bin/env bash
# test/ha/patroni.sh: the failover drill under Patroni with etcd (Debian 12's
# patroni 3.0.2 and etcd-server 3.4).  As root:
#
#   test/ha/patroni.sh                    # about 4 minutes
#   IDEM_HA_SECONDS=300 IDEM_HA_KEEP=1 test/ha/patroni.sh
#
# Three PostgreSQL nodes (ports 56950-56952, Patroni REST API 56960-56962)
# on the private PostgreSQL of setup.sh, synchronous_mode on (one
# synchronous standby, the other asynchronous), one etcd on 23790/23791,
# and HAProxy on 56970 sending connections to whichever node Patroni's
# REST API calls the primary (GET /primary): the one-host path for a
# client such as n8n.  6 clients use the multi-host connection string with
# target_session_attrs=read-write, 2 go through HAProxy.
#
# One etcd, not three: every node runs on this one machine, so three etcd
# members would share its fate anyway and only cost CPU on two cores; the
# drill does not fault etcd.  What it needs from the DCS, a leader key with
# a time to live and the /sync key, one member gives.
set -euo pipefail
DRILL=patroni
. "$(dirname "$0")/lib.sh"

BASE=${IDEM_HA_PATRONI_PORT:-56950}
NODES=(node1 node2 node3)
declare -A PORT=([node1]=$BASE [node2]=$((BASE + 1)) [node3]=$((BASE + 2)))
declare -A REST=([node1]=$((BASE + 10)) [node2]=$((BASE + 11)) [node3]=$((BASE + 12)))
HAPROXY_PORT=$((BASE + 20))
ETCD_CLIENT=${IDEM_HA_ETCD_PORT:-23790}
ETCD_PEER=$((ETCD_CLIENT + 1))

ha_init

data() { echo "$W/$1/data"; }
pctl() { as_pg patronictl -c "$W/node1.yml" "$@"; }

# the hooks of lib.sh's fault loop
drill_data() { data "$1"; }
drill_mgrlog() { echo "$W/$1.log"; }
# Patroni starts postgres in a session of its own, so the manager's group
# is Patroni alone; lib.sh signals the postmaster and its children itself
drill_groups() { ha_pgid "$1"; }
drill_restart() { ha_spawn "$1" patroni "$W/$1.yml"; }
drill_sync_standby() {
	local p
	p=$(primary_of $(all_ports)) || return 1
	q "$p" "SELECT application_name FROM pg_stat_replication WHERE sync_state = 'sync' LIMIT 1"
}
drill_switchover() {
	local p c
	p=$(primary_node) && c=$(drill_sync_standby) && [ -n "$c" ] || return 1
	pctl switchover --leader "$p" --candidate "$c" --force
}
# a primary with its synchronous standby and the other standby streaming
drill_healthy() {
	local p
	p=$(primary_of $(all_ports)) || return 1
	[ "$(sync_count "$p")" -ge 1 ] &&
		[ "$(q "$p" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" -ge 2 ]
}

# --- etcd -------------------------------------------------------------------
mkdir -p "$W/etcd" "$W/node1" "$W/node2" "$W/node3"
chown -R postgres: "$W"
ha_log "starting etcd on $ETCD_CLIENT"
ha_spawn etcd etcd --name idem-ha --data-dir "$W/etcd/data" \
	--listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
	--initial-cluster "idem-ha=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new
wait_for 30 "etcd" as_pg etcdctl --endpoints "http://127.0.0.1:$ETCD_CLIENT" endpoint health >/dev/null 2>&1 ||
	ha_die "etcd did not start"

# --- Patroni ----------------------------------------------------------------
# idem_gate's settings are in the DCS (bootstrap.dcs.postgresql.parameters):
# Patroni writes them into every node's postgresql.conf, standbys and
# rebuilt nodes included.  Faster than Patroni's defaults (ttl 30,
# loop_wait 10), so that a failover takes seconds: Patroni wants
# loop_wait + 2 * retry_timeout <= ttl.
params() {
	ha_pg_settings | sed -e 's/ = /: /'
	cat <<EOF
wal_level: replica
hot_standby: 'on'
wal_log_hints: 'on'
max_wal_senders: 10
max_replication_slots: 10
EOF
}
for n in "${NODES[@]}"; do
	cat >"$W/$n.yml" <<EOF
scope: idem-ha
namespace: /idem-ha/
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:${REST[$n]}
  connect_address: 127.0.0.1:${REST[$n]}
etcd3:
  hosts: 127.0.0.1:$ETCD_CLIENT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
$(params | sed 's/^/        /')
  initdb:
  - encoding: UTF8
  - auth: trust
  pg_hba:
  - local all all trust
  - host replication postgres 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${PORT[$n]}
  connect_address: 127.0.0.1:${PORT[$n]}
  data_dir: $(data "$n")
  bin_dir: $PGBIN
  pgpass: $W/$n/pgpass
  # a new standby's pg_basebackup asks for an immediate checkpoint, not a
  # spread one (minutes with the default checkpoint_timeout)
  basebackup:
  - checkpoint: fast
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '$W/$n'
watchdog:
  mode: off
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
done
chown postgres: "$W"/*.yml

ha_log "starting node1 (Patroni bootstraps it)"
ha_spawn node1 patroni "$W/node1.yml"
wait_for 90 "node1 primary" primary_of "${PORT[node1]}" >/dev/null || ha_die "node1 did not bootstrap (see $W/node1.log)"
q "${PORT[node1]}" "CREATE DATABASE app" >/dev/null || ha_die "CREATE DATABASE failed"
q "${PORT[node1]}" "CREATE EXTENSION idem_gate" app >/dev/null || ha_die "CREATE EXTENSION failed"
q "${PORT[node1]}" "INSERT INTO idem_gate.policies (workflow, retention) VALUES ('ha_short', '${HA_SHORT_RETENTION_S}s')" app >/dev/null ||
	ha_die "the policy row failed"
for n in node2 node3; do
	ha_log "starting $n (Patroni clones it with pg_basebackup)"
	ha_spawn "$n" patroni "$W/$n.yml"
done
wait_for 150 "two streaming standbys, one synchronous" drill_healthy || ha_die "the standbys did not come up (see $W/node*.log)"
check_binaries "$(data node1)" "$(data node2)" "$(data node3)"
ha_log "cluster up: $(pctl list 2>/dev/null | grep -E '^\| node' | awk -F'|' '{gsub(/ /,""); print $2, $4}' | tr '\n' ' ')"

# Two ways of changing a setting once the cluster runs, to see which
# reaches every node (docs/failover.md): the DCS (patronictl edit-config),
# and ALTER SYSTEM on the primary (postgresql.auto.conf: a file, not WAL)
pctl edit-config --force -p idem_gate.batch_size=500 >>"$W/faults.log" 2>&1 || ha_log "edit-config failed"
q "${PORT[node1]}" "ALTER SYSTEM SET idem_gate.max_janitors = 2" >/dev/null
q "${PORT[node1]}" "SELECT pg_reload_conf()" >/dev/null

# --- HAProxy: one address for clients that take one host ---------------------
cat >"$W/haproxy.cfg" <<EOF
global
  maxconn 400
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 2s
listen idem_primary
  bind 127.0.0.1:$HAPROXY_PORT
  # Patroni's REST API answers 200 on GET /primary only on the leader
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
$(for n in "${NODES[@]}"; do echo "  server $n 127.0.0.1:${PORT[$n]} check port ${REST[$n]}"; done)
EOF
chown postgres: "$W/haproxy.cfg"
ha_spawn haproxy haproxy -db -f "$W/haproxy.cfg"
wait_for 20 "HAProxy" q "$HAPROXY_PORT" "SELECT 1" >/dev/null || ha_die "HAProxy did not start (see $W/haproxy.log)"

if [ "${IDEM_HA_SETUP_ONLY:-0}" = 1 ]; then
	ha_log "IDEM_HA_SETUP_ONLY=1: stopping here"
	HA_KEEP=1
	trap - EXIT
	exit 0
fi

# --- load and faults -----------------------------------------------------------
HOSTS=$(for n in "${NODES[@]}"; do printf '127.0.0.1:%s,' "${PORT[$n]}"; done)
DSN="postgresql://${HOSTS%,}/app?target_session_attrs=read-write&user=postgres&connect_timeout=2&application_name=idem_ha_load"
ALT="host=127.0.0.1 port=$HAPROXY_PORT dbname=app user=postgres connect_timeout=2 application_name=idem_ha_haproxy"
ALT_CLIENTS=${IDEM_HA_HAPROXY_CLIENTS:-2}
ha_log "load: $HA_CLIENTS clients for ${HA_SECONDS}s, $ALT_CLIENTS through HAProxy ($ALT), the others through $DSN"
"$PY" "$HA_DIR/load.py" load --dsn "$DSN" --alt-dsn "$ALT" --alt-clients "$ALT_CLIENTS" \
	--out "$W/out" --seconds $((HA_SECONDS + 300)) --stop-file "$W/out/stop" \
	--clients "$HA_CLIENTS" --seed "${IDEM_HA_SEED:-1}" 2>>"$W/load.log" &
HA_LOAD_PID=$!
ha_run_faults
ha_log "waiting for the load to end"
wait "$HA_LOAD_PID" || ha_log "the load exited with status $?"
HA_LOAD_PID=""

wait_for "$HA_RECOVER_S" "a healthy cluster at the end" drill_healthy || ha_log "not healthy at the end"
check_binaries "$(data node1)" "$(data node2)" "$(data node3)"
ha_log "state at the end: $(pctl list 2>/dev/null | grep -E '^\| node' | awk -F'|' '{gsub(/ /,""); print $2, $4, $5}' | tr '\n' ' ')"
ha_report_config
ha_report_rejoins

set +e
"$PY" "$HA_DIR/load.py" check --name patroni --dir "$W" --dsn "$DSN" --retention "$HA_SHORT_RETENTION_S" \
	--node "node1=${PORT[node1]}=$W/node1/log" --node "node2=${PORT[node2]}=$W/node2/log" \
	--node "node3=${PORT[node3]}=$W/node3/log"
rc=$?
set -e
exit $rc
