#!/usr/bin/env bash
# Canonical JSON benchmark, in one run on one corpus:
#   idem_hash(doc)                               (canonical form + SHA-256)
#   encode(sha256(doc::text::bytea), 'hex')      (the floor: print + hash)
#   idem_hash(doc) of the same events as json    (the text as received)
#   Node canonicalize + crypto SHA-256           (the reference implementation)
# Throughput is corpus bytes (compact JSON) per second, single core.
#
# usage (root or postgres, idem_gate installed with make install):
#   bench/canonical/run.sh [documents=20000] [rounds=5]
# Starts a throwaway cluster under /tmp on a loopback port (BENCH_PORT,
# default 55491) and removes it afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DOCS=${1:-20000}
ROUNDS=${2:-5}
PORT=${BENCH_PORT:-55491}
BIN=$(pg_config --bindir)

if [ ! -f "$(pg_config --sharedir)/extension/idem_gate.control" ]; then
	echo "idem_gate is not installed: run 'make install' first" >&2
	exit 1
fi
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

WORK=$(mktemp -d /tmp/idem_bench.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"
cleanup() {
	as_pg "$BIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

as_pg "$BIN/initdb" -D "$WORK/pg" -E UTF8 --locale=C.UTF-8 -A trust >/dev/null
as_pg "$BIN/pg_ctl" -D "$WORK/pg" -l "$WORK/server.log" -w start -o "-p $PORT \
	-c listen_addresses=127.0.0.1 -c unix_socket_directories=$WORK \
	-c shared_preload_libraries=idem_gate -c shared_buffers=512MB \
	-c max_parallel_workers_per_gather=0 -c jit=off" >/dev/null
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres

(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
node "$HERE/gen_corpus.mjs" "$DOCS" > "$WORK/corpus.ndjson"

psql -q -X -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
CREATE EXTENSION idem_gate;
CREATE TABLE corpus (doc jsonb);
\copy corpus FROM '$WORK/corpus.ndjson' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
CREATE TABLE corpus_json (doc json);
\copy corpus_json FROM '$WORK/corpus.ndjson' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
VACUUM ANALYZE corpus;
VACUUM ANALYZE corpus_json;
SQL

# Best of ROUNDS timed passes over the whole table, after one warm-up pass.
read -r HASH_S FLOOR_S JSON_S < <(psql -X -At -v ON_ERROR_STOP=1 -c "SET client_min_messages=notice" -f - 2>&1 <<SQL | sed -n 's/.*RESULT //p'
DO \$\$
DECLARE
	t0 timestamptz;
	best_hash float8 := 'Infinity';
	best_floor float8 := 'Infinity';
	best_json float8 := 'Infinity';
	s float8;
BEGIN
	PERFORM sum(length(idem_hash(doc))) FROM corpus;
	PERFORM sum(length(encode(sha256(doc::text::bytea), 'hex'))) FROM corpus;
	PERFORM sum(length(idem_hash(doc))) FROM corpus_json;
	FOR i IN 1..$ROUNDS LOOP
		t0 := clock_timestamp();
		PERFORM sum(length(idem_hash(doc))) FROM corpus;
		s := extract(epoch FROM clock_timestamp() - t0);
		best_hash := least(best_hash, s);
		t0 := clock_timestamp();
		PERFORM sum(length(encode(sha256(doc::text::bytea), 'hex'))) FROM corpus;
		s := extract(epoch FROM clock_timestamp() - t0);
		best_floor := least(best_floor, s);
		t0 := clock_timestamp();
		PERFORM sum(length(idem_hash(doc))) FROM corpus_json;
		s := extract(epoch FROM clock_timestamp() - t0);
		best_json := least(best_json, s);
	END LOOP;
	RAISE NOTICE 'RESULT % % %', best_hash, best_floor, best_json;
END
\$\$;
SQL
)
read -r BYTES NODE_S < <(node "$HERE/bench.mjs" "$WORK/corpus.ndjson" "$ROUNDS")

awk -v b="$BYTES" -v n="$DOCS" -v h="$HASH_S" -v f="$FLOOR_S" -v js="$JSON_S" -v j="$NODE_S" 'BEGIN {
	mb = b / 1e6
	printf "corpus: %d webhook events, %.1f MB of JSON (avg %.1f KB)\n", n, mb, b / n / 1000
	printf "%-44s %8.1f MB/s  (%.3f s)\n", "idem_hash(doc)", mb / h, h
	printf "%-44s %8.1f MB/s  (%.3f s)\n", "encode(sha256(doc::text::bytea), '"'"'hex'"'"')", mb / f, f
	printf "%-44s %8.1f MB/s  (%.3f s)\n", "idem_hash(doc) of the events as json", mb / js, js
	printf "%-44s %8.1f MB/s  (%.3f s)\n", "node canonicalize + crypto sha256", mb / j, j
	printf "idem_hash / sha256(doc::text) floor: %.2fx (target >= 0.5x)\n", f / h
	printf "idem_hash / node canonicalize:       %.2fx (target >= 2x)\n", j / h
}'
