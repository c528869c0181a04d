#!/usr/bin/env bash
# n8n driver suite: the example workflows' SQL run through node-postgres and
# pg-promise exactly as n8n's Postgres node runs it (single-query mode: all
# items in one multi-statement string), connected as a role that holds only the
# GRANT lines of docs/n8n.md.  Needs a running server reachable through the
# libpq variables (PGHOST, PGPORT, PGUSER superuser, PGDATABASE with idem_gate
# installed).  Installs node/npm when missing.  Ends with one line
# "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT/test/n8n" || exit 1

fail() { echo "not ok - $*"; echo "0 passed, 1 failed"; exit 1; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	{ apt-get update -qq && apt-get install -y -qq nodejs npm; } >/tmp/idem_n8n_apt.$$ 2>&1 ||
		{ cat /tmp/idem_n8n_apt.$$; rm -f /tmp/idem_n8n_apt.$$; fail "could not install nodejs and npm"; }
	rm -f /tmp/idem_n8n_apt.$$
fi
if ! { npm ci --no-audit --no-fund --loglevel=error >/tmp/idem_n8n_npm.$$ 2>&1 ||
	   npm install --no-audit --no-fund --loglevel=error >>/tmp/idem_n8n_npm.$$ 2>&1; }; then
	cat /tmp/idem_n8n_npm.$$; rm -f /tmp/idem_n8n_npm.$$
	fail "npm could not install the test dependencies (pg, pg-promise)"
fi
rm -f /tmp/idem_n8n_npm.$$

# the dedicated n8n role, with exactly the documented grants
export IDEM_N8N_ROLE="idem_n8n_ci_$$"
export IDEM_N8N_PASSWORD="ci-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
grants=$(./doc_grants.sh "$IDEM_N8N_ROLE") || fail "no GRANT block in docs/n8n.md"
drop_role() {
	psql -X -q -v ON_ERROR_STOP=0 \
		-c "DROP OWNED BY $IDEM_N8N_ROLE" -c "DROP ROLE IF EXISTS $IDEM_N8N_ROLE" >/dev/null 2>&1
}
trap drop_role EXIT
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE $IDEM_N8N_ROLE LOGIN PASSWORD '$IDEM_N8N_PASSWORD'" \
	-c "$grants" >/tmp/idem_n8n_psql.$$ 2>&1 ||
	{ cat /tmp/idem_n8n_psql.$$; rm -f /tmp/idem_n8n_psql.$$; fail "could not create the n8n role with the documented grants"; }
rm -f /tmp/idem_n8n_psql.$$

node queries.test.mjs
