#!/usr/bin/env bash
# idem_gate end-to-end drills against a real n8n (NOT part of CI: it installs n8n).
#
#   test/n8n/e2e.sh                       # run as root on Debian 12 with PostgreSQL 15
#   N8N_VERSION=2.8.4 test/n8n/e2e.sh     # another n8n (default: the newest pin, 2.41.1)
#   test/n8n/e2e.sh --screenshots         # also refresh docs/img/n8n-*.png and check the
#                                         # editor's import route (Debian's chromium)
#   test/n8n/e2e.sh --editor              # the editor check only, no pictures
#   test/n8n/e2e-all.sh                   # every pinned version, one summary line
#   IDEM_EDITION=managed test/n8n/e2e.sh  # the managed edition (docs/managed.md), below
#   E2E_ONLY=1,2,janitor test/n8n/e2e.sh  # some drills only (setup is always done)
#
# It follows docs/n8n.md's "Gate a webhook" as written: every block marked
# <!-- run: NAME --> there is extracted (test/n8n/doc_block.mjs) and run, with
# the shell variables the docs tell the reader to set (N8N_URL,
# SIDE_EFFECT_URL, CHAT_WEBHOOK_URL) set to the test's addresses, and only
# the placeholders the docs name replaced (the password change-me, the
# credential's port, and the stuck-alert's '30 seconds'), so a documented
# command that stops working fails this test.  n8n starts with the docs'
# run:n8n-offline variables.  All on loopback:
#   1. installs the pinned n8n, and the Node it needs, into reusable caches
#      (test/n8n/install_n8n.sh); that Node is first on PATH for n8n only;
#   2. runs the documented install line (make ... install) from the repository,
#      into the PostgreSQL of PG_CONFIG (or PG_BIN, default the system 15);
#   3. starts a throwaway PostgreSQL 15 (user postgres, its own port) with the
#      documented postgresql.conf lines, runs the documented SQL (the database
#      app, the extension, the n8n role, the stuck-alert policy row with a
#      short stuck_after) and a 1 s janitor naptime;
#   4. runs the documented commands (the side effect's URL, n8n import and
#      publish) on a copy of the examples, imports the test-only workflows,
#      starts n8n on 127.0.0.1 with telemetry, version checks and templates
#      off, a local HTTP sink as the side effect's downstream, and runs the
#      documented try-it deliveries;
#   5. runs drills 1-14 (test/n8n/drills.mjs) and prints the table;
#   6. stops everything it started and removes its work directory
#      (IDEM_E2E_KEEP=1 keeps the directory with the logs).
#
# With idem_gate 1.2 it also sets up docs/n8n.md's "Operate the inbox" and
# "Alerts" as written (the operator role, the inbox and alerts workflows) and
# runs the inbox drills in headless Chromium (test/n8n/inbox-browser.mjs,
# puppeteer-core); test/n8n/browser.sh runs those alone.
#
# IDEM_EDITION=managed: the same examples, unchanged, against the managed
# edition, installed as docs/managed.md says.  The server preloads pg_cron
# (when the PostgreSQL of PG_BIN has it) and not idem_gate; no C extension is
# installed; a role that owns the database app, may create roles and is no
# superuser (the service's owner role: rds_superuser, Supabase's postgres)
# runs docs/managed.md's run:managed-install (psql -f managed/idem_gate.sql),
# and then, as that role, the same run:n8n-role (and run:operator-role) as
# above, the policy row of run:stuck-alert, and docs/managed.md's
# run:janitor-grant.  The janitor is the shipped
# examples/n8n/janitor-schedule.json, imported and published unchanged
# (docs/managed.md run:janitor-import); drill "janitor" checks that its
# passes ran in n8n and did their work (a completed claim past its retention
# deleted, a stuck claim announced on idem_gate_alert).  What the managed
# edition does not do (docs/managed.md) is skipped with the reason printed:
# drill 6's stuck-claim alert while n8n is down (no background worker; the
# janitor's schedule is down with n8n).  The inbox's run:operator-role runs
# with its ALTER ROLE ... SET idem_gate.workflow_acl line as docs/managed.md
# "Settings" says (idem_gate.set_workflow_acl()); were it refused: a failed row "operator-role", and
# the inbox and its drills are left out.
#
# Ports (override with env): PostgreSQL 54329, n8n 5688, n8n task broker 5689,
# sink 5690, chat sink 5691, the inbox's nginx 5692 (IDEM_E2E_PROXY_PORT).  Exit status: 0 when every drill passed.
set -euo pipefail

