"""
The levers the 1.2 matrix lacked (test/security/matrix.py imports this):
state a session leaves behind, caches a caller primes, leaky functions in
a reader's WHERE, members of a restricted role, sessions that hold rows a
janitor wants, and every way a claim commits.  Generated from the tables
below like matrix.py's cells; one cell is one attempt, and each asserts:

  - no right gained: rolsuper and pg_has_role(..., 'MEMBER') of the
    extension's owner, and none of the actor's code ran as another role;
  - no row of another workflow seen (canary workflows: payroll,
    mxXa_secret, mx13_side), in a row, a NOTICE of a leaky function, or an
    answer of the gate;
  - no acknowledged answer lost: a claim answered new and committed stays
    committed, and its key answers in_flight, then completed, never new;
  - the janitor makes progress: it never waits on a lock for more than
    about a second, and the rows nobody holds are still done.

Cells return (name, problems) as matrix.py's worker cells do; a cell this
server cannot run (PREPARE TRANSACTION with max_prepared_transactions = 0)
returns None as its problems and counts as skipped.
"""
import collections
import re
import time

import psycopg2
import psycopg2.extensions

from levers13_common import (CANARY, CANARY_RE, EDITION, OWN, TEAM, attempt, connect, fresh_db,
                             gained, run_all)
# worker_lock_cells is matrix.py's to call, where it has set the naptime
from levers13_janitor import (cached_cells, close_sc_cache, janitor_cells,  # noqa: F401
                              worker_lock_cells)

# -- the roles -------------------------------------------------------------

# Cluster-wide; named mx_* so that matrix.py's clean-up drops them.  Each
# restricted role is granted its own workflow only.
ROLES13 = r"""
CREATE ROLE mx_side13 NOLOGIN;
-- NOINHERIT: it may SET ROLE mx_side13 but does not have that role's grants
CREATE ROLE mx_reader13 LOGIN NOINHERIT IN ROLE mx_side13;
CREATE ROLE mx_inbox13 LOGIN;
CREATE ROLE mx_monitor13 LOGIN;
CREATE ROLE mx_team13 NOLOGIN;
CREATE ROLE mx_member13 LOGIN IN ROLE mx_team13;
CREATE ROLE mx_member13b LOGIN IN ROLE mx_member13;
CREATE ROLE mx_noinherit13 LOGIN NOINHERIT IN ROLE mx_team13;
CREATE ROLE mx_teamdb13 NOLOGIN;
CREATE ROLE mx_memberdb13 LOGIN IN ROLE mx_teamdb13;
-- teams whose setting a DBA wrote another way PostgreSQL accepts for on
-- (the catalog keeps it as written); their privileges come from one role
CREATE ROLE mx_grants13 NOLOGIN;
CREATE ROLE mx_teamtrue13 NOLOGIN IN ROLE mx_grants13;
CREATE ROLE mx_teamyes13 NOLOGIN IN ROLE mx_grants13;
CREATE ROLE mx_team1x13 NOLOGIN IN ROLE mx_grants13;
CREATE ROLE mx_mtrue13 LOGIN IN ROLE mx_teamtrue13;
CREATE ROLE mx_myes13 LOGIN IN ROLE mx_teamyes13;
CREATE ROLE mx_m1x13 LOGIN IN ROLE mx_team1x13;
-- a member of the team that is also a member of a role nobody restricted
-- (a reporting role, say, granted for another purpose)
CREATE ROLE mx_report13 NOLOGIN IN ROLE mx_grants13;
CREATE ROLE mx_mboth13 LOGIN IN ROLE mx_team13, mx_report13;
ALTER ROLE mx_teamtrue13 SET idem_gate.workflow_acl = true;
ALTER ROLE mx_teamyes13 SET idem_gate.workflow_acl = 'YES';
ALTER ROLE mx_team1x13 SET idem_gate.workflow_acl = 1;
CREATE ROLE mx_client13 LOGIN;
CREATE ROLE mx_oper13 LOGIN;
-- per-workflow access where these roles log in, as the README's operator
-- role has it; mx_team13's members get none of this at their own login
ALTER ROLE mx_reader13 SET idem_gate.workflow_acl = on;
ALTER ROLE mx_side13 SET idem_gate.workflow_acl = on;
ALTER ROLE mx_inbox13 SET idem_gate.workflow_acl = on;
ALTER ROLE mx_monitor13 SET idem_gate.workflow_acl = on;
ALTER ROLE mx_team13 SET idem_gate.workflow_acl = on;
ALTER ROLE mx_client13 SET idem_gate.workflow_acl = on;
"""

