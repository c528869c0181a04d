#!/usr/bin/env bash
# The managed edition's pg_tle package (managed/idem_gate.pg_tle.sql) on a
# server with pg_tle, as Amazon RDS and Aurora and Supabase offer it.  NOT
# part of the test command: pg_tle is not in Debian, so it is built here
# from its sources, which PG_TLE_SRC names (a source directory or a tarball);
# on a machine with internet access:
#   git clone --branch v1.5.2 https://github.com/aws/pg_tle /tmp/pg_tle
#   PG_TLE_SRC=/tmp/pg_tle test/managed/pg_tle.sh
# From a git mirror: git --git-dir=MIRROR archive --prefix=pg_tle/ v1.5.2 | gzip > /tmp/pg_tle.tar.gz
#
# PG_CONFIG names the PostgreSQL to build pg_tle into and to run (default
# /opt/pg15mg/usr/lib/postgresql/15/bin/pg_config, a private copy of
# Debian's 15): pg_tle is installed into its directories, so it must be a
# private copy, never the system's /usr/lib/postgresql (refused).
# PG_MAJOR=18 (or 17) instead builds, installs and runs in that major's
# Debian root (scripts/roots.sh, the test command's), with its compiler and
# headers.  Needs root (the server runs as user postgres).  What it does:
#   1. builds and installs pg_tle (make, make install) with PG_CONFIG;
#   2. starts a managed-like server on 127.0.0.1:PORT (IDEM_TLE_PORT, default
#      54352): shared_preload_libraries = 'pg_tle' (and pg_cron when that
#      PostgreSQL has it), no idem_gate;
#   3. as a role that owns the database, may create roles, is no superuser,
#      and is granted pgtle_admin (RDS's master user, Supabase's postgres),
#      runs docs/managed.md's run:pg-tle-install as written, and checks the
#      gate: claims (new, in_flight, completed, a duplicate of idem_claim_ex
#      with the receipt), resolve with an actor in the audit trail,
#      canonical JSON, janitor_run() (retention and a stuck-claim alert),
#      schedule_janitor() with pg_cron, the versions the package offers,
#      DROP EXTENSION (nothing left) and pgtle.uninstall_extension;
#   4. the model test (test/model/run.sh --edition managed) and both
#      editions side by side (test/managed/differential.py), each with the
#      managed edition installed through pg_tle (IDEM_MANAGED_VIA=pg_tle),
#      IDEM_TLE_SECONDS each (default 20).
# Ends with one line "N passed, N failed"; IDEM_TLE_KEEP=1 keeps the directory.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
export PG_CONFIG=${PG_CONFIG:-/opt/pg15mg/usr/lib/postgresql/15/bin/pg_config}
PORT=${IDEM_TLE_PORT:-54352}
SECONDS_EACH=${IDEM_TLE_SECONDS:-20}
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (got '$2', expected '$3')"; fi; }
die() { not_ok "$1"; exit 1; }
DIR= RDIR=
finish() {
	local rc=$?
	# a script that stops early with nothing failed (a syntax error further
	# down is only found when bash reaches it) must not pass: ended is set
	# on its last line
	[ -n "${ended:-}" ] || [ "$fail" -gt 0 ] || not_ok "the script stopped before its end (exit $rc)"
	if [ -n "$DIR" ]; then
		cluster stop "$DIR/m" >/dev/null 2>&1
		[ -z "$RDIR" ] || rm -rf --one-file-system "$RDIR$DIR"
		if [ -n "${IDEM_TLE_KEEP:-}" ]; then echo "kept $DIR"; else rm -rf "$DIR"; fi
	fi
	echo "$pass passed, $fail failed"
	# an explicit status: a bare exit in a trap keeps the status from before it
	[ "$fail" -eq 0 ] && exit 0
	exit 1
}
trap finish EXIT

[ "$(id -u)" = 0 ] || die "run as root (the server runs as user postgres)"
[ -n "${PG_TLE_SRC:-}" ] && [ -e "$PG_TLE_SRC" ] ||
	die "PG_TLE_SRC must name pg_tle's sources, a directory or a tarball (git clone https://github.com/aws/pg_tle)"
# in_pg CMD...: run CMD where that PostgreSQL lives (its Debian root, or here)
if [ -n "${PG_MAJOR:-}" ] && [ "$PG_MAJOR" != 15 ]; then
	RDIR=$("$ROOT/scripts/roots.sh" path "$PG_MAJOR") || die "no Debian root for PostgreSQL $PG_MAJOR"
	[ -d "$RDIR" ] || die "no Debian root for PostgreSQL $PG_MAJOR at $RDIR (scripts/roots.sh $PG_MAJOR makes it)"
	PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
	in_pg() { chroot "$RDIR" "$@"; }
