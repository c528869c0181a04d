#!/usr/bin/python3
"""
The attack matrix: every actor x lever x entry point x extension table x
kind of attached code, generated from the tables below (docs/security.md).

A cell is one attempt: a DBA attaches code of one kind to one of the
extension's tables, code that names a function and a table without a
schema, as careless code does; an actor uses one lever to make those names
resolve to things of its own (functions that try to make it superuser and
record who ran them); the actor calls one entry point.  Each cell asserts:

  - no right gained: the actor is not superuser, not a member of the
    extension's owner, and none of its code ran as another role;
  - no row lost: the canary rows of another workflow, and the rows of a
    DBA's child table, are as they were;
  - the same answer and rows as the SQL path (idem_gate.direct_writes off),
    or a refusal with a SQLSTATE of the allowed set;
  - no error shows the token that owns a claim;
  - where the cell is the plain case (no code attached, no lever), the
    entry point does its job (the expected answer).

Each cell runs in one transaction of one session (SET ROLE for the actor)
and is rolled back, so cells are independent and cheap; a lever that makes
temporary objects gets a session of its own.  Levers that act at login
(ALTER ROLE / DATABASE ... SET) are applied as PostgreSQL applies them, as
the session's value; the background janitor, which does log in, gets real
database and role settings in the worker cells.  Cells for LISTEN, the
extension scripts and the grant rules come after.

A new table, entry point, kind or lever is covered by adding one entry to
TABLES, ENTRY_POINTS, KINDS or LEVERS.  The levers of 1.3 (session state,
primed caches, leaky functions, role members, held rows, commit paths) are
generated the same way in levers13.py, from its own tables.

    PGHOST=... PGPORT=... PGUSER=postgres /usr/bin/python3 test/security/matrix.py [--quick]

IDEM_EDITION=managed attacks the managed edition instead, installed by a
role that is no superuser (levers13_common.install_gate()), on a server
that need not preload idem_gate; the cells of the extension scripts and of
the background janitor, which it has neither of, are left out.

Ends with "N passed, N failed" (N = cells); prints every failing cell.
"""
import itertools
import json
import os
import re
import select
import sys
import time

import psycopg2
import psycopg2.extensions

import levers13
import levers13_common

DB = os.environ.get("IDEM_MATRIX_DB", "idem_matrix")
QUICK = "--quick" in sys.argv

# -- what the matrix is made of ------------------------------------------

# the extension's tables: a text column the gate writes, for expressions
TABLES = {
    "claims": "key",
    "audit": "action",
    "janitor_watermarks": "workflow",
    "policies": "workflow",
    "workflow_acl": "pattern",
}

# Kinds of attached code: SQL to attach it to table {t} (column {c}).  The
# DBA's functions (public.mx_code*) call mx_lever() and write mx_log
# without a schema: the names an actor may try to redirect.
KINDS = {
    "none": [],
    "trigger": ["CREATE TRIGGER mx_t AFTER INSERT OR UPDATE OR DELETE ON idem_gate.{t}"
                " FOR EACH ROW EXECUTE FUNCTION public.mx_trig()"],
    "statement_trigger": ["CREATE TRIGGER mx_st BEFORE INSERT OR UPDATE OR DELETE ON idem_gate.{t}"
                          " FOR EACH STATEMENT EXECUTE FUNCTION public.mx_trig()"],
    "rule": ["CREATE RULE mx_ri AS ON INSERT TO idem_gate.{t} DO ALSO SELECT public.mx_code('rule')",
             "CREATE RULE mx_ru AS ON UPDATE TO idem_gate.{t} DO ALSO SELECT public.mx_code('rule')",
             "CREATE RULE mx_rd AS ON DELETE TO idem_gate.{t} DO ALSO SELECT public.mx_code('rule')"],
    "check": ["ALTER TABLE idem_gate.{t} ADD CONSTRAINT mx_c CHECK (public.mx_code({c}::text))"],
    "default": ["ALTER TABLE idem_gate.{t} ADD COLUMN mx_def text DEFAULT public.mx_code_t('default')"],
    "domain": ["ALTER TABLE idem_gate.{t} ADD COLUMN mx_dcol public.mx_dom"],
    "index_expression": ["CREATE INDEX mx_ie ON idem_gate.{t} ((public.mx_code_ix({c}::text)))"],
    "index_predicate": ["CREATE INDEX mx_ip ON idem_gate.{t} ({c}) WHERE public.mx_code_ixb({c}::text)"],
    "policy": ["ALTER TABLE idem_gate.{t} ENABLE ROW LEVEL SECURITY",
               "CREATE POLICY mx_p ON idem_gate.{t} USING (public.mx_code({c}::text))"],
    "child": ["CREATE TABLE public.mx_child () INHERITS (idem_gate.{t})",
              "CREATE TRIGGER mx_ct AFTER INSERT OR UPDATE OR DELETE ON public.mx_child"
              " FOR EACH ROW EXECUTE FUNCTION public.mx_trig()"],
    "publication": ["SET LOCAL client_min_messages = error",
                    "CREATE PUBLICATION mx_pub FOR TABLE idem_gate.{t}"],
    # one of the extension's CHECKs redefined under its own name
    "redefined_check": ["ALTER TABLE idem_gate.claims DROP CONSTRAINT claims_key_not_empty,"
                        " ADD CONSTRAINT claims_key_not_empty CHECK (public.mx_code(key) AND key <> '')"],
}
KIND_TABLES = {"redefined_check": ["claims"]}