# -- the database of the session, leak, member and commit cells ------------

DB13_SETUP = r"""
GRANT USAGE ON SCHEMA idem_gate TO mx_reader13, mx_side13, mx_inbox13, mx_monitor13,
    mx_team13, mx_teamdb13, mx_client13, mx_grants13;
-- what a DBA gives one team's role, read and write
GRANT SELECT (workflow, key, token, state, execution_id) ON idem_gate.claims
    TO mx_reader13, mx_side13, mx_team13, mx_teamdb13, mx_grants13;
GRANT SELECT ON idem_gate.inbox, idem_gate.workflow_stats, idem_gate.audit
    TO mx_reader13, mx_side13, mx_team13, mx_teamdb13, mx_grants13;
GRANT EXECUTE ON FUNCTION idem_gate.history(text, text), idem_status(text, text),
    idem_claim_ex(text, text, interval, text, text), idem_complete(text, text, bigint, jsonb),
    idem_heartbeat(text, text, bigint), idem_fail(text, text, bigint, text, boolean),
    idem_release(text, text, text), idem_resolve(text, text, text, jsonb, text)
    TO mx_reader13, mx_side13, mx_team13, mx_teamdb13, mx_grants13;
-- 1.3's bulk decisions, where this version has them
DO $$
BEGIN
    IF to_regprocedure('idem_release_many(text[], text, text, text)') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION idem_release_many(text[], text, text, text),
            idem_resolve_many(text[], text, text, jsonb, text, text),
            idem_release(text, text, text, text), idem_resolve(text, text, text, jsonb, text, text)
            TO mx_reader13, mx_team13, mx_teamdb13, mx_grants13;
    END IF;
END $$;
-- the README's operator role (the inbox page)
GRANT SELECT ON idem_gate.inbox TO mx_inbox13;
GRANT EXECUTE ON FUNCTION idem_gate.history(text, text),
    idem_resolve(text, text, text, jsonb, text, text), idem_release(text, text, text, text),
    idem_status(text, text) TO mx_inbox13;
-- a monitoring role: the views of figures, and the functions they call
GRANT SELECT ON idem_gate.workflow_stats, idem_gate.stats, idem_gate.stats_gauges,
    idem_gate.secrets TO mx_monitor13;
GRANT EXECUTE ON FUNCTION idem_gate.stats_counters(), idem_gate.secret_ids() TO mx_monitor13;
-- the client of the commit cells
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
    idem_claim_many(text[], text, interval, text[], text), idem_complete(text, text, bigint, jsonb),
    idem_status(text, text) TO mx_client13;
SELECT idem_gate.grant_workflow('mx_reader13', 'mx13_own');
SELECT idem_gate.grant_workflow('mx_side13', 'mx13_side');
SELECT idem_gate.grant_workflow('mx_inbox13', 'mx13_own');
SELECT idem_gate.grant_workflow('mx_monitor13', 'mx13_own');
SELECT idem_gate.grant_workflow('mx_team13', 'mx13_team');
SELECT idem_gate.grant_workflow('mx_teamdb13', 'mx13_team');
SELECT idem_gate.grant_workflow('mx_teamtrue13', 'mx13_team');
SELECT idem_gate.grant_workflow('mx_teamyes13', 'mx13_team');
SELECT idem_gate.grant_workflow('mx_team1x13', 'mx13_team');
SELECT idem_gate.grant_workflow('mx_client13', 'mx13_own');

-- the actors' own code: procedures that trap a refused gate call, and
-- claim then commit
CREATE SCHEMA mx_reader13 AUTHORIZATION mx_reader13;
CREATE SCHEMA mx_client13 AUTHORIZATION mx_client13;
SET ROLE mx_reader13;
CREATE PROCEDURE mx_reader13.trap() LANGUAGE plpgsql AS $$
BEGIN
    PERFORM * FROM idem_status('payroll_c', 'payroll');
EXCEPTION WHEN insufficient_privilege THEN NULL;
END $$;
CREATE PROCEDURE mx_reader13.trap_commit() LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM * FROM idem_status('payroll_c', 'payroll');
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
    COMMIT;
END $$;
RESET ROLE;
SET ROLE mx_client13;
CREATE PROCEDURE mx_client13.claim_commit(k text, many boolean, fail boolean) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF many THEN
        FOR r IN SELECT c.key, c.outcome, c.token
                 FROM idem_claim_many(ARRAY[k, k || '_b', k], 'mx13_own') c LOOP
            RAISE NOTICE 'mx13 answer % % %', r.key, r.outcome, r.token;
        END LOOP;
    ELSE
        SELECT k AS key, c.outcome, c.token INTO r FROM idem_claim_ex(k, 'mx13_own') c;
        RAISE NOTICE 'mx13 answer % % %', r.key, r.outcome, r.token;
    END IF;
    COMMIT;
    IF fail THEN
        RAISE EXCEPTION 'the run fails after its claim committed';
    END IF;
END $$;
RESET ROLE;
"""


