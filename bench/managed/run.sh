#!/usr/bin/env bash
# The managed edition against the C edition and the hand-written PL/pgSQL
# gate of bench/baseline/, side by side in one run on one throwaway
# cluster, three databases:
#   c         CREATE EXTENSION idem_gate (preloaded, as a DBA runs it)
#   managed   managed/idem_gate.sql, installed by a role that is no superuser
#   baseline  bench/baseline/schema.sql (base.claim, base.complete)
# each with the same 100,000 completed keys, and three workloads:
#   new key, duplicate, claim + complete
# run by a role that is no superuser and has per-workflow access off (the
# n8n role of the README), pgbench -M prepared -c 8 -j 2, alternating rounds,
# synchronous_commit off (the gate's own cost, not the disk's).  Prints tps
# and the ratios managed / C and managed / baseline.
#   BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_PORT (55436),
#   PG_MAJOR (15; 17 or 18 run the server from its Debian root),
#   BENCH_NO_INSTALL=1 uses the idem_gate already installed for PG_CONFIG
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BASE=$ROOT/bench/baseline
CLAIM=$ROOT/bench/claim
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
PORT=${BENCH_PORT:-55436}

. "$ROOT/bench/lib.sh"
if [ "${BENCH_NO_INSTALL:-0}" = 1 ]; then
	PG_MAJOR=${PG_MAJOR:-15}
else
	"$ROOT/scripts/deps.sh"
	bench_install "$ROOT"
fi
MAJOR=$PG_MAJOR
DIR=$(mktemp -d /tmp/idem_gate_bench_managed.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'" \
	"checkpoint_timeout = '30min'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

q -d postgres -c "CREATE ROLE bench_owner LOGIN" -c "CREATE ROLE bench_app LOGIN" \
	-c "CREATE DATABASE c" -c "CREATE DATABASE managed OWNER bench_owner" -c "CREATE DATABASE baseline"
# the C edition, and its 100,000 completed keys (bench/claim/setup.sql)
q -d c -f "$CLAIM/setup.sql" >/dev/null
# the managed edition, installed by its owner, and the same keys
q -d managed -c "ALTER SCHEMA public OWNER TO bench_owner"
q -U bench_owner -d managed -f "$ROOT/managed/idem_gate.sql" >/dev/null
q -U bench_owner -d managed >/dev/null <<'SQL'
SELECT count(idem_complete(k, 'wf', NULL, '{"action_id":"inv_1"}'))
  FROM (SELECT 'dup_' || g AS k, idem_claim('dup_' || g, 'wf') FROM generate_series(1, 100000) g) s;
VACUUM ANALYZE idem_gate.claims;
SQL
q -d baseline -f "$BASE/schema.sql" >/dev/null 2>&1
for db in c managed; do
	owner=postgres
	[ "$db" = managed ] && owner=bench_owner
	q -U "$owner" -d "$db" -c "GRANT USAGE ON SCHEMA idem_gate TO bench_app" \
		-c "GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval),
			idem_claim_ex(text, text, interval, text, text), idem_complete(text, text, bigint, jsonb) TO bench_app"
done
q -d baseline -c "GRANT USAGE ON SCHEMA base TO bench_app" -c "GRANT ALL ON ALL TABLES IN SCHEMA base TO bench_app" \
	-c "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA base TO bench_app"

# tps DB SCRIPT: one pgbench run as the application's role, prints its tps
tps() {
	PGOPTIONS="-c synchronous_commit=off" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" -U bench_app -d "$1" -f "$2" 2>&1 |
		awk '/^tps = / { print $3 }'
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

declare -A sum
work=("new:$CLAIM/idem_new.pgb:$BASE/plpgsql_new.pgb"
	  "duplicate:$CLAIM/idem_dup.pgb:$BASE/plpgsql_dup.pgb"
	  "claim+complete:$CLAIM/idem_cycle.pgb:$BASE/plpgsql_cycle.pgb")
echo "PostgreSQL $MAJOR; pgbench -M prepared -c 8 -j 2 -T $SECS as a role that is no superuser, synchronous_commit off, $ROUNDS alternating rounds, mean tps"
for r in $(seq "$ROUNDS"); do
	for w in "${work[@]}"; do
		IFS=: read -r name gate base <<<"$w"
		ct=$(tps c "$gate")
		mt=$(tps managed "$gate")
		bt=$(tps baseline "$base")
		sum[$name:c]=$(echo "${sum[$name:c]:-0} + $ct" | bc -l)
		sum[$name:m]=$(echo "${sum[$name:m]:-0} + $mt" | bc -l)
		sum[$name:b]=$(echo "${sum[$name:b]:-0} + $bt" | bc -l)
		echo "  round $r $name: C $ct, managed $mt, baseline $bt"
	done
done
printf '%-16s %10s %10s %10s %12s %18s\n' workload "C tps" "managed" "baseline" "managed/C" "managed/baseline"
for w in "${work[@]}"; do
	name=${w%%:*}
	c=$(echo "${sum[$name:c]} / $ROUNDS" | bc -l)
	m=$(echo "${sum[$name:m]} / $ROUNDS" | bc -l)
	b=$(echo "${sum[$name:b]} / $ROUNDS" | bc -l)
	printf '%-16s %10.0f %10.0f %10.0f %12s %18s\n' "$name" "$c" "$m" "$b" "$(ratio "$m" "$c")" "$(ratio "$m" "$b")"
done