else
	in_pg() { "$@"; }
fi
in_pg test -x "$PG_CONFIG" || die "no pg_config at $RDIR$PG_CONFIG"
BIN=$(in_pg "$PG_CONFIG" --bindir)
LIBDIR=$(in_pg "$PG_CONFIG" --pkglibdir)
SHAREDIR=$(in_pg "$PG_CONFIG" --sharedir)
in_pg test -f "$(in_pg "$PG_CONFIG" --includedir-server)/postgres.h" || die "no server headers for $RDIR$PG_CONFIG"
case "$RDIR$LIBDIR" in /usr/lib/postgresql/*)
	die "PG_CONFIG is the system's PostgreSQL ($LIBDIR): use a private copy" ;;
esac
MAJOR=$(in_pg "$BIN/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/')
DIR=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_pg_tle.XXXXXX")
chmod 755 "$DIR"
# scripts/cluster.sh for this PostgreSQL (in its root for PG_MAJOR)
cluster() { if [ -n "$RDIR" ]; then env -u PG_CONFIG PG_MAJOR=$MAJOR "$ROOT/scripts/cluster.sh" "$@"; else PG_CONFIG=$PG_CONFIG "$ROOT/scripts/cluster.sh" "$@"; fi; }

# --- 1. pg_tle, built from its sources into PG_CONFIG's PostgreSQL ---------------
# the sources go where the compiler runs: here, or the same path in the root
SRC=$RDIR$DIR/src
mkdir -p "$SRC"
if [ -d "$PG_TLE_SRC" ]; then cp -a "$PG_TLE_SRC/." "$SRC/"; else tar -xf "$PG_TLE_SRC" -C "$SRC" --strip-components=1; fi
# pg_tle's src/guc-file.l needs flex: where the root has none, the host's
# (the C it writes does not depend on the major), else Debian's package in the root
if ! in_pg sh -c 'command -v flex' >/dev/null; then
	if command -v flex >/dev/null; then
		flex -o "$SRC/src/guc-file.c" "$SRC/src/guc-file.l"
	else
		in_pg sh -c 'apt-get install -y -q flex || { apt-get update -q && apt-get install -y -q flex; }' >"$DIR/flex.log" 2>&1
	fi
fi
if in_pg sh -c "cd '$DIR/src' && make PG_CONFIG='$PG_CONFIG' with_llvm=no && make PG_CONFIG='$PG_CONFIG' with_llvm=no install" >"$DIR/build.log" 2>&1; then
	tle_version=$(sed -nE "s/^default_version *= *'([^']*)'.*/\1/p" "$SRC/pg_tle.control")
	ok "pg_tle $tle_version builds and installs into PostgreSQL $MAJOR ($RDIR$LIBDIR)"
else
	tail -30 "$DIR/build.log"
	die "pg_tle builds against PostgreSQL $MAJOR"
fi

# --- 2. the managed-like server --------------------------------------------------
preload=pg_tle
[ -f "$RDIR$LIBDIR/pg_cron.so" ] && preload="pg_tle, pg_cron"
cluster start "$DIR/m" "$PORT" \
	"shared_preload_libraries = '$preload'" "cron.database_name = 'idem_tle'" >"$DIR/start.log" 2>&1 ||
	{ cat "$DIR/start.log" "$DIR/m/server.log" 2>/dev/null; die "the server starts with pg_tle preloaded"; }
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
# the clients: that PostgreSQL's, or the host's for a root's server
[ -n "$RDIR" ] || export PATH="$BIN:$PATH"
su_sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
owner_sql() { psql -X -q -At -v ON_ERROR_STOP=1 -U idem_owner -d idem_tle "$@"; }
err_of() { psql -X -q -At -v VERBOSITY=sqlstate "$@" 2>&1 >/dev/null | sed -E 's/^(psql:.*:[0-9]+: )?ERROR: +//' | head -1; }
check "preloaded: $preload, not idem_gate" "$(su_sql -c 'SHOW shared_preload_libraries')" "$preload"
su_sql <<'SQL'
CREATE ROLE idem_owner LOGIN CREATEDB CREATEROLE;
CREATE DATABASE idem_tle OWNER idem_owner;
SQL
# what the service has done: pg_tle in the database, pgtle_admin for its owner role
su_sql -d idem_tle -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO idem_owner"
check "the owner is no superuser" "$(su_sql -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'idem_owner'")" "f"
check "... and may not use LANGUAGE C" \
	"$(err_of -U idem_owner -d idem_tle -c "CREATE FUNCTION f() RETURNS int AS 'idem_gate', 'idem_claim' LANGUAGE C")" "42501"