def make_rows(cur, wf):
    """
    One workflow's rows in every state a read can show: stuck in
    processing (the inbox's stuck), needs_review with a payload, completed
    with a receipt, failed_retryable, and a released claim (an audit row).
    """
    w = wf
    cur.execute("SELECT token FROM idem_claim_ex('%s_p', '%s', NULL, NULL, 'run-p', '{\"p\": 1}')" % (w, w))
    cur.execute("SELECT idem_claim('%s_r', '%s'), idem_fail('%s_r', '%s', NULL, 'half done', false)" % (w, w, w, w))
    cur.execute("SELECT idem_claim('%s_c', '%s'), idem_complete('%s_c', '%s', NULL, '{\"r\": 1}')" % (w, w, w, w))
    cur.execute("SELECT idem_claim('%s_f', '%s'), idem_fail('%s_f', '%s', NULL, 'retry', true)" % (w, w, w, w))
    cur.execute("SELECT idem_claim('%s_x', '%s'), idem_release('%s_x', '%s', 'released')" % (w, w, w, w))
    cur.execute("UPDATE ONLY idem_gate.claims SET created_at = created_at - '1 hour'::interval,"
                " claimed_at = claimed_at - '1 hour'::interval, updated_at = updated_at - '1 hour'::interval"
                " WHERE workflow = '%s' AND key = '%s_p'" % (w, w))


def canary_rows(cur):
    """The canary workflows' claims and audit rows, as the superuser reads them."""
    cur.execute("SELECT key, state::text, attempt, result::text, token FROM ONLY idem_gate.claims"
                " WHERE workflow IN %s ORDER BY key", (CANARY,))
    claims = cur.fetchall()
    cur.execute("SELECT count(*) FROM ONLY idem_gate.audit WHERE workflow IN %s", (CANARY,))
    return claims, cur.fetchone()[0]


# -- 1. state an earlier statement of the session left ----------------------

# Reads of per-workflow data: a row (or answer) of a canary workflow is a
# leak.  history() shows no workflow, so the read names it; own: the read
# shows the reader's own workflow in the plain case.
READS = {
    "idem_gate.claims": ("SELECT workflow, key FROM idem_gate.claims", True),
    "idem_gate.inbox": ("SELECT workflow, key FROM idem_gate.inbox", True),
    "idem_gate.workflow_stats": ("SELECT workflow FROM idem_gate.workflow_stats", True),
    "idem_gate.audit": ("SELECT workflow, key FROM idem_gate.audit", True),
    "idem_gate.history of payroll": ("SELECT 'payroll', action FROM idem_gate.history('payroll_x', 'payroll')", False),
    "idem_status of payroll": ("SELECT workflow, key FROM idem_status('payroll_c', 'payroll')", False),
}

# The refused first gate call of a fresh backend, and a stale token: both
# fail after the gate has opened its call.
REFUSED = "SELECT * FROM idem_status('payroll_c', 'payroll')"
STALE = "SELECT idem_complete('mx13_own_p', 'mx13_own', 0, '{{}}')"

