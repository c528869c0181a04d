#!/usr/bin/env bash
# What a non-superuser owner of the extension's objects costs: the claim
# benchmark's new keys, duplicates and claim+complete cycles in two
# databases of one throwaway cluster, side by side in one run: "super",
# as CREATE EXTENSION leaves it (owned by the superuser), and "nolog",
# where every member object of the extension (tables, sequence, functions,
# views, types) was moved to one NOLOGIN role that is not a superuser
# (docs/security.md, "The owner of the extension's objects").
#   BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_PORT (55435)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
PORT=${BENCH_PORT:-55435}

"$ROOT/scripts/deps.sh"
make -s -C "$ROOT" with_llvm=no >/dev/null && make -s -C "$ROOT" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_bench_owner.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" "max_wal_size = '8GB'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

q -d postgres -c "CREATE ROLE idem_owner NOLOGIN" -c "CREATE DATABASE super" -c "CREATE DATABASE nolog"
for db in super nolog; do
	q -d "$db" -f "$here/setup.sql" >/dev/null
done
# every member object of the extension to the NOLOGIN role
q -d nolog >/dev/null <<'SQL'
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT pg_describe_object(d.classid, d.objid, 0) AS what, d.classid::regclass AS cls,
					d.objid
			   FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
			  WHERE e.extname = 'idem_gate' AND d.deptype = 'e' LOOP
		IF r.cls = 'pg_proc'::regclass THEN
			EXECUTE format('ALTER ROUTINE %s OWNER TO idem_owner', r.objid::regprocedure);
		ELSIF r.cls = 'pg_class'::regclass AND NOT EXISTS (
				SELECT 1 FROM pg_depend s WHERE s.classid = 'pg_class'::regclass
				   AND s.objid = r.objid AND s.deptype IN ('a', 'i')) THEN
			-- a table's own sequence (an identity's) follows its table
			EXECUTE format('ALTER TABLE %s OWNER TO idem_owner', r.objid::regclass);
		ELSIF r.cls = 'pg_type'::regclass AND (SELECT typtype FROM pg_type WHERE oid = r.objid) = 'e' THEN
			EXECUTE format('ALTER TYPE %s OWNER TO idem_owner', r.objid::regtype);
		END IF;
	END LOOP;
END $$;
GRANT USAGE, CREATE ON SCHEMA idem_gate TO idem_owner;
SQL
q -d nolog -c "SELECT count(*) AS objects_owned_by_idem_owner FROM pg_proc WHERE proowner = 'idem_owner'::regrole"
q -d nolog -c "SELECT idem_claim('probe', 'wf'), idem_gate.janitor_run() IS NOT NULL"

tps() {
	PGDATABASE=$2 PGOPTIONS="-c synchronous_commit=off" \
		pgbench -n -M prepared -c 8 -j 2 -T "$SECS" -f "$1" 2>&1 | awk '/^tps = / { print $3 }'
}
ratio() { printf '%.3f' "$(echo "$1 / $2" | bc -l)"; }

echo "$(pg_config --version); pgbench -M prepared -c 8 -j 2 -T $SECS, synchronous_commit off, $ROUNDS alternating rounds"
printf '%-16s %12s %12s %7s  %s\n' case super_tps nolog_tps ratio rounds
for f in idem_new idem_dup idem_cycle; do
	s_sum=0 n_sum=0 per=
	for r in $(seq "$ROUNDS"); do
		st=$(tps "$here/$f.pgb" super)
		nt=$(tps "$here/$f.pgb" nolog)
		s_sum=$(echo "$s_sum + $st" | bc -l)
		n_sum=$(echo "$n_sum + $nt" | bc -l)
		per="$per $(ratio "$nt" "$st")"
	done
	printf '%-16s %12.0f %12.0f %7s %s\n' "$f" "$(echo "$s_sum / $ROUNDS" | bc -l)" \
		"$(echo "$n_sum / $ROUNDS" | bc -l)" "$(ratio "$n_sum" "$s_sum")" "$per"
done
