#!/usr/bin/env bash
# The long Citus fault run, on demand (docs/citus.md): a coordinator and two
# workers, 8 clients claiming and completing through the coordinator while
# a shard moves, a worker is drained and the cluster rebalanced, a worker
# is killed with kill -9 and restarted, and the coordinator restarts; then
# the invariants (test/citus/faults.py).  About 2 minutes.
#   FAULT_CLIENTS (8), FAULT_KEYS (200, a window sliding by 20 keys a second), FAULT_PHASE (15 s), FAULT_SEED
#   PG_CONFIG: a PostgreSQL with idem_gate installed (Citus is built if
#   missing, see ensure_citus.sh); FAULT_PORT (56821) and the next two.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PG_CONFIG=${PG_CONFIG:-pg_config}
export CITUS_BASE=${CITUS_BASE:-$(mktemp -d /tmp/idem_citus_faults.XXXXXX)}
COORD=${FAULT_PORT:-56821}
W1=$((COORD + 1))
W2=$((COORD + 2))
. "$here/lib.sh"
trap 'cluster_down "$COORD" "$W1" "$W2"' EXIT

/usr/bin/python3 -c 'import psycopg2' 2>/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-psycopg2 >/dev/null
"$here/ensure_citus.sh" >/dev/null
cluster_up "$COORD" "$W1" "$W2"
q "$COORD" "SELECT idem_gate.distribute()" >/dev/null
export CITUS_BIN CITUS_PORTS="$COORD $W1 $W2"
/usr/bin/python3 "$here/faults.py"