# Levers: what the actor's session does before the read, in the read's
# transaction (xact) or in statements of their own before it.
SESSION_LEVERS = {
    "none": dict(xact=True, sql=[]),
    "savepoint, refused call, rollback to savepoint":
        dict(xact=True, sql=["SAVEPOINT s", "!" + REFUSED, "ROLLBACK TO SAVEPOINT s"]),
    "savepoint, stale token, rollback to savepoint":
        dict(xact=True, sql=["SAVEPOINT s", "!" + STALE, "ROLLBACK TO SAVEPOINT s"]),
    "nested savepoints, refused call, rollback to the outer":
        dict(xact=True, sql=["SAVEPOINT s1", "SAVEPOINT s2", "!" + REFUSED, "ROLLBACK TO SAVEPOINT s1"]),
    "EXCEPTION block traps a refused call":
        dict(xact=True, sql=["DO $$ BEGIN PERFORM * FROM idem_status('payroll_c', 'payroll');"
                             " EXCEPTION WHEN insufficient_privilege THEN NULL; END $$"]),
    "EXCEPTION block traps a stale token":
        dict(xact=True, sql=["DO $$ BEGIN PERFORM idem_complete('mx13_own_p', 'mx13_own', 0, '{{}}');"
                             " EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END $$"]),
    "procedure traps a refused call": dict(xact=True, sql=["CALL mx_reader13.trap()"]),
    # 1.3's bulk decisions trap each key's refusal in an EXCEPTION block
    "a bulk release answers not_permitted":
        dict(xact=True, sql=["SELECT * FROM idem_release_many(ARRAY['payroll_r'], 'payroll')"]),
    "procedure traps a refused call and commits": dict(xact=False, sql=["CALL mx_reader13.trap_commit()"]),
    "SET ROLE to another role it may, and back":
        dict(xact=True, sql=["SET ROLE mx_side13", "SELECT count(*) FROM idem_gate.claims",
                             "SELECT * FROM idem_status('mx13_side_c', 'mx13_side')",
                             "SELECT * FROM idem_gate.inbox", "RESET ROLE"]),
    "SET LOCAL row_security = off": dict(xact=True, sql=["SET LOCAL row_security = off"]),
    "SET LOCAL of its path and the planner's settings":
        dict(xact=True, sql=["SET LOCAL search_path = mx_reader13, pg_catalog, public",
                             "SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off",
                             "SET LOCAL transform_null_equals = on", "SET LOCAL jit = off"]),
    # the managed edition cannot refuse a placeholder's SET: it takes it,
    # and never reads off where the catalog says on (docs/managed.md)
    ("SET LOCAL idem_gate.workflow_acl = off refused in a savepoint" if EDITION != "managed" else
     "SET LOCAL idem_gate.workflow_acl = off in a savepoint, not read as off"):
        dict(xact=True, sql=["SAVEPOINT s", ("" if EDITION == "managed" else "!") + "SET LOCAL idem_gate.workflow_acl = off",
                             "ROLLBACK TO SAVEPOINT s"]),
    "cursors left open on the gate's view and functions":
        dict(xact=True, sql=["DECLARE c1 CURSOR FOR SELECT workflow FROM idem_gate.inbox", "FETCH 1 FROM c1",
                             "DECLARE c2 CURSOR FOR SELECT * FROM idem_gate.history('mx13_own_x', 'mx13_own')",
                             "FETCH 1 FROM c2",
                             "DECLARE c3 CURSOR FOR SELECT * FROM idem_status('mx13_own_c', 'mx13_own')",
                             "FETCH 1 FROM c3"]),
    "a cursor's refused gate call, rolled back to a savepoint":
        dict(xact=True, sql=["DECLARE c4 CURSOR FOR SELECT s.* FROM (VALUES ('mx13_own'), ('payroll')) v(w),"
                             " LATERAL idem_status(v.w || '_c', v.w) s",
                             "SAVEPOINT s", "!FETCH 2 FROM c4", "ROLLBACK TO SAVEPOINT s"]),
}


# what --quick keeps of the reads and of the calls on another workflow
QUICK_READS = ["idem_gate.claims", "idem_gate.inbox"]
QUICK_CALLS = ["idem_status", "idem_release"]


