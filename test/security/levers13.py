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
import threading
import time

import psycopg2
import psycopg2.extensions

# canary workflows: no row, notice or answer of a cell may name them
CANARY = ("payroll", "mxXa_secret", "mx13_side")
CANARY_RE = re.compile("|".join(CANARY))
OWN = "mx13_own"
TEAM = "mx13_team"


# databases whose background janitor is kept out (fresh_db(quiet=True)):
# their sessions turn default_transaction_read_only off again
QUIET = set()


def connect(db, user="postgres", notices=None):
    c = psycopg2.connect(dbname=db, user=user,
                         options="-c default_transaction_read_only=off" if db in QUIET else "")
    c.autocommit = True
    if notices is not None:
        c.notices = notices
    return c


def attempt(cur, sql):
    """Run one statement: ("rows", rows) or ("error", sqlstate, first line)."""
    try:
        cur.execute(sql)
        return ("rows", cur.fetchall() if cur.description is not None else [])
    except psycopg2.Error as e:
        return ("error", e.pgcode, (e.pgerror or "").splitlines()[0] if e.pgerror else str(e))


def run_all(cur, stmts, **fmt):
    """
    Run a lever's statements; one starting with "!" must fail (the failing
    gate call a lever traps).  Returns the problems.
    """
    problems = []
    for s in stmts:
        must_fail = s.startswith("!")
        r = attempt(cur, s.lstrip("!").format(**fmt))
        if must_fail and r[0] == "rows":
            problems.append("the call the lever makes fail was not refused: %s" % s[1:].format(**fmt))
        elif not must_fail and r[0] == "error":
            problems.append("the lever's %r failed: %s %s" % (s.format(**fmt), r[1], r[2]))
    return problems


def gained(su_cur, role):
    """Rights the role holds that it must not: checked in the catalog."""
    su_cur.execute("SELECT r.rolsuper, pg_has_role(r.oid, e.extowner, 'MEMBER')"
                   " FROM pg_roles r, pg_extension e WHERE r.rolname = %s AND e.extname = 'idem_gate'",
                   (role,))
    sup, member = su_cur.fetchone()
    bad = []
    if sup:
        bad.append("%s became superuser" % role)
        su_cur.execute("ALTER ROLE %s NOSUPERUSER" % role)
    if member:
        bad.append("%s is a member of the extension's owner" % role)
    su_cur.execute("SELECT who, how FROM public.mx_pwned WHERE who <> %s", (role,))
    for who, how in su_cur.fetchall():
        bad.append("%s's code ran as %s (%s)" % (role, who, how))
    su_cur.execute("DELETE FROM public.mx_pwned")
    return bad