# Actors: the role, the grants it has, the levers it controls.
ACTORS = {
    "client": ["session_path", "temp_objects", "user_schema", "role_setting", "none"],
    "operator": ["session_path", "temp_objects", "user_schema", "role_setting", "none"],
    "db_owner": ["session_path", "temp_objects", "user_schema", "role_setting",
                 "database_setting", "none"],
    "nobody": ["session_path", "temp_objects", "none"],
}

# Levers: SQL the actor runs in its session before the call.  The actor's
# own schema (mx_<actor>) holds its mx_lever() functions and its own
# split_part(), and its paths list pg_catalog after that schema so that
# its split_part() comes first.
LEVERS = {
    "none": [],
    "session_path": ["SET LOCAL search_path = mx_{a}, pg_catalog, public"],
    "user_schema": ["SET LOCAL search_path = \"$user\", pg_catalog, public"],
    "role_setting": ["ALTER ROLE mx_{a} SET search_path = mx_{a}, pg_catalog, public",
                     "SELECT set_config('search_path', 'mx_' || current_user || ', pg_catalog, public', true)"],
    "database_setting": ["ALTER DATABASE " + DB + " SET search_path = mx_{a}, pg_catalog, public",
                         "SELECT set_config('search_path', 'mx_' || current_user || ', pg_catalog, public', true)"],
    "temp_objects": [
        "CREATE FUNCTION pg_temp.mx_pwn() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN INSERT INTO public.mx_pwned VALUES (current_user, 'temp');"
        " BEGIN EXECUTE 'ALTER ROLE mx_{a} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;"
        " RETURN NULL; END $$",
        "CREATE TEMP VIEW mx_log AS SELECT ''::text AS what",
        "CREATE TRIGGER mx_pwn INSTEAD OF INSERT ON pg_temp.mx_log"
        " FOR EACH ROW EXECUTE FUNCTION pg_temp.mx_pwn()",
        "SET LOCAL search_path = mx_{a}, pg_catalog, public"],
}
# levers that run before SET ROLE (the role's or database's own settings
# are written by whoever may: the actor itself, the database owner)
LEVER_AS_SUPERUSER = {"role_setting", "database_setting"}

# Entry points: who may call them, the tables they touch, the fixture the
# superuser makes first (its result is {tok}), the call, and the answer of
# the plain case.
ENTRY_POINTS = [
    dict(name="idem_claim", who="client", tables=["claims"], fix=None,
         sql="SELECT idem_claim('{k}', 'mx_wf')", expect="new"),
    dict(name="idem_claim_ex takeover", who="client", tables=["claims"], fix="aged",
         sql="SELECT outcome, attempt FROM idem_claim_ex('{k}', 'mx_wf', '1 minute', NULL, 'run-B')",
         expect="stale_taken"),
    dict(name="idem_claim_ex retry", who="client", tables=["claims"], fix="failed",
         sql="SELECT outcome, attempt FROM idem_claim_ex('{k}', 'mx_wf', NULL, NULL, 'run-C')",
         expect="new"),
    dict(name="idem_claim_many", who="client", tables=["claims"], fix=None,
         sql="SELECT ord, outcome FROM idem_claim_many(ARRAY['{k}', '{k}_b', '{k}'], 'mx_wf')",
         expect="in_flight"),
    dict(name="idem_heartbeat", who="client", tables=["claims"], fix="processing",
         sql="SELECT idem_heartbeat('{k}', 'mx_wf', {tok})", expect="True"),
    dict(name="idem_complete", who="client", tables=["claims"], fix="processing",
         sql="SELECT idem_complete('{k}', 'mx_wf', {tok}, '{{\"r\": 1}}')", expect="True"),
    dict(name="idem_complete wrong token", who="client", tables=["claims"], fix="processing",
         sql="SELECT idem_complete('{k}', 'mx_wf', 0, '{{\"r\": 2}}')", expect="55000"),
    dict(name="idem_fail", who="client", tables=["claims"], fix="processing",
         sql="SELECT idem_fail('{k}', 'mx_wf', {tok}, 'boom', false)", expect="needs_review"),
    dict(name="idem_status", who="client", tables=["claims"], fix="completed",
         sql="SELECT state, result FROM idem_status('{k}', 'mx_wf')", expect="completed"),
    dict(name="idem_resolve", who="operator", tables=["claims", "audit"], fix="review",
         sql="SELECT idem_resolve('{k}', 'mx_wf', 'completed', '{{\"by\": \"ops\"}}', 'checked')",
         expect="completed"),
    dict(name="idem_release", who="operator", tables=["claims", "audit"], fix="processing",
         sql="SELECT idem_release('{k}', 'mx_wf', 'stuck')", expect="True"),
    dict(name="janitor_run", who="operator",
         tables=["claims", "audit", "janitor_watermarks", "policies"], fix="janitor",
         sql="SELECT deleted, alerts, escalated FROM idem_gate.janitor_run()", expect="(1, 1, 1)"),
    dict(name="idem_complete after a switch-over", who="client", tables=["claims"], fix="switched",
         sql="SELECT idem_complete('{k}', 'mx_wf', {tok}, '{{\"by\": \"released run\"}}')",
         expect="55000"),
    dict(name="select another workflow's claims", who="client", tables=["claims"], fix="secret",
         sql="SELECT count(*) FROM idem_gate.claims WHERE workflow = 'mxXa_secret'", expect="[(0,)]"),
    dict(name="idem_status of another workflow", who="client", tables=["claims"], fix="secret",
         sql="SELECT * FROM idem_status('{k}', 'mxXa_secret')", expect="42501"),
    dict(name="grant_workflow", who="operator", tables=["workflow_acl"], fix=None,
         sql="SELECT idem_gate.grant_workflow('mx_client', 'mx_wf_{k}%')", expect="True"),
    dict(name="revoke_workflow", who="operator", tables=["workflow_acl"], fix="acl",
         sql="SELECT idem_gate.revoke_workflow('mx_client', 'mx_wf_{k}_x')", expect="True"),
]
# the db owner is a client too
ACTOR_ROLE_OF = {"client": "client", "operator": "operator", "db_owner": "client", "nobody": None}

