#!/usr/bin/python3
"""The two editions side by side: the same random calls, the same answers.

Two databases on one server: one with the C extension (CREATE EXTENSION
idem_gate, as a superuser), one with the managed edition (managed/idem_gate.sql,
installed with psql by a role that owns the database and is not a
superuser).  Every function both editions have is called with the same
arguments in both, in the same order, half as the superuser and half as a
role with per-workflow access on: the argument pools of test/fuzz/sql_fuzz.py
(NULLs, empty and 100 kB strings, every Unicode plane, bad intervals, integer
extremes, deep and malformed JSON, arrays with NULLs and duplicates) and, most
of the time, arguments by name (a key, a workflow, a token an answer gave), so
that the calls reach the states behind valid arguments.  Before the random
calls, every run makes the same sweep of each function's arguments at the
edges (NULL, empty, too long; all at once, then one at a time), so that the
order of the argument checks is compared whatever the seed.

A call passes when both editions answer the same: the same rows (times
masked, since two writes are never at the same microsecond), or the same
SQLSTATE and message.  A difference is printed with the call; the docs'
table of what the editions do differently is the only list of allowed ones,
and it has none for these functions.

  differential.py --seconds N [--seed S]   (libpq variables name the server;
                                            PGUSER a superuser)

Ends with "N passed, N failed" (calls that agreed, calls that did not).
"""
import argparse
import datetime
import json
import os
import random
import re
import subprocess
import sys
import time

import psycopg2
import psycopg2.extras

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'fuzz'))
import sql_fuzz  # noqa: E402  (the argument pools)

DB_C = 'idem_diff_c'
DB_M = 'idem_diff_m'
OWNER = 'idem_diff_owner'
CLIENT = 'fz_client'
# Citus only, or the C edition's update helpers: not in the managed edition
LEFT_OUT = {'distribute', 'distribute_steps', 'cluster_counters', 'claim_many_group',
            'outside_extension', 'upgrade_grants'}
# the workflows the calls use: no keyed one (the managed edition has none)
sql_fuzz.WORKFLOWS[:] = ['fz_a', 'fz_b', 'payroll']


