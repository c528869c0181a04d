#!/usr/bin/env bash
# Which index designs let a completion be a HOT update, and what each costs
# the janitor (issue 37), on plain SQL tables (bench/janitor/hot_setup.sql:
# 1M claims over 10 days, 10,000 in flight, 50 stuck), one cluster:
#   - WAL bytes per cycle (a grant, a heartbeat, a completion; 5,000 cycles,
#     one client, after a checkpoint) and the share of HOT updates;
#   - buffers each janitor question reads (EXPLAIN (ANALYZE, BUFFERS)): the
#     first retention batch, an idle retention batch, the stuck claims, and
#     for design b the stuck claims from a watermark and as an open list.
# Counts, not times: a busy machine gives the same figures.
#   PG_MAJOR (15; 17 or 18 run the server from its Debian root),
#   BENCH_PORT (55441)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
PORT=${BENCH_PORT:-55441}

"$ROOT/scripts/deps.sh"
. "$ROOT/bench/lib.sh"
bench_install "$ROOT"
DIR=$(mktemp -d /tmp/idem_gate_bench_hot.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '512MB'" "max_wal_size = '4GB'" \
	"checkpoint_timeout = '1h'" "idem_gate.naptime = '1d'" "autovacuum = off" \
	"max_parallel_workers_per_gather = 0"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -f "$here/hot_setup.sql" >/dev/null 2>&1

echo "PostgreSQL $PG_MAJOR: 5,000 cycles (grant, heartbeat, completion) per design, one client"
printf '%-44s %14s %10s\n' design "WAL bytes/cycle" "HOT share"
for t in a b c d; do
	q -c "CHECKPOINT"
	read -r u0 h0 < <(q -F ' ' -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'p.$t'::regclass")
	l0=$(q -c "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -M simple -c 1 -t 5000 -D tbl=p.$t -f "$here/hot_cycle.pgb" >/dev/null 2>&1
	l1=$(q -c "SELECT pg_current_wal_insert_lsn()")
	sleep 1
	read -r u1 h1 < <(q -F ' ' -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'p.$t'::regclass")
	printf '%-44s %14s %9s%%\n' "$(q -c "SELECT string_agg(pg_get_indexdef(indexrelid), '; ' ORDER BY indexrelid)
		FROM pg_index WHERE indrelid = 'p.$t'::regclass AND NOT indisprimary" |
		sed -E 's/CREATE INDEX [a-z_]+ ON p\.[a-z] //g; s/USING btree //g; s/^$/(primary key alone)/')" \
		"$(q -c "SELECT round(pg_wal_lsn_diff('$l1', '$l0') / 5000)")" "$(((h1 - h0) * 100 / (u1 - u0)))"
done

# buffers LABEL QUERY: the buffers one janitor question reads
buffers() {
	printf '%-60s %8s\n' "$1" "$(q -c "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) $2" |
		python3 -c 'import json,sys; p=json.load(sys.stdin)[0]["Plan"]; print(p.get("Shared Hit Blocks",0)+p.get("Shared Read Blocks",0))')"
}
echo
echo "buffers read per janitor question (1M rows; about 300,000 older than 7 days)"
R7="now() - interval '7 days'" R11="now() - interval '11 days'" S1="now() - interval '1 hour'"
buffers "a: first retention batch (1000 of 300,000)" "SELECT ctid FROM p.a WHERE state = 'completed' AND workflow = 'wf' AND updated_at < $R7 ORDER BY updated_at, token LIMIT 1000"
buffers "b: first retention batch (1000 of 300,000)" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND claimed_at < $R7 AND state = 'completed' AND updated_at < $R7 ORDER BY claimed_at, token LIMIT 1000"
buffers "a: idle retention batch (nothing expires)" "SELECT ctid FROM p.a WHERE state = 'completed' AND workflow = 'wf' AND updated_at < $R11 ORDER BY updated_at, token LIMIT 1000"
buffers "b: idle retention batch (nothing expires)" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND claimed_at < $R11 AND state = 'completed' AND updated_at < $R11 ORDER BY claimed_at, token LIMIT 1000"
buffers "a: stuck claims (50 of 10,050 in flight)" "SELECT ctid FROM p.a WHERE state = 'processing' AND workflow = 'wf' AND updated_at < $S1 ORDER BY updated_at, token LIMIT 1000"
buffers "b: stuck claims, whole grant range" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND claimed_at < $S1 AND state = 'processing' AND updated_at < $S1 ORDER BY claimed_at, token LIMIT 1000"
buffers "c: stuck claims through the BRIN" "SELECT ctid FROM p.c WHERE workflow = 'wf' AND state = 'processing' AND updated_at < $S1 ORDER BY updated_at, token LIMIT 1000"
buffers "b: stuck, from the oldest open claim (10,000 grants)" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND (claimed_at, token) > ((SELECT claimed_at FROM p.b WHERE workflow = 'wf' AND key = 'k990001'), 990000) AND claimed_at < $S1 AND state = 'processing' AND updated_at < $S1 ORDER BY claimed_at, token LIMIT 1000"
buffers "b: stuck, from the last pass a minute ago" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND (claimed_at, token) > ($S1 - interval '1 minute', 0) AND claimed_at < $S1 AND state = 'processing' AND updated_at < $S1 ORDER BY claimed_at, token LIMIT 1000"
buffers "b: 50 open claims by primary key" "SELECT ctid FROM p.b WHERE workflow = 'wf' AND key = ANY (ARRAY(SELECT 'k' || g FROM generate_series(7, 1000000, 20000) g))"