def session_cells(db, su, quick):
    """
    Family 1: the reader (granted mx13_own only, per-workflow access on at
    its login) uses one lever in a fresh backend, so that the lever's gate
    call is the backend's first, then reads.  1.2 kept a count of running
    gate calls that a failed first call inside a subtransaction left at 1,
    and filtered nothing until the transaction ended.
    """
    results = []
    sc = su.cursor()
    for lever, spec in SESSION_LEVERS.items():
        for read, (sql, own) in READS.items():
            if quick and read not in QUICK_READS:
                continue
            c = connect(db, "mx_reader13")
            cur = c.cursor()
            problems = []
            if spec["xact"]:
                cur.execute("BEGIN")
            problems += run_all(cur, spec["sql"])
            if not spec["xact"]:
                cur.execute("BEGIN")
            r = attempt(cur, sql)
            cur.execute("ROLLBACK")
            c.close()
            problems += judge_read(r, own)
            problems += gained(sc, "mx_reader13")
            results.append(("reader / %s / %s / session state" % (lever, read), problems))
    return results


def judge_read(r, own, workflow=OWN):
    """A read's rows: none of a canary workflow; its own rows where it has some."""
    if r[0] == "error":
        # a refusal shows nothing; anything but 42501 is a failure of the read
        return [] if r[1] == "42501" else ["the read failed: %s %s" % (r[1], r[2])]
    bad = []
    leaked = sorted({str(row) for row in r[1] if CANARY_RE.search(str(row))})
    if leaked:
        bad.append("rows of another workflow seen: %s" % ", ".join(leaked[:4]))
    if own and not any(workflow in str(row) for row in r[1]):
        bad.append("the read shows none of the role's own rows (%s)" % workflow)
    return bad


# -- 3. a leaky function in the reader's WHERE -------------------------------

# A cheap function the planner evaluates first unless the view is a
# security barrier: what it is handed is what the reader learns.
LEAK_FN = ("CREATE FUNCTION pg_temp.mx_leak(v anyelement) RETURNS boolean LANGUAGE plpgsql"
           " COST 0.0000001 AS $$ BEGIN RAISE NOTICE 'mx13 leak %', v; RETURN true; END $$")

# Who reads what, and the columns handed to the leaky function, one call
# each (an expression over two columns would cost more than the view's
# own filter and run after it).
LEAK_READS = [
    ("mx_inbox13", "idem_gate.inbox", ["workflow", "key", "reason", "last_error", "execution_id"]),
    ("mx_inbox13", "idem_gate.history('payroll_x', 'payroll')", ["action", "reason", "actor"]),
    ("mx_inbox13", "idem_gate.history('mx13_own_x', 'mx13_own')", ["action", "reason", "actor"]),
    ("mx_inbox13", "idem_status('payroll_c', 'payroll')", ["workflow", "key", "state"]),
    ("mx_inbox13", "idem_status('mx13_own_c', 'mx13_own')", ["workflow", "key", "state"]),
    ("mx_monitor13", "idem_gate.workflow_stats", ["workflow", "rows_processing", "rows_needs_review"]),
    ("mx_monitor13", "idem_gate.stats", ["rows_processing", "rows_needs_review", "claims_new"]),
    ("mx_monitor13", "idem_gate.stats_gauges", ["rows_processing", "rows_needs_review", "oldest_processing_at"]),
    ("mx_monitor13", "idem_gate.secrets", ["secret_id", "claims"]),
    ("mx_reader13", "idem_gate.claims", ["workflow", "key", "state", "execution_id"]),
    ("mx_reader13", "idem_gate.audit", ["workflow", "key", "action", "reason"]),
]

# Where the function sits in the reader's query.
LEAK_SHAPES = {
    "WHERE": "SELECT 1 FROM {rel} v WHERE {quals}",
    "JOIN ON": "SELECT 1 FROM {rel} v JOIN (VALUES (1)) x(i) ON {quals}",
    "EXISTS": "SELECT 1 WHERE EXISTS (SELECT 1 FROM {rel} v WHERE {quals})",
}


