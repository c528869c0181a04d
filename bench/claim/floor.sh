#!/usr/bin/env bash
# The duplicate path against its floors, side by side in one run:
#   duplicate claims of completed keys (idem_claim, pgbench -M prepared, 8
#   clients) against pgbench's SELECT 1 (the protocol's own cost per call)
#   and against Redis SET key v NX EX 3600 (Debian's redis-server, with
#   redis-benchmark -c 8 on random keys): the in-memory lock people put in
#   front of their workflows.  Rounds alternate; then a perf profile of the
#   duplicate path (BENCH_PERF=0 skips it).
#   BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_PORT (55437), REDIS_PORT (56379)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
PORT=${BENCH_PORT:-55437}
RPORT=${REDIS_PORT:-56379}

# Redis and perf too, with no service started or left enabled
"$ROOT/scripts/deps.sh" --bench
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_bench.XXXXXX)
chmod 755 "$DIR"
cleanup() {
	redis-cli -h 127.0.0.1 -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
	"$ROOT/scripts/cluster.sh" stop "$DIR"
	rm -rf "$DIR"
}
trap cleanup EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "idem_gate.naptime = '1d'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
psql -X -q -v ON_ERROR_STOP=1 -f "$here/setup.sql" >/dev/null
psql -X -q -c "VACUUM ANALYZE idem_gate.claims" >/dev/null
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--dir "$DIR" --logfile "$DIR/redis.log" >/dev/null
for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo 'SELECT 1;' >"$DIR/select1.pgb"
tps() { pgbench -n -M prepared -c 8 -j 2 -T "$SECS" -f "$1" 2>&1 | awk '/^tps = / { print $3 }'; }
rps() {
	redis-benchmark -h 127.0.0.1 -p "$RPORT" -c 8 -n $((SECS * 40000)) -r 100000 -q \
		SET 'key:__rand_int__' v NX EX 3600 2>/dev/null |
		tr '\r' '\n' | sed -nE 's/.*: ([0-9.]+) requests per second.*/\1/p' | tail -1
}
dup=0 sel=0 red=0 rounds=""
for r in $(seq "$ROUNDS"); do
	d=$(tps "$here/idem_dup.pgb")
	s=$(tps "$DIR/select1.pgb")
	x=$(rps)
	dup=$(echo "$dup + $d" | bc -l); sel=$(echo "$sel + $s" | bc -l); red=$(echo "$red + $x" | bc -l)
	rounds="$rounds $(printf '%.2f/%.2f' "$(echo "$d / $s" | bc -l)" "$(echo "$d / $x" | bc -l)")"
done
printf 'duplicate claims %.0f/s, SELECT 1 %.0f/s, Redis SET NX EX %.0f/s (8 clients, %d rounds of %ds)\n' \
	"$(echo "$dup / $ROUNDS" | bc -l)" "$(echo "$sel / $ROUNDS" | bc -l)" "$(echo "$red / $ROUNDS" | bc -l)" "$ROUNDS" "$SECS"
printf 'duplicate / SELECT 1: %.2f (goal >= 0.75); duplicate / Redis: %.2f (rounds dup/select1 dup/redis:%s)\n' \
	"$(echo "$dup / $sel" | bc -l)" "$(echo "$dup / $red" | bc -l)" "$rounds"

if [ "${BENCH_PERF:-1}" = 1 ] && command -v perf >/dev/null; then
	pgbench -n -M prepared -c 1 -T 12 -f "$here/idem_dup.pgb" >/dev/null 2>&1 &
	sleep 2
	pid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' LIMIT 1")
	perf record -q -g -p "$pid" -o "$DIR/perf.data" -- sleep 6 >/dev/null 2>&1 || true
	wait
	echo
	echo "perf: where one backend's time goes on the duplicate path (by shared object, then idem_gate's functions)"
	# flat tables: without -g none, the call chains recorded with -g print
	# under each line, as raw addresses in Debian's stripped postgres
	perf report -i "$DIR/perf.data" --no-children -g none --sort dso --stdio 2>/dev/null |
		grep -E '^ +[0-9.]+%' | head -8
	perf report -i "$DIR/perf.data" --no-children -g none --sort sym --dsos idem_gate.so --stdio 2>/dev/null |
		grep -E '^ +[0-9.]+%' | head -10
fi