# SQLSTATEs a refusal may have: the gate's own (42501 temporary objects,
# 55000 a rule or a state), a missing privilege (42501), and what the
# DBA's code raises once its unqualified names no longer resolve under the
# pinned search_path (42883, 42P01).
ALLOWED = {"42501", "55000", "42883", "42P01"}

# -- the fixture ---------------------------------------------------------

SETUP = r"""
CREATE ROLE mx_client LOGIN;
CREATE ROLE mx_operator LOGIN;
CREATE ROLE mx_db_owner LOGIN;
CREATE ROLE mx_nobody LOGIN;
"""

# after the gate is installed (levers13_common.install_gate())
DB_SETUP = r"""
GRANT USAGE ON SCHEMA idem_gate TO mx_client, mx_operator, mx_db_owner;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval),
    idem_claim_ex(text, text, interval, text, text),
    idem_claim_many(text[], text, interval, text[], text),
    idem_heartbeat(text, text, bigint), idem_complete(text, text, bigint, jsonb),
    idem_fail(text, text, bigint, text, boolean), idem_status(text, text)
    TO mx_client, mx_db_owner;
GRANT SELECT (workflow, key, token, state, execution_id) ON idem_gate.claims TO mx_client, mx_db_owner;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, jsonb, text),
    idem_release(text, text, text), idem_gate.janitor_run(),
    idem_gate.grant_workflow(name, text), idem_gate.revoke_workflow(name, text)
    TO mx_operator;
SELECT idem_gate.grant_workflow('mx_operator', 'mx%');
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention, stuck_after)
    VALUES ('mx_wf', '1 hour', '1 minute', '10 minutes');

-- what the DBA writes, without schemas
CREATE TABLE public.mx_log (what text);
CREATE TABLE public.mx_pwned (who name, how text);
GRANT INSERT ON public.mx_pwned TO PUBLIC;
CREATE FUNCTION public.mx_lever(what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RETURN what; END $$;
CREATE FUNCTION public.mx_lever_sql(what text) RETURNS text LANGUAGE sql AS $$ SELECT what $$;
CREATE FUNCTION public.mx_code(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mx_lever(what);
    INSERT INTO mx_log VALUES (what);
    RETURN true;
END $$;
CREATE FUNCTION public.mx_code_t(what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mx_lever(what);
    INSERT INTO mx_log VALUES (what);
    RETURN what;
END $$;
-- an index's function calls a catalog function without a schema (the 1.1
-- audit's split_part): it resolves while PostgreSQL 17 and 18 build the
-- index with search_path pinned, and a caller whose path lists its own
-- schema before pg_catalog would redirect it when the expression runs
-- later.  PL/pgSQL, not SQL: an SQL function would be inlined into the
-- index's expression once, when the DBA's own backend first reads it, and
-- keep the DBA's split_part for that session; PL/pgSQL plans its
-- statement again under each search_path
CREATE FUNCTION public.mx_code_ix(what text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN RETURN split_part(what, ':', 1); END $$;
CREATE FUNCTION public.mx_code_ixb(what text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN RETURN split_part(what, ':', 1) IS NOT NULL; END $$;
CREATE FUNCTION public.mx_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.mx_code(TG_TABLE_NAME);
    RETURN NULL;
END $$;
CREATE DOMAIN public.mx_dom AS text CHECK (public.mx_code(coalesce(VALUE, 'domain')));

-- a canary workflow: rows that no entry point of a cell may touch
SELECT count(*) FROM (SELECT idem_claim('canary_' || i, 'mx_canary') FROM generate_series(1, 30) i) s;
SELECT count(*) FROM (SELECT idem_complete('canary_' || i, 'mx_canary', NULL, '{"c": 1}')
                      FROM generate_series(1, 20) i) s;
"""

