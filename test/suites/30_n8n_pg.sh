#!/usr/bin/env bash
# n8n driver suite: the example workflows' SQL run through node-postgres and
# pg-promise exactly as n8n's Postgres node runs it (single-query mode: all
# items in one multi-statement string), connected as a role created by the
# README's documented block (CREATE ROLE and GRANT lines, run as written with
# the role name and password replaced).  It also runs the README's install
# line as written (into a staging DESTDIR) and checks that docs/n8n.md repeats
# both blocks unchanged.  Needs a running server reachable through the libpq
# variables (PGHOST, PGPORT, PGUSER superuser, PGDATABASE with idem_gate
# installed) and pg_config (PG_CONFIG, else on PATH).  Installs node/npm when
# missing.  Ends with one line "N passed, N failed".
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

passed=0

# the README's install line, as written, from the repository's top directory.
# This suite runs as root: sudo (written "$(command -v sudo)") is a
# pass-through here, since the real one would drop DESTDIR and PG_CONFIG.
install_block=$(node doc_block.mjs "$ROOT/README.md" install) || fail "no install block in README.md"
docs_install=$(node doc_block.mjs "$ROOT/docs/n8n.md" install) || fail "no install block in docs/n8n.md"
[ "$(printf '%s' "$install_block" | sed 's/ *#.*//')" = "$(printf '%s' "$docs_install" | sed 's/ *#.*//')" ] ||
	fail "the install lines of README.md and docs/n8n.md differ: '$install_block' / '$docs_install'"
pgc=${PG_CONFIG:-pg_config}
stage=$(mktemp -d /tmp/idem_n8n_stage.XXXXXX)
if (cd "$ROOT" && DESTDIR="$stage" PG_CONFIG="$pgc" \
	bash -euo pipefail -c 'sudo() { "$@"; }'$'\n'"$install_block") >/tmp/idem_n8n_make.$$ 2>&1 &&
	[ -f "$stage$("$pgc" --pkglibdir)/idem_gate.so" ] &&
	[ -f "$stage$("$pgc" --sharedir)/extension/idem_gate.control" ]; then
	echo "ok - the README's install line builds and installs idem_gate (staged in DESTDIR)"
	passed=$((passed + 1))
else
	cat /tmp/idem_n8n_make.$$; rm -rf "$stage" /tmp/idem_n8n_make.$$
	fail "the README's install line failed: $install_block"
fi
rm -rf "$stage" /tmp/idem_n8n_make.$$

# the dedicated n8n role, created by exactly the documented block
export IDEM_N8N_ROLE="idem_n8n_ci_$$"
export IDEM_N8N_PASSWORD="ci-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
grants=$(./doc_grants.sh "$IDEM_N8N_ROLE" "$IDEM_N8N_PASSWORD") || fail "the documented n8n role block is missing or differs between README.md and docs/n8n.md"
drop_role() {
	psql -X -q -v ON_ERROR_STOP=0 \
		-c "DROP OWNED BY $IDEM_N8N_ROLE" -c "DROP ROLE IF EXISTS $IDEM_N8N_ROLE" >/dev/null 2>&1
}
trap drop_role EXIT
printf '%s\n' "$grants" | psql -X -q -v ON_ERROR_STOP=1 -f - >/tmp/idem_n8n_psql.$$ 2>&1 ||
	{ cat /tmp/idem_n8n_psql.$$; rm -f /tmp/idem_n8n_psql.$$; fail "could not create the n8n role with the README's block"; }
rm -f /tmp/idem_n8n_psql.$$
echo "ok - the README's n8n role block (identical in docs/n8n.md) runs as written"
passed=$((passed + 1))

# what the README and docs have that role call works with exactly those
# grants: both forms of idem_claim_ex (the README's example passes five
# arguments, the n8n recipe six), the completion, the failure, the status
if psql -X -q -At -v ON_ERROR_STOP=1 -U "$IDEM_N8N_ROLE" >/tmp/idem_n8n_calls.$$ 2>&1 <<'SQL'
SELECT outcome FROM idem_claim_ex('doc_evt_5', 'doc_grants', '15 minutes', NULL, 'run-41');
SELECT outcome FROM idem_claim_ex('doc_evt_6', 'doc_grants', '15 minutes', NULL, 'run-42', '{"id": 6}');
SELECT idem_complete('doc_evt_5', 'doc_grants',
	(SELECT token FROM idem_gate.claims WHERE workflow = 'doc_grants' AND key = 'doc_evt_5'), '{"ok": true}');
SELECT idem_fail('doc_evt_6', 'doc_grants',
	(SELECT token FROM idem_gate.claims WHERE workflow = 'doc_grants' AND key = 'doc_evt_6'), 'boom', true);
SELECT state FROM idem_status('doc_evt_5', 'doc_grants');
SQL
then
	echo "ok - the documented n8n role calls idem_claim_ex with five and six arguments, completes, fails and reads a status"
	passed=$((passed + 1))
else
	cat /tmp/idem_n8n_calls.$$; rm -f /tmp/idem_n8n_calls.$$
	fail "the documented n8n role cannot make the calls the docs show it"
fi
rm -f /tmp/idem_n8n_calls.$$
psql -X -q -c "DELETE FROM idem_gate.claims WHERE workflow = 'doc_grants'" >/dev/null

# the queries; its closing line is folded into this suite's
node queries.test.mjs >/tmp/idem_n8n_q.$$ 2>&1
rc=$?
grep -vE '^[0-9]+ passed, [0-9]+ failed$' /tmp/idem_n8n_q.$$
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/idem_n8n_q.$$ | tail -1)
rm -f /tmp/idem_n8n_q.$$
[ -n "$last" ] || { echo "$passed passed, 1 failed"; exit 1; }
p=$(echo "$last" | awk '{print $1}'); f=$(echo "$last" | awk '{print $3}')
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "$((passed + p)) passed, $f failed"
[ "$f" -eq 0 ]
