#!/usr/bin/python3
"""SQL-level fuzzer of every idem_gate function's arguments.

Reads the extension's functions from the catalog (pg_depend), so a new
function is fuzzed without an edit here, and calls them with arguments drawn
from per-type pools of edge values and random ones (NULLs, empty and 100 kB
strings, every Unicode plane, negative and huge intervals, integer extremes,
deep, large and malformed JSON, arrays with NULLs and duplicates, unknown
roles), half the calls as the superuser and half as a role with EXECUTE on
all of them and per-workflow access on, a few workflows and keys shared so
that calls meet each other's rows.

A finding is a backend that dies (the connection is lost), an error without
a documented SQLSTATE (class XX: internal_error, an elog(ERROR) a user can
reach), or a call that runs past the statement timeout (a hang).  The
server's log is searched for failed assertions by sql_fuzz.sh.

  sql_fuzz.py --seconds N [--seed S]     (libpq variables name the server)

Prints the calls per function and SQLSTATE, every finding with the call
that made it, and "N passed, N failed" (calls without and with a finding).
"""
import argparse
import json
import os
import random
import sys
import time

import psycopg2
import psycopg2.extras

SKIP = {
    # Citus only, and a helper of the extension's own scripts
    'distribute', 'distribute_steps', 'outside_extension',
}
TIMEOUT_MS = 10000
WORKFLOWS = ['fz_a', 'fz_b', 'fz_keyed', 'payroll']
KEYS = ['k1', 'k2', 'k3', 'evt_1', '']


def rand_text(r):
    """A string from the pools, or a random one."""
    choice = r.randrange(14)
    if choice == 0:
        return None
    if choice == 1:
        return ''
    if choice == 2:
        return r.choice(WORKFLOWS)
    if choice == 3:
        return r.choice(KEYS)
    if choice == 4:
        return 'a' * r.choice([63, 64, 200, 201, 255, 256, 1000, 100000])
    if choice == 5:
        return ''.join(chr(r.choice([0x41, 0xe9, 0x20ac, 0x1f600, 0xfffd, 0x10ffff, 0x7f, 0x1, 0x200b]))
                       for _ in range(r.randrange(1, 40)))
    if choice == 6:
        return r.choice(["'; select 1; --", '%s%n', '\\', '"', '*', '%', '_', 'fz_%', 'fz_*',
                         'safe', 'rfc', 'SAFE', ' safe', 'completed', 'in_flight', 'failed',
                         'needs_review', 'retry', 'release', 'done', 'keyed', 'plain',
                         '/key', '/a/b', '/~0/~1', '#', 'a\tb', 'a\nb'])
    if choice == 7:
        return r.choice(['safe', 'rfc'])
    return ''.join(chr(r.randrange(0x20, 0x7f)) for _ in range(r.randrange(0, 30)))


