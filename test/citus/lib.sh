# Sourced by the Citus tests and benchmark: a Citus cluster of private
# servers on loopback ports, run as user postgres.
#
# Needs PG_CONFIG (a PostgreSQL with idem_gate and Citus installed) and
# CITUS_BASE (a directory for the data directories and sockets).  Under
# scripts/test.sh, IDEM_PG_BIN and IDEM_PG_AS_POSTGRES name the major's
# programs and how to run them as postgres (through chroot for a major
# that lives in a Debian root).

CITUS_BIN=${IDEM_PG_BIN:-$("$PG_CONFIG" --bindir)}

# as_pg CMD...: run a command as the postgres user
as_pg() {
	if [ -n "${IDEM_PG_AS_POSTGRES:-}" ]; then
		$IDEM_PG_AS_POSTGRES "$@"
	else
		runuser -u postgres -- "$@"
	fi
}

# q PORT SQL: one statement's result, unaligned, no headers
q() { as_pg "$CITUS_BIN/psql" -X -v ON_ERROR_STOP=1 -h "$CITUS_BASE" -p "$1" -d postgres -Atqc "$2"; }

# node_init PORT [PRELOAD]: a data directory for one node
node_init() {
	local port=$1 preload=${2:-citus,idem_gate} dir=$CITUS_BASE/n$1
	as_pg "$CITUS_BIN/initdb" -D "$dir" -U postgres --auth=trust --no-sync >/dev/null
	cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$CITUS_BASE'
shared_preload_libraries = '$preload'
max_connections = 120
max_prepared_transactions = 120
wal_level = logical
fsync = off
shared_buffers = 64MB
citus.node_conninfo = 'sslmode=disable'
citus.log_remote_commands = off
idem_gate.naptime = 1
CONF
}

# node_start PORT / node_stop PORT [MODE]
node_start() { as_pg "$CITUS_BIN/pg_ctl" -D "$CITUS_BASE/n$1" -l "$CITUS_BASE/n$1.log" -w -t 60 start >/dev/null; }
node_stop() { as_pg "$CITUS_BIN/pg_ctl" -D "$CITUS_BASE/n$1" -m "${2:-fast}" -w -t 60 stop >/dev/null 2>&1 || true; }

# cluster_up COORD WORKER...: a coordinator and its workers, both
# extensions on every node, the gate distributed with SHARDS shards
cluster_up() {
	local coord=$1 w
	shift
	mkdir -p "$CITUS_BASE"
	chown postgres "$CITUS_BASE"
	for p in "$coord" "$@"; do node_init "$p"; node_start "$p"; done
	for w in "$@"; do q "$w" "CREATE EXTENSION citus" >/dev/null; done
	q "$coord" "CREATE EXTENSION citus" >/dev/null
	q "$coord" "SELECT citus_set_coordinator_host('127.0.0.1', $coord)" >/dev/null
	for w in "$@"; do q "$coord" "SELECT citus_add_node('127.0.0.1', $w)" >/dev/null; done
	q "$coord" "CREATE EXTENSION idem_gate" >/dev/null
}

# cluster_down PORT...: stop every node
cluster_down() { for p in "$@"; do node_stop "$p" immediate; done; }