def fresh_db(su_cur, name, owner="postgres", extension=True, quiet=False):
    su_cur.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)
    su_cur.execute("CREATE DATABASE %s OWNER %s" % (name, owner))
    if quiet:
        # the janitor makes no pass in a read-only session
        su_cur.execute("ALTER DATABASE %s SET default_transaction_read_only = on" % name)
        QUIET.add(name)
    c = connect(name)
    cur = c.cursor()
    cur.execute("ALTER SCHEMA public OWNER TO postgres")
    if not extension:
        return c
    cur.execute("SET client_min_messages = warning; CREATE EXTENSION idem_gate; RESET client_min_messages")
    cur.execute("CREATE TABLE public.mx_pwned (who name, how text);"
                " GRANT INSERT, SELECT ON public.mx_pwned TO PUBLIC")
    return c


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
    "SET LOCAL idem_gate.workflow_acl = off refused in a savepoint":
        dict(xact=True, sql=["SAVEPOINT s", "!SET LOCAL idem_gate.workflow_acl = off",
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


# -- 2. caches a caller primes ----------------------------------------------

# Attached code whose function is an inlinable SQL function calling
# split_part without a schema (audit defect 08): PostgreSQL inlines it
# into the expression a backend caches (the relcache for an index, the
# typcache for a domain) under the search_path of whoever first plans it.
CACHED_SETUP = r"""
CREATE FUNCTION public.key_prefix(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT split_part(k, '_', 1) $$;
-- the same careless name, an operator this time
CREATE FUNCTION public.key_tail(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT k || '_' $$;
-- the careless function one call down: inlining recurses
CREATE FUNCTION public.key_outer(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT public.key_prefix(k) $$;
CREATE DOMAIN public.mx_kdom AS text CHECK (public.key_prefix(coalesce(VALUE, 'domain_x')) IS NOT NULL);
CREATE DOMAIN public.mx_kdom2 AS text CHECK (public.key_outer(coalesce(VALUE, 'domain_x')) IS NOT NULL);
CREATE TYPE public.mx_kpair AS (a public.mx_kdom);
CREATE FUNCTION public.mx_ktrig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 'a_b'::public.mx_kdom;
    RETURN NULL;
END $$;
"""
# kind: (attach, detach, the name a refusal must give, the functions it may
# name).  The first three get every priming and every entry point; the
# others, variations on the way the careless name is reached, get the
# primed cache and one writer of each table.  The typcache keeps a domain's
# CHECKs for whatever coerces to the domain, not only for a column of it:
# an array or composite column, a cast in a CHECK, a default, a generated
# column or an index expression.
CACHED_KINDS = {
    "inlined SQL function in an index expression":
        (["CREATE INDEX mx_kie_{t} ON idem_gate.{t} ((public.key_prefix({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kie_{t}"], "mx_kie_", ["key_prefix"]),
    "inlined SQL function in an index predicate":
        (["CREATE INDEX mx_kip_{t} ON idem_gate.{t} ({c}) WHERE public.key_prefix({c}::text) IS NOT NULL"],
         ["DROP INDEX idem_gate.mx_kip_{t}"], "mx_kip_", ["key_prefix"]),
    "inlined SQL function in a domain CHECK":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcol public.mx_kdom"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcol"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function with an operator without a schema, in an index expression":
        (["CREATE INDEX mx_kio_{t} ON idem_gate.{t} ((public.key_tail({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kio_{t}"], "mx_kio_", ["key_tail"]),
    "nested inlined SQL functions in an index expression":
        (["CREATE INDEX mx_kin_{t} ON idem_gate.{t} ((public.key_outer({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kin_{t}"], "mx_kin_", ["key_outer", "key_prefix"]),
    "nested inlined SQL functions in a domain CHECK":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcol2 public.mx_kdom2"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcol2"], "mx_kdom2", ["key_outer", "key_prefix"]),
    "inlined SQL function in the CHECK of an array column's element domain, with a default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_karr public.mx_kdom[] DEFAULT ARRAY['a_b']::public.mx_kdom[]"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_karr"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in the CHECK of a composite column's domain attribute, with a default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcomp public.mx_kpair DEFAULT ROW('a_b')::public.mx_kpair"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcomp"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a table CHECK":
        (["ALTER TABLE idem_gate.{t} ADD CONSTRAINT mx_kcc_{t} CHECK ((({c})::text::public.mx_kdom) IS NOT NULL)"],
         ["ALTER TABLE idem_gate.{t} DROP CONSTRAINT mx_kcc_{t}"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a column default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kdef text DEFAULT ('a_b'::public.mx_kdom)::text"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kdef"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a generated column":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kgen text GENERATED ALWAYS AS"
          " ((({c})::text::public.mx_kdom)::text) STORED"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kgen"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a trigger's function":
        (["CREATE TRIGGER mx_ktr AFTER INSERT OR UPDATE OR DELETE ON idem_gate.{t}"
          " FOR EACH ROW EXECUTE FUNCTION public.mx_ktrig()"],
         ["DROP TRIGGER mx_ktr ON idem_gate.{t}"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in an index expression":
        (["CREATE INDEX mx_kic_{t} ON idem_gate.{t} ((({c})::text::public.mx_kdom))"],
         ["DROP INDEX idem_gate.mx_kic_{t}"], "mx_kdom", ["key_prefix"]),
}

# The actor's split_part and ||: IMMUTABLE, so that PostgreSQL inlines
# the DBA's function into a call of them; their work is done by a
# volatile function, which says in a NOTICE who ran it (a NOTICE survives
# the rollback of a failed call) and names no operator itself.
CACHED_ACTOR = r"""
CREATE SCHEMA mx13_{a} AUTHORIZATION mx_{a};
SET ROLE mx_{a};
CREATE FUNCTION mx13_{a}.mx_lever(what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'mx13 code ran as %', current_user;
    INSERT INTO public.mx_pwned VALUES (current_user, pg_catalog.concat('cached ', what));
    BEGIN EXECUTE 'ALTER ROLE mx_{a} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    RETURN what;
END $$;
CREATE FUNCTION mx13_{a}.split_part(what text, sep text, n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT mx13_{a}.mx_lever(what) $$;
CREATE FUNCTION mx13_{a}.mx_cat(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT mx13_{a}.mx_lever(a) $$;
CREATE OPERATOR mx13_{a}.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = mx13_{a}.mx_cat);
RESET ROLE;
"""

# How the actor primes its backend's caches before the call: it plans a
# query on every extension table (refused at execution for lack of
# privilege or not: planning loads the indexes' expressions) and casts to
# the domain, under a path that lists its schema first.
PRIMINGS = {
    "caches primed": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public", "{prime}"],
    "caches primed in a rolled-back savepoint": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public",
                                                 "SAVEPOINT p", "{prime}", "ROLLBACK TO SAVEPOINT p"],
    "path only, nothing primed": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public"],
}

# The entry points that write the tables the code is attached to (their
# fixtures and calls are matrix.py's)
CACHED_ENTRY_POINTS = ["idem_claim", "idem_claim_ex retry", "idem_claim_many", "idem_heartbeat",
                       "idem_complete", "idem_fail", "idem_resolve", "idem_release", "janitor_run",
                       "grant_workflow", "revoke_workflow"]
# one that inserts into each table the gate writes
CACHED_ENTRY_POINTS_FEW = ["idem_claim", "idem_resolve", "janitor_run", "grant_workflow"]


def cached_cells(su, dbname, matrix, quick):
    """
    Family 2: a DBA attaches code of one kind to every extension table,
    committed; the actor, in a fresh backend, primes its caches under its
    own path and calls an entry point that writes those tables.  On 1.2 the
    owner ran the caller's split_part.  1.3 refuses the write (55000, naming
    the index or domain and the function); never a right gained.
    """
    results = []
    sc = su.cursor()
    # no background pass: it would do the fixtures' janitor work, and
    # janitor_run() would then have nothing to write
    c = fresh_db(sc, dbname, "mx_db_owner", extension=False, quiet=True)
    cur = c.cursor()
    cur.execute(matrix.DB_SETUP)
    cur.execute("GRANT SELECT ON public.mx_pwned TO PUBLIC")
    for a in ("client", "operator"):
        cur.execute(CACHED_ACTOR.format(a=a))
    cur.execute(CACHED_SETUP)
    eps = [ep for ep in matrix.ENTRY_POINTS if ep["name"] in CACHED_ENTRY_POINTS]
    # the fixtures, made before any code is attached (1.3 refuses the
    # writes that make them afterwards); every call is rolled back
    toks = {}
    for i, ep in enumerate(eps):
        k = "k13c%d" % i
        last = None
        for st in matrix.FIXTURES[ep["fix"]]:
            if st.startswith("SET LOCAL"):
                continue
            cur.execute(st.format(k=k))
            if cur.description is not None:
                last = cur.fetchall()
        toks[ep["name"]] = str(last[0][0]) if ep["fix"] in ("processing",) and last else "NULL"
    # LIMIT 0: planned (which loads the indexes' expressions), no row read
    prime = ["SELECT 1 FROM idem_gate.%s WHERE public.key_prefix(%s::text) IS NOT NULL LIMIT 0" % (t, col)
             for t, col in matrix.TABLES.items()]
    prime += ["SELECT 'x_y'::public.mx_kdom", "SELECT NULL::public.mx_kdom", "SELECT 'x_y'::public.mx_kdom2"]
    kinds = list(CACHED_KINDS)[:1] if quick else list(CACHED_KINDS)
    for kind in kinds:
        attach, detach, named, functions = CACHED_KINDS[kind]
        for t, col in matrix.TABLES.items():
            for st in attach:
                cur.execute(st.format(t=t, c=col))
        for priming, pstmts in PRIMINGS.items():
            if priming != "caches primed" and (quick or kind not in list(CACHED_KINDS)[:3]):
                continue
            for i, ep in enumerate(eps):
                if kind not in list(CACHED_KINDS)[:3] and ep["name"] not in CACHED_ENTRY_POINTS_FEW:
                    continue
                a = "client" if ep["who"] == "client" else "operator"
                role = "mx_" + a
                k = "k13c%d" % i
                notices = collections.deque()
                ac = connect(dbname, role, notices)
                acur = ac.cursor()
                acur.execute("BEGIN")
                problems = []
                for st in pstmts:
                    if st == "{prime}":
                        for p in prime:
                            # refused or not, each in its own savepoint
                            acur.execute("SAVEPOINT q")
                            if attempt(acur, p)[0] == "error":
                                acur.execute("ROLLBACK TO SAVEPOINT q")
                            else:
                                acur.execute("RELEASE SAVEPOINT q")
                    else:
                        acur.execute(st.format(a=a))
                acur.execute("SAVEPOINT call")
                notices.clear()		# the actor's own split_part ran while it primed
                r = attempt(acur, ep["sql"].format(k=k, tok=toks[ep["name"]]))
                if r[0] == "error":
                    acur.execute("ROLLBACK TO SAVEPOINT call")
                    if r[1] == "55000" and ep["expect"] != "55000":
                        if named not in r[2] or not any(f in r[2] for f in functions):
                            problems.append("refused without naming the %s and the function: %s" % (
                                "domain" if "domain" in kind else "index", r[2]))
                    elif r[1] != ep["expect"]:
                        problems.append("refused with %s, not 55000: %s" % (r[1], r[2]))
                # in the call's transaction: a right gained and then rolled
                # back is gained all the same
                acur.execute("SELECT r.rolsuper, pg_has_role(r.oid, e.extowner, 'MEMBER')"
                             " FROM pg_roles r, pg_extension e WHERE r.rolname = current_user"
                             " AND e.extname = 'idem_gate'")
                sup, member = acur.fetchone()
                if sup:
                    problems.append("%s became superuser" % role)
                if member:
                    problems.append("%s is a member of the extension's owner" % role)
                ran = sorted({n.strip() for n in notices if "mx13 code ran as" in n and role not in n})
                if ran:
                    problems.append("the actor's split_part ran as another role: %s" % "; ".join(ran))
                acur.execute("ROLLBACK")
                ac.close()
                problems += gained(sc_db(dbname), role)
                results.append(("%s / %s / %s / every table / %s" % (a, priming, ep["name"], kind), problems))
        for t, col in matrix.TABLES.items():
            for st in detach:
                cur.execute(st.format(t=t, c=col))
    c.close()
    sc.execute("DROP DATABASE %s WITH (FORCE)" % dbname)
    return results


_sc_cache = {}


def sc_db(dbname):
    """A superuser cursor in dbname (kept for the family's cells)."""
    if dbname not in _sc_cache or _sc_cache[dbname].connection.closed:
        _sc_cache[dbname] = connect(dbname).cursor()
    return _sc_cache[dbname]


def close_sc_cache():
    for cur in _sc_cache.values():
        if not cur.connection.closed:
            cur.connection.close()
    _sc_cache.clear()


# -- 5. sessions holding rows against the janitor ----------------------------

# The janitor's steps: the state of the rows (made by STATE_MAKERS), how
# old they are made, and what a processed row looks like.  The policy of
# each cell's workflow: retention 1 hour, receipts 1 minute, stuck after
# 10 minutes; audit rows older than an hour are pruned.
JANITOR_STEPS = {
    "delete completed": ("completed", "2 hours", "gone"),
    "delete failed_retryable": ("failed", "2 hours", "gone"),
    "clear receipts": ("completed", "2 minutes", "result IS NULL"),
    "stuck alerts": ("processing", "1 hour", "alerted_token IS NOT NULL"),
    "clear payloads of processing": ("processing", "2 minutes", "payload IS NULL"),
    "clear payloads of failed_retryable": ("failed", "2 minutes", "payload IS NULL"),
    "clear payloads of needs_review": ("review", "2 minutes", "payload IS NULL"),
    "prune audit": ("audit", "2 hours", "gone"),
}

STATE_MAKERS = {
    "processing": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')"],
    "completed": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
                  "SELECT idem_complete('{k}', '{w}', {tok}, '{{\"r\": 1}}')"],
    "failed": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
               "SELECT idem_fail('{k}', '{w}', {tok}, 'before', true)"],
    "review": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
               "SELECT idem_fail('{k}', '{w}', {tok}, 'after', false)"],
    # the trail is append-only: its rows are written old
    "audit": ["INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key, token, reason)"
              " VALUES (now() - '{age}'::interval, 'postgres', 'postgres', 'release', '{w}', '{k}', 1, 'old')"],
}

