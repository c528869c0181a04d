#!/usr/bin/env bash
# Moving a gate from PostgreSQL 15 to the server under test (PGHOST/PGPORT,
# of major IDEM_PG_MAJOR: 15, 17 or 18), the two ways a DBA does it:
#   1. pg_dump of a filled 15 database, with the target major's pg_dump,
#      restored into the target: every claim, receipt, policy, audit row and
#      the token sequence's position arrive;
#   2. blue-green by logical replication: the 15 primary publishes the
#      extension's tables, the target subscribes, the gate runs under load
#      meanwhile, then the switch-over: every claim arrived, and after
#      idem_gate.sync_token_seq() the next token is larger than every one
#      the old primary handed out (without it the sequence starts at 1).
# The 15 server is this suite's own, on PORT+7.  Ends with one line
# "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
BLUE_PORT=$((PGPORT + 7))
BIN=${IDEM_PG_BIN:-$(pg_config --bindir)}
AS_PG=${IDEM_PG_AS_POSTGRES:-runuser -u postgres --}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/idem_gate_majors.XXXXXX")
chmod 755 "$DIR"
mkdir "$DIR/dump"
chown postgres "$DIR/dump"
pass=0 fail=0

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (got '$2', expected '$3')"; fi; }
finish() {
	local rc=$?
	# a script that stops early with nothing failed (a syntax error further
	# down is only found when bash reaches it) must not pass: ended is set
	# on its last line
	[ -n "${ended:-}" ] || [ "$fail" -gt 0 ] || not_ok "the script stopped before its end (exit $rc)"
	PG_MAJOR= "$ROOT/scripts/cluster.sh" stop "$DIR/blue" >/dev/null 2>&1
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS restored" -c "DROP DATABASE IF EXISTS green" >/dev/null 2>&1
	rm -rf "$DIR"
	echo "$pass passed, $fail failed"
	# in an EXIT trap a bare exit keeps the status from before the trap
	[ "$fail" -eq 0 ] && exit 0
	exit 1
}
trap finish EXIT
blue() { psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$BLUE_PORT" -U postgres -d blue "$@"; }
target() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# the rows and sequence a move must keep, as text
rows() { "$1" -d "$2" -c "SELECT string_agg(format('%s/%s %s a%s t%s %s %s %s', workflow, key, state, attempt,
	token, result, last_error, token_issued), E'\n' ORDER BY workflow, key) FROM idem_gate.claims"; }

PG_MAJOR= "$ROOT/scripts/cluster.sh" start "$DIR/blue" "$BLUE_PORT" "wal_level = logical" \
	"max_wal_senders = 10" "max_replication_slots = 10" || { not_ok "the 15 server starts"; exit 1; }
psql -X -q -h 127.0.0.1 -p "$BLUE_PORT" -U postgres -d postgres -c "CREATE DATABASE blue"
blue -c "CREATE EXTENSION idem_gate" >/dev/null 2>&1
blue <<'SQL' >/dev/null
SELECT idem_claim('m_processing', 'wf');
SELECT token FROM idem_claim_ex('m_fenced', 'wf');
SELECT idem_claim('m_completed', 'wf');
SELECT idem_complete('m_completed', 'wf', NULL, '{"charge": "ch_1"}');
SELECT idem_claim('m_failed', 'wf');
SELECT idem_fail('m_failed', 'wf', NULL, 'before', true);
SELECT idem_claim('m_review', 'wf');
SELECT idem_fail('m_review', 'wf', NULL, 'after', false);
SELECT idem_claim('m_resolved', 'wf');
SELECT idem_resolve('m_resolved', 'wf', 'completed', '{"by": "ops"}', 'checked');
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention) VALUES ('wf', '40 days', '10 days');
SELECT nextval('idem_gate.token_seq') FROM generate_series(1, 50);
SQL
before=$(rows blue blue)
seq_before=$(blue -c "SELECT last_value FROM idem_gate.token_seq")

# 1. pg_dump with the target's pg_dump, restored into the target
target -d postgres -c "CREATE DATABASE restored"
if $AS_PG "$BIN/pg_dump" -h 127.0.0.1 -p "$BLUE_PORT" -U postgres -Fc -f "$DIR/dump/blue.dump" blue &&
	$AS_PG "$BIN/pg_restore" -h 127.0.0.1 -p "$PGPORT" -U postgres -d restored "$DIR/dump/blue.dump"; then
	ok "pg_dump of a 15 database restores into PostgreSQL ${IDEM_PG_MAJOR:-15}"