# the actor's schema and its functions, which try to become superuser
ACTOR_SETUP = r"""
CREATE SCHEMA mx_{a} AUTHORIZATION mx_{a};
SET ROLE mx_{a};
CREATE FUNCTION mx_{a}.mx_lever(what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.mx_pwned VALUES (current_user, what);
    BEGIN EXECUTE 'ALTER ROLE mx_{a} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    RETURN what;
END $$;
CREATE FUNCTION mx_{a}.mx_lever_sql(what text) RETURNS text LANGUAGE sql AS $$
    SELECT mx_{a}.mx_lever(what) $$;
CREATE FUNCTION mx_{a}.split_part(what text, sep text, n integer) RETURNS text LANGUAGE sql AS $$
    SELECT mx_{a}.mx_lever(what) $$;
RESET ROLE;
"""

FIXTURES = {
    None: [],
    "processing": ["SELECT token FROM idem_claim_ex('{k}', 'mx_wf', NULL, NULL, 'run-A')"],
    "aged": ["SELECT token FROM idem_claim_ex('{k}', 'mx_wf', NULL, NULL, 'run-A')",
             "UPDATE idem_gate.claims SET created_at = created_at - '1 hour'::interval,"
             " claimed_at = claimed_at - '1 hour'::interval, updated_at = updated_at - '1 hour'::interval"
             " WHERE key = '{k}'"],
    "failed": ["SELECT idem_claim('{k}', 'mx_wf')",
               "SELECT idem_fail('{k}', 'mx_wf', NULL, 'before', true)"],
    "review": ["SELECT idem_claim('{k}', 'mx_wf')",
               "SELECT idem_fail('{k}', 'mx_wf', NULL, 'after', false)"],
    "completed": ["SELECT idem_claim('{k}', 'mx_wf')",
                  "SELECT idem_complete('{k}', 'mx_wf', NULL, '{{\"r\": 0}}')"],
    # one expired completion, one receipt to clear, one stuck claim
    "janitor": ["SELECT idem_claim('{k}_old', 'mx_wf')",
                "SELECT idem_complete('{k}_old', 'mx_wf', NULL, '{{\"r\": 0}}')",
                "SELECT idem_claim('{k}_rcpt', 'mx_wf')",
                "SELECT idem_complete('{k}_rcpt', 'mx_wf', NULL, '{{\"r\": 0}}')",
                "SELECT idem_claim('{k}_stuck', 'mx_wf')",
                "UPDATE idem_gate.claims SET created_at = created_at - d, claimed_at = claimed_at - d,"
                " updated_at = updated_at - d, completed_at = completed_at - d"
                " FROM (VALUES ('{k}_old', '2 hours'::interval), ('{k}_rcpt', '2 minutes'),"
                " ('{k}_stuck', '1 hour')) v(k, d) WHERE key = v.k",
                "SET LOCAL idem_gate.stuck_action = 'review'"],
    "acl": ["SELECT idem_gate.grant_workflow('mx_client', 'mx_wf_{k}_x')"],
    # a blue-green switch-over after a release: {tok} is the released
    # run's token, and the new server's sequence starts low
    "switched": ["SELECT token FROM idem_claim_ex('{k}_prev', 'mx_wf')",
                 "SELECT token FROM idem_claim_ex('{k}', 'mx_wf', NULL, NULL, 'run-A')",
                 "SELECT idem_release('{k}', 'mx_wf', 'looks stuck')",
                 "SELECT setval('idem_gate.token_seq', 1)",
                 "SELECT idem_gate.sync_token_seq()",
                 "SELECT token FROM idem_claim_ex('{k}', 'mx_wf', NULL, NULL, 'run-B')"],
    # a workflow of another team, and a grant whose _ is literal
    "secret": ["SET LOCAL idem_gate.workflow_acl = on",
               "SELECT idem_gate.grant_workflow('mx_client', 'mx_a%')",
               "SELECT idem_claim('{k}', 'mxXa_secret')"],
}

# -- running a cell ------------------------------------------------------

def connect(db, user="postgres"):
    c = psycopg2.connect(dbname=db, user=user)
    c.autocommit = True
    return c


def normalize(s):
    s = re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.+\-]+", "T", str(s))
    s = re.sub(r"\d\d:\d\d:\d\d(\.\d+)?", "D", s)
    s = re.sub(r"token \d+", "token N", s)
    return s


class Cell:
    def __init__(self, n, actor, lever, ep, table, kind):
        self.n, self.actor, self.lever, self.ep, self.table, self.kind = n, actor, lever, ep, table, kind
        self.key = "c%d" % n

    def __str__(self):
        return "%s / %s / %s / %s / %s" % (self.actor, self.lever, self.ep["name"], self.table, self.kind)


def run_statements(cur, stmts, **fmt):
    last = None
    for s in stmts:
        cur.execute(s.format(**fmt))
        if cur.description is not None:
            last = cur.fetchall()
    return last


