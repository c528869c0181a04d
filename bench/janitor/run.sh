#!/usr/bin/env bash
# idem_gate janitor benchmark: the four performance targets of the
# background worker, on one throwaway cluster (see README.md):
#   1. deletion rate of a worker pass over EXPIRED expired rows among LIVE
#      live ones (target >= 100,000 rows/s)
#   2. p99 latency of a concurrent claim load (pgbench, 8 clients) during
#      such a pass, over its p99 with no janitor running (target <= 1.25)
#   3. idle pass (nothing to do) on BIG rows over one on SMALL rows
#      (target <= 2)
#   4. table size on disk under a steady claim/complete/expire cycle with a
#      5 s retention (target: levels off)
# Environment (defaults): JANITOR_EXPIRED (1000000) JANITOR_LIVE (1000000)
#   JANITOR_ROUNDS (3) JANITOR_P99_SECONDS (45) JANITOR_SMALL (100000)
#   JANITOR_BIG (10000000; 0 skips 3) JANITOR_IDLE_SECONDS (15)
#   JANITOR_CYCLE_SECONDS (240; 0 skips 4) JANITOR_SAMPLE_SECONDS (10)
#   JANITOR_BATCH_SIZE, JANITOR_BATCH_DELAY (server defaults) BENCH_PORT (55440)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
EXPIRED=${JANITOR_EXPIRED:-1000000}
LIVE=${JANITOR_LIVE:-1000000}
ROUNDS=${JANITOR_ROUNDS:-3}
P99_SECS=${JANITOR_P99_SECONDS:-45}
SMALL=${JANITOR_SMALL:-100000}
BIG=${JANITOR_BIG:-10000000}
IDLE_SECS=${JANITOR_IDLE_SECONDS:-15}
CYCLE_SECS=${JANITOR_CYCLE_SECONDS:-240}
SAMPLE_SECS=${JANITOR_SAMPLE_SECONDS:-10}
PORT=${BENCH_PORT:-55440}

"$ROOT/scripts/deps.sh"
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_janitor.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
# naptime 1h: the worker runs a pass only when the benchmark asks for one
conf=("shared_buffers = '1GB'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'"
	  "idem_gate.naptime = '1h'")
[ -n "${JANITOR_BATCH_SIZE:-}" ] && conf+=("idem_gate.batch_size = ${JANITOR_BATCH_SIZE}")
[ -n "${JANITOR_BATCH_DELAY:-}" ] && conf+=("idem_gate.batch_delay = '${JANITOR_BATCH_DELAY}'")
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "${conf[@]}"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION idem_gate" >/dev/null 2>&1
BATCH=$(q -c "SHOW idem_gate.batch_size")

results=()
# result NAME MEASURED TARGET PASS(0/1)
result() { results+=("$(printf '%-44s %16s %14s %s' "$1" "$2" "$3" "$([ "$4" = 1 ] && echo PASS || echo FAIL)")"); }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# load EXPIRED LIVE: a fresh table, vacuumed, analyzed and checkpointed
load() {
	q -v expired="$1" -v live="$2" -f "$here/load.sql"
	q -c "VACUUM ANALYZE idem_gate.claims" -c "CHECKPOINT"
}

# worker_pass: make the worker run one pass now, from one session (see
# worker_pass.sql); prints "deleted ms start_epoch end_epoch"
worker_pass() {
	local passes d ms from to
	read -r passes d ms from to < <(q -F ' ' -f "$here/worker_pass.sql")
	[ "$passes" -eq 1 ] || { echo "unexpected janitor passes: $passes" >&2; exit 1; }
	echo "$d $ms $from $to"
}
# p99 LOGPREFIX FROM TO: p99 latency (ms) of the transactions of pgbench's
# per-transaction logs that ended within [FROM, TO] (epoch seconds)
p99() {
	cat "$1".* | awk -v from="$2" -v to="$3" '{ t = $5 + $6 / 1e6; if (t >= from && t <= to) print $3 / 1000 }' |
		sort -g | awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.3f %d\n", v[i], NR }'
}
claim_load() {  # claim_load SECONDS LOGPREFIX: 8 clients, new keys and claim+complete
	pgbench -n -M prepared -c 8 -j 2 -T "$1" --log --log-prefix="$2" \
		-f "$here/new.pgb" -f "$here/cycle.pgb" >/dev/null 2>&1
}

echo "idem_gate janitor benchmark: batch_size $BATCH, $ROUNDS rounds, $EXPIRED expired + $LIVE live rows"

# 1. deletion rate of a worker pass (one transaction per batch), no other load
rates=()
for r in $(seq "$ROUNDS"); do
	load "$EXPIRED" "$LIVE"
	read -r n ms _ _ < <(worker_pass)
	[ "$n" -eq "$EXPIRED" ] || { echo "the pass deleted $n rows, not $EXPIRED" >&2; exit 1; }
	rate=$(echo "$n / ($ms / 1000)" | bc -l)
	printf '  deletion round %d: %d rows in %.0f ms = %.0f rows/s\n' "$r" "$n" "$ms" "$rate"
	rates+=("$rate")
done
rate=$(printf '%s\n' "${rates[@]}" | median)
result "1. deletion rate, rows/s (median)" "$(printf '%.0f' "$rate")" ">= 100000" "$(ge "$rate" 100000 && echo 1 || echo 0)"

