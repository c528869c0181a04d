#!/usr/bin/env bash
# Instructions per claim of several builds of idem_gate, counted by
# valgrind's callgrind: the same for the same build and input whatever
# else the machine does, so a change of a percent shows where pgbench's
# rounds spread by ten.  For each build: a fresh cluster, N claims of
# one workflow made completed, then a single-user backend
# (postgres --single) under callgrind runs N new-key claims, one
# statement each, and another N duplicates of the completed keys.
# Prints instructions per statement (parsing and planning included, as a
# client's simple query pays them) and each build's ratio to the first.
#   bench/claim/instructions.sh REV [REV ...]   ("" or "tree" = the work tree)
#   BENCH_N (10000)
# PostgreSQL 15 (the host's); each build is installed into it in turn, and
# the work tree's build again at the end.  Needs valgrind (installed if
# missing).  About a minute per build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
N=${BENCH_N:-10000}
[ $# -ge 1 ] || { echo "usage: $0 REV [REV ...]" >&2; exit 2; }

# valgrind too
"$ROOT/scripts/deps.sh" --bench
BIN=$(pg_config --bindir)
DIR=$(mktemp -d /tmp/idem_gate_instr.XXXXXX)
chmod 755 "$DIR"
chown postgres "$DIR"
PORT=${BENCH_PORT:-55437}
cleanup() {
	[ -f "$DIR/data/postmaster.pid" ] &&
		runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1
	make -s -C "$ROOT" with_llvm=no install >/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

# the statements, one claim each, as a client sends them
for g in $(seq 1 "$N"); do echo "SELECT idem_claim('evt_$g', 'wf', '15 minutes');"; done > "$DIR/new.sql"
for g in $(seq 1 "$N"); do echo "SELECT idem_claim('dup_$g', 'wf', '15 minutes');"; done > "$DIR/dup.sql"

# count NAME WHICH: instructions of one callgrind run of the single-user backend
count() {
	runuser -u postgres -- valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.$1.$2" \
		"$BIN/postgres" --single -D "$DIR/data" -c synchronous_commit=off postgres \
		<"$DIR/$2.sql" >"$DIR/$1.$2.out" 2>&1
	if [ "$(grep -c '= "new"' "$DIR/$1.$2.out")" != "$([ "$2" = new ] && echo "$N" || echo 0)" ] ||
		[ "$(grep -c '= "completed"' "$DIR/$1.$2.out")" != "$([ "$2" = dup ] && echo "$N" || echo 0)" ]; then
		echo "$1 $2: not every claim answered as expected:" >&2
		grep -E 'ERROR|= "' "$DIR/$1.$2.out" | sort | uniq -c | head >&2
		return 1
	fi
	awk '/^summary:/ { print $2 }' "$DIR/cg.$1.$2"
}

first_new=
first_dup=
printf '%-10s %14s %14s %8s %8s\n' build "new/claim" "dup/claim" "new" "dup"
for rev in "$@"; do
	name=${rev:-tree}
	src="$DIR/src-$name"
	mkdir -p "$src"
	if [ -z "$rev" ] || [ "$rev" = tree ]; then
		tar -C "$ROOT" --exclude=.git --exclude=node_modules -cf - . | tar -C "$src" -xf -
	else
		git -C "$ROOT" archive "$rev" | tar -C "$src" -xf -
	fi
	make -s -C "$src" clean >/dev/null 2>&1 || true
	make -s -C "$src" with_llvm=no >/dev/null 2>&1
	make -s -C "$src" with_llvm=no install >/dev/null

	rm -rf "$DIR/data"
	install -d -o postgres -m 700 "$DIR/data"
	runuser -u postgres -- "$BIN/initdb" -D "$DIR/data" >/dev/null 2>&1
	cat >>"$DIR/data/postgresql.conf" <<EOF
shared_preload_libraries = 'idem_gate'
idem_gate.naptime = '1h'
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
EOF
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null
	psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE EXTENSION idem_gate" \
		-c "SELECT count(idem_claim('dup_' || g, 'wf', '15 minutes')) FROM generate_series(1, $N) g" \
		-c "UPDATE idem_gate.claims SET state = 'completed', completed_at = now(), updated_at = now(), result = '{}'" \
		-c "VACUUM ANALYZE idem_gate.claims" >/dev/null
	runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -w stop >/dev/null

	new=$(count "$name" new)
	dup=$(count "$name" dup)
	first_new=${first_new:-$new}
	first_dup=${first_dup:-$dup}
	printf '%-10s %14d %14d %8.3f %8.3f\n' "$name" $((new / N)) $((dup / N)) \
		"$(echo "$new / $first_new" | bc -l)" "$(echo "$dup / $first_dup" | bc -l)"
done