def snapshot(cur, key):
    """The rows a cell may change, as the superuser reads them."""
    cur.execute("SELECT key, state, attempt, result::text, last_error, execution_id, alerted_token IS NOT NULL"
                " FROM ONLY idem_gate.claims WHERE key LIKE %s ORDER BY key", (key + "%",))
    claims = cur.fetchall()
    cur.execute("SELECT key, action, state_before, state_after, reason FROM ONLY idem_gate.audit"
                " WHERE key LIKE %s ORDER BY id", (key + "%",))
    audit = cur.fetchall()
    cur.execute("SELECT role::text, pattern FROM ONLY idem_gate.workflow_acl ORDER BY 1, 2")
    acl = cur.fetchall()
    cur.execute("SELECT count(*) FROM public.mx_log")
    log = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM ONLY idem_gate.janitor_watermarks")
    marks = cur.fetchone()[0]
    return normalize((claims, audit, acl, log, marks))


def verdicts(cur, cell):
    """Did the actor gain a right, or lose the owner a row?"""
    bad = []
    role = "mx_" + cell.actor
    cur.execute("SELECT r.rolsuper, pg_has_role(r.oid, " + levers13_common.OWNER_OID + ", 'MEMBER')"
                " FROM pg_roles r WHERE r.rolname = %s", (role,))
    sup, member = cur.fetchone()
    if sup:
        bad.append("the actor became superuser")
    if member:
        bad.append("the actor is a member of the extension's owner")
    cur.execute("SELECT who, how FROM public.mx_pwned WHERE who <> %s", (role,))
    for who, how in cur.fetchall():
        bad.append("the actor's code ran as %s (%s)" % (who, how))
    cur.execute("SELECT count(*) FROM ONLY idem_gate.claims WHERE workflow = 'mx_canary'")
    if cur.fetchone()[0] != 30:
        bad.append("canary rows of another workflow were lost")
    return bad


class Unattachable(Exception):
    """PostgreSQL refused to attach a cell's code: the cell tests nothing."""


def attempt(conn, cell, direct):
    """One run of the cell; returns (answer, rows, problems), all rolled back."""
    cur = conn.cursor()
    fmt = dict(k=cell.key, t=cell.table, c=TABLES[cell.table], a=cell.actor, tok="NULL")
    cur.execute("BEGIN")
    problems = []
    try:
        if not direct:
            cur.execute("SET LOCAL idem_gate.direct_writes = off")
        if cell.kind != "none":
            # the lock attaching the code takes, before any fixture: the
            # background janitor works in this database too, and a
            # fixture's SHARE lock (sync_token_seq) followed by the
            # ALTER's ACCESS EXCLUSIVE can deadlock with its pass, which
            # reads the table before it deletes
            cur.execute("LOCK TABLE idem_gate.%s IN ACCESS EXCLUSIVE MODE" % cell.table)
        if cell.ep["fix"] == "switched":
            stmts = FIXTURES["switched"]
            run_statements(cur, stmts[:1], **fmt)
            fmt["tok"] = str(run_statements(cur, stmts[1:2], **fmt)[0][0])
            run_statements(cur, stmts[2:6], **fmt)
        else:
            tok = run_statements(cur, FIXTURES[cell.ep["fix"]], **fmt)
            if tok and cell.ep["fix"] in ("processing", "aged"):
                fmt["tok"] = str(tok[0][0])
        try:
            run_statements(cur, KINDS[cell.kind], **fmt)
        except psycopg2.Error as e:
            # PostgreSQL itself refuses to attach it: the cell would test
            # nothing, and counts as failed (17 and 18 build an index with
            # search_path pinned: the index's code must resolve there)
            raise Unattachable("%s: %s" % (e.pgcode, e.pgerror.splitlines()[0] if e.pgerror else ""))
        if cell.kind == "child":
            # a child's rows share tuple ids with the extension's rows
            cur.execute("INSERT INTO public.mx_child (workflow, key, state, attempt, token, created_at,"
                        " claimed_at, updated_at, completed_at, token_issued)"
                        " SELECT 'mx_wf', 'child_' || i, 'completed', 1, 900000 + i, now() - '3 days'::interval,"
                        " now() - '3 days'::interval, now() - '3 days'::interval, now() - '3 days'::interval, false"
                        " FROM generate_series(1, 40) i" if cell.table == "claims" else "SELECT 1")
        if cell.lever in LEVER_AS_SUPERUSER:
            cur.execute(LEVERS[cell.lever][0].format(**fmt))
        cur.execute("SET LOCAL ROLE mx_%s" % cell.actor)
        stmts = LEVERS[cell.lever][1:] if cell.lever in LEVER_AS_SUPERUSER else LEVERS[cell.lever]
        run_statements(cur, stmts, **fmt)
        cur.execute("SAVEPOINT call")
        try:
            cur.execute(cell.ep["sql"].format(**fmt))
            answer = normalize(cur.fetchall())
        except psycopg2.Error as e:
            answer = "%s: %s" % (e.pgcode, normalize(e.pgerror.splitlines()[0] if e.pgerror else ""))
            detail = (e.pgerror or "") + " " + str(getattr(e.diag, "message_detail", "") or "")
            # the owner's token, where the caller does not pass it itself
            if fmt["tok"] != "NULL" and "{tok}" not in cell.ep["sql"] and \
                    re.search(r"\b%s\b" % fmt["tok"], detail):
                problems.append("an error shows the owner's token: %s" % detail.strip())
            cur.execute("ROLLBACK TO SAVEPOINT call")
        cur.execute("RESET ROLE")
        rows = snapshot(cur, cell.key)
        if cell.kind == "child" and cell.table == "claims":
            cur.execute("SELECT count(*) FROM public.mx_child")
            if cur.fetchone()[0] != 40:
                problems.append("rows of a DBA's child table were lost")
        problems += verdicts(cur, cell)
    finally:
        cur.execute("ROLLBACK")
    return answer, rows, problems