else
	not_ok "pg_dump of a 15 database restores into PostgreSQL ${IDEM_PG_MAJOR:-15}"
fi
check "every claim keeps its state, token and receipt" "$(rows target restored)" "$before"
check "the policies arrive" "$(target -d restored -c "SELECT retention || ' ' || receipt_retention FROM idem_gate.policies")" \
	"$(blue -c "SELECT retention || ' ' || receipt_retention FROM idem_gate.policies")"
check "the audit trail arrives" "$(target -d restored -c "SELECT count(*) FROM idem_gate.audit WHERE reason = 'checked'")" "1"
check "the token sequence keeps its position" "$(target -d restored -c "SELECT last_value FROM idem_gate.token_seq")" "$seq_before"
check "a completed payment is still completed" "$(target -d restored -c "SELECT idem_claim('m_completed', 'wf')")" "completed"
check "the next token is larger than every dumped one" \
	"$(target -d restored -c "SELECT token > $seq_before FROM idem_claim_ex('m_new', 'wf')")" "t"

# 2. blue-green: publish on 15, subscribe on the target, load, switch over
blue -c "CREATE PUBLICATION idem_gate_move FOR TABLE idem_gate.claims, idem_gate.policies,
	idem_gate.audit, idem_gate.workflow_acl"
target -d postgres -c "CREATE DATABASE green"
target -d green -c "CREATE EXTENSION idem_gate" >/dev/null 2>&1
target -d green -c "CREATE SUBSCRIPTION idem_gate_move
	CONNECTION 'host=127.0.0.1 port=$BLUE_PORT user=postgres dbname=blue'
	PUBLICATION idem_gate_move" >/dev/null 2>&1
# the gate keeps running on the old primary while the copy streams
cat >"$DIR/load.pgb" <<'PGB'
\set k random(1, 5000)
SELECT idem_complete(k.key, 'load', c.token, '{"ok": true}')
  FROM (SELECT 'bg_' || :k AS key) k, idem_claim_ex(k.key, 'load') c WHERE c.token IS NOT NULL;
PGB
pgbench -n -h 127.0.0.1 -p "$BLUE_PORT" -U postgres -c 4 -j 2 -T 8 -f "$DIR/load.pgb" blue >"$DIR/load.log" 2>&1 &&
	ok "the gate runs on the old primary during the move" || not_ok "the gate runs during the move ($(tail -3 "$DIR/load.log"))"
# switch over: wait until the subscriber has everything, then stop writing
lsn=$(blue -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 120); do
	done_=$(blue -c "SELECT coalesce(bool_and(confirmed_flush_lsn >= '$lsn'), false) FROM pg_replication_slots WHERE slot_name = 'idem_gate_move'")
	copied=$(target -d green -c "SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate <> 'r'")
	[ "$done_" = t ] && [ "$copied" = t ] && break
	sleep 0.5
done
check "the subscriber caught up" "$done_$copied" "tt"
check "every claim arrived" "$(rows target green)" "$(rows blue blue)"
max_blue=$(blue -c "SELECT max(token) FROM idem_gate.claims")
target -d green -c "ALTER SUBSCRIPTION idem_gate_move DISABLE" >/dev/null
check "without a sync the new primary's sequence is behind (logical replication does not carry it)" \
	"$(target -d green -c "SELECT last_value < $max_blue FROM idem_gate.token_seq")" "t"
next=$(target -d green -c "SELECT idem_gate.sync_token_seq()")
check "sync_token_seq() sets the sequence past every replicated token" "$next" "$((max_blue + 1))"
check "the first claim on the new primary gets a larger token than any claim of the old one" \
	"$(target -d green -c "SELECT token > $max_blue FROM idem_claim_ex('after_switch', 'load')")" "t"
check "a completed claim stays completed on the new primary" \
	"$(target -d green -c "SELECT idem_claim('m_completed', 'wf')")" "completed"
check "audit ids continue after the replicated ones" \
	"$(target -d green -c "SELECT idem_release('m_processing', 'wf', 'moved') AND (SELECT count(DISTINCT id) = count(*) FROM idem_gate.audit)")" "t"
target -d green -c "DROP SUBSCRIPTION idem_gate_move" >/dev/null 2>&1 ||
	{ target -d green -c "ALTER SUBSCRIPTION idem_gate_move SET (slot_name = NONE)" >/dev/null;
	  target -d green -c "DROP SUBSCRIPTION idem_gate_move" >/dev/null; }
ended=1
