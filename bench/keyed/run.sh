#!/usr/bin/env bash
# Keyed against plain claims, side by side on one throwaway cluster: new
# keys and duplicates of one workflow whose policy says keyed and of one
# that does not, in alternating rounds (pgbench -M prepared, 8 clients,
# synchronous_commit off).  Keyed claims compute one HMAC-SHA256 per
# listed secret, and with more than one listed a first claim looks for the
# key under the others; the goal is within 10%.  A third script shows what
# one HMAC costs by itself: the plain claim with one HMAC-SHA256 of the
# same message and a 32-byte key computed beside it in the same statement
# (pgcrypto's hmac(), which uses the same OpenSSL as PostgreSQL's
# common/hmac.h), so "keyed/plain" can be read against "plain+HMAC/plain".
# A fourth is the keyed claim's floor: a plain workflow (swf) whose keys
# have the stored shape of a keyed one ('s1:' and 64 hex digits of a
# SHA-256 of the key, computed in the statement by PostgreSQL's sha256()):
# the same work, a hash and a long random key in the primary key, done the
# cheapest way SQL allows; "keyed/shaped" is what the gate adds to it.
#   BENCH_SECONDS (10), BENCH_ROUNDS (4), BENCH_SECRETS (1: secrets listed;
#   2 shows a rotation, where a duplicate under the older secret is probed
#   twice), PG_CONFIG (pg_config on the PATH: the PostgreSQL that idem_gate
#   is installed into and whose server, psql and pgbench run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-4}
NSECRETS=${BENCH_SECRETS:-1}
PORT=${BENCH_PORT:-55436}

PG_CONFIG=${PG_CONFIG:-pg_config}
export PG_CONFIG
BIN=$("$PG_CONFIG" --bindir)
export PATH=$BIN:$PATH

"$ROOT/scripts/deps.sh"
make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null &&
	make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null
