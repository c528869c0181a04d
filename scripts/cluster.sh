#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for idem_gate's demo, tests and benchmarks.
#   cluster.sh start DIR PORT [extra postgresql.conf lines...]
#   cluster.sh stop DIR
# The server runs as user postgres, listens on 127.0.0.1:PORT and a socket
# in DIR, preloads idem_gate, and trusts local connections.
#
# Which PostgreSQL: the host's, found through PG_CONFIG (default pg_config
# on the PATH), unless PG_MAJOR names another major (17, 18): that one runs
# from its Debian root (scripts/roots.sh, made on first use), with DIR
# bind-mounted at the same path inside the root, so DIR, its server.log and
# its socket are where the caller expects them.  stop finds the major in
# DIR by itself.
set -euo pipefail

SCRIPTS=$(cd "$(dirname "$0")" && pwd)
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }

host_bin() {
	local bin
	bin=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
	[ -x "$bin/initdb" ] || bin=/usr/lib/postgresql/15/bin
	echo "$bin"
}

host_major() {
	"$(host_bin)/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/'
}

# select MAJOR: set BIN and ROOTDIR ("" on the host) for MAJOR
select_major() {
	if [ -z "$1" ] || [ "$1" = "$(host_major)" ]; then
		BIN=$(host_bin)
		ROOTDIR=
	else
		ROOTDIR=$("$SCRIPTS/roots.sh" path "$1")
		BIN=/usr/lib/postgresql/$1/bin
	fi
}

# pg PROG ARGS...: the selected major's PROG, as postgres
pg() {
	local prog=$1
	shift
	if [ -z "$ROOTDIR" ]; then
		as_pg "$BIN/$prog" "$@"
	else
		chroot "$ROOTDIR" runuser -u postgres -- "$BIN/$prog" "$@"
	fi
}

cmd=${1:-} dir=${2:-}
[ -n "$dir" ] && dir=$(realpath -m "$dir")
case "$cmd" in
start)
	port=$3; shift 3
	major=${PG_MAJOR:-}
	select_major "$major"
	mkdir -p "$dir"
	chown postgres "$dir"
	if [ -n "$ROOTDIR" ]; then
		"$SCRIPTS/roots.sh" "$major"
		"$SCRIPTS/roots.sh" mount "$major"
		if ! [ "$ROOTDIR$dir" -ef "$dir" ]; then
			"$SCRIPTS/roots.sh" bind "$major" "$dir"
			touch "$dir/.bound"
		fi
		echo "$major" >"$dir/.major"
	fi
	pg initdb -D "$dir/data" -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "shared_preload_libraries = 'idem_gate'"
		echo "max_connections = 120"
		echo "max_prepared_transactions = 4"	# the matrix's PREPARE TRANSACTION cells
		echo "fsync = on"
		for line in "$@"; do echo "$line"; done
	} >>"$dir/data/postgresql.conf"
	pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	;;
stop)
	major=
	[ -f "$dir/.major" ] && major=$(cat "$dir/.major")
	select_major "$major"
	if [ -n "$ROOTDIR" ] && ! [ -d "$ROOTDIR$dir/data" ]; then
		# bind gone (the root was unmounted): nothing of ours runs there
		:
	elif [ -d "$dir/data" ]; then
		pg pg_ctl -D "$dir/data" -m fast -w stop >/dev/null || true
	fi
	if [ -n "$ROOTDIR" ]; then
		if [ -f "$dir/.bound" ]; then
			"$SCRIPTS/roots.sh" unbind "$major" "$dir"
			rm -f "$dir/.bound"
		fi
		"$SCRIPTS/roots.sh" release "$major"
	fi
	;;
*)
	echo "usage: [PG_MAJOR=N] $0 start DIR PORT [conf lines] | stop DIR" >&2
	exit 2
	;;
esac
