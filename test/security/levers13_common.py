"""
The helpers and constants levers13.py and levers13_janitor.py share:
connections, attempts, the rights check, throwaway databases.
"""
import os
import re
import subprocess

import psycopg2
import psycopg2.extensions

# canary workflows: no row, notice or answer of a cell may name them
CANARY = ("payroll", "mxXa_secret", "mx13_side")
CANARY_RE = re.compile("|".join(CANARY))
OWN = "mx13_own"
TEAM = "mx13_team"


# which edition the cells attack: the C extension, or with
# IDEM_EDITION=managed the managed edition (managed/idem_gate.sql),
# installed by GATE_OWNER, a role that is no superuser (like rds_superuser)
EDITION = os.environ.get("IDEM_EDITION", "c")
GATE_OWNER = "mx_gate_owner"
MANAGED_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "managed", "idem_gate.sql")

# the role that owns the gate: the extension's, or the managed edition's
# installing role; both own schema idem_gate
OWNER_OID = "(SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'idem_gate')"

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


def install_gate(su_cur, cur, name):
    """
    The gate in database name (cur connected to it as the superuser):
    CREATE EXTENSION, or the managed edition's file run with psql by
    GATE_OWNER, who may create schemas there and in public, nothing more.
    """
    if EDITION != "managed":
        cur.execute("SET client_min_messages = warning; CREATE EXTENSION idem_gate; RESET client_min_messages")
        return
    su_cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (GATE_OWNER,))
    if su_cur.fetchone() is None:
        su_cur.execute("CREATE ROLE %s LOGIN CREATEDB CREATEROLE" % GATE_OWNER)
    su_cur.execute("GRANT CREATE ON DATABASE %s TO %s" % (name, GATE_OWNER))
    cur.execute("GRANT CREATE ON SCHEMA public TO %s" % GATE_OWNER)
    r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", GATE_OWNER, "-d", name,
                        "-f", MANAGED_SQL], capture_output=True, text=True,
                       env=dict(os.environ, PGOPTIONS="-c default_transaction_read_only=off"))
    if r.returncode != 0:
        raise SystemExit("managed/idem_gate.sql in %s: %s" % (name, r.stderr or r.stdout))
    cur.execute("REVOKE CREATE ON SCHEMA public FROM %s" % GATE_OWNER)


def gained(su_cur, role):
    """Rights the role holds that it must not: checked in the catalog."""
    su_cur.execute("SELECT r.rolsuper, pg_has_role(r.oid, " + OWNER_OID + ", 'MEMBER')"
                   " FROM pg_roles r WHERE r.rolname = %s", (role,))
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
    install_gate(su_cur, cur, name)
    cur.execute("CREATE TABLE public.mx_pwned (who name, how text);"
                " GRANT INSERT, SELECT ON public.mx_pwned TO PUBLIC")
    return c