# --screenshots: also write docs/img/n8n-*.png with headless Debian chromium,
# and check the editor's import route; --editor: the check only
case "${1:-}" in
  --screenshots)
    export E2E_SCREENSHOT_DIR="$(cd "$(dirname "$0")/../.." && pwd)/docs/img" E2E_EDITOR_CHECK=1
    shift ;;
  --editor)
    export E2E_EDITOR_CHECK=1
    shift ;;
  --inbox-screenshots)
    # browser.sh --screenshots: only the inbox drills' pictures into docs/img
    export E2E_SCREENSHOT_DIR="$(cd "$(dirname "$0")/../.." && pwd)/docs/img" E2E_INBOX_SHOTS_ONLY=1
    shift ;;
esac

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

# the n8n under test: N8N_VERSION, by default the newest pin of install_n8n.sh
# (2.8.4 is the other one; e2e-all.sh runs both)
export N8N_VERSION="${N8N_VERSION:-$("$HERE/install_n8n.sh" --pins | awk '{print $NF}')}"
export N8N_CACHE="${N8N_CACHE:-/var/cache/idem_gate/n8n-$N8N_VERSION}"
# the PostgreSQL to install into and run: PG_BIN, else PG_CONFIG's bindir, else the system 15
if [ -z "${PG_BIN:-}" ]; then
  if [ -n "${PG_CONFIG:-}" ]; then PG_BIN=$("$PG_CONFIG" --bindir); else PG_BIN=/usr/lib/postgresql/15/bin; fi
fi
export PG_CONFIG="${PG_CONFIG:-$PG_BIN/pg_config}"   # the Makefile honours it
PSQL="$PG_BIN/psql"; [ -x "$PSQL" ] || PSQL=/usr/bin/psql
export E2E_PG_BIN="$PG_BIN"
export E2E_PGPORT="${IDEM_E2E_PGPORT:-54329}"
export E2E_N8N_PORT="${IDEM_E2E_N8N_PORT:-5688}"
export E2E_BROKER_PORT="${IDEM_E2E_BROKER_PORT:-5689}"
export E2E_SINK_PORT="${IDEM_E2E_SINK_PORT:-5690}"
export E2E_CHAT_PORT="${IDEM_E2E_CHAT_PORT:-5691}"
export E2E_PROXY_PORT="${IDEM_E2E_PROXY_PORT:-5692}"
export E2E_DB=app            # the database docs/n8n.md creates
export E2E_ROLE=n8n_gate
export E2E_ROLE_PASSWORD="e2e-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
export E2E_STUCK_AFTER="${IDEM_E2E_STUCK_AFTER:-5 seconds}"
# the edition under test: c (the extension) or managed (managed/idem_gate.sql)
export E2E_EDITION="${IDEM_EDITION:-c}"
case "$E2E_EDITION" in c|managed) ;; *) echo "IDEM_EDITION: c or managed, not $E2E_EDITION" >&2; exit 2 ;; esac

