#!/usr/bin/env bash
# idem_gate demo: install what is needed, build and install idem_gate, start
# a throwaway cluster under /tmp on 127.0.0.1 with idem_gate preloaded, show
# a double delivery, a completed retry and a stale takeover, then stop it.
#
#   ./scripts/demo.sh                        as root, on Debian 12
#   IDEM_DEMO_PORT=56000 ./scripts/demo.sh   the cluster on another port
#
# Environment: IDEM_DEMO_PORT, the throwaway cluster's port on 127.0.0.1
# (default 55433; the demo stops at once when something listens there);
# PG_CONFIG, the PostgreSQL to build against and install into (default the
# pg_config on PATH, Debian's 15).
#
# What it changes on the machine: the Debian packages of `scripts/deps.sh
# --demo` that are missing (the PostgreSQL 15 server, its server-dev
# headers, gcc, libc6-dev and make, with their dependencies), and
# idem_gate's files in that PostgreSQL's directories (make install).  It
# starts and enables no service and creates no system cluster (see
# scripts/deps.sh); its cluster and /tmp directory are gone when it ends.
# test/packaging/demo_clean.sh checks this in a clean Debian 12 root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${IDEM_DEMO_PORT:-55433}

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	echo "demo.sh: something listens on 127.0.0.1:$PORT already; choose a free port with IDEM_DEMO_PORT=..." >&2
	exit 1
fi

"$ROOT/scripts/deps.sh" --demo
echo "== building and installing idem_gate"
make -s -C "$ROOT" with_llvm=no >/dev/null
make -s -C "$ROOT" with_llvm=no install >/dev/null

DIR=$(mktemp -d /tmp/idem_gate_demo.XXXXXX)
chmod 755 "$DIR"
cleanup() { "$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"; }
trap cleanup EXIT
echo "== starting a throwaway cluster in $DIR on 127.0.0.1:$PORT (IDEM_DEMO_PORT)"
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT"

export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
psql -X -q -c "CREATE EXTENSION idem_gate" -c "SELECT idem_gate.preloaded() AS preloaded"
psql -X -q -f "$ROOT/scripts/demo.sql"
echo "== stopping the cluster"
