#!/usr/bin/python3
"""idem_gate model-based random test.

Drives the real SQL API of idem_gate from several roles (a client with
EXECUTE on the gate functions only, an operator who may also resolve,
release and run the janitor, the superuser) and several sessions, with
random sequences of claims, batch claims, heartbeats, completions,
failures, resolutions, releases, status reads, janitor passes and clock
steps (rows backdated or moved forward by the superuser), including NULL
and hostile arguments, and 1.2's human loop: payloads given with claims,
the inbox, the actor of resolutions and releases, a claim's history.
Every answer is checked against a small executable model of the claim
state machine of CONTRACT 1.0/1.1 and of the 1.2 additions (see
docs/dev/model.md):

  exact phase       each session owns its own workflows and keys, so the
                    model predicts every answer exactly: outcome, token
                    (presence, and growth), attempt, state, receipt,
                    payload, timestamps, the SQLSTATE of every error, the
                    audit rows and history(), the inbox, the janitor's
                    counts; after each call the rows it may have touched
                    are read back and compared.
  concurrent phase  sessions race on shared keys; only invariants are
                    checked (each token granted to one run, tokens only
                    grow, completed rows carry their owner's receipt and
                    no payload, no NULL-token completion, no deadlock, no
                    unexpected error).

Usage:
    model.py [--seed N] [--seconds S] [--steps N] [--sessions N]
             [--serial] [--skip CASE,...] [--keep]
             [--ext-version V [--update]]

Runs against the server given by PGHOST/PGPORT/PGUSER/PGDATABASE (PGUSER a
superuser, idem_gate 1.2 installed); creates its own database
and roles and drops them at the end.  A database whose idem_gate lacks the
1.2 API (--ext-version 1.1) fails at once, naming what it lacks.  Prints the seed first; a failure prints the seed,
the session, the step and the history of the key involved.  Replay with the
same --seed (and --steps to stop at the same point; --serial runs the
sessions of the exact phase interleaved in one thread, so the whole run is
determined by the seed).  Ends with one line "N passed, N failed".
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

import psycopg2
import psycopg2.extensions

EPS = 0.003                 # seconds of slack when comparing clock readings
FAR = 3000 * 365.25 * 86400  # a policy value that never expires anything
# the C edition's defaults, which the managed edition (no settings of its
# own) applies
MANAGED_DEFAULTS = {'idem_gate.retention': 2592000, 'idem_gate.failed_retention': 604800,
                    'idem_gate.receipt_retention': 0, 'idem_gate.stuck_after': 900,
                    'idem_gate.max_payload_bytes': 1048576, 'idem_gate.max_attempts': 5}
MODEL_VERSION = '1.3'        # the version of idem_gate the model knows (1.3 changes no
                             # answer of 1.2's state machine; its bulk decisions are
                             # tested in sql/bulk_decisions.sql)

# (SQL text, fixed length in seconds; None = 22023)
INTERVALS = [
    ('1 microsecond', 1e-6), ('150 milliseconds', 0.15), ('1 second', 1.0), ('5 minutes', 300.0),
    ('1 hour', 3600.0), ('1 day', 86400.0), ('1 mon', 30 * 86400.0),
    ('1 year', 365.25 * 86400), ('1 day -23:59:00', 60.0),
    ('1 mon -29 days', 86400.0), ('1 year -365 days', 21600.0),
    ('5000 years', 5000 * 365.25 * 86400),
    ('0', None), ('-1 second', None), ('1 mon -30 days', None),
    ('-1 year 365 days', None), ('7000 years', None), ('100000000 years', None),
]
# clock steps (seconds added to every timestamp of a workflow)
STEPS_BACK = [-130.0, -2000.0, -7300.0, -2.1 * 86400, -31 * 86400.0, -400 * 86400.0]
STEPS_FWD = [45.0, 7300.0]
TIMEZONES = ['UTC', 'America/New_York', 'Australia/Lord_Howe', 'Pacific/Chatham',
             'Europe/Berlin', 'Asia/Kathmandu']
EXECS = [None, None, 'e1', 'e2', 'e3', '']
FPS = [None, None, None, 'fpA', 'fpB', '']
RESULTS = [None, {'id': 'ch_1', 'n': 1}, [1, 'two', {'3': 'é'}], 'text \u00e9 "q"', 42,
           {'nested': {'a': [True, False]}}]
ERRORS = [None, 'boom', 'ctl\x01\x1b[31m\nline']
REASONS = [None, 'operator checked the charge', '', 'x' * 300]
RESOLUTIONS = ['completed', 'completed', 'retry', 'retry', None, 'bogus', 'COMPLETED', '']
# the person named by the 1.2 overloads of idem_resolve and idem_release
ACTORS = [None, 'alice', 'bob@example.com', '', 'ctl\x01\x1b[31m\nline', '\u00e9\U0001d11e' * 200]
# delivery payloads (1.2), as the SQL text sent; the model's value is json.loads
# of it (jsonb keeps the last of duplicate keys, as json.loads does)
PAYLOADS = ['{"order": 7, "email": "a@example.com"}', '[1, "two", {"3": "\u00e9"}]', '{}', '[]',
            '{"a": 1, "a": 2}', '{"nested": {"deep": [null, true, 1.5, "ctl\\u0001 \\"q\\" \U0001d11e"]}}',
            '  [ {"k": "v"} , [] ]  ', '{"blob": "%s"}' % ('x' * 3000)]
PAYLOAD_HUGE = '{"blob": "%s"}' % ('y' * (1024 * 1024))   # over the default 1 MB
PAYLOAD_SCALARS = ['"a string"', '42', 'true', 'null']    # 22023
GATE_FUNCS = ['idem_claim(text,text,interval)',
              'idem_claim_ex(text,text,interval,text,text)',
              'idem_claim_ex(text,text,interval,text,text,jsonb)',
              'idem_claim_many(text[],text,interval,text[],text)',
              'idem_claim_many(text[],text,interval,text[],text,jsonb[])',
              'idem_heartbeat(text,text,bigint)',
              'idem_complete(text,text,bigint,jsonb)',
              'idem_fail(text,text,bigint,text,boolean)',
              'idem_status(text,text)']
OPER_FUNCS = ['idem_resolve(text,text,text,jsonb,text)', 'idem_release(text,text,text)',
              'idem_resolve(text,text,text,jsonb,text,text)', 'idem_release(text,text,text,text)']
# what the model of 1.2 needs besides the functions above
API_1_2 = {
    'function': ['public.%s' % f for f in GATE_FUNCS + OPER_FUNCS] + ['idem_gate.history(text,text)'],
    'column': [('idem_gate.claims', 'payload'), ('idem_gate.claims', 'payload_dropped_bytes'),
               ('idem_gate.audit', 'actor')],
    'view': ['idem_gate.inbox'],
    'setting': ['idem_gate.max_payload_bytes', 'idem_gate.max_attempts'],
}
INBOX_COLS = ['workflow', 'key', 'reason', 'since', 'state', 'attempt', 'execution_id', 'last_error',
              'payload', 'payload_dropped_bytes', 'fingerprint', 'claimed_at', 'updated_at']
HISTORY_COLS = ['at', 'action', 'actor', 'session_role', 'acting_role', 'state_before', 'state_after',
                'reason']
# cases where main disagrees with the contract, which --skip can leave out
KNOWN_CASES = {
    'concurrent-delete': 'releases and janitor deletions racing with claims in the concurrent phase (a claim waiting for the deletion is granted a token drawn before it waited, lower than the deleted claim\'s)',
    'lock-receipt': 'a janitor pass while a completed row due for receipt clearing is locked (FOR KEY SHARE)',
    'many-empty-bad-args': 'idem_claim_many with an empty array and a NULL/empty workflow or a bad stale_interval/execution_id',
    'many-repeat-fp': 'idem_claim_many repeating a key with another fingerprint than the stored one',
}


# undefined function, column, table: an idem_gate without the 1.2 API
MISSING_CODES = {'42883', '42703', '42P01'}


class Fail(Exception):
    """A difference between the server and the model."""


def short(text):
    """Long runs of one character (the 255-character key) shown as a count."""
    return re.sub(r'(.)\1{11,}', lambda m: '%s{x%d}' % (m.group(1), len(m.group(0))), text)


def jdump(v):
    return json.dumps(v, sort_keys=True, ensure_ascii=False)


def quote_lit(s):
    return "'" + s.replace("'", "''") + "'"


# A timestamp the model knows is a pair (lo, hi) of seconds since the epoch:
# the write happened between the call's send and its answer.

def ts_ok(bounds, v):
    return bounds[0] - EPS <= v <= bounds[1] + EPS


def le(a, b):
    """a <= b for bounds: True, False, or None when it cannot be told."""
    if a[1] <= b[0] - EPS:
        return True
    if a[0] > b[1] + EPS:
        return False
    return None


def shift(b, d):
    return (b[0] + d, b[1] + d)


def tmax(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]))


class Prefix(str):
    """A text column the model knows only the beginning of."""


class JsonNull:
    """A jsonb value that is JSON null (not SQL NULL): never a kept payload."""

    def __repr__(self):
        return "'null'::jsonb"


def json_value(v):
    """A jsonb value read by psycopg2 that is not SQL NULL (JSON null made visible)."""
    return JsonNull() if v is None else v


def payload_differs(m, a):
    """Compare the payload columns of a model row and a row read; a reason or None."""
    if m['payload'] is None or a['payload'] is None or isinstance(a['payload'], JsonNull):
        if not (m['payload'] is None and a['payload'] is None):
            return 'payload %s, model %s' % (short(repr(a['payload'])), short(repr(m['payload'])))
    elif jdump(m['payload']) != jdump(a['payload']):
        return 'payload %s, model %s' % (short(jdump(a['payload'])), short(jdump(m['payload'])))
    if m['payload_dropped'] != a['payload_dropped']:
        return 'payload_dropped_bytes %r, model %r' % (a['payload_dropped'], m['payload_dropped'])
    return None


def name_errs(v):
    if v is None:
        return {'22004'}
    if v == '':
        return {'22023'}
    if len(v) > 255 or len(v.encode()) > 1300:
        return {'22023'}
    return set()


def interval_secs(sql):
    for s, secs in INTERVALS:
        if s == sql:
            return secs
    raise KeyError(sql)


# --------------------------------------------------------------------------
# the model of one row

def new_row(token_bounds, w, issued, exec_id, fp, payload=(None, None)):
    return {'state': 'processing', 'attempt': 1, 'token': None, 'token_gt': token_bounds,
            'token_issued': issued, 'execution_id': exec_id, 'fingerprint': fp,
            'result': None, 'last_error': None, 'created_at': w, 'claimed_at': w,
            'updated_at': w, 'completed_at': None, 'alerted_token': None,
            'payload': payload[0], 'payload_dropped': payload[1]}


def without_payload(row):
    """A row whose payload and payload_dropped_bytes are cleared (completion)."""
    return dict(row, payload=None, payload_dropped=None)


INBOX_SQL = ('SELECT workflow, key, reason, extract(epoch FROM since)::float8, state::text, attempt,'
             ' execution_id, last_error, payload, payload_dropped_bytes, fingerprint,'
             ' extract(epoch FROM claimed_at)::float8, extract(epoch FROM updated_at)::float8,'
             ' payload IS NULL FROM idem_gate.inbox')
# stuck_after of the workflows' policies while the inbox is read (None: the setting)
STUCK_POLICY = [None, None, '150 milliseconds', '2 minutes', '10 minutes', '1 hour', '1 day', '2 days',
                '1 mon', '45 days', '1 year']
HISTORY_SQL = ('SELECT extract(epoch FROM at)::float8, action, actor, session_role::text,'
               ' acting_role::text, state_before::text, state_after::text, reason'
               ' FROM idem_gate.history(%s::text, %s::text)')


class Session:
    """One session of the exact phase: its connections, keys and model."""

    def __init__(self, run, idx, rng):
        self.run = run
        self.idx = idx
        self.rng = rng
        self.name = 's%d' % idx
        self.wfs = ['m_s%d_a' % idx, 'm_s%d_b\t"%%' % idx]
        self.keys = ['k0', 'k1', 'k2', 'ctl\n\t\x01\x7f', "q'\"\\%_", '\U0001d11e' * 255]
        self.steps = 0
        self.tokens_seen = set()
        # 1.2's superuser settings, set on the session's connections before
        # they take their role: the largest payload kept (the default 1 MB,
        # none, or the size of one of the payloads or one byte less) and
        # the attempts from which a failed_retryable claim is failing
        edge = run.payload_sizes[rng.choice(PAYLOADS)]
        self.limit = rng.choice([None, None, 0, 64, edge, edge, edge - 1])
        self.max_attempts = rng.choice([None, 1, 2, 3, 3])
        settings = []
        if self.limit is not None:
            settings.append(('idem_gate.max_payload_bytes', self.limit))
        if self.max_attempts is not None:
            settings.append(('idem_gate.max_attempts', self.max_attempts))
        self.limit = run.defaults['idem_gate.max_payload_bytes'] if self.limit is None else self.limit
        self.max_attempts = run.defaults['idem_gate.max_attempts'] if self.max_attempts is None else self.max_attempts
        self.txn_limit = None
        self.conns = {}
        for role in ('client', 'operator', 'super'):
            self.conns[role] = run.connect(role, settings)
        self.tz = rng.choice(TIMEZONES)
        for c in self.conns.values():
            c.cursor().execute('SET TimeZone = %s', (self.tz,))
        # reads back as the superuser, in UTC (the inbox's now() - stuck_after
        # is then a fixed length for every interval but months and years)
        self.rb = run.connect('super', settings + [('TimeZone', 'UTC')])
        self.inbox_due = False

    def close(self):
        for c in list(self.conns.values()) + [self.rb]:
            try:
                c.close()
            except Exception:
                pass

    # ----------------------------------------------------------------- model
    def all_keys(self):
        return [(w, k) for w in self.wfs for k in self.keys]

    def hist(self, wk, text):
        if wk is None:
            return
        self.run.history.setdefault(wk, []).append('[%s #%d] %s' % (self.name, self.steps, short(text)))
        if len(self.run.history[wk]) > 60:
            del self.run.history[wk][0]

    def fail(self, wk, msg):
        raise Fail('%s (session %s, step %d, key %r workflow %r)' % (msg, self.name, self.steps,
                                                                      wk[1] if wk else None,
                                                                      wk[0] if wk else None),
                   wk)

    # ----------------------------------------------------------------- calls
    def call(self, conn, sql, args, name=None):
        """Run one statement; returns (rows or None, sqlstate or None, t_send, t_recv).
        The error's message is kept in self.last_msg, the columns in self.last_cols."""
        g = self.run.global_max_token
        cur = conn.cursor()
        t0 = time.time()
        self.last_msg = self.last_cols = None
        try:
            cur.execute(sql, args)
            rows = cur.fetchall() if cur.description else None
            self.last_cols = [d[0] for d in cur.description] if cur.description else None
            err = None
        except psycopg2.Error as e:
            rows = None
            err = e.pgcode or 'conn'
            msg = self.last_msg = str(e).strip()
            if err == 'conn':
                raise
        t1 = time.time()
        self.run.count('%s %s' % (name or sql.split('(')[0].split()[-1], err or 'ok'))
        if err in MISSING_CODES:
            raise Fail('idem_gate lacks part of the 1.2 API the model calls (%s): %s (%s)'
                       % (err, msg.splitlines()[0], sql.split(' FROM ')[-1].split('(')[0]), None)
        if err is not None and err not in self.run.expected_codes:
            raise Fail('unexpected error %s: %s (%s %r)' % (err, msg, sql, args), None)
        return rows, err, t0, t1, g

    def readback(self, wks):
        cur = self.rb.cursor()
        out = {}
        for wf, key in wks:
            cur.execute(
                'SELECT state::text, attempt, token, token_issued, execution_id, fingerprint,'
                ' result, result IS NULL, last_error,'
                ' extract(epoch FROM created_at)::float8, extract(epoch FROM claimed_at)::float8,'
                ' extract(epoch FROM updated_at)::float8, extract(epoch FROM completed_at)::float8,'
                ' alerted_token, payload, payload IS NULL, payload_dropped_bytes'
                ' FROM idem_gate.claims WHERE workflow = %s AND key = %s', (wf, key))
            r = cur.fetchone()
            out[(wf, key)] = None if r is None else {
                'state': r[0], 'attempt': r[1], 'token': r[2], 'token_issued': r[3],
                'execution_id': r[4], 'fingerprint': r[5], 'result': None if r[7] else r[6],
                'last_error': r[8], 'created_at': r[9], 'claimed_at': r[10], 'updated_at': r[11],
                'completed_at': r[12], 'alerted_token': r[13],
                'payload': None if r[15] else json_value(r[14]), 'payload_dropped': r[16]}
        return out

    def row_matches(self, m, a):
        """Compare a model row with a row read back; returns a reason or None."""
        if m is None or a is None:
            return None if (m is None and a is None) else 'row %s, model %s' % (
                'present' if a else 'absent', 'present' if m else 'absent')
        for f in ('state', 'attempt', 'token_issued', 'execution_id', 'fingerprint',
                  'alerted_token'):
            if f == 'alerted_token' and m[f] == 'token':
                if a[f] != a['token']:
                    return 'alerted_token %r, model: the token' % a[f]
                continue
            if m[f] != a[f]:
                return '%s %r, model %r' % (f, a[f], m[f])
        if m['token'] is not None:
            if a['token'] != m['token']:
                return 'token %r, model %r' % (a['token'], m['token'])
        elif not a['token'] > m['token_gt']:
            return 'token %r does not exceed %r, every token seen before the grant' % (
                a['token'], m['token_gt'])
        if jdump(m['result']) != jdump(a['result']):
            return 'result %s, model %s' % (jdump(a['result']), jdump(m['result']))
        why = payload_differs(m, a)
        if why:
            return why
        if isinstance(m['last_error'], Prefix):
            if a['last_error'] is None or not a['last_error'].startswith(m['last_error']):
                return 'last_error %r, model %r...' % (a['last_error'], str(m['last_error']))
        elif m['last_error'] != a['last_error']:
            return 'last_error %r, model %r' % (a['last_error'], m['last_error'])
        for f in ('created_at', 'claimed_at', 'updated_at', 'completed_at'):
            if (m[f] is None) != (a[f] is None):
                return '%s %r, model %r' % (f, a[f], m[f])
            if m[f] is not None and not ts_ok(m[f], a[f]):
                return '%s %.6f outside the model\'s [%.6f, %.6f]' % (f, a[f], m[f][0], m[f][1])
        return None

    def learn(self, m, a):
        """After a match: the model takes the exact values read back."""
        if m is None:
            return None
        m = dict(m)
        m['token'] = a['token']
        m['token_gt'] = None
        m['last_error'] = a['last_error']
        m['alerted_token'] = a['alerted_token']
        for f in ('created_at', 'claimed_at', 'updated_at', 'completed_at'):
            m[f] = None if a[f] is None else (a[f], a[f])
        return m

    def check_rows(self, wks, alts_by_key=None):
        """Read back wks and compare each with its model row (or one of its alternatives)."""
        actual = self.readback(wks)
        for wk in wks:
            a = actual[wk]
            alts = alts_by_key[wk] if alts_by_key and wk in alts_by_key else [self.run.model.get(wk)]
            reasons = []
            for m in alts:
                r = self.row_matches(m, a)
                if r is None:
                    self.run.model[wk] = self.learn(m, a)
                    if a is not None:
                        self.note_token(a['token'])
                    break
                reasons.append(r)
            else:
                self.fail(wk, 'row read back differs from the model: %s' % '; '.join(reasons))
        return actual

    def note_token(self, t):
        with self.run.lock:
            if t > self.run.global_max_token:
                self.run.global_max_token = t

    def check_audit(self, wk, expected):
        """The audit rows written for wk since the last check are exactly expected;
        after new ones, idem_gate.history() of wk is every audit row of wk."""
        last = self.run.audit_seen.get(wk, 0)
        cur = self.rb.cursor()
        cur.execute('SELECT id, extract(epoch FROM at)::float8, session_role::text, acting_role::text,'
                    ' action, state_before::text, state_after::text, token, reason, actor'
                    ' FROM idem_gate.audit WHERE workflow = %s AND key = %s AND id > %s ORDER BY id',
                    (wk[0], wk[1], last))
        rows = cur.fetchall()
        if len(rows) != len(expected):
            self.fail(wk, 'audit: %d new rows, model %d: %r' % (len(rows), len(expected), rows))
        log = self.run.audit_log.setdefault(wk, [])
        for r, e in zip(rows, expected):
            got = (r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])
            want = (e['session'], e['acting'], e['action'], e['before'], e['after'], e['token'],
                    e['reason'], e['actor'])
            if e['token'] is None:
                # granted by a plain idem_claim earlier in the same transaction,
                # not read back yet: the model does not know it
                want = want[:5] + (r[7],) + want[6:]
            if isinstance(e['reason'], Prefix):
                want = want[:6] + (r[8] if r[8] and r[8].startswith(e['reason']) else str(e['reason']) + '...',) + want[7:]
            if got != want or not ts_ok(e['at'], r[1]):
                self.fail(wk, 'audit row %r, model %r at [%.3f, %.3f]' % (r, want, e['at'][0], e['at'][1]))
            self.run.audit_seen[wk] = r[0]
            # what history() shows of it: no token
            log.append({'id': r[0], 'row': (r[1], r[4], r[9], r[2], r[3], r[5], r[6], r[8])})
        if rows:
            self.check_history(wk, self.rb, 'idem_gate.history%r as the superuser' % (wk[::-1],))

    def check_history(self, wk, conn, what, rows=None):
        """idem_gate.history(key, workflow) is the model's audit log of wk, oldest first."""
        if rows is None:
            cur = conn.cursor()
            cur.execute(HISTORY_SQL, (wk[1], wk[0]))
            rows = cur.fetchall()
        want = [e['row'] for e in self.run.audit_log.get(wk, [])]
        if len(rows) != len(want):
            self.fail(wk, '%s: %d rows, model %d: %r; model %r' % (what, len(rows), len(want), rows, want))
        for i, (r, m) in enumerate(zip(rows, want)):
            if r[1:] != m[1:] or abs(r[0] - m[0]) > 1e-6:
                self.fail(wk, '%s: row %d %r, model %r' % (what, i + 1, r, m))

    # ----------------------------------------------------------- arguments
    def pick_key(self):
        r = self.rng.random()
        if r < 0.93:
            return self.rng.choice(self.keys)
        return self.rng.choice([None, '', 'x' * 256, '\U0001d11e' * 256, 'é' * 256])

    def pick_wf(self):
        r = self.rng.random()
        if r < 0.95:
            return self.rng.choice(self.wfs)
        return self.rng.choice([None, '', 'w' * 256])

    def pick_interval(self):
        r = self.rng.random()
        if r < 0.3:
            return None
        good = [s for s, secs in INTERVALS if secs is not None]
        bad = [s for s, secs in INTERVALS if secs is None]
        return self.rng.choice(good if r < 0.9 else bad)

    def pick_payload(self, huge=False):
        """A payload's SQL text (None: SQL NULL), sometimes a JSON scalar (22023)."""
        r = self.rng.random()
        if r < 0.25:
            return None
        if r < 0.92:
            return self.rng.choice(PAYLOADS)
        if huge and r > 0.99:
            return PAYLOAD_HUGE
        return self.rng.choice(PAYLOAD_SCALARS)

    def payload_cols(self, text):
        """What a grant carrying the payload text writes: (payload, payload_dropped_bytes),
        or None for no payload (the stored one stays)."""
        if text is None:
            return None
        size = self.run.payload_sizes[text]
        if size > (self.txn_limit if self.txn_limit is not None else self.limit):
            return (None, size)
        return (json.loads(text), None)

    def pick_actor(self):
        return self.rng.choice(ACTORS)

    def pick_token(self, wk):
        m = self.run.model.get(wk)
        r = self.rng.random()
        if m is not None and r < 0.7:
            return m['token']
        if r < 0.8:
            return None
        if r < 0.9 and self.run.old_tokens.get(wk):
            return self.rng.choice(self.run.old_tokens[wk])
        return self.rng.choice([0, 2 ** 62, -5])

    def role_for(self, kind):
        r = self.rng.random()
        if kind == 'client':
            return 'client' if r < 0.7 else ('operator' if r < 0.85 else 'super')
        return 'operator' if r < 0.7 else ('super' if r < 0.92 else 'client')

    def allowed(self, role, kind):
        return role != 'client' or kind == 'client'

    def role_name(self, role):
        return self.run.roles[role]

    # --------------------------------------------------------------- model
    def claim_alts(self, wk, row, iv_secs, fp, exec_id, issued, tstart, w, g, pcols=None):
        """Alternatives for one claim of wk: list of (answer, new row); or ('error', codes).
        pcols: the payload columns a grant writes (payload_cols()), None for none."""
        if row is None:
            return [(('new', True), new_row(g, w, issued, exec_id, fp, pcols or (None, None)))]
        if fp is not None and row['fingerprint'] is not None and row['fingerprint'] != fp:
            return 'IG001'
        st = row['state']
        if st == 'completed':
            return [(('completed', False), row)]
        if st == 'needs_review':
            return [(('needs_review', False), row)]

        def regrant():
            n = dict(row)
            n['state'] = 'processing'
            n['attempt'] = row['attempt'] + 1
            n['token'] = None
            n['token_gt'] = max(g, row['token'] if row['token'] is not None else 0)
            n['execution_id'] = exec_id
            n['fingerprint'] = row['fingerprint'] if row['fingerprint'] is not None else fp
            n['claimed_at'] = n['updated_at'] = tmax(w, row['updated_at'])
            n['token_issued'] = issued
            if pcols is not None:
                # a grant without a payload leaves the stored one as it was
                n['payload'], n['payload_dropped'] = pcols
            return n
        if st == 'failed_retryable':
            return [(('new', True), regrant())]
        if exec_id is not None and row['execution_id'] == exec_id:
            return [(('new', True), row)]
        if iv_secs is not None:
            stale = le(row['updated_at'], (tstart[0] - iv_secs, tstart[1] - iv_secs))
            if stale is True:
                return [(('stale_taken', True), regrant())]
            if stale is None:
                return [(('stale_taken', True), regrant()), (('in_flight', False), row)]
        return [(('in_flight', False), row)]

    def claim_errs(self, key, wf, iv, fp=None, exec_id=None, ex=False):
        errs = name_errs(key) | name_errs(wf)
        if iv is not None and interval_secs(iv) is None:
            errs.add('22023')
        if ex and (fp == '' or exec_id == ''):
            errs.add('22023')
        return errs

    def expect_error(self, wk, what, err, codes, t0, t1):
        if err is None:
            self.fail(wk, '%s succeeded; model: error %s' % (what, '/'.join(sorted(codes))))
        if err not in codes:
            self.fail(wk, '%s: error %s; model: %s' % (what, err, '/'.join(sorted(codes))))

    # ------------------------------------------------------------ operations
    def op_claim(self, ex, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        iv = self.pick_interval()
        fp = self.rng.choice(FPS) if ex else None
        exec_id = self.rng.choice(EXECS) if ex else None
        # the 1.2 overload with a payload in a share of the calls, 1.1's in the rest
        with_payload = ex and self.rng.random() < 0.55
        payload = self.pick_payload(huge=True) if with_payload else None
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        if with_payload:
            sql = 'SELECT * FROM idem_claim_ex(%s::text, %s::text, %s::interval, %s::text, %s::text, %s::jsonb)'
            args = (key, wf, iv, fp, exec_id, payload)
        elif ex:
            sql = 'SELECT * FROM idem_claim_ex(%s::text, %s::text, %s::interval, %s::text, %s::text)'
            args = (key, wf, iv, fp, exec_id)
        else:
            sql = 'SELECT idem_claim(%s::text, %s::text, %s::interval)'
            args = (key, wf, iv)
        what = '%s%r' % ('idem_claim_ex' if ex else 'idem_claim', args)
        rows, err, t0, t1, g = self.call(conn, sql, args)
        self.hist(wk, '%s as %s -> %s' % (what, role, err or rows))
        errs = self.claim_errs(key, wf, iv, fp, exec_id, ex)
        if payload in PAYLOAD_SCALARS:
            # a JSON scalar is refused, naming the argument; nothing changes
            if not errs and err == '22023' and 'payload' not in self.last_msg.splitlines()[0]:
                self.fail(wk, '%s: error 22023 names no payload: %s' % (what, self.last_msg))
            if not errs:
                self.run.count('idem_claim_ex payload: a JSON scalar refused')
            errs.add('22023')
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        row = self.run.model.get(wk)
        ts = tstart or (t0, t1)
        alts = self.claim_alts(wk, row, interval_secs(iv) if iv else None, fp, exec_id, ex,
                               ts, (t0, t1), g, self.payload_cols(payload))
        if alts == 'IG001':
            return self.expect_error(wk, what, err, {'IG001'}, t0, t1)
        if err is not None:
            self.fail(wk, '%s: error %s; model: %s' % (what, err, [a[0] for a in alts]))
        got = rows[0]
        for (outcome, granted), nrow in alts:
            if ex:
                if got[0] != outcome or (got[1] is not None) != granted:
                    continue
            elif got[0] != outcome:
                continue
            break
        else:
            self.fail(wk, '%s answered %r; model %r' % (what, got, [a[0] for a in alts]))
        self.run.count('%s -> %s' % ('idem_claim_ex' if ex else 'idem_claim', outcome))
        if with_payload and payload is not None:
            self.run.count('idem_claim_ex payload %s -> %s' % (
                'dropped' if self.payload_cols(payload)[1] else 'kept', outcome))
        if ex:
            self.check_claim_row(wk, what, got[1:], outcome, granted, nrow, g)
        self.grant(wk, nrow, got[1] if ex and granted else None, outcome, granted)
        return [wk]

    def check_claim_row(self, wk, what, vals, outcome, granted, nrow, g):
        token, attempt, state, result, claimed_at = vals
        if granted:
            if nrow['token'] is not None:
                if token != nrow['token']:
                    self.fail(wk, '%s: token %r, model %r' % (what, token, nrow['token']))
            elif not token > nrow['token_gt']:
                self.fail(wk, '%s: new token %r does not exceed %r' % (what, token, nrow['token_gt']))
        if attempt != nrow['attempt'] or state != nrow['state']:
            self.fail(wk, '%s: attempt/state %r/%r, model %r/%r' % (what, attempt, state,
                                                                  nrow['attempt'], nrow['state']))
        want = nrow['result'] if outcome == 'completed' else None
        if jdump(result) != jdump(want):
            self.fail(wk, '%s: result %s, model %s' % (what, jdump(result), jdump(want)))
        if not ts_ok(nrow['claimed_at'], claimed_at.timestamp()):
            self.fail(wk, '%s: claimed_at %s outside the model\'s %r' % (what, claimed_at, nrow['claimed_at']))

    def grant(self, wk, nrow, token, outcome, granted):
        old = self.run.model.get(wk)
        if old is not None and old['token'] is not None:
            self.run.old_tokens.setdefault(wk, []).append(old['token'])
        if token is not None and nrow['token'] is None:
            nrow = dict(nrow)
            nrow['token'] = token
            self.note_token(token)
        self.run.model[wk] = nrow

    def op_claim_many(self, conn=None, role=None, tstart=None):
        wf = self.pick_wf()
        n = self.rng.choice([0, 1, 2, 3, 4, 5])
        keys = [self.pick_key() for _ in range(n)]
        if n >= 2 and self.rng.random() < 0.5:
            keys[self.rng.randrange(1, n)] = keys[0]
        fps = None
        r = self.rng.random()
        if r < 0.4:
            fps = [self.rng.choice(['fpA', 'fpB']) for _ in keys]
            if self.rng.random() < 0.1:
                fps.append('fpA')
            if self.rng.random() < 0.05 and fps:
                fps[self.rng.randrange(len(fps))] = self.rng.choice([None, ''])
        iv = self.pick_interval()
        exec_id = self.rng.choice(EXECS)
        if n == 0 and 'many-empty-bad-args' in self.run.skip:
            wf = self.rng.choice(self.wfs)
            if iv is not None and interval_secs(iv) is None:
                iv = None
            if exec_id == '':
                exec_id = None
        if fps is not None and 'many-repeat-fp' in self.run.skip:
            first = {}
            for i, k in enumerate(keys):
                if i < len(fps) and k in first and fps[first[k]] is not None:
                    fps[i] = fps[first[k]]
                first.setdefault(k, i)
        # the 1.2 overload with one payload per key in a share of the calls:
        # NULL elements (none for that key), JSON scalars, another length,
        # sometimes the whole array NULL (none at all) or two-dimensional
        with_payloads = self.rng.random() < 0.5
        payloads = None
        payloads_2d = False
        if with_payloads and self.rng.random() < 0.9:
            payloads = [self.pick_payload() for _ in keys]
            r = self.rng.random()
            if r < 0.04:
                payloads.append(self.rng.choice(PAYLOADS))
            elif r < 0.08 and payloads:
                payloads.pop(self.rng.randrange(len(payloads)))
            elif r < 0.10 and len(payloads) == 2:
                payloads, payloads_2d = [payloads[:1], payloads[1:]], True
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        shape = self.rng.random()
        if shape < 0.02:
            # the whole array NULL: 22004, or two-dimensional: refused
            # whatever the other arguments say
            args = (None if shape < 0.01 else [['k0', 'k1'], ['k2', 'k0']], wf, iv, fps, exec_id)
            rows, err, t0, t1, g = self.call(
                conn, 'SELECT * FROM idem_claim_many(%s::text[], %s::text, %s::interval, %s::text[], %s::text)', args)
            return self.expect_error(None, 'idem_claim_many%r' % (args,), err,
                                     {'22004'} if shape < 0.01 else {'2202E', '22023'}, t0, t1)
        args = (keys, wf, iv, fps, exec_id) + ((payloads,) if with_payloads else ())
        what = 'idem_claim_many%r' % (args,)
        rows, err, t0, t1, g = self.call(
            conn, 'SELECT ord, key, outcome::text, token, attempt, state::text, result, claimed_at'
            ' FROM idem_claim_many(%s::text[], %s::text, %s::interval, %s::text[], %s::text'
            + (', %s::jsonb[]' if with_payloads else '') + ') ORDER BY ord', args)
        for k in set(k for k in keys if k is not None):
            self.hist((wf, k), '%s as %s -> %s' % (what, role, err or rows))
        wk0 = (wf, keys[0]) if keys else None
        # argument errors, in any order the implementation checks them
        errs = set()
        if any(k is None for k in keys) or (fps is not None and any(f is None for f in fps)):
            errs.add('22004')
        if fps is not None and len(fps) != len(keys):
            errs.add('22023')
        if fps is not None and any(f == '' for f in fps):
            errs.add('22023')
        for k in keys:
            errs |= name_errs(k) if k is not None else set()
        errs |= name_errs(wf)
        if iv is not None and interval_secs(iv) is None:
            errs.add('22023')
        if exec_id == '':
            errs.add('22023')
        if payloads is not None:
            if payloads_2d or len(payloads) != len(keys):
                errs.add('22023')
            elif any(p in PAYLOAD_SCALARS for p in payloads):
                # a JSON scalar is refused, naming its element; nothing changes
                bad = 1 + [p in PAYLOAD_SCALARS for p in payloads].index(True)
                if not errs and err == '22023' and 'payloads[%d]' % bad not in self.last_msg.splitlines()[0]:
                    self.fail(wk0, '%s: error 22023 does not name payloads[%d]: %s' % (what, bad, self.last_msg))
                if not errs:
                    self.run.count('idem_claim_many payloads: a JSON scalar refused')
                errs.add('22023')
        if errs:
            return self.expect_error(wk0, what, err, errs, t0, t1)
        # each distinct key is claimed once; repeats answer in_flight
        plan = []
        firsts = {}
        new_rows = {}
        ts = tstart or (t0, t1)
        for i, k in enumerate(keys):
            wk = (wf, k)
            fp = fps[i] if fps is not None else None
            if k in firsts:
                # a repeat is in_flight; its payload is ignored
                stored = new_rows[k][0][1]['fingerprint'] if new_rows[k] != 'IG001' else None
                if fp is not None and stored is not None and stored != fp:
                    return self.expect_error(wk, what + ' (element %d repeats key with fingerprint %r, stored %r)' % (i + 1, fp, stored), err, {'IG001'}, t0, t1)
                plan.append((i, k, 'repeat'))
                continue
            firsts[k] = i
            alts = self.claim_alts(wk, self.run.model.get(wk), interval_secs(iv) if iv else None,
                                   fp, exec_id, True, ts, (t0, t1), g,
                                   self.payload_cols(payloads[i] if payloads is not None else None))
            new_rows[k] = alts
            if alts == 'IG001':
                return self.expect_error(wk, what, err, {'IG001'}, t0, t1)
            plan.append((i, k, 'first'))
        if err is not None:
            self.fail(wk0, '%s: error %s; model: rows (model rows of the keys: %s)' % (what, err, '; '.join(
                '%r %s' % (k, None if self.run.model.get((wf, k)) is None else
                           '%s fingerprint %r' % (self.run.model[(wf, k)]['state'], self.run.model[(wf, k)]['fingerprint']))
                for k in firsts)))
        if len(rows) != len(keys):
            self.fail(wk0, '%s: %d rows for %d keys' % (what, len(rows), len(keys)))
        chosen = {}
        for (i, k, kind), got in zip(plan, rows):
            wk = (wf, k)
            if got[0] != i + 1 or got[1] != k:
                self.fail(wk, '%s: row %r out of order' % (what, got[:2]))
            if kind == 'first':
                for (outcome, granted), nrow in new_rows[k]:
                    if got[2] == outcome and (got[3] is not None) == granted:
                        break
                else:
                    self.fail(wk, '%s: element %d answered %r; model %r' % (
                        what, i + 1, got[2:4], [a[0] for a in new_rows[k]]))
                self.check_claim_row(wk, what, got[3:], outcome, granted, nrow, g)
                self.run.count('idem_claim_many element -> %s' % outcome)
                pc = self.payload_cols(payloads[i]) if payloads is not None else None
                if pc is not None:
                    self.run.count('idem_claim_many element payload %s -> %s' % (
                        'dropped' if pc[1] else 'kept', outcome))
                chosen[k] = (nrow, got, granted, outcome)
            else:
                nrow, fgot = chosen[k][0], chosen[k][1]
                if got[2] != 'in_flight' or got[3] is not None:
                    self.fail(wk, '%s: repeated element %d answered %r/%r, model in_flight with no token'
                              % (what, i + 1, got[2], got[3]))
                if (got[4], got[5], got[7]) != (fgot[4], fgot[5], fgot[7]) or got[6] is not None:
                    self.fail(wk, '%s: repeated element %d row %r differs from its first %r' % (
                        what, i + 1, got, fgot))
                if payloads is not None and payloads[i] is not None:
                    self.run.count('idem_claim_many repeated element with a payload (ignored)')
        for k, (nrow, got, granted, outcome) in chosen.items():
            self.grant((wf, k), nrow, got[3] if granted else None, outcome, granted)
        return [(wf, k) for k in chosen]

    def owner_common(self, wk, fname, token, completed_ok):
        """The checks of idem_complete/idem_fail before the transition: error code, 'done', or None."""
        row = self.run.model.get(wk)
        if row is None:
            return 'P0002'
        if token is not None and token != row['token']:
            return '55000'
        if token is None and row['token_issued']:
            return '22004'
        if row['state'] == 'completed' and completed_ok:
            return 'done'
        if row['state'] != 'processing':
            return '55000'
        return None

    def op_complete(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        token = self.pick_token(wk)
        result = self.rng.choice(RESULTS)
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        args = (key, wf, token, None if result is None else jdump(result))
        what = 'idem_complete%r' % (args,)
        rows, err, t0, t1, g = self.call(conn, 'SELECT idem_complete(%s::text, %s::text, %s::bigint, %s::jsonb)', args)
        self.hist(wk, '%s as %s -> %s' % (what, role, err or rows))
        errs = name_errs(key) | name_errs(wf)
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        c = self.owner_common(wk, 'idem_complete', token, True)
        if c not in (None, 'done'):
            return self.expect_error(wk, what, err, {c}, t0, t1)
        if err is not None or rows[0][0] is not True:
            self.fail(wk, '%s -> %s; model true' % (what, err or rows))
        if c is None:
            # a completion clears the payload
            row = without_payload(self.run.model[wk])
            row['state'] = 'completed'
            row['result'] = result
            row['updated_at'] = row['completed_at'] = tmax((t0, t1), row['updated_at'])
            self.run.model[wk] = row
        return [wk]

    def op_fail(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        token = self.pick_token(wk)
        error = self.rng.choice(ERRORS)
        retryable = self.rng.choice([None, True, False])
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        args = (key, wf, token, error, retryable)
        what = 'idem_fail%r' % (args,)
        rows, err, t0, t1, g = self.call(conn, 'SELECT idem_fail(%s::text, %s::text, %s::bigint, %s::text, %s::boolean)::text', args)
        self.hist(wk, '%s as %s -> %s' % (what, role, err or rows))
        errs = name_errs(key) | name_errs(wf)
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        c = self.owner_common(wk, 'idem_fail', token, False)
        if c is not None:
            return self.expect_error(wk, what, err, {c}, t0, t1)
        new_state = 'failed_retryable' if retryable else 'needs_review'
        if err is not None or rows[0][0] != new_state:
            self.fail(wk, '%s -> %s; model %s' % (what, err or rows, new_state))
        row = dict(self.run.model[wk])
        row['state'] = new_state
        row['last_error'] = error
        row['updated_at'] = tmax((t0, t1), row['updated_at'])
        self.run.model[wk] = row
        return [wk]

    def op_heartbeat(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        token = self.pick_token(wk)
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        args = (key, wf, token)
        what = 'idem_heartbeat%r' % (args,)
        rows, err, t0, t1, g = self.call(conn, 'SELECT idem_heartbeat(%s::text, %s::text, %s::bigint)', args)
        self.hist(wk, '%s as %s -> %s' % (what, role, err or rows))
        errs = name_errs(key) | name_errs(wf)
        if token is None:
            errs.add('22004')
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        row = self.run.model.get(wk)
        if row is None:
            return self.expect_error(wk, what, err, {'P0002'}, t0, t1)
        owns = row['state'] == 'processing' and row['token'] == token
        if err is not None or rows[0][0] is not owns:
            self.fail(wk, '%s -> %s; model %s' % (what, err or rows, owns))
        if owns:
            row = dict(row)
            row['updated_at'] = tmax((t0, t1), row['updated_at'])
            self.run.model[wk] = row
        return [wk]

    def op_resolve(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        resolution = self.rng.choice(RESOLUTIONS)
        result = self.rng.choice(RESULTS) if self.rng.random() < 0.7 or resolution != 'retry' else None
        reason = self.rng.choice(REASONS)
        args = (key, wf, resolution, None if result is None else jdump(result), reason)
        # the 1.2 overload naming the person in a share of the calls; 1.1's records no actor
        with_actor = self.rng.random() < 0.5
        actor = self.pick_actor() if with_actor else None
        if with_actor:
            args += (actor,)
        what = 'idem_resolve%r' % (args,)
        rows, err, t0, t1, role, session, acting = self.operator_call(
            conn, role, wk, what,
            'SELECT idem_resolve(%s::text, %s::text, %s::text, %s::jsonb, %s::text'
            + (', %s::text' if with_actor else '') + ')::text', args)
        if not self.allowed(role, 'operator'):
            return self.expect_error(wk, what, err, {'42501'}, t0, t1)
        errs = name_errs(key) | name_errs(wf)
        if resolution is None:
            errs.add('22004')
        elif resolution not in ('completed', 'retry'):
            errs.add('22023')
        elif resolution == 'retry' and result is not None:
            errs.add('22023')
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        row = self.run.model.get(wk)
        if row is None:
            return self.expect_error(wk, what, err, {'P0002'}, t0, t1)
        if row['state'] not in ('processing', 'needs_review'):
            return self.expect_error(wk, what, err, {'55000'}, t0, t1)
        new_state = 'completed' if resolution == 'completed' else 'failed_retryable'
        if err is not None or rows[0][0] != new_state:
            self.fail(wk, '%s -> %s; model %s' % (what, err or rows, new_state))
        # an operator's completion clears the payload, a retry keeps it
        n = without_payload(row) if new_state == 'completed' else dict(row)
        n['state'] = new_state
        n['updated_at'] = tmax((t0, t1), row['updated_at'])
        n['result'] = result if new_state == 'completed' else None
        n['completed_at'] = n['updated_at'] if new_state == 'completed' else None
        self.run.model[wk] = n
        self.pending_audit.append((wk, {'session': session, 'acting': acting,
                                        'action': 'resolve', 'before': row['state'], 'after': new_state,
                                        'token': row['token'], 'reason': reason, 'actor': actor,
                                        'at': (t0, t1)}))
        return [wk]

    def operator_call(self, conn, role, wk, what, sql, args, name=None):
        """Make an operator's call (idem_resolve, idem_release, history(), a
        read of the inbox), sometimes as the superuser through SET ROLE.
        Returns the answer, the role whose rights apply, and the session and
        acting roles the audit must name."""
        as_role = None
        if role is None:
            role = self.role_for('operator')
            conn = self.conns[role]
            as_role = self.maybe_set_role(role, conn)
        rows, err, t0, t1, g = self.call(conn, sql, args, name)
        self.hist(wk, '%s as %s%s -> %s' % (what, role, ' (SET ROLE %s)' % as_role if as_role else '', err or rows))
        session = self.session_role(role)
        acting = self.role_name(role)
        if as_role:
            conn.cursor().execute('RESET ROLE')
            role, acting = as_role, self.role_name(as_role)
        return rows, err, t0, t1, role, session, acting

    def maybe_set_role(self, role, conn):
        """Sometimes the superuser acts through SET ROLE: the audit names both roles."""
        if role != 'super' or self.rng.random() < 0.6:
            return None
        as_role = self.rng.choice(['operator', 'client'])
        conn.cursor().execute('SET ROLE %s' % self.role_name(as_role))
        return as_role

    def session_role(self, role):
        return self.run.roles[role]

    def op_release(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        reason = self.rng.choice(REASONS)
        args = (key, wf, reason)
        with_actor = self.rng.random() < 0.5
        actor = self.pick_actor() if with_actor else None
        if with_actor:
            args += (actor,)
        what = 'idem_release%r' % (args,)
        rows, err, t0, t1, role, session, acting = self.operator_call(
            conn, role, wk, what, 'SELECT idem_release(%s::text, %s::text, %s::text'
            + (', %s::text' if with_actor else '') + ')', args)
        if not self.allowed(role, 'operator'):
            return self.expect_error(wk, what, err, {'42501'}, t0, t1)
        errs = name_errs(key) | name_errs(wf)
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        row = self.run.model.get(wk)
        if err is not None or rows[0][0] is not (row is not None):
            self.fail(wk, '%s -> %s; model %s' % (what, err or rows, row is not None))
        if row is not None:
            self.run.old_tokens.setdefault(wk, []).append(row['token'])
            self.run.model[wk] = None
            self.pending_audit.append((wk, {'session': session, 'acting': acting,
                                            'action': 'release', 'before': row['state'], 'after': None,
                                            'token': row['token'], 'reason': reason, 'actor': actor,
                                            'at': (t0, t1)}))
        return [wk]

    def op_status(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        if role is None:
            role = self.role_for('client')
            conn = self.conns[role]
        args = (key, wf)
        what = 'idem_status%r' % (args,)
        rows, err, t0, t1, g = self.call(
            conn, 'SELECT state::text, attempt, token, token_issued, execution_id, fingerprint, result,'
            ' last_error, created_at, claimed_at, updated_at, completed_at, payload, payload IS NULL,'
            ' payload_dropped_bytes FROM idem_status(%s::text, %s::text)', args)
        self.hist(wk, '%s as %s -> %s' % (what, role, err or rows))
        errs = name_errs(key) | name_errs(wf)
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        row = self.run.model.get(wk)
        if err is not None:
            self.fail(wk, '%s -> error %s' % (what, err))
        if row is None:
            if rows:
                self.fail(wk, '%s -> %r; model: no row' % (what, rows))
            return []
        if len(rows) != 1:
            self.fail(wk, '%s -> %d rows; model one' % (what, len(rows)))
        r = rows[0]
        a = {'state': r[0], 'attempt': r[1], 'token': r[2], 'token_issued': r[3],
             'execution_id': r[4], 'fingerprint': r[5], 'result': r[6], 'last_error': r[7],
             'created_at': r[8].timestamp(), 'claimed_at': r[9].timestamp(),
             'updated_at': r[10].timestamp(),
             'completed_at': r[11].timestamp() if r[11] else None,
             'alerted_token': row['alerted_token'],
             'payload': None if r[13] else json_value(r[12]), 'payload_dropped': r[14]}
        why = self.row_matches(row, a)
        if why:
            self.fail(wk, '%s: %s' % (what, why))
        return []

    def op_history(self, conn=None, role=None, tstart=None):
        key, wf = self.pick_key(), self.pick_wf()
        wk = (wf, key)
        args = (key, wf)
        what = 'idem_gate.history%r' % (args,)
        rows, err, t0, t1, role, session, acting = self.operator_call(
            conn, role, wk, what, HISTORY_SQL, args, 'idem_gate.history')
        if not self.allowed(role, 'operator'):
            return self.expect_error(wk, what, err, {'42501'}, t0, t1)
        errs = name_errs(key) | name_errs(wf)
        if errs:
            return self.expect_error(wk, what, err, errs, t0, t1)
        if err is not None:
            self.fail(wk, '%s -> error %s' % (what, err))
        self.check_history(wk, None, '%s as %s' % (what, role), rows)
        self.run.count('idem_gate.history -> %s' % ('rows' if rows else 'no rows'))
        return []

    def op_inbox(self):
        """Read the inbox through the session's own connection (its settings,
        the workflows' policies as they are): needs_review and failing."""
        what = 'idem_gate.inbox of %r' % (self.wfs,)
        rows, err, t0, t1, role, session, acting = self.operator_call(
            None, None, None, what, 'SELECT * FROM idem_gate.inbox WHERE workflow = ANY(%s)',
            (self.wfs,), 'idem_gate.inbox')
        if not self.allowed(role, 'operator'):
            return self.expect_error(None, what, err, {'42501'}, t0, t1)
        if err is not None:
            self.fail(None, '%s as %s -> error %s' % (what, role, err))
        if self.last_cols != INBOX_COLS:
            self.fail(None, '%s: columns %r, model %r' % (what, self.last_cols, INBOX_COLS))
        rows = [r[:3] + (r[3].timestamp(),) + r[4:11] + (r[11].timestamp(), r[12].timestamp(), r[8] is None)
                for r in rows]
        cut = {wf: (t0 - FAR, t1 - FAR) for wf in self.wfs}   # the base policies' stuck_after
        self.compare_inbox(rows, self.wfs, cut, self.max_attempts, '%s as %s' % (what, role))
        return []

    def check_inbox(self, wfs=None, whole=False):
        """Read idem_gate.inbox as the superuser and compare it with the model:
        the rows of the workflows wfs (the session's), or with whole every row
        (the other workflows' against idem_gate.claims).  Often in a
        transaction that gives the workflows other stuck_after policies, the
        setting another value and sometimes max_attempts too, then rolls back."""
        wfs = wfs or self.wfs
        cur = self.rb.cursor()
        max_att = self.max_attempts
        what = 'idem_gate.inbox'
        override = whole or self.rng.random() < 0.6
        if not override:
            t0 = time.time()
            cur.execute(INBOX_SQL + ' WHERE workflow = ANY(%s)', (wfs,))
            t1 = time.time()
            rows = cur.fetchall()
            cut = {wf: (t0 - FAR, t1 - FAR) for wf in wfs}
        else:
            cur.execute('BEGIN ISOLATION LEVEL REPEATABLE READ')
            setting = self.rng.choice(SET_STUCK + [600, 7200, 172800])
            cur.execute('SET LOCAL idem_gate.stuck_after = %d' % setting)
            if self.rng.random() < 0.3:
                max_att = self.rng.choice([1, 2, 3, 5, 8])
                cur.execute('SET LOCAL idem_gate.max_attempts = %d' % max_att)
            stuck = {wf: self.rng.choice(STUCK_POLICY) for wf in wfs}
            cur.execute('UPDATE idem_gate.policies p SET stuck_after = v.iv::interval'
                        ' FROM unnest(%s::text[], %s::text[]) v(wf, iv) WHERE p.workflow = v.wf',
                        (list(stuck), list(stuck.values())))
            if cur.rowcount != len(wfs):
                self.fail(None, 'the policies of %r: %d rows' % (wfs, cur.rowcount))
            for wf in wfs:
                if stuck[wf] is None:
                    stuck[wf] = '%d seconds' % setting
            # the cutoffs, now() - stuck_after, as the server computes them
            cur.execute('SELECT x, extract(epoch FROM now() - x::interval)::float8'
                        ' FROM unnest(%s::text[]) x', (sorted(set(stuck.values())),))
            cuts = dict(cur.fetchall())
            cut = {wf: (cuts[stuck[wf]], cuts[stuck[wf]]) for wf in wfs}
            what = 'idem_gate.inbox (policies\' stuck_after %s, setting %d s, max_attempts %d)' % (
                stuck, setting, max_att)
            cur.execute(INBOX_SQL + ('' if whole else ' WHERE workflow = ANY(%s)'), (wfs,))
            rows = cur.fetchall()
            if whole:
                self.check_inbox_order(rows, what)
                others = [r for r in rows if r[0] not in wfs]
                rows = [r for r in rows if r[0] in wfs]
                # the other workflows (the concurrent phase's): as their claims say
                cur.execute('SELECT workflow, key, state::text, attempt, extract(epoch FROM updated_at)::float8'
                            ' FROM idem_gate.claims WHERE workflow <> ALL(%s) AND (state = \'needs_review\''
                            ' OR state = \'failed_retryable\' AND attempt >= %s)', (wfs, max_att))
                want = dict(((r[0], r[1]), r) for r in cur.fetchall())
            cur.execute('ROLLBACK')
            if whole:
                got = dict(((r[0], r[1]), r) for r in others)
                if len(got) != len(others) or set(got) != set(want):
                    self.fail(None, '%s: the other workflows\' rows %r, their claims %r' % (
                        what, sorted(set(got) ^ set(want))[:5], len(want)))
                for wk, r in got.items():
                    c = want[wk]
                    reason = 'needs_review' if c[2] == 'needs_review' else 'failing'
                    if (r[2], r[4], r[5], r[3], r[12]) != (reason, c[2], c[3], c[4], c[4]):
                        self.fail(None, '%s: row %r, its claim %r' % (what, r, c))
                self.run.count('idem_gate.inbox, whole view checked')
        self.compare_inbox(rows, wfs, cut, max_att, what, order=not whole)

    def compare_inbox(self, rows, wfs, cut, max_att, what, order=True):
        """The inbox rows of the workflows wfs are the model's claims that need a person."""
        exp = {}
        for wk in [(wf, k) for wf in wfs for k in self.keys]:   # every session has these keys
            m = self.run.model.get(wk)
            if m is None:
                continue
            st = m['state']
            if st == 'needs_review':
                exp[wk] = {'needs_review'}
            elif st == 'failed_retryable' and m['attempt'] >= max_att:
                exp[wk] = {'failing'}
            elif st == 'processing':
                d = le(m['updated_at'], cut[wk[0]])
                if d is not False:
                    exp[wk] = {'stuck'} if d else {'stuck', None}
        seen = set()
        for r in rows:
            wk = (r[0], r[1])
            if wk[0] not in wfs:
                self.fail(wk, '%s: a row of another workflow %r' % (what, r))
            if wk in seen:
                self.fail(wk, '%s: the claim is listed twice' % what)
            seen.add(wk)
            m = self.run.model.get(wk)
            if r[2] not in exp.get(wk, ()):
                self.fail(wk, '%s: listed as %r; model %s (row %s)' % (
                    what, r[2], sorted(x for x in exp.get(wk, ()) if x) or 'not listed',
                    None if m is None else '%s attempt %d updated_at %.6f, cutoff %.6f' % (
                        m['state'], m['attempt'], m['updated_at'][0], cut[wk[0]][0])))
            a = {'state': r[4], 'attempt': r[5], 'execution_id': r[6], 'last_error': r[7],
                 'payload': None if r[13] else json_value(r[8]), 'payload_dropped': r[9],
                 'fingerprint': r[10], 'claimed_at': r[11], 'updated_at': r[12]}
            why = None
            for f in ('state', 'attempt', 'execution_id', 'fingerprint'):
                if a[f] != m[f]:
                    why = '%s %r, model %r' % (f, a[f], m[f])
            if isinstance(m['last_error'], Prefix):
                if a['last_error'] is None or not a['last_error'].startswith(m['last_error']):
                    why = 'last_error %r, model %r...' % (a['last_error'], str(m['last_error']))
            elif a['last_error'] != m['last_error']:
                why = 'last_error %r, model %r' % (a['last_error'], m['last_error'])
            why = why or payload_differs(m, a)
            for f in ('claimed_at', 'updated_at'):
                if not ts_ok(m[f], a[f]):
                    why = '%s %.6f outside the model\'s [%.6f, %.6f]' % (f, a[f], m[f][0], m[f][1])
            if r[3] != r[12]:
                why = 'since %.6f is not updated_at %.6f' % (r[3], r[12])
            if why:
                self.fail(wk, '%s: %s' % (what, why))
            self.run.count('idem_gate.inbox row -> %s' % r[2])
        for wk, reasons in exp.items():
            if wk not in seen and None not in reasons:
                m = self.run.model[wk]
                self.fail(wk, '%s: not listed; model %s (%s attempt %d updated_at %.6f, cutoff %.6f)' % (
                    what, sorted(reasons)[0], m['state'], m['attempt'], m['updated_at'][0], cut[wk[0]][0]))
        if order:
            self.check_inbox_order(rows, what)

    def check_inbox_order(self, rows, what):
        """Oldest first: ordered by since, then workflow, then key (the server's collation)."""
        for a, b in zip(rows, rows[1:]):
            if a[3] < b[3]:
                continue
            if a[3] == b[3]:
                cur = self.rb.cursor()
                cur.execute('SELECT (%s::text, %s::text) < (%s::text, %s::text)', (a[0], a[1], b[0], b[1]))
                if cur.fetchone()[0]:
                    continue
            self.fail((b[0], b[1]), '%s: out of order: %r before %r' % (what, a[:4], b[:4]))

    def op_clock(self):
        wf = self.rng.choice(self.wfs)
        d = self.rng.choice(STEPS_BACK if self.rng.random() < 0.85 else STEPS_FWD)
        cur = self.rb.cursor()
        cur.execute('BEGIN')
        cur.execute("UPDATE idem_gate.claims SET created_at = created_at + make_interval(secs => %s),"
                    " claimed_at = claimed_at + make_interval(secs => %s),"
                    " updated_at = updated_at + make_interval(secs => %s),"
                    " completed_at = completed_at + make_interval(secs => %s) WHERE workflow = %s",
                    (d, d, d, d, wf))
        if d < 0:
            # time passes for the workflow: everything it recorded ages, the
            # janitor's progress in clearing its receipts included.  (A step
            # forward is a clock that ran fast when the rows were written; the
            # janitor's progress was measured with the true clock.)
            cur.execute("UPDATE idem_gate.janitor_watermarks SET receipts_cleared_until ="
                        " receipts_cleared_until + make_interval(secs => %s) WHERE workflow = %s", (d, wf))
        cur.execute('COMMIT')
        self.inbox_due = True
        for k in self.keys:
            wk = (wf, k)
            row = self.run.model.get(wk)
            self.hist(wk, 'clock step %+.0f s for workflow %r' % (d, wf))
            if row is not None:
                row = dict(row)
                for f in ('created_at', 'claimed_at', 'updated_at', 'completed_at'):
                    if row[f] is not None:
                        row[f] = shift(row[f], d)
                self.run.model[wk] = row
        return []

    def op_txn(self):
        """A transaction of a few calls after a pause, committed or rolled back."""
        role = self.role_for('client')
        conn = self.conns[role]
        saved = {wk: self.run.model.get(wk) for wk in self.all_keys()}
        saved_pending = list(self.pending_audit)
        cur = conn.cursor()
        t0 = time.time()
        cur.execute('BEGIN')
        t1 = time.time()
        tstart = (t0, t1)
        cur.execute('SELECT pg_sleep(%s)', (self.rng.choice([0, 0.05, 0.2]),))
        if role == 'super' and self.rng.random() < 0.5:
            # the superuser keeps smaller payloads, for this transaction
            edge = self.run.payload_sizes[self.rng.choice(PAYLOADS)]
            self.txn_limit = self.rng.choice([0, 40, edge, edge - 1])
            cur.execute('SET LOCAL idem_gate.max_payload_bytes = %d' % self.txn_limit)
            for wk in self.all_keys():
                self.hist(wk, 'transaction: SET LOCAL idem_gate.max_payload_bytes = %d' % self.txn_limit)
        touched = set()
        ok = True
        ops = [self.op_claim_ex_, self.op_claim_many, self.op_complete, self.op_fail,
               self.op_heartbeat, self.op_status, self.op_claim_plain]
        if role != 'client':
            ops += [self.op_resolve, self.op_release]
        for _ in range(self.rng.randint(1, 3)):
            op = self.rng.choice(ops)
            r = op(conn=conn, role=role, tstart=tstart)
            if conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INERROR:
                ok = False
                break
            touched |= set(r or [])
        commit = ok and self.rng.random() < 0.75
        self.run.count('transaction %s' % ('committed' if commit else 'rolled back'))
        cur.execute('COMMIT' if commit else 'ROLLBACK')
        self.txn_limit = None
        for wk in self.all_keys():
            self.hist(wk, 'transaction %s' % ('committed' if commit else 'rolled back'))
        if not commit:
            for wk, row in saved.items():
                cur_row = self.run.model.get(wk)
                if cur_row is not None and cur_row['token'] is not None and (
                        row is None or row['token'] != cur_row['token']):
                    self.run.old_tokens.setdefault(wk, []).append(cur_row['token'])
                self.run.model[wk] = row
            self.pending_audit = saved_pending
            return list(saved.keys())
        return list(touched)

    def op_claim_ex_(self, **kw):
        return self.op_claim(True, **kw)

    def op_claim_plain(self, **kw):
        return self.op_claim(False, **kw)

    def step(self):
        self.steps += 1
        self.pending_audit = []
        ops = [(self.op_claim_plain, 8), (self.op_claim_ex_, 14), (self.op_claim_many, 7),
               (self.op_heartbeat, 6), (self.op_complete, 12), (self.op_fail, 8),
               (self.op_resolve, 6), (self.op_release, 4), (self.op_status, 5),
               (self.op_clock, 4), (self.op_txn, 4), ('janitor', 2),
               (self.op_history, 2), (self.op_inbox, 1)]
        total = sum(w for _, w in ops)
        r = self.rng.uniform(0, total)
        for op, w in ops:
            r -= w
            if r <= 0:
                break
        if op == 'janitor':
            self.run.janitor_exact(self)
            return
        with self.run.rw.shared():
            touched = op()
            self.settle(touched)

    def settle(self, touched):
        touched = [wk for wk in (touched or []) if wk[1] in self.keys and wk[0] in self.wfs]
        if touched:
            self.check_rows(touched)
        by_key = {}
        for wk, a in self.pending_audit:
            by_key.setdefault(wk, []).append(a)
        for wk in set([wk for wk, _ in self.pending_audit]) | set(touched):
            if wk[1] in self.keys and wk[0] in self.wfs:
                self.check_audit(wk, by_key.get(wk, []))
        self.pending_audit = []
        # a readback point for the inbox: after every clock step, and often
        if self.inbox_due or self.rng.random() < 0.2:
            self.inbox_due = False
            self.check_inbox()


class RWLock:
    """Many sessions' calls at once, or one janitor pass alone."""

    def __init__(self):
        self.cond = threading.Condition()
        self.readers = 0
        self.writer = False

    class _Ctx:
        def __init__(self, enter, leave):
            self.enter, self.leave = enter, leave

        def __enter__(self):
            self.enter()

        def __exit__(self, *a):
            self.leave()

    def shared(self):
        def enter():
            with self.cond:
                while self.writer:
                    self.cond.wait()
                self.readers += 1

        def leave():
            with self.cond:
                self.readers -= 1
                self.cond.notify_all()
        return self._Ctx(enter, leave)

    def exclusive(self):
        def enter():
            with self.cond:
                while self.writer:
                    self.cond.wait()
                self.writer = True
                while self.readers:
                    self.cond.wait()

        def leave():
            with self.cond:
                self.writer = False
                self.cond.notify_all()
        return self._Ctx(enter, leave)


def lt(a, b):
    """a < b for bounds: True, False, or None when it cannot be told."""
    if a[1] < b[0] - EPS:
        return True
    if a[0] >= b[1] + EPS:
        return False
    return None


POLICY_VALUES = [('10 minutes', 600.0), ('1 hour', 3600.0), ('1 day', 86400.0),
                 ('2 days', 172800.0), ('1 mon', 2592000.0), ('1 year', 31557600.0)]
SET_RETENTION = [600, 3600, 86400, 2592000]
SET_FAILED = [600, 3600, 86400, 604800]
SET_STUCK = [1, 60, 900, 3600, 86400]
SET_RECEIPT = [0, 0, 120, 1800, 43200]


class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.skip = set(args.skip)
        self.model = {}
        self.history = {}
        self.old_tokens = {}
        self.audit_seen = {}
        self.audit_log = {}     # (workflow, key) -> the audit rows history() must show
        self.global_max_token = 0
        self.lock = threading.Lock()
        self.rw = RWLock()
        self.expected_codes = {'22004', '22023', 'P0002', '55000', 'IG001', '42501', '2202E'}
        self.policies = {}
        self.failure = None
        self.stats = {}
        self.tag = '%d' % os.getpid()
        self.db = 'idem_model_' + self.tag
        self.admin = psycopg2.connect('')
        self.admin.autocommit = True
        cur = self.admin.cursor()
        cur.execute('SELECT current_user::text, rolsuper FROM pg_roles WHERE rolname = current_user')
        su, is_super = cur.fetchone()
        if not is_super:
            raise SystemExit('model.py: PGUSER must be a superuser')
        self.roles = {'super': su, 'client': 'idem_model_client_' + self.tag,
                      'operator': 'idem_model_operator_' + self.tag}

    def setup(self):
        """The database, its roles and grants; Fail when idem_gate lacks what the model checks."""
        cur = self.admin.cursor()
        cur.execute('CREATE DATABASE %s' % self.db)
        self.created = True
        for r in ('client', 'operator'):
            cur.execute('CREATE ROLE %s NOLOGIN' % self.roles[r])
        self.sconn = self.connect('super')
        c = self.sconn.cursor()
        if self.args.edition == 'managed':
            return self.setup_managed(c, cur)
        try:
            if self.args.ext_version:
                c.execute('CREATE EXTENSION idem_gate VERSION %s', (self.args.ext_version,))
                if self.args.update:
                    c.execute('ALTER EXTENSION idem_gate UPDATE')
            else:
                c.execute('CREATE EXTENSION idem_gate')
        except psycopg2.Error as e:
            raise Fail('CREATE EXTENSION idem_gate: %s' % str(e).strip(), None)
        c.execute("SELECT extversion FROM pg_extension WHERE extname = 'idem_gate'")
        v = c.fetchone()[0]
        missing = self.missing_api(c)
        if missing:
            raise Fail('idem_gate %s (database %s) lacks the 1.2 API the model checks: %s' % (
                v, self.db, '; '.join(missing)), None)
        if v != MODEL_VERSION:
            raise Fail('idem_gate installs version %s; the model knows %s' % (v, MODEL_VERSION), None)
        return self.setup_grants(c)

    def setup_grants(self, c):
        """The roles' grants, the shape of what the operator reads, the defaults."""
        for r in ('client', 'operator'):
            c.execute('GRANT USAGE ON SCHEMA idem_gate TO %s' % self.roles[r])
            for f in GATE_FUNCS:
                c.execute('GRANT EXECUTE ON FUNCTION public.%s TO %s' % (f, self.roles[r]))
        for f in OPER_FUNCS:
            c.execute('GRANT EXECUTE ON FUNCTION public.%s TO %s' % (f, self.roles['operator']))
        c.execute('GRANT EXECUTE ON FUNCTION idem_gate.janitor_run() TO %s' % self.roles['operator'])
        # the human loop's reads: the operator's, not the client's
        c.execute('GRANT EXECUTE ON FUNCTION idem_gate.history(text, text) TO %s' % self.roles['operator'])
        c.execute('GRANT SELECT ON idem_gate.inbox TO %s' % self.roles['operator'])
        for what, sql, cols in (('idem_gate.inbox', 'SELECT * FROM idem_gate.inbox LIMIT 0', INBOX_COLS),
                                ('idem_gate.history()', "SELECT * FROM idem_gate.history('k', 'w')", HISTORY_COLS)):
            c.execute(sql)
            got = [d[0] for d in c.description]
            if got != cols:
                raise Fail('%s has the columns %r; the model expects %r' % (what, got, cols), None)
        if self.args.edition == 'managed':
            # no settings are defined: the C edition's defaults apply
            self.defaults = dict(MANAGED_DEFAULTS)
            self.default_action = 'alert'
        else:
            c.execute("SELECT name, setting::int FROM pg_settings WHERE name IN ('idem_gate.retention',"
                      " 'idem_gate.failed_retention', 'idem_gate.receipt_retention', 'idem_gate.stuck_after',"
                      " 'idem_gate.max_payload_bytes', 'idem_gate.max_attempts')")
            self.defaults = dict(c.fetchall())
            c.execute("SELECT setting FROM pg_settings WHERE name = 'idem_gate.stuck_action'")
            self.default_action = c.fetchone()[0]
        # the size of each payload as idem_gate.max_payload_bytes measures
        # it: the bytes of the jsonb value
        c.execute('SELECT x, pg_column_size(x::jsonb) FROM unnest(%s::text[]) x', (PAYLOADS + [PAYLOAD_HUGE],))
        self.payload_sizes = dict(c.fetchall())
        self.locker = self.connect('super')

    def setup_managed(self, c, cur):
        """The managed edition (managed/idem_gate.sql), installed with psql by
        a role that is not a superuser and owns the database, as on a
        managed service; then the grants and checks of setup()."""
        owner = 'idem_model_owner_' + self.tag
        self.roles['owner'] = owner
        cur.execute('CREATE ROLE %s LOGIN CREATEDB CREATEROLE' % owner)
        cur.execute('ALTER DATABASE %s OWNER TO %s' % (self.db, owner))
        c.execute('ALTER SCHEMA public OWNER TO %s' % owner)
        # IDEM_MANAGED_VIA=pg_tle (test/managed/pg_tle.sh): the pg_tle package
        # and CREATE EXTENSION idem_gate_managed, as a role granted pgtle_admin
        tle = os.environ.get('IDEM_MANAGED_VIA') == 'pg_tle'
        if tle:
            c.execute('CREATE EXTENSION IF NOT EXISTS pg_tle')
            cur.execute('GRANT pgtle_admin TO %s' % owner)
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'managed',
                            'idem_gate.pg_tle.sql' if tle else 'idem_gate.sql')
        r = subprocess.run(['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-U', owner, '-d', self.db,
                            '-f', path] + (['-c', 'CREATE EXTENSION idem_gate_managed'] if tle else []),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Fail('%s: %s' % (os.path.basename(path), r.stderr.strip() or r.stdout.strip()), None)
        c.execute('SELECT idem_gate.managed_version()')
        v = c.fetchone()[0]
        missing = [m for m in self.missing_api(c) if not m.startswith('setting ')]
        if missing:
            raise Fail('the managed edition %s lacks the API the model checks: %s' % (v, '; '.join(missing)), None)
        if v != MODEL_VERSION:
            raise Fail('the managed edition is version %s; the model knows %s' % (v, MODEL_VERSION), None)
        return self.setup_grants(c)

    def missing_api(self, c):
        """The objects of the 1.2 API the model uses that this database lacks."""
        missing = []
        for f in API_1_2['function']:
            c.execute('SELECT to_regprocedure(%s) IS NULL', (f,))
            if c.fetchone()[0]:
                missing.append('function %s' % f)
        for t, col in API_1_2['column']:
            c.execute('SELECT count(*) = 0 FROM pg_attribute WHERE attrelid = to_regclass(%s)'
                      ' AND attname = %s AND NOT attisdropped', (t, col))
            if c.fetchone()[0]:
                missing.append('column %s.%s' % (t, col))
        for v in API_1_2['view']:
            c.execute('SELECT to_regclass(%s) IS NULL', (v,))
            if c.fetchone()[0]:
                missing.append('view %s' % v)
        for g in API_1_2['setting']:
            c.execute('SELECT count(*) = 0 FROM pg_settings WHERE name = %s', (g,))
            if c.fetchone()[0]:
                missing.append('setting %s (the server loads an older idem_gate.so)' % g)
        return missing

    def count(self, what):
        with self.lock:
            self.stats[what] = self.stats.get(what, 0) + 1

    def connect(self, role, settings=()):
        """A connection as role; settings are SET first, as the superuser."""
        conn = psycopg2.connect(dbname=self.db)
        conn.autocommit = True
        for name, value in settings:
            conn.cursor().execute('SET %s = %%s' % name, (str(value),))
        if role != 'super':
            conn.cursor().execute('SET SESSION AUTHORIZATION %s' % self.roles[role])
        return conn

    def cleanup(self):
        for c in (getattr(self, 'sconn', None), getattr(self, 'locker', None)):
            try:
                c and c.close()
            except Exception:
                pass
        cur = self.admin.cursor()
        if not getattr(self, 'created', False):
            return
        if self.args.keep:
            print('kept database %s' % self.db)
            return
        cur.execute('DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.db)
        for r in ('client', 'operator', 'owner'):
            if r in self.roles:
                cur.execute('DROP ROLE IF EXISTS %s' % self.roles[r])

    def base_policy(self, cur, wfs):
        for wf in wfs:
            cur.execute('INSERT INTO idem_gate.policies (workflow, retention, failed_retention,'
                        ' stuck_after, receipt_retention) VALUES (%s, make_interval(secs => %s),'
                        ' make_interval(secs => %s), make_interval(secs => %s), make_interval(secs => %s))'
                        ' ON CONFLICT (workflow) DO UPDATE SET retention = EXCLUDED.retention,'
                        ' failed_retention = EXCLUDED.failed_retention, stuck_after = EXCLUDED.stuck_after,'
                        ' receipt_retention = EXCLUDED.receipt_retention', (wf, FAR, FAR, FAR, FAR))

    # ------------------------------------------------------------ janitor
    def janitor_exact(self, s):
        rng = s.rng
        with self.rw.exclusive():
            r = rng.random()
            role = 'super' if r < 0.7 else ('operator' if r < 0.9 else 'client')
            conn = s.conns[role]
            wfs = [wf for sess in self.sessions for wf in sess.wfs]
            owner = {wf: sess for sess in self.sessions for wf in sess.wfs}
            settings = dict(self.defaults)
            action = self.default_action
            pol = {wf: (FAR, FAR, FAR, FAR) for wf in wfs}  # retention, failed, stuck, receipt
            setup = []
            audit_ret = None
            if role == 'super':
                settings['idem_gate.retention'] = rng.choice(SET_RETENTION)
                settings['idem_gate.failed_retention'] = rng.choice(SET_FAILED)
                settings['idem_gate.stuck_after'] = rng.choice(SET_STUCK)
                rr = rng.choice(SET_RECEIPT)
                settings['idem_gate.receipt_retention'] = rr if rr < settings['idem_gate.retention'] else 0
                action = rng.choice(['alert', 'review'])
                setup.append('SET LOCAL idem_gate.receipt_retention = 0')
                for n in ('retention', 'failed_retention', 'stuck_after', 'receipt_retention'):
                    setup.append('SET LOCAL idem_gate.%s = %d' % (n, settings['idem_gate.' + n]))
                setup.append("SET LOCAL idem_gate.stuck_action = '%s'" % action)
                if rng.random() < 0.2:
                    audit_ret = 1
                    setup.append('SET LOCAL idem_gate.audit_retention = 1')
                for wf in wfs:
                    mode = rng.choice(['keep', 'settings', 'settings', 'policy', 'policy'])
                    if mode == 'settings':
                        pol[wf] = (None, None, None, None)
                        setup.append('DELETE FROM idem_gate.policies WHERE workflow = %s' % quote_lit(wf))
                    elif mode == 'policy':
                        vals = []
                        for _ in range(4):
                            vals.append(rng.choice(POLICY_VALUES + [(None, None)]))
                        if vals[3][1] is not None and vals[0][1] is not None and vals[3][1] > vals[0][1]:
                            vals[3] = (None, None)
                        if all(v[1] is None for v in vals):
                            vals[2] = ('1 hour', 3600.0)
                        pol[wf] = tuple(v[1] for v in vals)
                        setup.append(
                            'UPDATE idem_gate.policies SET retention = %s, failed_retention = %s,'
                            ' stuck_after = %s, receipt_retention = %s WHERE workflow = %s' % (
                                tuple(("'%s'::interval" % v[0]) if v[0] else 'NULL' for v in vals)
                                + (quote_lit(wf),)))

            def eff(wf, i, setting):
                v = pol[wf][i]
                return float(settings[setting]) if v is None else v
            # the model's alternatives for every row
            plan = {}
            t_guess = time.time()
            locked = None
            for wf in wfs:
                ret_c = eff(wf, 0, 'idem_gate.retention')
                ret_f = eff(wf, 1, 'idem_gate.failed_retention')
                stuck = eff(wf, 2, 'idem_gate.stuck_after')
                # the receipt retention clears the payloads of open claims
                # too, whatever the retention (a payload has no row to outlive)
                rr_p = rr = eff(wf, 3, 'idem_gate.receipt_retention')
                if rr >= ret_c:
                    rr = 0
                for k in owner[wf].keys:
                    plan[(wf, k)] = (ret_c, ret_f, stuck, rr, rr_p)
            if role == 'super' and rng.random() < 0.5:
                cands = []
                receipts = []
                for wk, (ret_c, ret_f, stuck, rr, rr_p) in plan.items():
                    row = self.model.get(wk)
                    if row is None:
                        continue
                    if row['state'] == 'completed' and lt(row['updated_at'], (t_guess - ret_c - 60, t_guess - ret_c + 60)) is not False:
                        continue
                    cands.append(wk)
                    rr = plan[wk][3]
                    if (row['state'] == 'completed' and row['result'] is not None and rr > 0
                            and lt(row['updated_at'], (t_guess - rr - 60, t_guess - rr)) is True):
                        receipts.append(wk)
                if 'lock-receipt' in self.skip:
                    # no completed row holding a receipt, due or not
                    cands = [wk for wk in cands if not (
                        self.model[wk]['state'] == 'completed' and self.model[wk]['result'] is not None)]
                    receipts = []
                if receipts and rng.random() < 0.5:
                    locked = rng.choice(sorted(receipts))
                elif cands:
                    locked = rng.choice(sorted(cands))
                if locked:
                    self.count('janitor pass with a locked %s row' % self.model[locked]['state'])
            lcur = self.locker.cursor()
            cur = conn.cursor()
            if locked:
                lcur.execute('BEGIN')
                lcur.execute('SELECT 1 FROM idem_gate.claims WHERE workflow = %s AND key = %s FOR KEY SHARE', locked)
            cur.execute('BEGIN')
            for sql in setup:
                cur.execute(sql)
            t0 = time.time()
            try:
                cur.execute('SELECT deleted, deleted_completed, deleted_failed, alerts, escalated'
                            ' FROM idem_gate.janitor_run()')
                counts = cur.fetchone()
                err = None
            except psycopg2.Error as e:
                err, counts = e.pgcode, None
            t1 = time.time()
            if err is None and role == 'super':
                cur.execute('DELETE FROM idem_gate.policies WHERE workflow = ANY(%s)', (wfs,))
                self.base_policy(cur, wfs)
            cur.execute('COMMIT' if err is None else 'ROLLBACK')
            if locked:
                lcur.execute('COMMIT')
            desc = 'janitor pass as %s (settings %s, action %s, policies %s, locked %r) -> %s' % (
                role, settings, action, {wf: pol[wf] for wf in wfs}, locked, err or counts)
            for wk in plan:
                s.hist(wk, desc)
            if role == 'client':
                if err != '42501':
                    s.fail(None, 'janitor_run() as the client -> %s; model 42501' % (err or counts))
                return
            if err is not None:
                s.fail(None, 'janitor_run() -> error %s' % err)
            now = (t0, t1)
            alts_by_key = {}
            contrib = {}
            escalations = {}
            for wk, (ret_c, ret_f, stuck, rr, rr_p) in plan.items():
                row = self.model.get(wk)
                alts = [(row, (0, 0, 0))]
                if (row is not None and wk == locked and row['state'] == 'completed'
                        and row['result'] is not None and rr > 0
                        and lt(row['updated_at'], shift((t0, t1), -rr)) is not False):
                    # a FOR KEY SHARE lock does not stop clearing a receipt (a
                    # no-key update): the janitor may clear it or leave it
                    alts.append((dict(row, result=None), (0, 0, 0)))
                if row is not None and wk != locked:
                    st = row['state']
                    if st == 'completed':
                        d = lt(row['updated_at'], shift(now, -ret_c))
                        c = rr > 0 and row['result'] is not None and lt(row['updated_at'], shift(now, -rr))
                        cleared = dict(row, result=None)
                        if d is True:
                            alts = [(None, (1, 0, 0))]
                        elif d is None:
                            alts = [(None, (1, 0, 0)), (row, (0, 0, 0))]
                            if c is not False:
                                alts.append((cleared, (0, 0, 0)))
                        elif c is True:
                            alts = [(cleared, (0, 0, 0))]
                        elif c is None:
                            alts = [(row, (0, 0, 0)), (cleared, (0, 0, 0))]
                    elif st == 'failed_retryable':
                        d = lt(row['updated_at'], shift(now, -ret_f))
                        if d is True:
                            alts = [(None, (0, 1, 0))]
                        elif d is None:
                            alts = [(None, (0, 1, 0)), (row, (0, 0, 0))]
                    elif st == 'processing' and row['alerted_token'] != row['token']:
                        d = lt(row['updated_at'], shift(now, -stuck))
                        hit = dict(row, alerted_token=row['token'])
                        if action == 'review':
                            hit.update(state='needs_review', last_error=Prefix('stuck in processing for '),
                                       updated_at=tmax(now, row['updated_at']))
                        if d is True:
                            alts = [(hit, (0, 0, 1))]
                        elif d is None:
                            alts = [(hit, (0, 0, 1)), (row, (0, 0, 0))]
                if rr_p > 0:
                    # after the stuck claims: the payloads of open rows older
                    # than the receipt retention (a no-key update: a FOR KEY
                    # SHARE lock does not stop it)
                    more = []
                    for m, c in alts:
                        if m is None or m['state'] == 'completed' or m['payload'] is None:
                            more.append((m, c))
                            continue
                        d = lt(m['updated_at'], shift(now, -rr_p))
                        if d is not False:
                            more.append((dict(m, payload=None), c))
                        if d is not True:
                            more.append((m, c))
                    alts = more
                alts_by_key[wk] = [a[0] for a in alts]
                contrib[wk] = alts
            actual = s.readback(list(plan))
            tot = [0, 0, 0]
            for wk, alts in contrib.items():
                a = actual[wk]
                for m, c in alts:
                    if s.row_matches(m, a) is None:
                        old = self.model.get(wk)
                        if m is not old:
                            if m is None:
                                self.count('janitor: row deleted')
                            elif m['state'] == 'completed':
                                self.count('janitor: receipt cleared')
                            elif m['state'] != old['state']:
                                self.count('janitor: claim escalated')
                            elif m['alerted_token'] != old['alerted_token']:
                                self.count('janitor: claim alerted')
                            if m is not None and m['payload'] is None and old['payload'] is not None:
                                self.count('janitor: payload of a %s claim cleared' % m['state'])
                        self.model[wk] = s.learn(m, a)
                        tot = [x + y for x, y in zip(tot, c)]
                        if c[2] and action == 'review':
                            escalations[wk] = m
                        break
                else:
                    reasons = [s.row_matches(m, a) for m, _ in alts]
                    s.fail(wk, 'after the janitor pass: %s' % '; '.join(reasons))
            want = (tot[0] + tot[1], tot[0], tot[1], tot[2], tot[2] if action == 'review' else 0)
            if tuple(counts) != want:
                s.fail(None, 'janitor_run() counts %r; model %r' % (tuple(counts), want))
            if audit_ret is not None:
                c2 = s.rb.cursor()
                c2.execute('SELECT count(*) FROM idem_gate.audit WHERE at < to_timestamp(%s)',
                           (t0 - audit_ret - EPS,))
                n = c2.fetchone()[0]
                if n:
                    s.fail(None, 'audit rows older than idem_gate.audit_retention = 1 s remain: %d' % n)
                # what history() will show: the log without the rows pruned
                cut = shift(now, -audit_ret)
                for wk in plan:
                    if not self.audit_log.get(wk):
                        continue
                    c2.execute('SELECT id FROM idem_gate.audit WHERE workflow = %s AND key = %s', wk)
                    ids = set(r[0] for r in c2.fetchall())
                    kept = []
                    for e in self.audit_log[wk]:
                        gone = lt((e['row'][0], e['row'][0]), cut)
                        if gone is not None and gone == (e['id'] in ids):
                            s.fail(wk, 'audit row %r %s after the pass with idem_gate.audit_retention = 1 s'
                                   % (e['row'], 'kept' if gone else 'pruned'))
                        if e['id'] in ids:
                            kept.append(e)
                    self.audit_log[wk] = kept
            for wk in plan:
                if wk in escalations:
                    m = escalations[wk]
                    s.check_audit(wk, [{'session': self.roles[role], 'acting': self.roles['super'],
                                                  'action': 'escalate', 'before': 'processing',
                                                  'after': 'needs_review', 'token': m['token'],
                                                  'reason': m['last_error'], 'actor': None, 'at': now}])
            # every session waits: the inbox of all their workflows
            s.check_inbox(wfs)

    # ------------------------------------------------------- exact phase
    def exact_phase(self, deadline, max_steps):
        def work(sess):
            try:
                while time.time() < deadline and self.failure is None:
                    if max_steps and sess.steps >= max_steps:
                        break
                    sess.step()
            except Fail as e:
                self.failure = self.failure or (sess, e)
            except Exception as e:
                self.failure = self.failure or (sess, Fail('%s: %s' % (type(e).__name__, e), None))
                traceback.print_exc()
        if self.args.serial:
            master = random.Random('%s-serial' % self.seed)
            try:
                while time.time() < deadline and self.failure is None:
                    live = [x for x in self.sessions if not max_steps or x.steps < max_steps]
                    if not live:
                        break
                    sess = master.choice(live)
                    sess.step()
            except Fail as e:
                self.failure = (sess, e)
        else:
            threads = [threading.Thread(target=work, args=(x,)) for x in self.sessions]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if self.failure is None:
            # every session at rest: the whole inbox, the concurrent phase's
            # workflows too
            sess = self.sessions[0]
            try:
                sess.check_inbox([wf for x in self.sessions for wf in x.wfs], whole=True)
            except Fail as e:
                self.failure = (sess, e)

    # -------------------------------------------------- concurrent phase
    def concurrent_phase(self, rnd, seconds):
        wf = 'mc_%d' % rnd
        base = ['c0', 'c1', 'c2', 'c\n3']
        t_start = time.time()

        def keys_now():
            # a new generation of keys every few seconds, so that keys keep
            # being claimed anew even when nothing deletes the completed ones
            g = int((time.time() - t_start) / 0.5)
            return ['%s#%d' % (b, g) for b in base]
        cur = self.sconn.cursor()
        self.base_policy(cur, [wf])
        nthreads = max(3, self.args.sessions)
        deadline = time.time() + seconds
        grants, completes, obs, problems = [], [], [], []
        jlock = threading.Lock()
        ops_done = [0]

        def bad(msg):
            problems.append(msg)

        def worker(tid):
            rng = random.Random('%s-conc-%d-%d' % (self.seed, rnd, tid))
            cc = self.connect('client')
            oc = self.connect('operator')
            sc = self.connect('super')
            held = {}
            n = 0
            execs = []
            try:
                while time.time() < deadline and not problems and self.failure is None:
                    n += 1
                    ops_done[0] += 1
                    keys = keys_now()
                    k = rng.choice(keys)
                    r = rng.random()
                    c = cc.cursor()
                    kind = 'claim'
                    try:
                        t0 = time.time()
                        if r < 0.30:
                            ex = rng.choice([None, 'x%d_%d' % (tid, n)] + execs[-1:])
                            if ex:
                                execs.append(ex)
                            iv = rng.choice([None, '1 microsecond', '20 milliseconds', '1 hour'])
                            # a payload (1.2) naming the call, or none
                            pl = rng.choice([None, {'tid': tid, 'n': n}]) if rng.random() < 0.5 else False
                            if pl is False:
                                c.execute('SELECT outcome::text, token FROM idem_claim_ex(%s, %s, %s::interval, NULL, %s)',
                                          (k, wf, iv, ex))
                                pl = None
                            else:
                                c.execute('SELECT outcome::text, token FROM idem_claim_ex(%s, %s, %s::interval, NULL, %s, %s::jsonb)',
                                          (k, wf, iv, ex, None if pl is None else jdump(pl)))
                            o, t = c.fetchone()
                            t1 = time.time()
                            res = [(k, o, t, pl)]
                        elif r < 0.40:
                            ks = [rng.choice(keys) for _ in range(rng.randint(1, 4))]
                            ex = rng.choice([None, 'x%d_%d' % (tid, n)])
                            iv = rng.choice([None, '1 microsecond', '1 hour'])
                            pls = [None] * len(ks)
                            if rng.random() < 0.5:
                                c.execute('SELECT key, outcome::text, token FROM idem_claim_many(%s::text[], %s, %s::interval, NULL, %s) ORDER BY ord',
                                          (ks, wf, iv, ex))
                            else:
                                pls = [rng.choice([None, {'tid': tid, 'n': n, 'i': i}]) for i in range(len(ks))]
                                c.execute('SELECT key, outcome::text, token FROM idem_claim_many(%s::text[], %s, %s::interval, NULL, %s, %s::jsonb[]) ORDER BY ord',
                                          (ks, wf, iv, ex, [None if p is None else jdump(p) for p in pls]))
                            rows = c.fetchall()
                            t1 = time.time()
                            seen = set()
                            res = []
                            for (kk, o, t), pl in zip(rows, pls):
                                if kk in seen and (o != 'in_flight' or t is not None):
                                    bad('claim_many %r: repeated key %r answered %s/%s' % (ks, kk, o, t))
                                seen.add(kk)
                                res.append((kk, o, t, pl))
                        else:
                            res = None
                        if res is not None:
                            for kk, o, t, pl in res:
                                self.count('concurrent claim -> %s' % o)
                                if o in ('new', 'stale_taken'):
                                    if t is None:
                                        bad('grant %s of %r without a token' % (o, kk))
                                    grants.append((kk, t, ex, o, t0, t1, tid, 'batch' if r >= 0.30 else 'single', pl))
                                    held[kk] = t
                                elif t is not None:
                                    bad('outcome %s of %r with token %s' % (o, kk, t))
                            continue
                        t = held.get(k)
                        kind = 'other'
                        if r < 0.55 and t is not None:
                            c.execute('SELECT idem_complete(%s, %s, %s, %s::jsonb)', (k, wf, t, jdump({'t': t})))
                            if c.fetchone()[0] is not True:
                                bad('idem_complete returned false')
                            completes.append((k, t, t0, time.time()))
                        elif r < 0.62:
                            kind = 'nulltoken'
                            c.execute('SELECT idem_complete(%s, %s, NULL, %s::jsonb)', (k, wf, jdump({'forged': 1})))
                            bad('idem_complete with a NULL token on %r succeeded' % k)
                        elif r < 0.66 and t is not None:
                            c.execute('SELECT idem_complete(%s, %s, %s, %s::jsonb)', (k, wf, t + 10 ** 9, jdump({'forged': 2})))
                            bad('idem_complete with a wrong token on %r succeeded' % k)
                        elif r < 0.74 and t is not None:
                            c.execute('SELECT idem_fail(%s, %s, %s, %s, %s)', (k, wf, t, 'e', rng.random() < 0.7))
                        elif r < 0.80 and t is not None:
                            c.execute('SELECT idem_heartbeat(%s, %s, %s)', (k, wf, t))
                        elif r < 0.92:
                            c.execute('SELECT state::text, token, result FROM idem_status(%s, %s)', (k, wf))
                            row = c.fetchone()
                            t1 = time.time()
                            if row:
                                st, tok, result = row
                                if st == 'completed':
                                    if result not in ({'t': tok}, {'r': 1}, None):
                                        bad('completed row %r token %s carries receipt %r' % (k, tok, result))
                                elif result is not None:
                                    bad('%s row %r carries a receipt %r' % (st, k, result))
                                obs.append((k, tok, st, result, t0, t1))
                        elif r < 0.95:
                            if 'concurrent-delete' not in self.skip:
                                oc.cursor().execute('SELECT idem_release(%s, %s, %s)', (k, wf, 'model'))
                        elif r < 0.98:
                            if rng.random() < 0.5:
                                oc.cursor().execute("SELECT idem_resolve(%s, %s, 'completed', '{\"r\": 1}')", (k, wf))
                            else:
                                oc.cursor().execute("SELECT idem_resolve(%s, %s, 'retry')", (k, wf))
                        else:
                            with jlock:
                                sc2 = sc.cursor()
                                sc2.execute('BEGIN')
                                sc2.execute('DELETE FROM idem_gate.policies WHERE workflow = %s', (wf,))
                                sc2.execute('SET LOCAL idem_gate.stuck_after = 1')
                                sc2.execute('SET LOCAL idem_gate.retention = %s', (
                                    3600 if 'concurrent-delete' in self.skip else rng.choice([1, 3600]),))
                                sc2.execute('SET LOCAL idem_gate.failed_retention = 1')
                                sc2.execute('SET LOCAL idem_gate.stuck_action = %s', (rng.choice(['alert', 'review']),))
                                sc2.execute('SELECT * FROM idem_gate.janitor_run()')
                                self.base_policy(sc2, [wf])
                                sc2.execute('COMMIT')
                    except psycopg2.Error as e:
                        code = e.pgcode
                        self.count('concurrent %s %s' % (kind, code))
                        ok = {'55000', 'P0002'}
                        if kind == 'nulltoken':
                            ok = {'22004', 'P0002'}
                        if code not in ok:
                            bad('unexpected error %s: %s' % (code, e))
                        try:
                            sc.cursor().execute('ROLLBACK') if sc.get_transaction_status() else None
                        except psycopg2.Error:
                            pass
            finally:
                for x in (cc, oc, sc):
                    x.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # invariants
        by_token = {}
        for g in grants:
            by_token.setdefault((g[0], g[1]), []).append(g)
        for (k, t), gs in by_token.items():
            execs = set(g[2] for g in gs)
            if len(gs) > 1 and (len(execs) > 1 or None in execs):
                problems.append('token %s of %r granted to %d runs: %r' % (t, k, len(gs), gs))
        for k in sorted(set(g[0] for g in grants)):
            gs = sorted([g for g in grants if g[0] == k], key=lambda g: g[4])
            ends = sorted(gs, key=lambda g: g[5])
            j = 0
            best = None
            for g in gs:
                while j < len(ends) and ends[j][5] < g[4]:
                    if best is None or ends[j][1] > best[1]:
                        best = ends[j]
                    j += 1
                if best is not None and best[1] > g[1]:
                    related = [x for x in grants if x[0] == k and x[1] in (best[1], g[1])]
                    problems.append('token of %r went down: %r granted before %r; all grants of these tokens: %r'
                                    % (k, best, g, related))
        done = {}
        for k, tok, st, result, t0, t1 in sorted(obs, key=lambda o: o[4]):
            prev = done.get((k, tok))
            if prev is not None and prev[4] < t0:
                if st != 'completed' or (result is not None and result != prev[1]):
                    problems.append('completed row %r token %s changed to %s %r' % (k, tok, st, result))
            if st == 'completed' and prev is None:
                done[(k, tok)] = (k, result, t0, t1, t1)
        cur.execute('SELECT key, token, state::text, result, payload, payload IS NULL, payload_dropped_bytes'
                    ' FROM idem_gate.claims WHERE workflow = %s', (wf,))
        for k, tok, st, result, payload, no_payload, dropped in cur.fetchall():
            mine = [g[1] for g in grants if g[0] == k]
            if tok not in mine:
                problems.append('row %r holds token %s that no run was granted' % (k, tok))
            elif tok != max(mine):
                problems.append('row %r holds token %s, not the last granted %s' % (k, tok, max(mine)))
            if st == 'completed' and result not in ({'t': tok}, {'r': 1}, None):
                problems.append('row %r completed with receipt %r under token %s' % (k, result, tok))
            # the payload: none once completed; else the one the grant of its
            # token carried (a re-entry writes nothing), or without one an
            # earlier grant's (or none, after a release)
            payload = None if no_payload else json_value(payload)
            if dropped is not None or (st == 'completed' and payload is not None):
                problems.append('%s row %r holds payload %r (payload_dropped_bytes %r)' % (st, k, payload, dropped))
            elif st != 'completed' and tok in mine:
                first = min((g for g in grants if g[0] == k and g[1] == tok), key=lambda g: g[4])
                earlier = [g[8] for g in grants if g[0] == k and g[1] < tok and g[8] is not None]
                if first[8] is not None and payload != first[8]:
                    problems.append('%s row %r token %s holds payload %r, granted with %r' % (st, k, tok, payload, first[8]))
                elif first[8] is None and payload is not None and payload not in earlier:
                    problems.append('%s row %r token %s holds payload %r that no earlier grant carried' % (st, k, tok, payload))
        return ops_done[0], len(grants), problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--seconds', type=float, default=60)
    ap.add_argument('--steps', type=int, default=0, help='steps per session of the exact phase, then stop')
    ap.add_argument('--sessions', type=int, default=3)
    ap.add_argument('--serial', action='store_true', help='interleave the exact sessions in one thread')
    ap.add_argument('--skip', default='', help='comma-separated known cases not to generate: %s' % ', '.join(KNOWN_CASES))
    ap.add_argument('--keep', action='store_true', help='keep the database')
    ap.add_argument('--phase', choices=['both', 'exact', 'concurrent'], default='both',
                    help='run only one of the two phases')
    ap.add_argument('--ext-version', default=None,
                    help='CREATE EXTENSION idem_gate VERSION this (default: the default version); '
                         'a version without the 1.2 API fails at once, naming what it lacks')
    ap.add_argument('--edition', choices=['c', 'managed'], default=os.environ.get('IDEM_EDITION', 'c'),
                    help='the C extension (CREATE EXTENSION) or the managed edition (managed/idem_gate.sql, '
                         'installed by a role that is not a superuser); default $IDEM_EDITION or c')
    ap.add_argument('--update', action='store_true',
                    help='with --ext-version: ALTER EXTENSION idem_gate UPDATE before the run')
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10 ** 9)
    args.skip = [x for x in args.skip.split(',') if x]
    for x in args.skip:
        if x not in KNOWN_CASES:
            raise SystemExit('unknown case %r; known: %s' % (x, ', '.join(KNOWN_CASES)))
    print('model: seed %d (replay: test/model/run.sh --seed %d%s%s)' % (
        args.seed, args.seed, ''.join(' --skip ' + x for x in args.skip),
        (' --ext-version %s%s' % (args.ext_version, ' --update' if args.update else ''))
        if args.ext_version else '') + (' --edition managed' if args.edition == 'managed' else ''),
        flush=True)
    passed = failed = 0
    # a terminated run still drops its database and roles
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    run = Run(args)
    start = time.time()
    try:
        try:
            run.setup()
        except Fail as e:
            run.failure = (None, e)
    except BaseException:
        run.cleanup()
        raise
    try:
        run.sessions = []
        if run.failure is None:
            run.sessions = [Session(run, i, random.Random('%s-session-%d' % (args.seed, i)))
                            for i in range(args.sessions)]
            wfs = [wf for s in run.sessions for wf in s.wfs]
            run.base_policy(run.sconn.cursor(), wfs)
        rnd = 0
        conc_total = [0, 0]
        end = start + args.seconds
        while run.failure is None:
            rnd += 1
            now = time.time()
            if not args.steps and now >= end:
                break
            if args.phase != 'concurrent':
                if args.steps:
                    run.exact_phase(float('inf'), args.steps)
                else:
                    run.exact_phase(min(end, now + max(5.0, (end - now) * 0.75 if end - now < 60 else 45)), 0)
            if run.failure is not None:
                break
            if args.phase == 'exact':
                if args.steps:
                    break
                continue
            secs = 5.0 if args.steps else min(15.0, max(2.0, end - time.time()))
            ops, ng, problems = run.concurrent_phase(rnd, secs)
            conc_total[0] += ops
            conc_total[1] += ng
            if problems:
                run.failure = (None, Fail('concurrent phase %d: %s' % (rnd, '; '.join(problems[:5])), None))
                break
            if args.steps:
                break
        steps = sum(s.steps for s in run.sessions)
        if run.failure is None:
            print('model: exact phase %d steps in %d sessions (%d checked keys), concurrent phase %d calls, %d grants; %.0f s'
                  % (steps, len(run.sessions), len(run.model), conc_total[0], conc_total[1], time.time() - start))
            passed = 1
            print('model: what was exercised (calls by SQLSTATE, outcomes, janitor effects):')
            items = sorted(run.stats.items())
            for i in range(0, len(items), 3):
                print('  ' + ' | '.join('%s: %d' % kv for kv in items[i:i + 3]))
        else:
            sess, e = run.failure
            wk = e.args[1] if len(e.args) > 1 else None
            print('FAIL: %s' % short(e.args[0]))
            print('seed %d, session %s, step %s; replay: test/model/run.sh --seed %d --steps %s --serial'
                  % (args.seed, sess.name if sess else '-', sess.steps if sess else '-', args.seed,
                     sess.steps if sess else '-'))
            if wk and wk in run.history:
                print(short('history of key %r in workflow %r:' % (wk[1], wk[0])))
                for h in run.history[wk]:
                    print('  ' + h)
            failed = 1
    finally:
        for s in getattr(run, 'sessions', []):
            s.close()
        run.cleanup()
    print('%d passed, %d failed' % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
