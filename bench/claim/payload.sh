#!/usr/bin/env bash
# A new-key claim that keeps a 3 KB payload as evidence, side by side on
# one throwaway cluster in alternating rounds (pgbench -M prepared, 8
# clients; synchronous_commit off and on), against
#   - the same claim without a payload (what keeping it costs the gate), and
#   - its raw floor: a plain INSERT of the same row (every column the gate
#     sets on a new claim) with the same payload
#     into a table of the claims table's schema, storage and indexes
#     (CREATE TABLE ... (LIKE idem_gate.claims INCLUDING ALL)), no gate in
#     between: what storing 3 KB of jsonb costs PostgreSQL itself.
# The payload is a literal JSON object of 3,000 bytes in the statement, as
# a webhook's body reaches the gate from n8n.
#   BENCH_SECONDS (10), BENCH_ROUNDS (4), BENCH_SYNC ("off on"), BENCH_PORT (55437)
# PostgreSQL 15 (the host's), the work tree's build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-4}
SYNCS=${BENCH_SYNC:-off on}
PORT=${BENCH_PORT:-55437}

"$ROOT/scripts/deps.sh"
DIR=$(mktemp -d /tmp/idem_gate_payload.XXXXXX)
chmod 755 "$DIR"
cleanup() {
	"$ROOT/scripts/cluster.sh" stop "$DIR/cluster" || true
	rm -rf "$DIR"
}
trap cleanup EXIT
make -s -C "$ROOT" with_llvm=no >/dev/null
make -s -C "$ROOT" with_llvm=no install >/dev/null
"$ROOT/scripts/cluster.sh" start "$DIR/cluster" "$PORT" "shared_buffers = '1GB'" \
	"max_wal_size = '8GB'" "checkpoint_timeout = '30min'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
psql -X -q -c "CREATE EXTENSION idem_gate"

# the two scripts: the same call, NULL or a 3 KB object as the payload
body=$(python3 -c '
import json
d = {"id": "evt_1NqR", "type": "charge.succeeded", "data": {"object": {"amount": 1999, "currency": "eur"}}}
i = 0
while len(json.dumps(d)) < 3000:
    d["line_%03d" % i] = "item %d: widget, blue, qty 1" % i
    i += 1
s = json.dumps(d)
print(s)')
echo "payload: ${#body} bytes"
cat >"$DIR/none.pgb" <<SQL
SELECT outcome FROM idem_claim_ex('n_' || :client_id || '_' || random()::text, 'wf', NULL, NULL, NULL, NULL);
SQL
cat >"$DIR/payload.pgb" <<SQL
SELECT outcome FROM idem_claim_ex('p_' || :client_id || '_' || random()::text, 'wf', NULL, NULL, NULL, '$body'::jsonb);
SQL
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE SCHEMA raw;
CREATE SEQUENCE raw.token_seq;
CREATE TABLE raw.claims (LIKE idem_gate.claims INCLUDING ALL);
SQL
cat >"$DIR/raw.pgb" <<SQL
INSERT INTO raw.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at, token_issued, payload)
VALUES ('wf', 'r_' || :client_id || '_' || random()::text, 'processing', 1, nextval('raw.token_seq'),
		now(), now(), now(), true, '$body'::jsonb)
ON CONFLICT DO NOTHING RETURNING token;
SQL
echo "raw floor: $(psql -X -At -c "SELECT string_agg(pg_get_indexdef(indexrelid), '; ') FROM pg_index WHERE indrelid = 'raw.claims'::regclass")"

tps() {
	PGOPTIONS="-c synchronous_commit=$2" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" \
		-f "$1" 2>&1 | awk '/^tps = / { print $3 }'
}
declare -A sum per rsum rper
for r in $(seq "$ROUNDS"); do
	for s in $SYNCS; do
		order="none payload raw"
		[ $((r % 2)) = 0 ] && order="raw payload none"
		for v in $order; do
			t=$(tps "$DIR/$v.pgb" "$s")
			eval "t_$v=$t"
		done
		x=$(printf '%.3f' "$(echo "$t_payload / $t_none" | bc -l)")
		y=$(printf '%.3f' "$(echo "$t_payload / $t_raw" | bc -l)")
		per[$s]="${per[$s]:-} $x"
		sum[$s]=$(echo "${sum[$s]:-0} + $x" | bc -l)
		rper[$s]="${rper[$s]:-} $y"
		rsum[$s]=$(echo "${rsum[$s]:-0} + $y" | bc -l)
		echo "round $r sync=$s none=$t_none payload=$t_payload raw=$t_raw payload/none=$x payload/raw=$y"
	done
done
echo
for s in $SYNCS; do
	printf 'sync=%-3s payload/none mean %.3f  rounds%s\n' "$s" "$(echo "${sum[$s]} / $ROUNDS" | bc -l)" "${per[$s]}"
	printf 'sync=%-3s payload/raw  mean %.3f  rounds%s (goal >= 0.90)\n' "$s" "$(echo "${rsum[$s]} / $ROUNDS" | bc -l)" "${rper[$s]}"
done
echo "table: $(psql -X -At -c "SELECT pg_size_pretty(pg_total_relation_size('idem_gate.claims'))"), $(psql -X -At -c "SELECT count(*) FROM idem_gate.claims WHERE payload IS NOT NULL") claims with a payload"
