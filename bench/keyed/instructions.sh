#!/usr/bin/env bash
# Instructions per keyed and per plain claim of several builds of
# idem_gate, counted by valgrind's callgrind: the same for the same build
# and input whatever else the machine does, where pgbench's rounds of
# bench/keyed/run.sh spread by tens of percent.  For each build: a fresh
# cluster with a secret file, N claims in a plain workflow (wf) and N in a
# keyed one (kwf) made completed, then a single-user backend (postgres
# --single) under callgrind runs N new-key claims, one statement each, and
# another N duplicates of the completed keys, in each workflow.  Prints
# instructions per statement (parsing and planning included) and
# plain/keyed, which reads as keyed/plain throughput would.
#   bench/keyed/instructions.sh REV [REV ...]   ("tree" = the work tree)
#   BENCH_N (5000), BENCH_SECRETS (1; 2: the keys were completed under the
#   older of two, as during a rotation, so a duplicate is probed twice and a
#   new key is looked for under the older secret too), PG_CONFIG
#   (pg_config on the PATH: each build is installed into that PostgreSQL
#   in turn, and the work tree's build again at the end)
# Needs valgrind (installed if missing).  About a minute per build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
N=${BENCH_N:-5000}
NSECRETS=${BENCH_SECRETS:-1}
PG_CONFIG=${PG_CONFIG:-pg_config}
[ $# -ge 1 ] || { echo "usage: $0 REV [REV ...]" >&2; exit 2; }

# valgrind too
"$ROOT/scripts/deps.sh" --bench
BIN=$("$PG_CONFIG" --bindir)
DIR=$(mktemp -d /tmp/idem_gate_keyed_instr.XXXXXX)
chmod 755 "$DIR"
chown postgres "$DIR"
PORT=${BENCH_PORT:-55438}
cleanup() {
	[ -f "$DIR/data/postmaster.pid" ] &&
		runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1
	make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

# the statements, one claim each, as a client sends them
for wf in wf kwf; do
	for g in $(seq 1 "$N"); do echo "SELECT idem_claim('evt_$g', '$wf', '15 minutes');"; done > "$DIR/new_$wf.sql"
	for g in $(seq 1 "$N"); do echo "SELECT idem_claim('dup_$g', '$wf', '15 minutes');"; done > "$DIR/dup_$wf.sql"
done

# secret ID: a line of the secret file
secret() { echo "$1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"; }

# count NAME KIND WF: instructions of one callgrind run of the single-user backend
count() {
	runuser -u postgres -- valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.$1.$2.$3" \
		"$BIN/postgres" --single -D "$DIR/data" -c synchronous_commit=off postgres \
		<"$DIR/$2_$3.sql" >"$DIR/$1.$2.$3.out" 2>&1
	if [ "$(grep -c '= "new"' "$DIR/$1.$2.$3.out")" != "$([ "$2" = new ] && echo "$N" || echo 0)" ] ||
		[ "$(grep -c '= "completed"' "$DIR/$1.$2.$3.out")" != "$([ "$2" = dup ] && echo "$N" || echo 0)" ]; then
		echo "$1 $2 $3: not every claim answered as expected:" >&2
		grep -E 'ERROR|= "' "$DIR/$1.$2.$3.out" | sort | uniq -c | head >&2
		return 1
	fi
	awk '/^summary:/ { print $2 }' "$DIR/cg.$1.$2.$3"
}

echo "instructions per claim, $N claims each, $NSECRETS secret(s) listed"
printf '%-10s %11s %11s %11s %11s %11s %11s\n' build "plain new" "keyed new" "new p/k" \
	"plain dup" "keyed dup" "dup p/k"
for rev in "$@"; do
	name=$rev
	src="$DIR/src-$name"
	mkdir -p "$src"
	if [ "$rev" = tree ]; then
		tar -C "$ROOT" --exclude=.git --exclude=node_modules -cf - . | tar -C "$src" -xf -
	else
		git -C "$ROOT" archive "$rev" | tar -C "$src" -xf -
	fi
	make -s -C "$src" PG_CONFIG="$PG_CONFIG" clean >/dev/null 2>&1 || true
	make -s -C "$src" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null 2>&1
	make -s -C "$src" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null

	rm -rf "$DIR/data"
	install -d -o postgres -m 700 "$DIR/data"
	runuser -u postgres -- "$BIN/initdb" -D "$DIR/data" >/dev/null 2>&1
	secrets=$DIR/data/idem_gate_secrets
	secret s1 > "$secrets"
	chown postgres "$secrets"
	chmod 600 "$secrets"
	cat >>"$DIR/data/postgresql.conf" <<EOF
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = '1h'
idem_gate.secret_file = 'idem_gate_secrets'
listen_addresses = ''
port = $PORT
unix_socket_directories = '$DIR'
EOF
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null
	"$BIN/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE EXTENSION idem_gate" \
		-c "INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('kwf', true)" \
		-c "SELECT count(idem_claim('dup_' || g, w, '15 minutes')) FROM generate_series(1, $N) g, unnest(ARRAY['wf', 'kwf']) w" \
		-c "UPDATE idem_gate.claims SET state = 'completed', completed_at = now(), updated_at = now(), result = '{}'" \
		-c "VACUUM ANALYZE idem_gate.claims" >/dev/null
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -w stop >/dev/null
	if [ "$NSECRETS" -gt 1 ]; then
		{ for i in $(seq "$NSECRETS" -1 2); do secret "s$i"; done; cat "$secrets"; } > "$secrets.new"
		chown postgres "$secrets.new"
		chmod 600 "$secrets.new"
		mv "$secrets.new" "$secrets"
	fi

	pn=$(count "$name" new wf)
	kn=$(count "$name" new kwf)
	pd=$(count "$name" dup wf)
	kd=$(count "$name" dup kwf)
	printf '%-10s %11d %11d %11.3f %11d %11d %11.3f\n' "$name" $((pn / N)) $((kn / N)) \
		"$(echo "$pn / $kn" | bc -l)" $((pd / N)) $((kd / N)) "$(echo "$pd / $kd" | bc -l)"
done