DIR=$(mktemp -d /tmp/idem_gate_bench_keyed.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/scripts/cluster.sh" stop "$DIR"; rm -rf "$DIR"' EXIT

# the secrets: made before the server starts, readable by it alone
secrets=$DIR/secrets
for i in $(seq "$NSECRETS" -1 1); do
	echo "s$i $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
done > "$secrets"
chown postgres "$secrets"
chmod 600 "$secrets"
"$ROOT/scripts/cluster.sh" start "$DIR" "$PORT" "shared_buffers = '1GB'" \
	"max_wal_size = '8GB'" "checkpoint_timeout = '30min'" "idem_gate.secret_file = '$secrets'"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"; }

# 100,000 completed keys in each workflow for the duplicates; with two
# secrets, the keyed ones under the older (the second probe's case)
q -c "CREATE EXTENSION idem_gate" -c "CREATE EXTENSION pgcrypto" \
	-c "INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('kwf', true)"
# (a thousand keys a transaction)
q -c "DO \$\$ BEGIN FOR b IN 0..99 LOOP
	PERFORM idem_complete(k, w, NULL, '{\"action_id\":\"inv_1\"}')
	  FROM (SELECT 'dup_' || g AS k, w, idem_claim('dup_' || g, w)
	        FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g,
	             unnest(ARRAY['wf', 'kwf']) w) s;
	PERFORM idem_complete(k, 'swf', NULL, '{\"action_id\":\"inv_1\"}')
	  FROM (SELECT k, idem_claim(k, 'swf')
	        FROM (SELECT 's1:' || encode(sha256(convert_to('dup_' || g, 'UTF8')), 'hex') AS k
	                FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g) g) s;
	COMMIT;
END LOOP; END \$\$"
if [ "$NSECRETS" -gt 1 ]; then
	{ echo "s$((NSECRETS + 1)) $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"; cat "$secrets"; } > "$secrets.new"
	chown postgres "$secrets.new"; chmod 600 "$secrets.new"; mv "$secrets.new" "$secrets"
	q -c "SELECT pg_reload_conf()" >/dev/null; sleep 1
fi
q -c "VACUUM ANALYZE idem_gate.claims"
q -c "SELECT secret_id, file_order, claims FROM idem_gate.secrets" | sed 's/^/# secrets: /'

for wf in wf kwf; do
	printf '\\set k random(1, 9000000000000)\nSELECT idem_claim('"'"'evt_'"'"' || :k, '"'"'%s'"'"', '"'"'15 minutes'"'"');\n' "$wf" > "$DIR/new_$wf.pgb"
	printf '\\set k random(1, 100000)\nSELECT idem_claim('"'"'dup_'"'"' || :k, '"'"'%s'"'"', '"'"'15 minutes'"'"');\n' "$wf" > "$DIR/dup_$wf.pgb"
done
# the plain claim and, beside it, one HMAC-SHA256 of "kwf" 0x00 key, the
# message a keyed claim of kwf hashes
hkey=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
cat > "$DIR/new_hwf.pgb" <<EOF
\set k random(1, 9000000000000)
SELECT idem_claim('evt_' || :k, 'wf', '15 minutes'), hmac(convert_to('kwf', 'UTF8') || '\x00'::bytea || convert_to('evt_' || :k, 'UTF8'), '\x$hkey'::bytea, 'sha256');
EOF
cat > "$DIR/dup_hwf.pgb" <<EOF
\set k random(1, 100000)
SELECT idem_claim('dup_' || :k, 'wf', '15 minutes'), hmac(convert_to('kwf', 'UTF8') || '\x00'::bytea || convert_to('dup_' || :k, 'UTF8'), '\x$hkey'::bytea, 'sha256');
EOF
for kind in new:evt:9000000000000 dup:dup:100000; do
	IFS=: read -r name prefix range <<<"$kind"
	printf '\\set k random(1, %s)\nSELECT idem_claim('"'"'s1:'"'"' || encode(sha256(convert_to('"'"'%s_'"'"' || :k, '"'"'UTF8'"'"')), '"'"'hex'"'"'), '"'"'swf'"'"', '"'"'15 minutes'"'"');\n' \
		"$range" "$prefix" > "$DIR/${name}_swf.pgb"
done
tps() {
	PGOPTIONS="-c synchronous_commit=off" pgbench -n -M prepared -c 8 -j 2 -T "$SECS" \
		-f "$1" postgres 2>&1 | awk '/^tps = / { print $3 }'
}
ratio() { printf '%.3f' "$(echo "$1 / $2" | bc -l)"; }

echo "keyed (kwf, $NSECRETS secret(s) when claimed) against plain (wf);" \
	"pgbench -M prepared -c 8 -j 2 -T $SECS, $ROUNDS rounds"
declare -A sum hsum ssum
for r in $(seq "$ROUNDS"); do
	for kind in new dup; do
		if [ $((r % 2)) = 1 ]; then
			p=$(tps "$DIR/${kind}_wf.pgb"); k=$(tps "$DIR/${kind}_kwf.pgb"); h=$(tps "$DIR/${kind}_hwf.pgb"); f=$(tps "$DIR/${kind}_swf.pgb")
		else
			f=$(tps "$DIR/${kind}_swf.pgb"); h=$(tps "$DIR/${kind}_hwf.pgb"); k=$(tps "$DIR/${kind}_kwf.pgb"); p=$(tps "$DIR/${kind}_wf.pgb")
		fi
		x=$(ratio "$k" "$p")
		y=$(ratio "$h" "$p")
		z=$(ratio "$k" "$f")
		sum[$kind]=$(echo "${sum[$kind]:-0} + $x" | bc -l)
		hsum[$kind]=$(echo "${hsum[$kind]:-0} + $y" | bc -l)
		ssum[$kind]=$(echo "${ssum[$kind]:-0} + $z" | bc -l)
		echo "round $r $kind plain=$p keyed=$k plain+HMAC=$h shaped=$f keyed/plain=$x plain+HMAC/plain=$y keyed/shaped=$z"
	done
done
for kind in new dup; do
	printf 'mean keyed/plain %s: %.3f   plain+HMAC/plain: %.3f   keyed/shaped: %.3f\n' "$kind" \
		"$(echo "${sum[$kind]} / $ROUNDS" | bc -l)" "$(echo "${hsum[$kind]} / $ROUNDS" | bc -l)" \
		"$(echo "${ssum[$kind]} / $ROUNDS" | bc -l)"
done