def leak_cells(db, su):
    """
    Family 3: the README's operator role, a monitoring role and a team's
    reader (per-workflow access on, granted mx13_own only) put a leaky
    function in every readable view and function of the gate.  1.2's inbox
    and workflow_stats were plain views: the function saw every workflow's
    keys before their filter ran.
    """
    results = []
    sc = su.cursor()
    conns = {}
    for role, rel, cols in LEAK_READS:
        if role not in conns:
            notices = collections.deque()
            c = connect(db, role, notices)
            c.cursor().execute(LEAK_FN)
            conns[role] = (c, notices)
        c, notices = conns[role]
        quals = " AND ".join("pg_temp.mx_leak(v.%s)" % col for col in cols)
        for shape, q in LEAK_SHAPES.items():
            notices.clear()
            cur = c.cursor()
            r = attempt(cur, q.format(rel=rel, quals=quals))
            problems = []
            if r[0] == "error" and r[1] != "42501":
                problems.append("the read failed: %s %s" % (r[1], r[2]))
            seen = [n.strip() for n in notices if "mx13 leak" in n and CANARY_RE.search(n)]
            if seen:
                problems.append("the function was handed another workflow's values: %s" % "; ".join(seen[:3]))
            problems += gained(sc, role)
            results.append(("%s / leaky function in %s / %s / views and functions" % (role, shape, rel), problems))
    for c, _ in conns.values():
        c.close()
    return results


# -- 4. members of a restricted role, logging in as themselves ---------------

# (login role, what restricts it, whether it has the team's privileges)
MEMBERS = [
    ("mx_member13", "member of mx_team13 (ALTER ROLE ... SET)", True, []),
    ("mx_member13b", "member of a member of mx_team13", True, []),
    ("mx_memberdb13", "member of mx_teamdb13 (ALTER ROLE ... IN DATABASE ... SET)", True, []),
    ("mx_noinherit13", "NOINHERIT member of mx_team13", False, []),
    ("mx_noinherit13", "NOINHERIT member of mx_team13 after SET ROLE mx_team13", True, ["SET ROLE mx_team13"]),
    ("mx_mtrue13", "member of a role whose setting is written true", True, []),
    ("mx_myes13", "member of a role whose setting is written 'YES'", True, []),
    ("mx_m1x13", "member of a role whose setting is written 1", True, []),
    ("mx_mboth13", "member of mx_team13 and of a role nobody restricted", True, []),
    # restricted or not is decided for the role in effect: a login that
    # may SET ROLE to a role nobody restricted leaves its team's limits
    ("mx_mboth13", "member of mx_team13 and of a role nobody restricted, after SET ROLE to that role", True,
     ["SET ROLE mx_report13"]),
]

# Calls on another team's workflow: each must be refused with 42501 (a
# bulk decision: answer not_permitted for each key) and change nothing.
# {tok} is the token of payroll_p.
MEMBER_CALLS = {
    "idem_status": "SELECT * FROM idem_status('payroll_c', 'payroll')",
    "idem_gate.history": "SELECT * FROM idem_gate.history('payroll_x', 'payroll')",
    "idem_release": "SELECT idem_release('payroll_r', 'payroll', 'a member decides')",
    "idem_resolve": "SELECT idem_resolve('payroll_r', 'payroll', 'completed', '{{}}', 'a member decides')",
    "idem_claim_ex": "SELECT * FROM idem_claim_ex('payroll_new', 'payroll')",
    "idem_complete": "SELECT idem_complete('payroll_p', 'payroll', {tok}, '{{\"by\": \"member\"}}')",
    "idem_heartbeat": "SELECT idem_heartbeat('payroll_p', 'payroll', {tok})",
    "idem_fail": "SELECT idem_fail('payroll_p', 'payroll', {tok}, 'member', true)",
    "idem_release_many": "SELECT outcome FROM idem_release_many(ARRAY['payroll_r', 'payroll_c'], 'payroll')",
    "idem_resolve_many": "SELECT outcome FROM idem_resolve_many(ARRAY['payroll_r'], 'payroll', 'completed')",
}


