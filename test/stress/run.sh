#!/usr/bin/env bash
# idem_gate stress: concurrent clients claim, complete, fail, heartbeat,
# abandon and take over claims on a small key space, then the invariants
# are checked from what the clients recorded.
#   STRESS_CLIENTS (32), STRESS_KEYS (1000), STRESS_TX (per client, 400)
# Uses the server the libpq environment points at (PGHOST, PGPORT, ...),
# in a database that has idem_gate; it empties idem_gate.claims there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
clients=${STRESS_CLIENTS:-32}
keys=${STRESS_KEYS:-1000}
tx=${STRESS_TX:-400}

psql -q -X -v ON_ERROR_STOP=1 -f "$here/setup.sql" >/dev/null
echo "stress: $clients clients x $tx claims over $keys keys"
start=$(date +%s.%N)
pgbench -n -M prepared -c "$clients" -j 2 -t "$tx" -D keys="$keys" \
	-f "$here/stress.pgb" >"${TMPDIR:-/tmp}/stress.$$.log" 2>&1 || {
	cat "${TMPDIR:-/tmp}/stress.$$.log"; echo "0 passed, 1 failed"; exit 1; }
end=$(date +%s.%N)
grep -E 'transactions actually processed|failed|aborted' "${TMPDIR:-/tmp}/stress.$$.log" || true
rm -f "${TMPDIR:-/tmp}/stress.$$.log"
awk -v s="$start" -v e="$end" -v n=$((clients * tx)) 'BEGIN { printf "claims: %d in %.1f s (%.0f/s)\n", n, e - s, n / (e - s) }'
psql -q -X -f "$here/check.sql"
