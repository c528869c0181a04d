#!/usr/bin/env bash
# idem_hash of the C edition against the managed edition's PL/pgSQL
# (managed/parts/30_canonical.sql and 31_canonical_number.sql), side by
# side in one throwaway cluster: 10,000 calls on a small webhook-like document (about 300 bytes) and on a
# 3 KB one, each document different (so no call is folded into a constant),
# jsonb and json, best of 3 runs.
#
# Usage: bench/canonical/managed.sh [bindir]   (idem_gate installed there)
# Env: BENCH_PORT (default 56160), BENCH_N (default 10000).
# Run as root (the server runs as postgres) or as postgres.
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
bindir="${1:-$(pg_config --bindir)}"
port="${BENCH_PORT:-56160}"
n="${BENCH_N:-10000}"
work="$(mktemp -d /tmp/idem_managed_bench.XXXXXX)"

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
cleanup() {
	as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
[ "$(id -u)" = 0 ] && chown postgres "$work"
as_pg "$bindir/initdb" -D "$work/data" -E UTF8 --locale=C -A trust >/dev/null
as_pg "$bindir/pg_ctl" -D "$work/data" -w -l "$work/server.log" \
	-o "-p $port -k $work -c listen_addresses='' -c jit=off" start >/dev/null
export PGHOST="$work" PGPORT="$port" PGUSER=postgres
psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)

"${psql[@]}" -d postgres -c "CREATE DATABASE c_edition" -c "CREATE DATABASE managed"
"${psql[@]}" -d c_edition -c "CREATE EXTENSION idem_gate"
{
	echo "CREATE SCHEMA idem_gate;"
	sed 's/@extschema@/public/g' "$here"/managed/parts/3[01]_canonical*.sql
} | "${psql[@]}" -d managed >/dev/null

docs="
CREATE TABLE docs AS
SELECT i,
	jsonb_build_object(
		'id', 'evt_' || left(md5(i::text), 24), 'type', 'payment_intent.succeeded',
		'created', 1700000000 + i, 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object(
			'id', 'pi_' || left(md5('pi' || i), 24), 'amount', 1999 + i, 'currency', 'eur',
			'status', 'succeeded',
			'metadata', jsonb_build_object('order_id', 'ord_' || i, 'n8n_execution', i))),
		'request', jsonb_build_object('id', NULL, 'idempotency_key', md5('k' || i)::uuid::text)
	) AS small,
	jsonb_build_object(
		'id', 'in_' || left(md5(i::text), 24), 'object', 'invoice', 'created', 1700000000 + i,
		'customer', jsonb_build_object('id', 'cus_' || left(md5('c' || i), 14),
			'name', 'Zoë Ångström', 'email', 'customer' || i || '@example.com',
			'address', jsonb_build_object('city', 'Kraków', 'country', 'PL', 'line1', i || ' Floriańska',
				'line2', NULL, 'postal_code', '30-001', 'state', NULL)),
		'lines', (SELECT jsonb_agg(jsonb_build_object(
			'id', 'il_' || left(md5(i || '-' || j), 24), 'amount', 1250 * j + i,
			'unit_amount_decimal', (12.50 * j + i / 100.0)::text::numeric, 'quantity', j,
			'currency', 'eur', 'description', 'Bestellung für Jürgen, item ' || j,
			'period', jsonb_build_object('start', 1700000000 + i, 'end', 1702592000 + i),
			'tax_rates', jsonb_build_array(19.0, 7), 'proration', false))
			FROM generate_series(1, 9) AS j),
		'metadata', jsonb_build_object('tenant', 'acme', 'workflow', 'billing', '✓', 'verified'),
		'total', 56250 + i, 'tax', 0.19, 'paid', true
	) AS big
FROM generate_series(1, $n) AS i;
ALTER TABLE docs ADD COLUMN small_json json, ADD COLUMN big_json json;
UPDATE docs SET small_json = small::json, big_json = big::json;"
for db in c_edition managed; do
	"${psql[@]}" -d "$db" -c "$docs"
	"${psql[@]}" -d "$db" -c "VACUUM ANALYZE docs"
done

# Both editions must give the same hashes before their speed means anything.
"${psql[@]}" -d c_edition -At -c "COPY (SELECT i, idem_hash(small), idem_hash(big), idem_hash(small_json), idem_hash(big_json) FROM docs ORDER BY i) TO STDOUT" >"$work/c.txt"
"${psql[@]}" -d managed -At -c "COPY (SELECT i, idem_hash(small), idem_hash(big), idem_hash(small_json), idem_hash(big_json) FROM docs ORDER BY i) TO STDOUT" >"$work/m.txt"
cmp -s "$work/c.txt" "$work/m.txt" || { echo "the editions' hashes differ"; exit 1; }

# best of 3 runs of one query, in ms
best() {
	local db="$1" q="$2" b="" t
	for _ in 1 2 3; do
		t="$("${psql[@]}" -d "$db" -At -c "
			DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
				PERFORM count($q) FROM docs;
				RAISE NOTICE '%', round(extract(epoch FROM clock_timestamp() - t0) * 1000);
			END \$\$" 2>&1 | sed -n 's/^NOTICE:  //p')"
		if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b="$t"; fi
	done
	echo "$b"
}
avg_small="$("${psql[@]}" -d managed -At -c "SELECT round(avg(octet_length(small::text))) FROM docs")"
avg_big="$("${psql[@]}" -d managed -At -c "SELECT round(avg(octet_length(big::text))) FROM docs")"
printf '%-38s %10s %10s %8s\n' "$n calls of" "C (ms)" "managed" "ratio"
for q in "idem_hash(small)" "idem_hash(small_json)" "idem_hash(big)" "idem_hash(big_json)" \
	"idem_hash(small, ARRAY['id', '/data/object/id'])"; do
	c="$(best c_edition "$q")"
	m="$(best managed "$q")"
	label="$q"
	case "$q" in
	*small*) label="$q, ${avg_small} B" ;;
	*big*) label="$q, ${avg_big} B" ;;
	esac
	printf '%-38s %10s %10s %7sx\n' "$label" "$c" "$m" "$(awk -v a="$c" -v b="$m" 'BEGIN { printf "%.0f", b / (a > 0 ? a : 1) }')"
done