def member_cells(db, su, quick):
    """
    Family 4: a role restricted by ALTER ROLE ... SET idem_gate.workflow_acl
    = on, and its members logging in as themselves (real connections, not
    SET ROLE): a member that has the role's privileges is restricted like
    it; a NOINHERIT member has none of them.  On 1.2 the setting applied
    only to sessions that logged in as the role itself.
    """
    results = []
    sc = su.cursor()
    sc.execute("SELECT token FROM ONLY idem_gate.claims WHERE workflow = 'payroll' AND key = 'payroll_p'")
    tok = sc.fetchone()[0]
    base = canary_rows(sc)
    for login, how, inherits, pre in MEMBERS:
        attempts = [("read " + k, sql, own) for k, (sql, own) in READS.items()
                    if not quick or k in QUICK_READS]
        attempts += [("call " + k, sql, None) for k, sql in MEMBER_CALLS.items()
                     if not quick or k in QUICK_CALLS]
        for what, sql, own in attempts:
            c = connect(db, login)
            cur = c.cursor()
            problems = run_all(cur, pre)
            # the token of the canary's processing claim, as it is now
            r = attempt(cur, sql.format(tok=tok) if own is None else sql)
            c.close()
            if own is None and inherits and r[0] == "rows" and "_many" in what:
                if not r[1] or any(row != ("not_permitted",) for row in r[1]):
                    problems.append("a bulk decision on another workflow answered %s" % r[1])
            elif own is None:
                # a call on another workflow: refused, whoever calls
                if r[0] != "error" or r[1] != "42501":
                    problems.append("not refused with 42501: %s" % str(r[1:] if r[0] == "error" else r[1])[:200])
            elif not inherits:
                if r[0] != "error" or r[1] != "42501":
                    problems.append("a member without the role's privileges was not refused: %s" % str(r)[:200])
            else:
                problems += judge_read(r, own, TEAM)
            now = canary_rows(sc)
            if now != base:
                problems.append("another workflow's rows changed")
                # put the canaries back for the next cells
                sc.execute("DELETE FROM ONLY idem_gate.claims WHERE workflow = 'payroll'")
                make_rows(sc, "payroll")
                sc.execute("SELECT token FROM ONLY idem_gate.claims WHERE workflow = 'payroll' AND key = 'payroll_p'")
                tok = sc.fetchone()[0]
                base = canary_rows(sc)
            problems += gained(sc, login)
            results.append(("%s / %s / %s / members" % (login, how, what), problems))
    return results


# -- 6. every commit path ---------------------------------------------------

# How a claim is made: its statement, one (key, outcome, token) per row.
CLAIM_KINDS = {
    "idem_claim_ex": "SELECT '{k}', outcome::text, token FROM idem_claim_ex('{k}', 'mx13_own')",
    "idem_claim_many": "SELECT key, outcome::text, token FROM idem_claim_many(ARRAY['{k}', '{k}_b', '{k}'],"
                       " 'mx13_own')",
}

# The ways its transaction ends; {claim} is the claim, {pre} a lever's
# statements before it.  A procedure's answers come as NOTICEs.
COMMIT_PATHS = {
    "COMMIT": ["BEGIN", "{pre}", "{claim}", "COMMIT"],
    "autocommit": ["{claim}"],
    "PREPARE TRANSACTION, COMMIT PREPARED": ["BEGIN", "{pre}", "{claim}", "PREPARE TRANSACTION 'mx13_{k}'",
                                             "COMMIT PREPARED 'mx13_{k}'"],
    "a procedure that claims and COMMITs": ["CALL mx_client13.claim_commit('{k}', {many}, false)"],
    "a procedure that claims, COMMITs and fails": ["!CALL mx_client13.claim_commit('{k}', {many}, true)"],
}
COMMIT_PRE = {
    "none": [],
    "a refused call in a rolled-back savepoint": ["SAVEPOINT s", "!" + REFUSED, "ROLLBACK TO SAVEPOINT s"],
    "an EXCEPTION block that trapped a refused call":
        ["DO $$ BEGIN PERFORM * FROM idem_status('payroll_c', 'payroll');"
         " EXCEPTION WHEN insufficient_privilege THEN NULL; END $$"],
}