log() { printf '[e2e] %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || { echo "run as root (PostgreSQL runs as user postgres)" >&2; exit 2; }

# --- 1. n8n --------------------------------------------------------------------
"$HERE/install_n8n.sh" >&2
export N8N_BIN="$N8N_CACHE/node_modules/.bin/n8n"
# the directory of the node that n8n runs on (the system's for 2.8.4, the npm
# registry's Node 24 for 2.40 and later): first on PATH for n8n and its CLI only
E2E_N8N_NODE_DIR=$(cat "$N8N_CACHE/n8n-path")
export E2E_N8N_NODE_DIR
log "n8n $N8N_VERSION on node $("$E2E_N8N_NODE_DIR/node" --version) ($E2E_N8N_NODE_DIR)"

if [ -n "${E2E_EDITOR_CHECK:-}" ]; then
  command -v chromium >/dev/null 2>&1 || apt-get install -y chromium >&2
  export PLAYWRIGHT_CORE_DIR="${PLAYWRIGHT_CORE_DIR:-/var/cache/idem_gate/playwright-core}"
  if [ ! -d "$PLAYWRIGHT_CORE_DIR/node_modules/playwright-core" ]; then
    mkdir -p "$PLAYWRIGHT_CORE_DIR"
    (cd "$PLAYWRIGHT_CORE_DIR" && [ -f package.json ] || echo '{"private":true}' > package.json
     cd "$PLAYWRIGHT_CORE_DIR" && npm install --no-audit --no-fund --loglevel=error playwright-core@1.65.1 >&2)
  fi
  export PLAYWRIGHT_CORE_DIR="$PLAYWRIGHT_CORE_DIR/node_modules/playwright-core"
  [ -z "${E2E_SCREENSHOT_DIR:-}" ] || mkdir -p "$E2E_SCREENSHOT_DIR"
fi

# --- documented blocks ----------------------------------------------------------
DOC="$ROOT/docs/n8n.md"
doc_block() { node "$HERE/doc_block.mjs" "$DOC" "$1"; }
# run a documented shell block as written.  This script runs as root, so sudo
# (where the docs write "$(command -v sudo)") is a pass-through here: the real
# one would reset the environment, PG_CONFIG included.
run_doc_sh() {
  local script; script=$(doc_block "$1") || exit 1
  log "docs/n8n.md run:$1: $(printf '%s' "$script" | tr '\n' ';')"
  bash -euo pipefail -c 'sudo() { "$@"; }'$'\n'"$script"
}

# --- 2. idem_gate, with the documented install line ------------------------------
if [ "$E2E_EDITION" = managed ]; then
  log "managed edition: no C extension is installed (docs/managed.md)"
else
  log "installing idem_gate into $("$PG_CONFIG" --pkglibdir)"
  (cd "$ROOT" && run_doc_sh install) >&2
fi

# --- work directory and cleanup -----------------------------------------------
WORK=$(mktemp -d /tmp/idem_gate_e2e.XXXXXX)
chmod 755 "$WORK"
export E2E_WORK="$WORK"
PGDATA="$WORK/pgdata"
PG_STARTED=0

cleanup() {
  local rc=$?
  set +e
  # n8n and the sink are children of drills.mjs, which stops them itself; this
  # catches what is left when the script is interrupted.
  if [ -f "$WORK/n8n.pid" ]; then
    local p; p=$(cat "$WORK/n8n.pid")
    # drills.mjs starts n8n as the leader of its own process group
    kill -TERM -- "-$p" 2>/dev/null && sleep 3; kill -KILL -- "-$p" 2>/dev/null
  fi
  if [ "$PG_STARTED" = 1 ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1
  fi
  if [ "${IDEM_E2E_KEEP:-0}" = 1 ]; then
    log "kept $WORK (logs: n8n.log, postgres.log)"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT INT TERM

# --- 3. throwaway PostgreSQL ---------------------------------------------------
log "starting PostgreSQL on 127.0.0.1:$E2E_PGPORT ($PGDATA)"
chown postgres "$WORK"
od -An -N12 -tx1 /dev/urandom | tr -d ' \n' > "$WORK/superuser.pw"
chown postgres "$WORK/superuser.pw"; chmod 600 "$WORK/superuser.pw"
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" --auth-host=scram-sha-256 --auth-local=trust \
  --pwfile="$WORK/superuser.pw" -E UTF8 --locale=C.UTF-8 >/dev/null
cat >> "$PGDATA/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $E2E_PGPORT
unix_socket_directories = '$WORK'
max_connections = 200
fsync = off
logging_collector = off
log_min_messages = warning
EOF
if [ "$E2E_EDITION" = managed ]; then
  # a managed-like server: pg_cron preloaded where this PostgreSQL has it, as
  # the services offer it (test/managed/run.sh), idem_gate not
  if [ -f "$("$PG_CONFIG" --pkglibdir)/pg_cron.so" ]; then
    printf "shared_preload_libraries = 'pg_cron'\ncron.database_name = '%s'\n" "$E2E_DB" >> "$PGDATA/postgresql.conf"
  else
    log "no pg_cron in $("$PG_CONFIG" --pkglibdir): nothing preloaded"
  fi
else
  # the documented lines (shared_preload_libraries, idem_gate.database)
  doc_block postgresql.conf >> "$PGDATA/postgresql.conf"
fi
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w start >/dev/null
PG_STARTED=1
export PGHOST="$WORK" PGPORT="$E2E_PGPORT" PGUSER=postgres
export E2E_PGDATA="$PGDATA"
psql() { runuser -u postgres -- env PGHOST="$WORK" PGPORT="$E2E_PGPORT" "$PSQL" -X -v ON_ERROR_STOP=1 -q "$@"; }

if [ "$E2E_EDITION" = managed ]; then
  # what a service hands out: a database and its owner, who may create roles
  # and databases and is no superuser; as that role, docs/managed.md's install
  export E2E_OWNER=idem_owner
  psql -d postgres -c "CREATE ROLE $E2E_OWNER LOGIN CREATEDB CREATEROLE" -c "CREATE DATABASE $E2E_DB OWNER $E2E_OWNER"
  MDOC="$ROOT/docs/managed.md"
  script=$(node "$HERE/doc_block.mjs" "$MDOC" managed-install) || exit 1
  log "docs/managed.md run:managed-install: $script"
  (cd "$ROOT" && runuser -u postgres -- env DATABASE_URL="postgresql:///$E2E_DB?host=$WORK&port=$E2E_PGPORT&user=$E2E_OWNER" \
    PATH="$PG_BIN:$PATH" bash -euo pipefail -c "$script") >/dev/null
  [ "$(psql -d "$E2E_DB" -Atc "SELECT rolsuper FROM pg_roles WHERE rolname = '$E2E_OWNER'")" = f ] ||
    { echo "the managed edition's owner must be no superuser" >&2; exit 1; }
  log "managed edition $(psql -d "$E2E_DB" -Atc 'SELECT idem_gate.managed_version()') installed by $E2E_OWNER (no superuser); preloaded: $(psql -d "$E2E_DB" -Atc 'SHOW shared_preload_libraries')"
  # the documented SQL blocks from here on run as that role
  gate_psql() { psql -U "$E2E_OWNER" "$@"; }
else
  # the documented database and extension (connected to postgres, as a superuser)
  doc_block database > "$WORK/database.sql"
  chmod 644 "$WORK/database.sql"
  psql -d postgres -f "$WORK/database.sql"
  gate_psql() { psql "$@"; }
fi
# a short stuck_after makes drill 6's alert observable within seconds: the
# documented policy row (docs/n8n.md run:stuck-alert), with its '30 seconds'
# shortened, and a janitor pass every second
if [ "$E2E_EDITION" = managed ]; then
  # the policy row as documented (the janitor_run() passes read it); no
  # naptime: the janitor is n8n's schedule (janitor-schedule.json)
  doc_block stuck-alert > "$WORK/stuck-alert.sql.in"
  grep -q "'30 seconds'" "$WORK/stuck-alert.sql.in" || { echo "docs/n8n.md run:stuck-alert lost its '30 seconds'" >&2; exit 1; }
  sed "s/'30 seconds'/'$E2E_STUCK_AFTER'/" "$WORK/stuck-alert.sql.in" > "$WORK/stuck-alert.sql"
  chmod 644 "$WORK/stuck-alert.sql"
  log "docs/n8n.md run:stuck-alert, as $E2E_OWNER: $(tr '\n' ' ' < "$WORK/stuck-alert.sql")"
  gate_psql -d "$E2E_DB" -f "$WORK/stuck-alert.sql"
  export E2E_HAS_STUCK_AFTER=0
  export E2E_NO_ALERT_REASON="skipped: the managed edition has no background worker (docs/managed.md); its janitor is n8n's schedule, down with n8n; drill janitor checks the schedule's alerts"
elif [ "$(psql -d "$E2E_DB" -Atc "SELECT count(*) FROM pg_settings WHERE name = 'idem_gate.stuck_after'")" = 1 ]; then
  doc_block stuck-alert > "$WORK/stuck-alert.sql.in"
  grep -q "'30 seconds'" "$WORK/stuck-alert.sql.in" || { echo "docs/n8n.md run:stuck-alert lost its '30 seconds'" >&2; exit 1; }
  sed "s/'30 seconds'/'$E2E_STUCK_AFTER'/" "$WORK/stuck-alert.sql.in" > "$WORK/stuck-alert.sql"
  chmod 644 "$WORK/stuck-alert.sql"
  log "docs/n8n.md run:stuck-alert: $(tr '\n' ' ' < "$WORK/stuck-alert.sql")"
  psql -d "$E2E_DB" -f "$WORK/stuck-alert.sql"
  for g in idem_gate.naptime idem_gate.janitor_naptime idem_gate.interval; do
    if [ "$(psql -d "$E2E_DB" -Atc "SELECT count(*) FROM pg_settings WHERE name = '$g'")" = 1 ]; then
      psql -d "$E2E_DB" -c "ALTER SYSTEM SET $g = '1s'"
    fi
  done
  psql -d "$E2E_DB" -c "SELECT pg_reload_conf()" >/dev/null
  export E2E_HAS_STUCK_AFTER=1
else
  log "idem_gate.stuck_after does not exist (no background worker yet): drill 6 checks what it can"
  export E2E_HAS_STUCK_AFTER=0
fi

if [ "$(psql -d "$E2E_DB" -Atc "SELECT count(*) FROM pg_proc WHERE proname = 'idem_hash'")" = 0 ]; then
  echo "idem_hash is not installed: this idem_gate build lacks canonical JSON, which the examples use" >&2
  exit 1
fi

# --- 4. the n8n role: the documented block, with the documented password placeholder replaced
doc_block n8n-role > "$WORK/role.sql.in"
grep -q "'change-me'" "$WORK/role.sql.in" || { echo "docs/n8n.md run:n8n-role lost its 'change-me' placeholder" >&2; exit 1; }
sed "s/'change-me'/'$E2E_ROLE_PASSWORD'/" "$WORK/role.sql.in" > "$WORK/role.sql"
chmod 644 "$WORK/role.sql"
gate_psql -d "$E2E_DB" -f "$WORK/role.sql"
if [ "$E2E_EDITION" = managed ]; then
  # the janitor's schedule in n8n runs as the gate's credential: docs/managed.md's grant
  node "$HERE/doc_block.mjs" "$MDOC" janitor-grant > "$WORK/janitor-grant.sql"
  chmod 644 "$WORK/janitor-grant.sql"
  log "docs/managed.md run:janitor-grant, as $E2E_OWNER: $(tr '\n' ' ' < "$WORK/janitor-grant.sql")"
  gate_psql -d "$E2E_DB" -f "$WORK/janitor-grant.sql"
fi

# --- 4b. the operator role of the inbox (docs/n8n.md run:operator-role, idem_gate
# 1.2 and later): the documented block, with its password placeholder replaced
if [ "$(psql -d "$E2E_DB" -Atc "SELECT count(*) FROM pg_views WHERE schemaname = 'idem_gate' AND viewname = 'inbox'")" = 1 ]; then
  export E2E_INBOX_ROLE=n8n_inbox
  export E2E_INBOX_ROLE_PASSWORD="e2e-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  export E2E_INBOX_LOGIN_PASSWORD="e2e-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  doc_block operator-role > "$WORK/operator-role.sql.in"
  grep -q "'change-me'" "$WORK/operator-role.sql.in" || { echo "docs/n8n.md run:operator-role lost its 'change-me' placeholder" >&2; exit 1; }
  sed "s/'change-me'/'$E2E_INBOX_ROLE_PASSWORD'/" "$WORK/operator-role.sql.in" > "$WORK/operator-role.sql"
  chmod 644 "$WORK/operator-role.sql"
  log "docs/n8n.md run:operator-role: $(tr '\n' ' ' < "$WORK/operator-role.sql.in")"
  # idem_gate 1.3: the bulk decisions' grants (docs/n8n.md run:operator-role-bulk)
  operator_role_bulk() {
    if [ "$(psql -d "$E2E_DB" -Atc "SELECT count(*) FROM pg_proc WHERE proname = 'idem_resolve_many'")" != 0 ]; then
      doc_block operator-role-bulk | gate_psql -d "$E2E_DB" -f - >/dev/null
    fi
  }
  if [ "$E2E_EDITION" = managed ]; then
    # docs/managed.md, "Settings": the owner may not attach a setting to a
    # role, so the block's ALTER ROLE ... SET idem_gate.workflow_acl = on is
    # SELECT idem_gate.set_workflow_acl(role, true), as that page says
    sed -i -E "s/^( *)ALTER ROLE ([a-z_0-9]+) SET idem_gate\.workflow_acl = on;/\1SELECT idem_gate.set_workflow_acl('\2', true);/" "$WORK/operator-role.sql"
    grep -q "set_workflow_acl('n8n_inbox', true)" "$WORK/operator-role.sql" ||
      { echo "docs/n8n.md run:operator-role lost its ALTER ROLE n8n_inbox SET idem_gate.workflow_acl = on line" >&2; exit 1; }
    # as the owner, who is no superuser: a refusal is recorded as a failed
    # row (drills.mjs) and the inbox is left out, the other drills still run
    if gate_psql -d "$E2E_DB" -f "$WORK/operator-role.sql" >/dev/null 2>"$WORK/operator-role.err"; then
      operator_role_bulk
      export E2E_HAS_INBOX=1
    else
      cat "$WORK/operator-role.err" >&2
      export E2E_OPERATOR_ROLE_ERROR="$(grep -m1 ERROR "$WORK/operator-role.err")"
      export E2E_HAS_INBOX=0
    fi
  else
    gate_psql -d "$E2E_DB" -f "$WORK/operator-role.sql" >/dev/null
    operator_role_bulk
    export E2E_HAS_INBOX=1
  fi
  # the inbox drills drive Debian's chromium with puppeteer-core from the npm
  # registry (it downloads no browser)
  command -v chromium >/dev/null 2>&1 || apt-get install -y chromium >&2
  export PUPPETEER_CORE_DIR="${PUPPETEER_CORE_DIR:-/var/cache/idem_gate/puppeteer-core}"
  if [ ! -d "$PUPPETEER_CORE_DIR/node_modules/puppeteer-core" ]; then
    mkdir -p "$PUPPETEER_CORE_DIR"
    (cd "$PUPPETEER_CORE_DIR" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
     PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error puppeteer-core@24.40.0 >&2)
  fi
  # the inbox's sign-in proxy (examples/nginx/inbox.conf): Debian's nginx,
  # NGINX or on PATH, else unpacked from Debian's package into a cache
  # without installing it (an installed nginx starts a service on port 80)
  if [ -z "${NGINX:-}" ] && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    NGINX_CACHE=/var/cache/idem_gate/nginx
    if [ ! -x "$NGINX_CACHE/root/usr/sbin/nginx" ]; then
      mkdir -p "$NGINX_CACHE" && chmod 777 "$NGINX_CACHE"
      (cd "$NGINX_CACHE" && apt-get download nginx nginx-common >&2 && for f in nginx*.deb; do dpkg-deb -x "$f" root; done)
    fi
    export NGINX="$NGINX_CACHE/root/usr/sbin/nginx"
  fi
else
  log "idem_gate has no idem_gate.inbox (before 1.2): the inbox drills are skipped"
  export E2E_HAS_INBOX=0
fi

# --- 5-6. n8n, sink and drills ---------------------------------------------------
cd "$HERE"
if [ ! -d node_modules/pg ]; then npm ci --no-audit --no-fund --loglevel=error >&2; fi
node "$HERE/drills.mjs"