# Who holds the row, and how: a client's or operator's gate call left
# uncommitted, a DBA's row lock, or a DBA's table lock (then nothing of the
# table can be written: the pass must only not wait on it, and the next
# one do the work).  (The client's repeated idem_complete and idem_fail on
# a failed claim take no row lock in 1.2: nothing to hold.)
HOLDERS = {
    "client heartbeat": ("mx_client13", "SELECT idem_heartbeat('{k}', '{w}', {tok})", ["processing"]),
    "client retry": ("mx_client13", "SELECT outcome FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-H')",
                     ["failed"]),
    "operator release": ("mx_oper13", "SELECT idem_release('{k}', '{w}', 'held open')",
                         ["processing", "completed", "failed", "review"]),
    "operator resolve": ("mx_oper13", "SELECT idem_resolve('{k}', '{w}', 'completed', '{{}}', 'held open')",
                         ["review"]),
    "DBA row lock": ("postgres", "SELECT 1 FROM ONLY idem_gate.audit WHERE key = '{k}' FOR UPDATE", ["audit"]),
    "DBA table lock": ("postgres", "LOCK TABLE ONLY idem_gate.{table} IN SHARE MODE", ["completed", "audit"]),
}
# the steps a table lock is tried against: one per table
TABLE_LOCK_STEPS = ["delete completed", "prune audit"]