def judge(cell, conn):
    a1, r1, p1 = attempt(conn, cell, True)
    a2, r2, p2 = attempt(conn, cell, False)
    problems = p1 + [p for p in p2 if p not in p1]
    if (a1, r1) != (a2, r2):
        problems.append("the direct path answered %s with rows %s, SQL %s with rows %s" % (a1, r1, a2, r2))
    code = a1.split(":")[0] if re.match(r"^[0-9A-Z]{5}:", a1) else None
    expect = cell.ep["expect"]
    plain = cell.kind == "none" and cell.lever == "none"
    if cell.actor == "nobody":
        if code != "42501":
            problems.append("a role without grants was not refused: %s" % a1)
    elif code is not None and code != expect and code not in ALLOWED:
        problems.append("refused with %s, not an allowed SQLSTATE" % a1)
    if plain and cell.actor != "nobody" and expect not in a1:
        problems.append("the plain case answered %s, expected %s" % (a1, expect))
    return problems


def cells():
    n = 0
    for actor, levers in ACTORS.items():
        for lever in levers:
            for ep in ENTRY_POINTS:
                if ACTOR_ROLE_OF[actor] not in (ep["who"], None):
                    continue
                for table in ep["tables"]:
                    for kind in KINDS:
                        if table not in KIND_TABLES.get(kind, TABLES):
                            continue
                        if QUICK and kind not in ("none", "trigger", "index_expression", "rule"):
                            continue
                        n += 1
                        yield Cell(n, actor, lever, ep, table, kind)

# -- the worker, LISTEN, the extension scripts ----------------------------

def worker_cells(su):
    """
    The background janitor in databases whose owner set the database's
    search_path to its own schema, one database per kind of code attached
    to the tables the janitor writes: its passes must run none of the
    owner's code, lose no canary row, and do their work where no code runs
    on their writes (a rule: refuse, with one WARNING).  All the databases
    are served at once.
    """
    kinds = [k for k in KINDS if k not in ("none", "publication", "redefined_check")]
    c = su.cursor()
    attached = {}
    for kind in kinds:
        wdb = "%s_w_%s" % (DB, kind)
        c.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % wdb)
        c.execute("CREATE DATABASE %s OWNER mx_db_owner" % wdb)
        w = connect(wdb)
        wc = w.cursor()
        wc.execute("ALTER SCHEMA public OWNER TO postgres")
        levers13_common.install_gate(c, wc, wdb)
        wc.execute(DB_SETUP)
        wc.execute(ACTOR_SETUP.format(a="db_owner"))
        # expired work for a pass: a completion, a receipt, a stuck claim
        for st in FIXTURES["janitor"][:-1]:
            wc.execute(st.format(k="w"))
        attached[kind] = True
        for table in ["claims", "audit", "janitor_watermarks"]:
            if table not in KIND_TABLES.get(kind, TABLES):
                continue
            for st in KINDS[kind]:
                if st.startswith("SET LOCAL"):
                    continue
                st = st.format(t=table, c=TABLES[table])
                st = re.sub(r"\b(mx_(?:t|st|ri|ru|rd|c|ie|ip|p|ct|child|def|dcol))\b", r"\1_" + table, st)
                try:
                    wc.execute(st)
                except psycopg2.Error:
                    attached[kind] = False		# PostgreSQL refuses it (see attempt())
        w.close()
        o = connect(wdb, "mx_db_owner")
        o.cursor().execute("ALTER DATABASE %s SET search_path = mx_db_owner, public" % wdb)
        o.close()

    def work_done(kind):
        w = connect("%s_w_%s" % (DB, kind))
        wc = w.cursor()
        wc.execute("SELECT count(*) FROM ONLY idem_gate.claims WHERE key = 'w_old'")
        done = wc.fetchone()[0] == 0
        w.close()
        return done

    # code that runs on the janitor's deletes and updates cannot resolve
    # the DBA's unqualified names under the pinned path, and its pass ends
    # with that error: only these kinds leave the janitor its work
    working = [k for k in kinds if attached[k] and k in ("child", "policy", "default", "domain")]
    start = time.time()
    while time.time() < start + 20 and not all(work_done(k) for k in working):
        time.sleep(0.5)
    time.sleep(max(0, start + 4 - time.time()))		# a few passes for every kind
    results = []
    for kind in kinds:
        wdb = "%s_w_%s" % (DB, kind)
        w = connect(wdb)
        wc = w.cursor()
        wc.execute("SELECT who, how FROM public.mx_pwned WHERE who <> 'mx_db_owner'")
        pwned = wc.fetchall()
        wc.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'mx_db_owner'")
        sup = wc.fetchone()[0]
        wc.execute("SELECT count(*) FROM ONLY idem_gate.claims WHERE workflow = 'mx_canary'")
        canaries = wc.fetchone()[0]
        w.close()
        done = work_done(kind)
        problems = []
        if pwned:
            problems.append("the database owner's code ran as %s" % pwned)
        if sup:
            problems.append("the database owner became superuser")
        if canaries != 30:
            problems.append("the janitor lost canary rows")
        if kind in working and not done:
            problems.append("the janitor did not delete the expired row within 20 s")
        if done and kind == "rule":
            problems.append("the janitor wrote a table with a rule")
        c.execute("ALTER ROLE mx_db_owner NOSUPERUSER")
        c.execute("DROP DATABASE %s WITH (FORCE)" % wdb)
        results.append(("db_owner / database_setting / background janitor / claims, audit, watermarks / %s" % kind,
                        problems))
    return results