# --- 3. docs/managed.md's commands, as written, as the owner -----------------------
script=$(node "$ROOT/test/n8n/doc_block.mjs" "$ROOT/docs/managed.md" pg-tle-install) || die "docs/managed.md run:pg-tle-install"
echo "# docs/managed.md run:pg-tle-install: $(printf '%s' "$script" | tr '\n' ';')"
if (cd "$ROOT" && DATABASE_URL="postgresql://idem_owner@127.0.0.1:$PORT/idem_tle" bash -euo pipefail -c "$script") >"$DIR/install.log" 2>&1; then
	ok "docs/managed.md's pg_tle commands: the package installs and CREATE EXTENSION idem_gate_managed runs, as a role granted pgtle_admin"
else
	cat "$DIR/install.log"
	die "docs/managed.md's pg_tle commands, as a role granted pgtle_admin"
fi
check "the extension, its version and owner" \
	"$(su_sql -d idem_tle -c "SELECT extversion || ' ' || extowner::regrole FROM pg_extension WHERE extname = 'idem_gate_managed'")" "1.3 idem_owner"
check "its version function" "$(owner_sql -c 'SELECT idem_gate.managed_version()')" "1.3"
check "every function of the gate is a member of the extension" \
	"$(su_sql -d idem_tle -c "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE (n.nspname IN ('idem_gate', 'idem_gate_call') OR n.nspname = 'public' AND p.proname ~ '^idem_')
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')")" "0"
check "the versions the package offers (no update path yet)" \
	"$(owner_sql -c "SELECT string_agg(version, ',' ORDER BY version) FROM pgtle.available_extension_versions() WHERE name = 'idem_gate_managed'")" "1.3"

# the gate, as the owner
check "idem_claim: new, then in_flight" \
	"$(owner_sql -c "SELECT idem_claim('k1', 'tle')" -c "SELECT idem_claim('k1', 'tle')")" "$(printf 'new\nin_flight')"
check "idem_complete, then the key is completed" \
	"$(owner_sql -c "SELECT idem_complete('k1', 'tle', NULL, '{\"id\": \"r-1\"}')" -c "SELECT idem_claim('k1', 'tle')")" "$(printf 't\ncompleted')"
token=$(owner_sql -c "SELECT token FROM idem_claim_ex('k2', 'tle', NULL, 'fp', 'run-1', '{\"a\": 1}')")
check "idem_claim_ex: a token" "$([ -n "$token" ] && [ "$token" -gt 0 ] && echo yes)" "yes"
owner_sql -c "SELECT idem_complete('k2', 'tle', $token, '{\"id\": \"r-2\"}')" >/dev/null
check "a duplicate delivery: completed, with the receipt" \
	"$(owner_sql -c "SELECT outcome || ' ' || (result ->> 'id') FROM idem_claim_ex('k2', 'tle', NULL, 'fp', 'run-2', '{\"a\": 1}')")" "completed r-2"
token=$(owner_sql -c "SELECT token FROM idem_claim_ex('k3', 'tle')")
owner_sql -c "SELECT idem_fail('k3', 'tle', $token, 'crashed after the side effect', false)" >/dev/null
check "idem_resolve with an actor: completed, and the audit trail names the actor" \
	"$(owner_sql -c "SELECT idem_resolve('k3', 'tle', 'completed', '{\"by\": \"ops\"}', 'checked the PSP', 'ann')" \
		-c "SELECT state FROM idem_status('k3', 'tle')" \
		-c "SELECT actor || ' ' || action || ' ' || state_before || '->' || state_after FROM idem_gate.audit WHERE key = 'k3' ORDER BY id DESC LIMIT 1")" \
	"$(printf 'completed\ncompleted\nann resolve needs_review->completed')"
check "canonical JSON (RFC 8785): members sorted, numbers in their shortest form" \
	"$(owner_sql -c "SELECT idem_canonical('{\"b\": 1, \"a\": [1.0, 2e1, \"\\u00e9\"]}'::jsonb)")" '{"a":[1,20,"é"],"b":1}'
check "... the same hash for the same document in another order" \
	"$(owner_sql -c "SELECT idem_hash('{\"b\": 1, \"a\": 2}'::jsonb) = idem_hash('{\"a\": 2, \"b\": 1}'::jsonb)")" "t"
# the janitor: a completed claim past its retention is deleted, a stuck one announced
owner_sql -c "INSERT INTO idem_gate.policies (workflow, retention, stuck_after) VALUES ('jan', '1 second', '1 second')" \
	-c "SELECT idem_claim('done', 'jan')" -c "SELECT idem_complete('done', 'jan', NULL, NULL)" -c "SELECT idem_claim('stuck', 'jan')" >/dev/null