JANITOR_SETUP = r"""
GRANT USAGE ON SCHEMA idem_gate TO mx_client13, mx_oper13;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
    idem_claim_ex(text, text, interval, text, text, jsonb), idem_heartbeat(text, text, bigint),
    idem_complete(text, text, bigint, jsonb), idem_fail(text, text, bigint, text, boolean)
    TO mx_client13;
GRANT EXECUTE ON FUNCTION idem_release(text, text, text), idem_resolve(text, text, text, jsonb, text),
    idem_gate.janitor_run() TO mx_oper13;
SELECT idem_gate.grant_workflow('mx_client13', 'mx13%');
SELECT idem_gate.grant_workflow('mx_oper13', 'mx13%');
"""


def make_claim(cur, state, k, w, age):
    tok = None
    for st in STATE_MAKERS[state]:
        cur.execute(st.format(k=k, w=w, age=age, tok=tok))
        if tok is None and cur.description is not None:
            tok = cur.fetchone()[0]
    if state != "audit":
        cur.execute("UPDATE ONLY idem_gate.claims SET created_at = created_at - d, claimed_at = claimed_at - d,"
                    " updated_at = updated_at - d, completed_at = completed_at - d"
                    " FROM (SELECT %s::interval) v(d) WHERE workflow = %s AND key = %s", (age, w, k))
    return tok