def listen_cells(su_db):
    """
    A role with no privileges listens: the announcements of claims entering
    the inbox carry no key and no token, and tell it nothing to act with.
    """
    results = []
    lc = connect(DB, "mx_nobody")
    lc.cursor().execute("LISTEN idem_gate_alert")
    c = su_db.cursor()
    tok = None
    c.execute("SELECT token FROM idem_claim_ex('listen_stuck', 'mx_wf', NULL, NULL, 'run-L')")
    tok = c.fetchone()[0]
    c.execute("UPDATE idem_gate.claims SET created_at = created_at - '1 hour'::interval,"
              " claimed_at = claimed_at - '1 hour'::interval, updated_at = updated_at - '1 hour'::interval"
              " WHERE key = 'listen_stuck'")
    c.execute("SELECT * FROM idem_gate.janitor_run()")
    payloads = []
    deadline = time.time() + 5
    while time.time() < deadline and not payloads:
        if select.select([lc], [], [], 0.5) != ([], [], []):
            lc.poll()
            payloads += [n.payload for n in lc.notifies]
            lc.notifies.clear()
    problems = []
    if not payloads:
        problems.append("no alert reached the listener")
    for p in payloads:
        d = json.loads(p)
        if set(d) - {"workflow", "reason", "at", "seq", "workflow_truncated"}:
            problems.append("the payload carries more than the workflow, reason, time and number: %s" % p)
        shown = json.dumps({k: v for k, v in d.items() if k not in ("at", "seq")})
        if "listen_stuck" in p or re.search(r"\b%d\b" % tok, shown):
            problems.append("the payload shows the key or the token: %s" % p)
    c.execute("DELETE FROM idem_gate.claims WHERE key = 'listen_stuck'")
    lc.close()
    results.append(("nobody / LISTEN / alerts / claims / none", problems))
    return results


def script_cells(su):
    """
    The extension's scripts, run by a superuser whose search_path puts a
    schema first that a non-superuser owns and filled with functions and
    operators named like pg_catalog's: install and every update resolve
    none of them.
    """
    results = []
    sdb = DB + "_s"
    c = su.cursor()
    c.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % sdb)
    c.execute("CREATE DATABASE %s" % sdb)
    s = connect(sdb)
    sc = s.cursor()
    sc.execute("CREATE TABLE public.mx_pwned (who name, how text); GRANT INSERT ON public.mx_pwned TO PUBLIC")
    sc.execute("CREATE SCHEMA mx_planted AUTHORIZATION mx_client")
    sc.execute("SET ROLE mx_client")
    for fn, args, ret in [("format", "text, VARIADIC text[]", "text"), ("quote_ident", "text", "text"),
                          ("string_agg", None, None), ("nextval", "regclass", "bigint"),
                          ("setval", "regclass, bigint, boolean", "bigint"),
                          ("set_config", "text, text, boolean", "text"),
                          ("current_setting", "text", "text"), ("array_agg", None, None),
                          ("date_part", "text, interval", "double precision"),
                          ("now", "", "timestamptz"), ("strpos", "text, text", "integer"),
                          ("aclexplode", None, None), ("pg_extension_config_dump", "regclass, text", "void")]:
        if args is None:
            continue
        sc.execute("CREATE FUNCTION mx_planted.%s(%s) RETURNS %s LANGUAGE plpgsql AS $$ BEGIN"
                   " INSERT INTO public.mx_pwned VALUES (current_user, '%s'); RETURN%s; END $$"
                   % (fn, args, ret, fn, "" if ret == "void" else " NULL"))
    sc.execute("CREATE FUNCTION mx_planted.mx_ne(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
               " INSERT INTO public.mx_pwned VALUES (current_user, '<>'); RETURN true; END $$")
    sc.execute("CREATE OPERATOR mx_planted.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = mx_planted.mx_ne)")
    sc.execute("RESET ROLE")
    sc.execute("SET search_path = mx_planted, public, pg_catalog")
    for label, stmts, refused in [
            ("install 1.0, update to 1.1 and 1.2",
             ["CREATE EXTENSION idem_gate SCHEMA mx_planted VERSION '1.0'",
              "ALTER EXTENSION idem_gate UPDATE TO '1.1'",
              "ALTER EXTENSION idem_gate UPDATE TO '1.2'"], None),
            ("install 1.2", ["DROP EXTENSION idem_gate", "CREATE EXTENSION idem_gate SCHEMA mx_planted"], None),
            ("install 1.2 next to a planted API overload",
             ["DROP EXTENSION idem_gate",
              "SET ROLE mx_client",
              "CREATE FUNCTION mx_planted.idem_complete(text, text, integer) RETURNS boolean"
              " LANGUAGE sql AS 'SELECT true'",
              "RESET ROLE",
              "CREATE EXTENSION idem_gate SCHEMA mx_planted"], "42723")]:
        problems = []
        try:
            for st in stmts:
                sc.execute(st)
            if refused:
                problems.append("the install was not refused")
        except psycopg2.Error as e:
            if e.pgcode != refused:
                problems.append("the script failed: %s" % e.pgerror.splitlines()[0])
        sc.execute("SELECT who, how FROM public.mx_pwned")
        for who, how in sc.fetchall():
            problems.append("%s ran the planted %s" % (who, how))
        results.append(("schema owner / planted names in the target schema / extension scripts (%s) / every table / none"
                        % label, problems))
    s.close()
    c.execute("DROP DATABASE %s WITH (FORCE)" % sdb)
    return results


