#!/usr/bin/env bash
# Claims per second through a Citus coordinator with two workers, against
# one server with idem_gate, with the same pgbench scripts, side by side:
#   new    a first claim of a new key (one write)
#   dup    a duplicate claim of a completed key (a read)
#   cycle  idem_claim_ex + idem_complete of a new key (two calls)
# and the CPU each node spent per call, from which the model of
# docs/citus.md estimates the throughput of N worker nodes.
#   BENCH_SECONDS (20) per run, BENCH_CLIENTS (8), BENCH_PORT (56811),
#   PG_CONFIG: a PostgreSQL with idem_gate and Citus installed (see
#   test/citus/ensure_citus.sh)
# Every server is private, on loopback, run as user postgres.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PG_CONFIG=${PG_CONFIG:-pg_config}
export CITUS_BASE=${CITUS_BASE:-$(mktemp -d /tmp/idem_citus_bench.XXXXXX)}
secs=${BENCH_SECONDS:-20}
clients=${BENCH_CLIENTS:-8}
COORD=${BENCH_PORT:-56811}
W1=$((COORD + 1))
W2=$((COORD + 2))
SOLO=$((COORD + 3))
. "$here/../../test/citus/lib.sh"
trap 'cluster_down "$COORD" "$W1" "$W2" "$SOLO"' EXIT

"$here/../../test/citus/ensure_citus.sh" >/dev/null
cluster_up "$COORD" "$W1" "$W2"
q "$COORD" "SELECT idem_gate.distribute()" >/dev/null
node_init "$SOLO" idem_gate; node_start "$SOLO"
q "$SOLO" "CREATE EXTENSION idem_gate"
cp "$here"/*.pgb "$CITUS_BASE/"
chmod 644 "$CITUS_BASE"/*.pgb
for p in "$COORD" "$SOLO"; do
	# the duplicates' keys: claimed and completed once
	q "$p" "SELECT count(idem_complete(k, 'bench_dup', NULL, '{}')) FROM (SELECT 'd' || i AS k, idem_claim('d' || i, 'bench_dup') FROM generate_series(1, 10000) i) s" >/dev/null
done

# node_cpu PORT: CPU ticks of the node's backends so far (sampled)
declare -A seen
sample() {
	local port pm pid t
	for port in "$@"; do
		pm=$(head -1 "$CITUS_BASE/n$port/postmaster.pid")
		for pid in $(pgrep -P "$pm"); do
			t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || continue
			seen["$port:$pid"]=$t
		done
	done
}
cpu_of() {
	local port=$1 k s=0
	for k in "${!seen[@]}"; do
		[ "${k%%:*}" = "$port" ] && s=$((s + seen[$k]))
	done
	echo "$s"
}

# bench PORT SCRIPT: tps; sets CPU_<port> per call (ms) for each node
results=()
bench() {
	local port=$1 script=$2 nodes calls tps hz out p
	if [ "$port" = "$SOLO" ]; then nodes=("$SOLO"); else nodes=("$COORD" "$W1" "$W2"); fi
	seen=()
	as_pg "$CITUS_BIN/pgbench" -n -M prepared -c "$clients" -j 2 -T "$secs" \
		-h "$CITUS_BASE" -p "$port" -f "$CITUS_BASE/$script.pgb" postgres >"$CITUS_BASE/pgbench.out" 2>&1 &
	local pid=$!
	while kill -0 "$pid" 2>/dev/null; do sample "${nodes[@]}"; sleep 0.5; done
	wait "$pid" || { cat "$CITUS_BASE/pgbench.out"; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$CITUS_BASE/pgbench.out" | head -1)
	calls=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$CITUS_BASE/pgbench.out")
	[ "$script" = cycle ] && calls=$((calls * 2))
	hz=$(getconf CLK_TCK)
	out="$tps"
	for p in "${nodes[@]}"; do
		out="$out $(awk -v t="$(cpu_of "$p")" -v n="$calls" -v hz="$hz" 'BEGIN { printf "%.3f", t * 1000 / hz / n }')"
	done
	echo "$out"
}

echo "idem_gate on Citus: $clients clients, $secs s per run, $(nproc) cores; CPU ms per call in brackets"
printf '%-7s %14s %14s %7s   %s\n' script single citus ratio "CPU/call: single | coordinator, worker 1, worker 2"
for script in new dup cycle; do
	s=$(bench "$SOLO" "$script")
	c=$(bench "$COORD" "$script")
	set -- $s; st=$1; scpu=$2
	set -- $c; ct=$1; ccpu=$2; w1cpu=$3; w2cpu=$4
	printf '%-7s %14.0f %14.0f %7.2f   %s | %s, %s, %s\n' "$script" "$st" "$ct" \
		"$(awk -v a="$ct" -v b="$st" 'BEGIN { print a / b }')" "$scpu" "$ccpu" "$w1cpu" "$w2cpu"
	echo "$script $st $ct $scpu $ccpu $w1cpu $w2cpu" >>"$CITUS_BASE/results"
done
echo
echo "model (docs/citus.md), per core of each node: c = CPU per call on the node the client"
echo "talks to (the coordinator), w = CPU per call on the node holding the key (the workers' sum);"
echo "one coordinator and N workers: min(1/c, N/w) calls/s; clients spread over all N nodes: N/(c+w)"
awk '{
	c = $5 / 1000; w = ($6 + $7) / 1000
	printf "%-6s c = %.3f ms, w = %.3f ms; one coordinator:", $1, c * 1000, w * 1000
	for (n = 2; n <= 16; n *= 2) printf " N=%d %.0f", n, (1 / c < n / w ? 1 / c : n / w)
	printf "; spread:"
	for (n = 2; n <= 16; n *= 2) printf " N=%d %.0f", n, n / (c + w)
	printf " (single server: %.0f)\n", 1000 / $4
}' "$CITUS_BASE/results"