def processed(cur, state, done, k, w):
    if state == "audit":
        cur.execute("SELECT count(*) = 0 FROM ONLY idem_gate.audit WHERE key = %s", (k,))
    elif done == "gone":
        cur.execute("SELECT count(*) = 0 FROM ONLY idem_gate.claims WHERE workflow = %s AND key = %s", (w, k))
    else:
        cur.execute("SELECT count(*) = 1 FROM ONLY idem_gate.claims WHERE workflow = %%s AND key = %%s AND %s"
                    % done, (w, k))
    return cur.fetchone()[0]


class Janitor(threading.Thread):
    """idem_gate.janitor_run() in a connection of its own, lock_timeout unset."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.conn = connect(db)
        cur = self.conn.cursor()
        cur.execute("SET lock_timeout = 0; SET idem_gate.audit_retention = '1h'")
        cur.execute("SELECT pg_backend_pid()")
        self.pid = cur.fetchone()[0]
        self.result = None

    def run(self):
        self.result = attempt(self.conn.cursor(), "SELECT deleted, alerts FROM idem_gate.janitor_run()")


class Victim(threading.Thread):
    """Another claim's call, with 3 s to answer, while a row is held."""

    def __init__(self, db, what, sql, want):
        super().__init__(daemon=True)
        self.db, self.what, self.sql, self.want = db, what, sql, want
        self.problems = []

    def run(self):
        v = connect(self.db, "mx_client13")
        vc = v.cursor()
        vc.execute("SET statement_timeout = '3s'")
        r = attempt(vc, self.sql)
        v.close()
        got = r[1][0][0] if r[0] == "rows" else "%s %s" % (r[1], r[2])
        if got != self.want:
            self.problems.append("%s of another claim answered %s" % (self.what, got))