def main():
    start = time.time()
    su = connect(os.environ.get("PGDATABASE", "postgres"))
    c = su.cursor()
    c.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (DB + "%",))
    for (d,) in c.fetchall():
        c.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % d)
    c.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'mx\\_%'")
    for (r,) in c.fetchall():
        c.execute("DROP OWNED BY %s" % r)
        c.execute("DROP ROLE %s" % r)
    c.execute(SETUP)
    c.execute("CREATE DATABASE %s OWNER mx_db_owner" % DB)
    conn = connect(DB)
    cur = conn.cursor()
    cur.execute("ALTER SCHEMA public OWNER TO postgres")
    levers13_common.install_gate(c, cur, DB)
    cur.execute(DB_SETUP)
    for a in ACTORS:
        cur.execute(ACTOR_SETUP.format(a=a))

    passed = failed = 0
    count = 0
    unattachable = {}
    for cell in cells():
        count += 1
        tconn = connect(DB) if cell.lever == "temp_objects" else conn
        try:
            problems = judge(cell, tconn)
        except Unattachable as e:
            # a cell whose code cannot be attached tests nothing
            unattachable.setdefault((cell.table, cell.kind), (cell, str(e)))
            failed += 1
            continue
        finally:
            if tconn is not conn:
                tconn.close()
        if problems:
            failed += 1
            print("not ok - %s: %s" % (cell, "; ".join(problems)))
        else:
            passed += 1
    print("# %d cells of actor x lever x entry point x table x kind in %.0f s" % (count, time.time() - start))
    for (table, kind), (cell, why) in sorted(unattachable.items()):
        print("not ok - PostgreSQL refuses to attach %s to idem_gate.%s here (first: %s, %s):"
              " its cells test nothing" % (kind, table, cell, why))

    t1 = time.time()
    # the extension scripts' cells attack CREATE EXTENSION, which the
    # managed edition is not (its install's refusals: test/managed/run.sh)
    others = listen_cells(conn) + (script_cells(su) if levers13_common.EDITION != "managed" else [])
    print("# %d cells of LISTEN and the extension scripts in %.0f s" % (len(others), time.time() - t1))
    t1 = time.time()
    new = levers13.cells(su, DB, sys.modules[__name__], QUICK)
    others += new
    print("# %d cells of the 1.3 levers in %.0f s" % (len(new), time.time() - t1))
    t1 = time.time()
    # the managed edition has no background janitor to attack
    if not QUICK and levers13_common.EDITION != "managed":
        c.execute("ALTER SYSTEM SET idem_gate.naptime = 1")
        c.execute("SELECT pg_reload_conf()")
        try:
            worker = levers13.worker_lock_cells(su, DB, 1) + worker_cells(su)
        finally:
            c.execute("ALTER SYSTEM RESET idem_gate.naptime")
            c.execute("SELECT pg_reload_conf()")
        others += worker
        print("# %d cells of the background janitor in %.0f s" % (len(worker), time.time() - t1))
    skipped = 0
    for name, problems in others:
        if problems is None:
            # a cell this server cannot run (levers13.py says which)
            skipped += 1
            print("# skip - %s: not possible on this server" % name)
        elif problems:
            failed += 1
            print("not ok - %s: %s" % (name, "; ".join(problems)))
        else:
            passed += 1

    conn.close()
    c.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
    c.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'mx\\_%'")
    for (r,) in c.fetchall():
        c.execute("DROP OWNED BY %s" % r)
        c.execute("DROP ROLE %s" % r)
    print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