# 2. claim p99 during a pass vs with no janitor: per round, a baseline run,
#    then a run with a worker pass started 5 s in; p99 of the transactions
#    that ended during the pass vs of the baseline's after its first 5 s
ratios=()
for r in $(seq "$ROUNDS"); do
	load "$EXPIRED" "$LIVE"
	t0=$(date +%s.%N)
	claim_load "$P99_SECS" "$DIR/base$r"
	read -r base nb < <(p99 "$DIR/base$r" "$(echo "$t0 + 5" | bc -l)" 1e12)
	claim_load "$P99_SECS" "$DIR/jan$r" &
	bg=$!
	sleep 5
	read -r n ms from to < <(worker_pass)
	wait "$bg"
	read -r during nd < <(p99 "$DIR/jan$r" "$from" "$to")
	# the pass goes on after the claims stop: a step that took a batch of a
	# tenth for its last (the defect fixed in 1.3) leaves rows behind
	[ "$n" -eq "$EXPIRED" ] || { echo "the pass deleted $n rows, not $EXPIRED" >&2; exit 1; }
	ratio=$(echo "$during / $base" | bc -l)
	printf '  p99 round %d: %.2f ms with no janitor (%d tx), %.2f ms during a %.0f ms pass deleting %d rows (%d tx): ratio %.2f\n' \
		"$r" "$base" "$nb" "$during" "$ms" "$n" "$nd" "$ratio"
	le "$to" "$(echo "$t0" + "$P99_SECS" + "$P99_SECS" | bc -l)" ||
		echo "  (the pass outlasted the load: raise JANITOR_P99_SECONDS)"
	ratios+=("$ratio")
	rm -f "$DIR"/base"$r".* "$DIR"/jan"$r".*
done
ratio=$(printf '%s\n' "${ratios[@]}" | median)
result "2. claim p99 during pass / without (median)" "$(printf '%.2f' "$ratio")" "<= 1.25" "$(le "$ratio" 1.25 && echo 1 || echo 0)"

# 3. idle pass: janitor_run() repeatedly in one session (the worker's code
#    path and cached plans, in the caller's transaction), median latency
idle() {
	load 0 "$1"
	pgbench -n -c 1 -T "$IDLE_SECS" --log --log-prefix="$DIR/idle$1" -f "$here/pass.pgb" >/dev/null 2>&1
	cat "$DIR/idle$1".* | awk '{ print $3 / 1000 }' | median
	echo "$(cat "$DIR/idle$1".* | wc -l)"
	rm -f "$DIR/idle$1".*
}
if [ "$BIG" -gt 0 ]; then
	{ read -r small_ms; read -r small_n; } < <(idle "$SMALL")
	echo "  loading $BIG rows..."
	{ read -r big_ms; read -r big_n; } < <(idle "$BIG")
	ratio=$(echo "$big_ms / $small_ms" | bc -l)
	printf '  idle pass: %.3f ms at %d rows (median of %d), %.3f ms at %d rows (median of %d)\n' \
		"$small_ms" "$SMALL" "$small_n" "$big_ms" "$BIG" "$big_n"
	result "3. idle pass ${BIG} rows / ${SMALL} rows" "$(printf '%.2f' "$ratio")" "<= 2" "$(le "$ratio" 2 && echo 1 || echo 0)"
fi

# 4. steady claim/complete/expire cycle: retention 5 s, naptime 1 s, 8
#    clients of claim+complete; the table's total size sampled every
#    SAMPLE_SECS; it levels off if its size at the end is within 10% of its
#    largest size over the first half of the run
if [ "$CYCLE_SECS" -gt 0 ]; then
	q -c "TRUNCATE idem_gate.claims" -c "VACUUM ANALYZE idem_gate.claims"
	q -c "ALTER SYSTEM SET idem_gate.retention = '5s'" -c "ALTER SYSTEM SET idem_gate.failed_retention = '5s'" \
		-c "ALTER SYSTEM SET idem_gate.naptime = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
	pgbench -n -M prepared -c 8 -j 2 -T "$CYCLE_SECS" -f "$here/cycle.pgb" >"$DIR/cycle.out" 2>&1 &
	bg=$!
	sizes=()
	echo "  cycle: seconds, total size (MB), live rows (est.), dead rows, autovacuums, janitor deletions"
	for s in $(seq "$SAMPLE_SECS" "$SAMPLE_SECS" "$CYCLE_SECS"); do
		sleep "$SAMPLE_SECS"
		row=$(q -F ' ' -c "SELECT pg_total_relation_size('idem_gate.claims'), n_live_tup, n_dead_tup, autovacuum_count,
			(SELECT deleted_completed FROM idem_gate.stats_counters())
			FROM pg_stat_user_tables WHERE relid = 'idem_gate.claims'::regclass")
		read -r size live dead av del <<<"$row"
		sizes+=("$size")
		printf '  %6d %10.1f %10d %10d %4d %12d\n' "$s" "$(echo "$size / 1048576" | bc -l)" "$live" "$dead" "$av" "$del"
	done
	wait "$bg"
	tps=$(awk '/^tps = / { print $3 }' "$DIR/cycle.out")
	half=$(( ${#sizes[@]} / 2 ))
	firstmax=$(printf '%s\n' "${sizes[@]:0:$half}" | sort -g | tail -1)
	last=${sizes[-1]}
	growth=$(echo "$last / $firstmax" | bc -l)
	printf '  cycle load: %.0f tps; size at end / largest size in the first half: %.2f\n' "$tps" "$growth"
	result "4. size at end / max size in first half" "$(printf '%.2f' "$growth")" "<= 1.10" "$(le "$growth" 1.10 && echo 1 || echo 0)"
fi

printf '\n%-44s %16s %14s %s\n' target measured goal result
printf '%s\n' "${results[@]}"