def json_depth(text):
    """How deep a JSON text nests its arrays and objects, without parsing."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == '\\':
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in '[{':
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ']}':
            depth -= 1
    return deepest


def loads(text):
    """A json or jsonb answer, decoded; one nested deeper than Python's
    recursion allows (the pools hold arrays 1,000 to 50,000 deep, which an
    answer can give back) is compared as its text."""
    return text if json_depth(text) > 200 else json.loads(text)


psycopg2.extras.register_default_json(globally=True, loads=loads)
psycopg2.extras.register_default_jsonb(globally=True, loads=loads)


def admin(db='postgres'):
    conn = psycopg2.connect(dbname=db)
    conn.autocommit = True
    return conn


def setup(skip):
    """Both databases, the owner and client roles, and the client's grants."""
    c = admin()
    cur = c.cursor()
    for db in (DB_C, DB_M):
        cur.execute('DROP DATABASE IF EXISTS %s WITH (FORCE)' % db)
    for role, opts in ((OWNER, 'LOGIN CREATEDB CREATEROLE'), (CLIENT, 'LOGIN')):
        cur.execute('SELECT 1 FROM pg_roles WHERE rolname = %s', (role,))
        if not cur.fetchone():
            cur.execute('CREATE ROLE %s %s' % (role, opts))
    cur.execute("ALTER ROLE %s SET idem_gate.workflow_acl = on" % CLIENT)
    cur.execute('CREATE DATABASE %s' % DB_C)
    cur.execute('CREATE DATABASE %s OWNER %s' % (DB_M, OWNER))
    with admin(DB_C) as cc:
        cc.cursor().execute('CREATE EXTENSION idem_gate')
    # IDEM_MANAGED_VIA=pg_tle (test/managed/pg_tle.sh): the pg_tle package
    # and CREATE EXTENSION idem_gate_managed, as a role granted pgtle_admin
    tle = os.environ.get('IDEM_MANAGED_VIA') == 'pg_tle'
    with admin(DB_M) as cm:
        cm.cursor().execute('ALTER SCHEMA public OWNER TO %s' % OWNER)
        if tle:
            cm.cursor().execute('CREATE EXTENSION IF NOT EXISTS pg_tle')
            cm.cursor().execute('GRANT pgtle_admin TO %s' % OWNER)
    path = os.path.join(HERE, '..', '..', 'managed', 'idem_gate.pg_tle.sql' if tle else 'idem_gate.sql')
    r = subprocess.run(['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-U', OWNER, '-d', DB_M, '-f', path]
                       + (['-c', 'CREATE EXTENSION idem_gate_managed'] if tle else []),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit('%s: %s' % (os.path.basename(path), r.stderr or r.stdout))
    functions = None
    for db in (DB_C, DB_M):
        conn = admin(db)
        cur = conn.cursor()
        cur.execute('GRANT USAGE ON SCHEMA idem_gate TO %s' % CLIENT)
        fns = [f for f in api_functions(cur, db == DB_C) if f['name'] not in skip]
        for f in fns:
            cur.execute('GRANT EXECUTE ON FUNCTION %s TO %s' % (f['sig'], CLIENT))
        cur.execute("SELECT idem_gate.grant_workflow(%s, 'fz_%%')", (CLIENT,))
        sigs = {f['sig'] for f in fns}
        if functions is None:
            functions, c_sigs = fns, sigs
        else:
            missing = sorted(c_sigs - sigs)
            if missing:
                raise SystemExit('the managed edition lacks: ' + ', '.join(missing))
        conn.close()
    return functions


def api_functions(cur, c_edition):
    """The functions of the API: the C extension's members, or the managed
    edition's of the same names (in idem_gate and the API's schema)."""
    if c_edition:
        where = """p.oid IN (SELECT d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                              WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
                                AND e.extname = 'idem_gate')"""
    else:
        where = """(n.nspname = 'idem_gate' AND p.proname !~ '^m_'
                    AND p.proname NOT IN ('managed_version', 'set_workflow_acl')
                    OR n.nspname = 'public' AND p.proname ~ '^idem_')"""
    cur.execute("""
        SELECT n.nspname, p.proname, p.prokind,
               coalesce(array(SELECT format_type(t, NULL)
                              FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i) ORDER BY i), '{}'),
               coalesce(p.proargnames[1:p.pronargs], '{}'), p.oid::regprocedure::text
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE p.prorettype <> 'trigger'::regtype AND """ + where + " ORDER BY 6")
    return [dict(schema=s, name=n, kind=k, args=a, names=names, sig=sig)
            for s, n, k, a, names, sig in cur.fetchall()
            if n not in LEFT_OUT and n not in sql_fuzz.SKIP]


# what the catalog comparison reads of each edition: every table, view,
# index, policy and type of schema idem_gate and every function of the API,
# with what a caller sees of it (columns, definitions, volatility,
# strictness, the result, who may execute it)
CATALOG = {
    'relation': """SELECT c.relname, c.relkind::text, c.relrowsecurity::text,
                          coalesce(array_to_string(c.reloptions, ','), ''),
                          coalesce(array_to_string(array(SELECT x::text FROM unnest(c.relacl) x
                                                          WHERE x::text !~ ('^' || pg_get_userbyid(c.relowner) || '=')
                                                          ORDER BY 1), ','), '')
                     FROM pg_class c WHERE c.relnamespace = 'idem_gate'::regnamespace
                      AND c.relkind IN ('r', 'v', 'S', 'i')""",
    'column': """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull::text,
                        coalesce(pg_get_expr(d.adbin, d.adrelid), ''), coalesce(co.collname, '')
                   FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
                                   AND NOT a.attisdropped
                   LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
                   LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
                  WHERE c.relnamespace = 'idem_gate'::regnamespace AND c.relkind IN ('r', 'v')""",
    'index': """SELECT regexp_replace(pg_get_indexdef(i.indexrelid), 'ON \\S+\\.', 'ON ')
                  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
                 WHERE c.relnamespace = 'idem_gate'::regnamespace""",
    'constraint': """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
                       FROM pg_constraint WHERE connamespace = 'idem_gate'::regnamespace""",
    'view': """SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c
                WHERE c.relnamespace = 'idem_gate'::regnamespace AND c.relkind = 'v'""",
    'policy': """SELECT polrelid::regclass::text, polname, polcmd::text, polpermissive::text,
                        coalesce(pg_get_expr(polqual, polrelid), ''),
                        coalesce(pg_get_expr(polwithcheck, polrelid), '')
                   FROM pg_policy WHERE polrelid::regclass::text LIKE 'idem_gate.%'""",
    'trigger': """SELECT tgrelid::regclass::text, tgname, tgtype::text, tgfoid::regproc::text
                    FROM pg_trigger WHERE NOT tgisinternal
                     AND tgrelid::regclass::text LIKE 'idem_gate.%'""",
    'type': """SELECT t.typname, coalesce(array_to_string(array(SELECT e.enumlabel FROM pg_enum e
                                         WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder), ','), '')
                 FROM pg_type t WHERE t.typnamespace = 'idem_gate'::regnamespace AND t.typtype = 'e'""",
}


def catalog(db, functions):
    """What a caller sees of an edition: CATALOG's rows, and each API
    function's result, volatility, strictness, rows and PUBLIC's EXECUTE."""
    conn = admin(db)
    cur = conn.cursor()
    out = set()
    for kind, sql in CATALOG.items():
        cur.execute(sql)
        out.update((kind,) + tuple(r) for r in cur.fetchall())
    for f in functions:
        cur.execute("""SELECT pg_get_function_result(p.oid), pg_get_function_arguments(p.oid),
                              p.provolatile::text, p.proisstrict::text, p.proretset::text,
                              p.prorows::text, has_function_privilege('public', p.oid, 'EXECUTE')::text
                         FROM pg_proc p WHERE p.oid = %s::regprocedure""", (f['sig'],))
        out.add(('function', f['sig']) + cur.fetchone())
    conn.close()
    return out


# The one difference docs/managed.md lists: a setting the inbox reads is a
# placeholder in the managed edition, read with the C edition's default when
# unset (managed/build.py's SETTING_DEFAULTS).
SETTING_READ = re.compile(r"COALESCE\(NULLIF\(current_setting\(('idem_gate\.\w+'::text), true\), ''::text\), '[^']*'::text\)")


def compare_catalogs(functions):
    """The differences between the two editions' catalogs, each a line."""
    c = catalog(DB_C, functions)
    m = {tuple(SETTING_READ.sub(r"current_setting(\1)", v) if isinstance(v, str) else v for v in x)
         for x in catalog(DB_M, functions)}
    return ['only in the C edition:   %r' % (x,) for x in sorted(c - m)] + \
           ['only in the managed one: %r' % (x,) for x in sorted(m - c)]


def mask(v):
    """An answer with its times masked: two writes are never at one microsecond."""
    if isinstance(v, (datetime.datetime, datetime.date)):
        return '<time>'
    if isinstance(v, (list, tuple)):
        return type(v)(mask(x) for x in v)
    if isinstance(v, str) and v.startswith('(') and v.endswith(')'):
        # a composite as text: its timestamps
        return re.sub(r'"\d{4}-\d\d-\d\d [0-9:.+-]+"', '<time>', v)
    return v


def valid_arg(typ, name):
    """A valid argument of a type and name, for the edge sweep's other
    arguments: so that the one at an edge is the one the call is about."""
    by_name = {'key': 'edge_key', 'keys': ['edge_key', 'edge_key_2'], 'workflow': 'fz_a',
               'token': 1, 'numbers': 'safe', 'resolution': 'retry', 'decision': 'retry',
               'reason': 'edge sweep', 'actor': 'edge sweep', 'error': 'edge sweep',
               'run_id': 'run-1'}
    if name in by_name:
        return by_name[name]
    by_type = {'text': 'edge', 'interval': '1 hour', 'jsonb': '{}', 'json': '{}',
               'bigint': 1, 'integer': 1, 'boolean': False, 'text[]': ['edge'],
               'bigint[]': [1], 'integer[]': [1], 'jsonb[]': ['{}'], 'double precision': 1.0,
               'name': 'fz_client', 'regrole': 'fz_client', 'idem_gate.state': 'needs_review',
               'idem_gate.outcome': 'new',
               'timestamp with time zone': '2026-01-01 00:00:00+00'}
    return by_type.get(typ)


class Differ:
    def __init__(self, seed, functions):
        self.r = random.Random(seed)
        self.functions = functions
        self.conns = {}
        for db in (DB_C, DB_M):
            for who, user in (('su', None), ('client', CLIENT)):
                conn = psycopg2.connect(dbname=db, user=user) if user else psycopg2.connect(dbname=db)
                conn.autocommit = True
                conn.cursor().execute('SET statement_timeout = 20000')
                self.conns[db, who] = conn
        # sql_fuzz.Fuzzer.arg() draws by name from the pools and the tokens seen
        self.fz = sql_fuzz.Fuzzer.__new__(sql_fuzz.Fuzzer)
        self.fz.r = self.r
        self.fz.tokens = {1, 2}
        self.calls = 0
        self.diffs = []
        self.tally = {}

    def answer(self, db, who, sql, args):
        try:
            with self.conns[db, who].cursor() as cur:
                cur.execute(sql, args)
                rows = cur.fetchmany(50) if cur.description else []
            return ('ok', mask(rows))
        except psycopg2.Error as e:
            if self.conns[db, who].closed:
                raise SystemExit('%s: connection lost' % db)
            return (e.pgcode, (e.diag.message_primary or '').strip())

    def call(self, fn, who=None, args=None):
        if who is None:
            who = 'su' if self.r.randrange(2) == 0 else 'client'
        if args is None:
            args = [self.fz.arg(t, n) for t, n in zip(fn['args'], fn['names'] + [''] * len(fn['args']))]
        params = ', '.join('%s::' + t for t in fn['args'])
        sql = 'SELECT * FROM %s.%s(%s)' % (fn['schema'], fn['name'], params)
        c = self.answer(DB_C, who, sql, args)
        m = self.answer(DB_M, who, sql, args)
        self.calls += 1
        if c[0] == 'ok':
            for row in c[1]:
                self.fz.tokens.update(v for v in (row if isinstance(row, tuple) else ())
                                      if isinstance(v, int) and v > 0)
        key = '%s(%s)' % (fn['name'], ', '.join(fn['args']))
        per = self.tally.setdefault(key, {})
        per[c[0]] = per.get(c[0], 0) + 1
        if c != m:
            shown = [a if not isinstance(a, str) or len(a) < 80 else a[:80] + '...' for a in args]
            shown = [a if not isinstance(a, list) or len(a) < 8 else a[:8] + ['...%d' % len(a)]
                     for a in shown]
            self.diffs.append(key)
            print('DIFFERENT, as %s: %s %r\n  C:       %s\n  managed: %s' % (
                who, key, shown, str(c)[:400], str(m)[:400]), flush=True)

    def edges(self):
        """Every function, as both roles, with its arguments at the edges
        every argument check meets: all of them NULL, all text ones empty or
        too long at once (which check comes first), then one at a time with
        the others valid.  Each run makes these calls, whatever its seed."""
        too_long = 'p' * 300
        for fn in self.functions:
            names = fn['names'] + [''] * len(fn['args'])
            valid = [valid_arg(t, n) for t, n in zip(fn['args'], names)]
            sweeps = [[None] * len(valid)]
            for v in ('', too_long):
                sweeps.append([v if t == 'text' else a for t, a in zip(fn['args'], valid)])
            for i, t in enumerate(fn['args']):
                for v in ([None, '', too_long] if t == 'text' else [None]):
                    sweeps.append(valid[:i] + [v] + valid[i + 1:])
            for who in ('su', 'client'):
                for args in sweeps:
                    self.call(fn, who, args)

    def run(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            self.call(self.r.choice(self.functions))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=int, default=60)
    ap.add_argument('--seed', type=int, default=int(time.time()))
    ap.add_argument('--skip', default='', help='comma-separated function names not to call')
    ap.add_argument('--keep', action='store_true', help='keep both databases')
    a = ap.parse_args()
    print('differential: seed %d, %d s (replay: --seed %d)' % (a.seed, a.seconds, a.seed), flush=True)
    functions = setup(set(x for x in a.skip.split(',') if x))
    lines = compare_catalogs(functions)
    for line in lines:
        print('CATALOG ' + line, flush=True)
    d = Differ(a.seed, functions)
    print('%d functions in both editions' % len(functions), flush=True)
    d.edges()
    print('%d calls at the edges' % d.calls, flush=True)
    d.run(a.seconds)
    for key in sorted(d.tally):
        print('  %-72s %s' % (key, ' '.join('%s=%d' % kv for kv in sorted(d.tally[key].items()))))
    for conn in d.conns.values():
        conn.close()
    if not a.keep:
        c = admin()
        for db in (DB_C, DB_M):
            c.cursor().execute('DROP DATABASE IF EXISTS %s WITH (FORCE)' % db)
        c.close()
    print('catalog: %s' % ('the same' if not lines else '%d differences' % len(lines)))
    print('%d passed, %d failed' % (d.calls - len(d.diffs) + (0 if lines else 1),
                                    len(d.diffs) + (1 if lines else 0)))
    sys.exit(1 if d.diffs or lines else 0)


if __name__ == '__main__':
    main()
