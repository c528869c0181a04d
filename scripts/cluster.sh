#!/usr/bin/env bash
# Throwaway PostgreSQL 15 clusters for idem_gate's demo, tests and benchmarks.
#   cluster.sh start DIR PORT [extra postgresql.conf lines...]
#   cluster.sh stop DIR
# The server runs as user postgres, listens on 127.0.0.1:PORT and a socket
# in DIR, preloads idem_gate, and trusts local connections.
set -euo pipefail

BIN=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
[ -x "$BIN/initdb" ] || BIN=/usr/lib/postgresql/15/bin
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }

cmd=$1 dir=$2
case "$cmd" in
start)
	port=$3; shift 3
	mkdir -p "$dir"
	chown postgres "$dir"
	as_pg "$BIN/initdb" -D "$dir/data" -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "shared_preload_libraries = 'idem_gate'"
		echo "max_connections = 120"
		echo "fsync = on"
		for line in "$@"; do echo "$line"; done
	} >>"$dir/data/postgresql.conf"
	as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	;;
stop)
	[ -d "$dir/data" ] && as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
	;;
*)
	echo "usage: $0 start DIR PORT [conf lines] | stop DIR" >&2
	exit 2
	;;
esac