sleep 1.5
check "janitor_run(): one deleted, one alert" \
	"$(owner_sql -c "SELECT deleted || ' ' || alerts FROM idem_gate.janitor_run()")" "1 1"
check "... the stuck claim is marked alerted, the completed one gone" \
	"$(owner_sql -c "SELECT string_agg(key || ' ' || (alerted_token = token), ',') FROM idem_gate.claims WHERE workflow = 'jan'")" "stuck true"
if [ "$preload" != pg_tle ]; then
	su_sql -d idem_tle -c "CREATE EXTENSION pg_cron" -c "GRANT USAGE ON SCHEMA cron TO idem_owner"
	check "schedule_janitor() with pg_cron: one job, as the owner" \
		"$(owner_sql -c "SELECT idem_gate.schedule_janitor() > 0" -c "SELECT username || ' ' || command FROM cron.job")" \
		"$(printf 't\nidem_owner SELECT idem_gate.janitor_run()')"
	owner_sql -c "SELECT cron.unschedule('idem_gate_janitor_idem_tle')" >/dev/null
fi
# the n8n recipe's role, as the README's block creates it, run by the owner
if (cd "$ROOT/test/n8n" && ./doc_grants.sh tle_n8n tle-pw) | owner_sql -f - >"$DIR/grants.log" 2>&1; then
	check "the n8n role's grants, given by the owner: it claims and completes" \
		"$(PGPASSWORD=tle-pw psql -X -q -At -U tle_n8n -d idem_tle -c "SELECT outcome FROM idem_claim_ex('n1', 'orders')" \
			-c "SELECT idem_complete('n1', 'orders', (SELECT token FROM idem_gate.claims WHERE key = 'n1'), NULL)")" "$(printf 'new\nt')"
else
	cat "$DIR/grants.log"; not_ok "the n8n role's grants (README run:n8n-role), given by the owner"
fi
check "DROP EXTENSION idem_gate_managed, as the owner" "$(owner_sql -c "DROP EXTENSION idem_gate_managed" 2>&1)" ""
check "... leaves no schema, function or table of the gate" \
	"$(su_sql -d idem_tle -c "SELECT (SELECT count(*) FROM pg_namespace WHERE nspname IN ('idem_gate', 'idem_gate_call'))
		+ (SELECT count(*) FROM pg_proc WHERE proname ~ '^idem_' AND pronamespace = 'public'::regnamespace)")" "0"
check "... and CREATE EXTENSION installs it afresh" \
	"$(owner_sql -c "CREATE EXTENSION idem_gate_managed" -c "SELECT idem_claim('k1', 'tle')")" "new"
check "pgtle.uninstall_extension, as the owner" \
	"$(owner_sql -c "DROP EXTENSION idem_gate_managed" -c "SELECT pgtle.uninstall_extension('idem_gate_managed')")" "t"

# --- 4. the model test and both editions side by side, through pg_tle -------------
chown -R postgres "$DIR"
IDEM_MANAGED_VIA=pg_tle bash "$ROOT/test/model/run.sh" --seconds "$SECONDS_EACH" --edition managed >"$DIR/model.log" 2>&1
rc=$?
tail -3 "$DIR/model.log" | sed 's/^/  /'
if [ $rc -eq 0 ] && grep -q '^1 passed, 0 failed' "$DIR/model.log"; then ok "the model test, managed edition through pg_tle"; else
	grep -B2 -A12 '^FAIL' "$DIR/model.log" | head -40; not_ok "the model test, managed edition through pg_tle"; fi
if [ -f "$RDIR$SHAREDIR/extension/idem_gate.control" ]; then
	IDEM_MANAGED_VIA=pg_tle /usr/bin/python3 "$here/differential.py" --seconds "$SECONDS_EACH" >"$DIR/diff.log" 2>&1
	rc=$?
	grep -E '^(CATALOG|DIFFERENT|  C:|  managed:|catalog:)' "$DIR/diff.log" | head -40 | sed 's/^/  /'
	tail -1 "$DIR/diff.log" | sed 's/^/  /'
	if [ $rc -eq 0 ]; then ok "both editions, the managed one through pg_tle: the same catalog and the same answers"; else
		not_ok "both editions, the managed one through pg_tle: the same catalog and the same answers"; fi
else
	not_ok "the C extension is not installed in $RDIR$SHAREDIR: make install PG_CONFIG=$PG_CONFIG, for the differential test"
fi
ended=1