def watch_locks(sc, db, pids, seconds, done=lambda: False, enough=1.0):
    """
    Sample the lock waits for seconds (or until done(), or a wait of
    enough seconds): the longest wait on a lock of any janitor (the given
    backends, and the background janitors in db, or in any database), as
    pg_locks.waitstart tells it.
    """
    longest = 0.0
    end = time.time() + seconds
    while True:
        sc.execute("SELECT coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)), 0)"
                   " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                   " WHERE NOT l.granted AND (l.pid = ANY(%s::int[]) OR (a.backend_type = 'idem_gate janitor'"
                   " AND (%s::name IS NULL OR a.datname = %s)))", (list(pids), db, db))
        longest = max(longest, float(sc.fetchone()[0]))
        if longest >= enough or time.time() >= end or done():
            return longest
        time.sleep(0.05)


def janitor_cells(su, dbname, quick):
    """
    Family 5: an open transaction holds one row each janitor step wants.
    The janitor (janitor_run() in another connection) must not wait for
    it, must still do the step's other rows, and a completion and a
    takeover of other claims must not wait behind it; once the holder is
    gone, the next pass does the held row too.  On 1.2 the deletion of
    completed rows, receipt and payload clearing and the audit's pruning
    waited as long as the holder stayed open.
    """
    results = []
    sc = su.cursor()
    c = fresh_db(sc, dbname)
    cur = c.cursor()
    cur.execute(JANITOR_SETUP)
    n = 0
    for step, (state, age, done) in JANITOR_STEPS.items():
        for holder, (role, hold_sql, states) in HOLDERS.items():
            if state not in states or (hold_sql.startswith("LOCK") and step not in TABLE_LOCK_STEPS):
                continue
            n += 1
            if quick and (step not in ("clear payloads of processing", "delete completed")
                          or hold_sql.startswith("LOCK")):
                continue
            w = "mx13_j%d" % n
            problems = []
            cur.execute("INSERT INTO idem_gate.policies (workflow, retention, failed_retention,"
                        " receipt_retention, stuck_after) VALUES (%s, '1 hour', '1 hour', '1 minute',"
                        " '10 minutes')", (w,))
            held_tok = make_claim(cur, state, w + "_held", w, age)
            make_claim(cur, state, w + "_other", w, age)
            # other claims, to complete and to take over meanwhile
            v1 = make_claim(cur, "processing", w + "_v1", w, "2 minutes")
            make_claim(cur, "processing", w + "_v2", w, "1 hour")

            h = connect(dbname, role)
            hc = h.cursor()
            hc.execute("BEGIN")
            table_lock = hold_sql.startswith("LOCK")
            r = attempt(hc, hold_sql.format(k=w + "_held", w=w, tok=held_tok,
                                            table="audit" if state == "audit" else "claims"))
            if r[0] == "error":
                problems.append("the holder's call failed: %s %s" % (r[1], r[2]))
            j = Janitor(dbname)
            j.start()
            waited = watch_locks(sc, dbname, [j.pid], 2.5, lambda: not j.is_alive())
            if waited >= 1.0:
                problems.append("the janitor waited %.1f s on a lock" % waited)
            # both at once, each given 3 s (a DBA's table lock holds them
            # up by itself)
            others = [] if table_lock else [Victim(dbname, what, sql, want) for what, sql, want in [
                ("a completion", "SELECT idem_complete('%s_v1', '%s', %d, '{\"v\": 1}')::text" % (w, w, v1),
                 "true"),
                ("a takeover", "SELECT outcome::text FROM idem_claim_ex('%s_v2', '%s', '1 minute', NULL,"
                               " 'run-T')" % (w, w), "stale_taken")]]
            for v in others:
                v.start()
            for v in others:
                v.join()
                problems += v.problems
            if j.is_alive():
                sc.execute("SELECT pg_cancel_backend(%s)", (j.pid,))
                j.join(10)
                problems.append("the janitor's pass did not end while the holder was open")
            elif j.result[0] == "error":
                problems.append("the janitor's pass failed: %s %s" % (j.result[1], j.result[2]))
            elif not table_lock and not processed(cur, state, done, w + "_other", w):
                problems.append("the step's other row was not done (%s)" % done)
            j.conn.close()
            hc.execute("ROLLBACK")
            h.close()
            # the holder gone, the next pass does the held row
            j2 = connect(dbname)
            r = attempt(j2.cursor(), "SET statement_timeout = '10s'; SET idem_gate.audit_retention = '1h';"
                                     " SELECT * FROM idem_gate.janitor_run()")
            j2.close()
            if r[0] == "error":
                problems.append("the next pass failed: %s %s" % (r[1], r[2]))
            elif not all(processed(cur, state, done, w + x, w) for x in ("_held", "_other")):
                problems.append("the held row was not done by the next pass after its holder ended")
            cur.execute("DELETE FROM ONLY idem_gate.claims WHERE workflow = %s", (w,))
            results.append(("%s / holds %s of %s / janitor_run() / claims, audit / none"
                            % (holder, "the table" if table_lock else "a row", step), problems))
    c.close()
    sc.execute("DROP DATABASE %s WITH (FORCE)" % dbname)
    return results


def worker_lock_cells(su, dbprefix, naptime):
    """
    Family 5, background janitor (naptime already 1 s): hostile sessions
    in max_janitors databases each hold a processing claim whose payload
    is due for clearing; a claim stuck in another database is still
    announced within stuck_after + 2 x naptime, no janitor waits on a lock
    for more than about a second, and the hostile databases' other rows
    are done.  On 1.2 every janitor slot waited forever.
    """
    sc = su.cursor()
    sc.execute("SHOW idem_gate.max_janitors")
    slots = int(sc.fetchone()[0])
    names = ["%s_13h%d" % (dbprefix, i) for i in range(slots)]
    victim = "%s_13hv" % dbprefix
    holders = []
    problems = []
    try:
        for name in names:
            c = fresh_db(sc, name)
            cur = c.cursor()
            cur.execute(JANITOR_SETUP)
            cur.execute("INSERT INTO idem_gate.policies (workflow, receipt_retention, stuck_after)"
                        " VALUES ('mx13_h', '1 minute', '10 minutes')")
            tok = make_claim(cur, "processing", "h_held", "mx13_h", "2 minutes")
            make_claim(cur, "processing", "h_other", "mx13_h", "2 minutes")
            c.close()
            h = connect(name, "mx_client13")
            hc = h.cursor()
            hc.execute("BEGIN")
            hc.execute("SELECT idem_heartbeat('h_held', 'mx13_h', %d)" % tok)
            holders.append(h)
        vconn = fresh_db(sc, victim)
        vcur = vconn.cursor()
        stuck_after = 3
        vcur.execute("INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('mx13_v', '%d seconds')"
                     % stuck_after)
        vcur.execute("SELECT idem_claim('v_stuck', 'mx13_v')")
        t0 = time.time()
        # polled every 0.2 s: half a second of slack for the polling
        deadline = t0 + stuck_after + 2 * naptime + 0.5
        alerted_at = None
        longest = 0.0
        while time.time() < deadline + 3 and alerted_at is None:
            longest = max(longest, watch_locks(sc, None, [], 0.2))
            vcur.execute("SELECT alerted_token IS NOT NULL FROM ONLY idem_gate.claims WHERE key = 'v_stuck'")
            if vcur.fetchone()[0]:
                alerted_at = time.time()
        if alerted_at is None or alerted_at > deadline:
            problems.append("the stuck claim of another database was announced %s (deadline %.1f s)"
                            % ("after %.1f s" % (alerted_at - t0) if alerted_at else "not at all",
                               deadline - t0))
        longest = max(longest, watch_locks(sc, None, [], 1.5))
        if longest >= 1.0:
            problems.append("a janitor waited %.1f s on a lock" % longest)
        for name in names:
            c = connect(name)
            if not processed(c.cursor(), "processing", "payload IS NULL", "h_other", "mx13_h"):
                problems.append("%s: the payload nobody held was not cleared" % name)
            c.close()
        vconn.close()
    finally:
        for h in holders:
            h.close()
        for name in names + [victim]:
            sc.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)
    return [("client / holds a row in %d databases (max_janitors) / background janitor / claims / none" % slots,
             problems)]


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