def commit_cells(db, su, quick):
    """
    Family 6: a claim answered new and then committed, by each path, is
    kept: the superuser sees its row with the answered token, and the same
    key answers in_flight, then (completed with that token) completed,
    never new again.
    """
    results = []
    sc = su.cursor()
    sc.execute("SHOW max_prepared_transactions")
    prepared = int(sc.fetchone()[0]) > 0
    n = 0
    check = connect(db, "mx_client13")
    ck = check.cursor()
    for path, stmts in COMMIT_PATHS.items():
        for kind, claim in CLAIM_KINDS.items():
            for pre, pre_sql in COMMIT_PRE.items():
                if pre != "none" and ("{pre}" not in stmts or quick):
                    continue
                n += 1
                k = "mx13_commit_%d" % n
                name = "mx_client13 / %s / %s / %s / commit paths" % (pre, kind, path)
                if "PREPARE" in path and not prepared:
                    results.append((name, None))
                    continue
                notices = collections.deque()
                c = connect(db, "mx_client13", notices)
                cur = c.cursor()
                problems = []
                answers = []
                for s in stmts:
                    if s == "{pre}":
                        problems += run_all(cur, pre_sql)
                        continue
                    s = s.format(claim=claim, k=k, many="true" if kind == "idem_claim_many" else "false")
                    r = attempt(cur, s.lstrip("!").format(k=k))
                    if s.startswith("!"):
                        if r[0] != "error" or r[1] != "P0001":
                            problems.append("the procedure did not fail as written: %s" % str(r)[:200])
                    elif r[0] == "error":
                        problems.append("%s was refused: %s %s" % (s.split()[0], r[1], r[2]))
                        break
                    elif s.startswith("SELECT"):
                        answers += r[1]
                for note in notices:
                    m = re.search(r"mx13 answer (\S+) (\S+) (\S+)", note)
                    if m:
                        answers.append((m.group(1), m.group(2), int(m.group(3)) if m.group(3) != "<NULL>" else None))
                if cur.connection.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
                    cur.execute("ROLLBACK")
                sc.execute("SELECT gid FROM pg_prepared_xacts WHERE gid = %s", ("mx13_" + k,))
                if sc.fetchone():
                    sc.execute("ROLLBACK PREPARED 'mx13_%s'" % k)
                    problems.append("a prepared transaction was left")
                c.close()
                problems += judge_commit(sc, ck, answers, k)
                problems += gained(sc, "mx_client13")
                results.append((name, problems))
    check.close()
    return results


def judge_commit(sc, ck, answers, k):
    bad = []
    new = {}
    for key, outcome, token in answers:
        if outcome == "new" and key not in new:
            new[key] = token
    if k not in new:
        return ["the claim was not answered new: %s" % answers]
    for key, token in sorted(new.items()):
        sc.execute("SELECT state::text, token FROM ONLY idem_gate.claims WHERE workflow = 'mx13_own' AND key = %s",
                   (key,))
        row = sc.fetchone()
        if row != ("processing", token):
            bad.append("the acknowledged claim %s is %s, not processing with token %s" % (key, row, token))
            continue
        for step, want in [("SELECT outcome::text FROM idem_claim_ex('%s', 'mx13_own')" % key, "in_flight"),
                           ("SELECT idem_complete('%s', 'mx13_own', %d, '{\"ok\": 1}')::text" % (key, token), "true"),
                           ("SELECT outcome::text FROM idem_claim_ex('%s', 'mx13_own')" % key, "completed")]:
            r = attempt(ck, step)
            got = r[1][0][0] if r[0] == "rows" and r[1] else r
            if got != want:
                bad.append("%s answered %s after the commit, not %s" % (key, got, want))
                break
    return bad


def cells(su, dbprefix, matrix, quick):
    """
    Every family but the background janitor's (worker_lock_cells(), run
    where matrix.py has set naptime to 1 s).  su: a superuser connection;
    the roles are dropped by matrix.py's clean-up, the databases here.
    """
    sc = su.cursor()
    sc.execute(ROLES13)
    db = dbprefix + "_13"
    c = fresh_db(sc, db)
    cur = c.cursor()
    cur.execute(DB13_SETUP)
    cur.execute("ALTER ROLE mx_teamdb13 IN DATABASE %s SET idem_gate.workflow_acl = on" % db)
    for wf in (OWN, TEAM) + CANARY:
        make_rows(cur, wf)
    results = []
    families = [
        ("session state", lambda: session_cells(db, c, quick)),
        ("leaky functions", lambda: leak_cells(db, c)),
        ("role members", lambda: member_cells(db, c, quick)),
        ("commit paths", lambda: commit_cells(db, c, quick)),
        ("primed caches", lambda: cached_cells(su, dbprefix + "_13c", matrix, quick)),
        ("held rows", lambda: janitor_cells(su, dbprefix + "_13j", quick)),
    ]
    try:
        for name, family in families:
            t = time.time()
            res = family()
            print("# 1.3 levers, %s: %d cells, %d failing, in %.1f s"
                  % (name, len(res), sum(1 for _, p in res if p), time.time() - t))
            results += res
    finally:
        close_sc_cache()
        if not c.closed:
            c.close()
        sc.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
    return results
