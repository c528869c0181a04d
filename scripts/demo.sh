#!/usr/bin/env bash
# idem_gate demo: install what is needed, build and install idem_gate, start
# a throwaway cluster under /tmp on 127.0.0.1 with idem_gate preloaded, show
# a double delivery, a completed retry and a stale takeover, then stop it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${IDEM_DEMO_PORT:-55433}

"$ROOT/scripts/deps.sh"
echo "== building and installing idem_gate"
make -s -C "$ROOT" with_llvm=no >/dev/null
make -s -C "$ROOT" with_llvm=no install >/dev/null

DIR=$(mktemp -d /tmp/idem_gate_demo.XXXXXX)
chmod 755 "$DIR"
cleanup() { "$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"; }
trap cleanup EXIT
echo "== starting a throwaway cluster in $DIR on 127.0.0.1:$PORT"
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT"

export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
psql -X -q -c "CREATE EXTENSION idem_gate" -c "SELECT idem_gate.preloaded() AS preloaded"
psql -X -q -f "$ROOT/scripts/demo.sql"
echo "== stopping the cluster"