def rand_json(r, depth=0):
    """A random JSON value; deep, wide and numeric edges included."""
    choice = r.randrange(12 if depth < 6 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return r.choice([True, False])
    if choice == 2:
        return r.choice([0, -0.0, 1, -1, 2 ** 53, 2 ** 53 + 1, 2 ** 63, 1e21, 1e-7, 5e-324,
                         1.7976931348623157e308, 0.1, 123456789.123456789])
    if choice == 3:
        return rand_text(r) or ''
    if choice == 4:
        return r.random() * 10 ** r.randrange(-300, 300)
    if choice == 5:
        return r.randrange(-10 ** 20, 10 ** 20)
    if choice < 9:
        return [rand_json(r, depth + 1) for _ in range(r.randrange(0, 5))]
    return {rand_text(r) or '': rand_json(r, depth + 1) for _ in range(r.randrange(0, 5))}


def json_literal(r):
    """JSON text: a generated document, or one of the hard cases."""
    choice = r.randrange(10)
    if choice == 0:
        return None
    if choice == 1:
        n = r.choice([100, 1000, 5000, 50000])
        return '[' * n + ']' * n
    if choice == 2:
        return r.choice(['{"a":1,"a":2}', '"\\ud800"', '"\\udc00x"', '1e400', '-1e400',
                         '9007199254740993', '1e-400', '"\\u0000"', '{"":{"":{"":[]}}}',
                         '[1,2', '{', 'nul', '01', '1.', '.5', '"\\x"', ' ', ''])
    if choice == 3:
        return json.dumps({'k%d' % i: i for i in range(r.choice([10, 1000, 20000]))})
    return json.dumps(rand_json(r))


def rand_value(r, typ):
    """An argument of SQL type typ, as text for a cast (None is NULL)."""
    if typ.endswith('[]'):
        if r.randrange(8) == 0:
            return None
        base = typ[:-2]
        n = r.choice([0, 1, 2, 3, 5, 10, 1000, 10001])
        items = []
        for _ in range(n):
            if base in ('text', 'name'):
                items.append(r.choice(KEYS + [None, rand_text(r)]))
            else:
                items.append(rand_value(r, base))
        return items
    if typ in ('text', 'name', 'character varying'):
        if typ == 'name' and r.randrange(3) == 0:
            return r.choice(['postgres', 'fz_client', 'fz_nobody', 'pg_monitor', 'public', ''])
        return rand_text(r)
    if typ in ('json', 'jsonb'):
        return json_literal(r)
    if typ == 'interval':
        return r.choice([None, '0', '1 microsecond', '1 second', '-1 second', '5 minutes',
                         '100 years', '-100 years', '178000000 years', '1 day', '00:00:00.5',
                         'bogus'])
    if typ in ('integer', 'bigint', 'smallint'):
        return r.choice([None, 0, 1, -1, 2, 7, 1000, 2 ** 31 - 1, -2 ** 31, 2 ** 62,
                         2 ** 63 - 1, -2 ** 63, r.randrange(-5, 50)])
    if typ == 'boolean':
        return r.choice([None, True, False])
    if typ == 'timestamp with time zone':
        return r.choice([None, 'now', '-infinity', 'infinity', '1970-01-01', '2999-12-31',
                         '4713-01-01 BC'])
    if typ == 'aclitem[]':
        return None
    return None


class Fuzzer:
    """One run: the connections, the functions, the tallies."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.seed = seed
        self.tally = {}
        self.findings = []
        self.calls = 0
        self.tokens = {1, 2}	# fencing tokens the answers gave
        self.connect()
        self.functions = self.load_functions()

    def connect(self):
        self.su = psycopg2.connect('')
        self.su.autocommit = True
        self.client = psycopg2.connect('', user='fz_client')
        self.client.autocommit = True
        for c in (self.su, self.client):
            with c.cursor() as cur:
                cur.execute('SET statement_timeout = %s', (TIMEOUT_MS,))
                cur.execute('SET lock_timeout = 2000')

    def load_functions(self):
        with self.su.cursor() as cur:
            cur.execute("""
                SELECT p.oid, n.nspname, p.proname, p.prokind,
                       coalesce(array(SELECT format_type(t, NULL)
                                      FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i)
                                      ORDER BY i), '{}'),
                       p.prorettype = 'trigger'::regtype,
                       coalesce(p.proargnames[1:p.pronargs], '{}')
                FROM pg_proc p
                JOIN pg_namespace n ON n.oid = p.pronamespace
                JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                JOIN pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
                WHERE e.extname = 'idem_gate'
                ORDER BY 2, 3, 1""")
            rows = cur.fetchall()
        return [dict(schema=s, name=n, kind=k, args=a, names=names)
                for _, s, n, k, a, trig, names in rows if not trig and n not in SKIP]

    def call(self, fn):
        """One call with random arguments; records its outcome."""
        r = self.r
        conn = self.su if r.randrange(2) == 0 else self.client
        who = 'superuser' if conn is self.su else 'client'
        args = [self.arg(t, n) for t, n in zip(fn['args'], fn['names'] + [''] * len(fn['args']))]
        # a trailing argument left to its default, sometimes
        params = ', '.join('%s::' + t for t in fn['args'])
        target = '%s.%s' % (fn['schema'], fn['name'])
        sql = ('CALL %s(%s)' if fn['kind'] == 'p' else 'SELECT * FROM %s(%s)') % (target, params)
        key = fn['name'] + '(' + ', '.join(fn['args']) + ')'
        self.calls += 1
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                if cur.description:
                    for row in cur.fetchmany(10):
                        self.tokens.update(v for v in row if isinstance(v, int) and v > 0)
            outcome = 'ok'
        except psycopg2.Error as e:
            outcome = e.pgcode or 'lost'
            if conn.closed or outcome == 'lost':
                self.finding('connection lost (backend crashed?)', who, key, args, str(e))
                time.sleep(3)
                self.reconnect()
            elif outcome.startswith('XX'):
                self.finding('undocumented SQLSTATE ' + outcome, who, key, args, e.pgerror)
            elif outcome == '57014':
                self.finding('ran past %d ms' % TIMEOUT_MS, who, key, args, e.pgerror)
        per = self.tally.setdefault(key, {})
        per[outcome] = per.get(outcome, 0) + 1

    def arg(self, typ, name):
        """An argument: by its name most of the time (a key, a workflow, a
        token the gate gave, a numbers policy), so that calls reach the
        states behind valid arguments; random otherwise."""
        r = self.r
        if r.randrange(3) == 0:
            return rand_value(r, typ)
        if name == 'key':
            return r.choice(KEYS[:-1])
        if name == 'keys':
            return [r.choice(KEYS[:-1]) for _ in range(r.randrange(1, 6))]
        if name == 'workflow':
            return r.choice(WORKFLOWS)
        if name == 'token':
            return r.choice(sorted(self.tokens)[-50:])
        if name == 'numbers':
            return r.choice(['safe', 'rfc'])
        if name in ('resolution', 'decision'):
            return r.choice(['retry', 'completed', 'failed', 'release'])
        if name in ('reason', 'actor', 'error', 'run_id'):
            return r.choice(['fuzz', 'x' * 200, 'Ünïcode', 'a'])
        return rand_value(r, typ)

    def reconnect(self):
        for _ in range(30):
            try:
                self.connect()
                return
            except psycopg2.Error:
                time.sleep(1)
        raise SystemExit('the server did not come back')

    def finding(self, what, who, key, args, err):
        shown = [a if not isinstance(a, str) or len(a) < 120 else a[:120] + '...' for a in args]
        if isinstance(shown, list):
            shown = [s if not isinstance(s, list) or len(s) < 12 else s[:12] + ['...%d' % len(s)]
                     for s in shown]
        self.findings.append((what, who, key, shown, (err or '').strip()[:300]))
        print('FINDING: %s, as %s: %s %r\n  %s' % (what, who, key, shown, (err or '').strip()[:300]),
              flush=True)

    def run(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            self.call(self.r.choice(self.functions))


def setup():
    """The role and the rows the calls meet."""
    conn = psycopg2.connect('')
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = 'fz_client'")
        if not cur.fetchone():
            cur.execute('CREATE ROLE fz_client LOGIN')
        cur.execute('GRANT USAGE ON SCHEMA idem_gate TO fz_client')
        cur.execute("""SELECT format('GRANT EXECUTE ON FUNCTION %s TO fz_client', p.oid::regprocedure)
                       FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass
                        AND d.objid = p.oid AND d.deptype = 'e'
                       JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idem_gate'""")
        for (stmt,) in cur.fetchall():
            cur.execute(stmt)
        cur.execute("ALTER ROLE fz_client SET idem_gate.workflow_acl = on")
        cur.execute("SELECT idem_gate.grant_workflow('fz_client', 'fz_%')")
        cur.execute("INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('fz_keyed', true) "
                    "ON CONFLICT DO NOTHING")
    conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=int, default=60)
    ap.add_argument('--seed', type=int, default=int(time.time()))
    a = ap.parse_args()
    # json and jsonb answers kept as text: the fuzzer never reads into them,
    # and Python's decoder raises RecursionError past about 1,000 levels,
    # which an answer from the generated '[[[...]]]' cases can have.  Here,
    # not at import: test/managed/differential.py imports this module for
    # its pools and decodes the answers it compares
    psycopg2.extras.register_default_json(loads=lambda text: text, globally=True)
    psycopg2.extras.register_default_jsonb(loads=lambda text: text, globally=True)
    print('seed %d, %d s' % (a.seed, a.seconds), flush=True)
    setup()
    f = Fuzzer(a.seed)
    print('%d functions' % len(f.functions), flush=True)
    f.run(a.seconds)
    for key in sorted(f.tally):
        print('  %-70s %s' % (key, ' '.join('%s=%d' % kv for kv in sorted(f.tally[key].items()))))
    print('%d calls, %d findings' % (f.calls, len(f.findings)))
    print('%d passed, %d failed' % (f.calls - len(f.findings), len(f.findings)))
    sys.exit(1 if f.findings else 0)


if __name__ == '__main__':
    main()
