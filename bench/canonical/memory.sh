#!/usr/bin/env bash
# Peak memory of the canonical JSON functions on large json documents, per
# byte of input:
#   empty   [{},{},...]                  (the most objects per byte)
#   pairs   [{"b":0,"a":1},...]          (small objects whose members must
#                                         be reordered)
#   stripe  [event,event,...]            (Stripe-like webhook events of
#                                         gen_corpus.mjs)
# For each shape and function a fresh backend loads the document's pages
# into shared buffers (pg_prewarm), reads its own peak resident size (VmHWM
# of /proc/self/status), runs the function once and reads it again.  The
# difference over the document's size in bytes is the figure printed;
# md5(doc::text), which only detoasts and hashes, is the floor.
#
# usage (root or postgres, idem_gate installed with make install):
#   bench/canonical/memory.sh [megabytes=100]
# Starts a throwaway cluster under /tmp on a loopback port (BENCH_PORT,
# default 55492) and removes it afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MB=${1:-100}
PORT=${BENCH_PORT:-55492}
BIN=$(pg_config --bindir)

if [ ! -f "$(pg_config --sharedir)/extension/idem_gate.control" ]; then
	echo "idem_gate is not installed: run 'make install' first" >&2
	exit 1
fi
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

WORK=$(mktemp -d /tmp/idem_mem.XXXXXX)
chmod 755 "$WORK"
cleanup() {
	as_pg "$BIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"

as_pg "$BIN/initdb" -D "$WORK/pg" -E UTF8 --locale=C.UTF-8 -A trust >/dev/null
as_pg "$BIN/pg_ctl" -D "$WORK/pg" -l "$WORK/server.log" -w start -o "-p $PORT \
	-c listen_addresses=127.0.0.1 -c unix_socket_directories=$WORK \
	-c shared_preload_libraries=idem_gate -c shared_buffers=512MB \
	-c max_parallel_workers_per_gather=0 -c jit=off" >/dev/null
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres

# The Stripe-like shape: events of the throughput corpus in one array of
# MB megabytes.  The corpus's events average about 3,000 bytes; twice as
# many as that needs are generated, and the array takes them until it has
# its size (bytes counted by awk in the C locale).
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
node "$HERE/gen_corpus.mjs" $((MB * 1000000 / 1500 + 1)) 7 |
	LC_ALL=C awk -v want=$((MB * 1000000)) '
		BEGIN { printf "["; n = 2 }
		n < want { if (NR > 1) { printf ","; n++ } printf "%s", $0; n += length($0) }
		END { printf "]\n" }' \
	> "$WORK/stripe.json"
chmod 644 "$WORK/stripe.json"

psql -q -X -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
CREATE EXTENSION idem_gate;
CREATE EXTENSION pg_prewarm;
CREATE TABLE doc (shape text PRIMARY KEY, doc json);
INSERT INTO doc SELECT 'empty', ('[' || repeat('{},', $MB * 1000000 / 3 - 1) || '{}]')::json;
INSERT INTO doc SELECT 'pairs', ('[' || repeat('{"b":0,"a":1},', $MB * 1000000 / 14 - 1) || '{"b":0,"a":1}]')::json;
CREATE TEMP TABLE raw (doc json);
\copy raw FROM '$WORK/stripe.json' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO doc SELECT 'stripe', doc FROM raw;
VACUUM ANALYZE doc;
SQL

# peak SHAPE EXPR: kB by which one evaluation of EXPR raises a fresh
# backend's peak resident size, and the seconds it took
peak() {
	psql -X -At -v ON_ERROR_STOP=1 <<SQL | tail -1
SET client_min_messages = warning;
SELECT pg_prewarm('doc') + pg_prewarm(reltoastrelid) + pg_prewarm(i.indexrelid)
  FROM pg_class c, pg_index i WHERE c.oid = 'doc'::regclass AND i.indrelid = c.reltoastrelid \g /dev/null
SELECT count(*) FROM doc WHERE shape = '$1' \g /dev/null
SELECT substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+)')::bigint AS hwm0,
       extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT $2 FROM doc WHERE shape = '$1' \g /dev/null
SELECT substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+)')::bigint - :hwm0,
       extract(epoch FROM clock_timestamp()) - :t0;
SQL
}

printf '%-8s %9s  %-22s %10s %14s %9s\n' shape 'input MB' function 'peak MB' 'bytes/in byte' seconds
for shape in empty pairs stripe; do
	bytes=$(psql -X -At -c "SELECT octet_length(doc::text) FROM doc WHERE shape = '$shape'")
	for fn in 'md5(doc::text)' 'idem_hash(doc)' 'idem_canonical(doc)'; do
		expr=$fn
		[ "$fn" = 'idem_canonical(doc)' ] && expr='octet_length(idem_canonical(doc))'
		IFS='|' read -r kb secs < <(peak "$shape" "$expr")
		awk -v s="$shape" -v b="$bytes" -v f="$fn" -v kb="$kb" -v t="$secs" 'BEGIN {
			printf "%-8s %9.1f  %-22s %10.1f %14.2f %9.2f\n", s, b / 1e6, f, kb * 1024 / 1e6, kb * 1024 / b, t }'
	done
done
