"""The invariants of idem_gate's fault torture, checked after the run.

Inputs: the clients' logs of every call and what it returned, the ledger of
side effects (written outside the database), torture.history (every
committed change of idem_gate.claims, written by a trigger in the same
transaction) and the final idem_gate.claims table, all read after a last
crash and recovery.
"""
import datetime
import glob
import json
import os

GRANTS = ('new', 'stale_taken')
MAX_SHOWN = 8


class Result:
    def __init__(self, name):
        self.name = name
        self.violations = []
        self.notes = []

    def bad(self, msg):
        self.violations.append(msg)

    def note(self, msg):
        self.notes.append(msg)


def read_lines(pattern):
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path, 'rb') as f:
            for line in f:
                if not line.endswith(b'\n'):
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def check_all(h, history, final, amcheck, worker_at_end):
    from torture import STALE_OF
    work = h.work
    logs = read_lines(os.path.join(work, 'clients', '*.log'))
    ledger = read_lines(os.path.join(work, 'clients', '*.ledger'))
    stale_of = {w: (None if s is None else datetime.timedelta(seconds=s))
                for w, s in STALE_OF.items()}

    claims = [r for r in logs if r['op'] == 'claim']
    claim_ok = [r for r in claims if r['st'] == 'ok']
    grants = [r for r in claim_ok if r['out'] in GRANTS]
    completes = [r for r in logs if r['op'] == 'complete']
    intents = {}
    for r in logs:
        if r['op'] == 'complete_intent':
            intents.setdefault((r['w'], r['k'], r['tok']), r['res'])
    fails = [r for r in logs if r['op'] == 'fail']
    beats = [r for r in logs if r['op'] == 'heartbeat']
    deaths = [r for r in logs if r['op'] == 'die']

    # history by key, in the order of the changes
    hist = {}
    by_token = {}
    for row in history:
        (hid, op, w, k, state, tok, att, ex, res, cat, uat, alerted) = row
        hist.setdefault((w, k), []).append(row)
        by_token.setdefault((w, k, tok), []).append(row)
    fin = {(r[0], r[1]): r for r in final}

    results = []

    # ---------------------------------------------------------------- 1
    r1 = Result('1. no token granted to two runs; tokens per key only grow')
    owners = {}
    for g in grants:
        owners.setdefault((g['w'], g['k'], g['tok']), set()).add(g['e'])
    for (w, k, tok), ex in owners.items():
        if len(ex) > 1:
            r1.bad('%s/%s: token %d granted to %d runs (%s)' % (w, k, tok, len(ex), ', '.join(sorted(ex))))
    # client side: a grant that began after another one was answered has a
    # token at least as large
    gk = {}
    for g in grants:
        gk.setdefault((g['w'], g['k']), []).append(g)
    for key, gs in gk.items():
        gs.sort(key=lambda g: g['ta'])
        for b in gs:
            for a in gs:
                if a['ta'] < b['ts'] and b['tok'] < a['tok']:
                    r1.bad('%s/%s: token %d granted at %.3f after token %d was granted at %.3f'
                           % (key[0], key[1], b['tok'], b['ta'], a['tok'], a['ta']))
    # server side, from the history
    token_key = {}
    takeovers = {}          # (w, k) -> number of stale takeovers
    illegal = []            # transitions the contract does not allow (invariant 5)
    takeover_of = {}        # (w, k, new token) -> the previous token
    deleted = 0
    for (w, k), rows in hist.items():
        prev = None
        for row in rows:
            (hid, op, _, _, state, tok, att, ex, res, cat, uat, alerted) = row
            other = token_key.setdefault(tok, (w, k))
            if other != (w, k):
                r1.bad('token %d granted on %s/%s and on %s/%s' % (tok, w, k, other[0], other[1]))
            if op == 'D':
                deleted += 1
                prev = None
                continue
            if prev is None:
                if att != 1 or state != 'processing':
                    illegal.append('%s/%s: first row is %s with attempt %d' % (w, k, state, att))
            elif tok < prev[5]:
                r1.bad('%s/%s: token went down from %d to %d' % (w, k, prev[5], tok))
            elif tok > prev[5]:
                pstate = prev[4]
                if pstate == 'failed_retryable':
                    pass
                elif pstate == 'processing':
                    st = stale_of.get(w)
                    if st is None:
                        r1.bad('%s/%s: token %d granted while token %d held the key'
                               ' (a NULL stale interval never takes over)' % (w, k, tok, prev[5]))
                    elif not prev[10] <= cat - st:
                        r1.bad('%s/%s: token %d granted while token %d held the key'
                               ' (its last heartbeat %s before, stale interval %s)'
                               % (w, k, tok, prev[5], cat - prev[10], st))
                    else:
                        takeovers[(w, k)] = takeovers.get((w, k), 0) + 1
                        takeover_of[(w, k, tok)] = prev[5]
                else:
                    illegal.append('%s/%s: %s row (token %d) granted again as token %d'
                                   % (w, k, pstate, prev[5], tok))
                if state != 'processing' or att != prev[6] + 1:
                    illegal.append('%s/%s: grant of token %d left state %s, attempt %d after %d'
                                   % (w, k, tok, state, att, prev[6]))
            else:
                pstate = prev[4]
                if ex != prev[7]:
                    r1.bad('%s/%s: token %d handed from run %s to run %s'
                           % (w, k, tok, prev[7], ex))
                if pstate != 'processing' or att != prev[6]:
                    illegal.append('%s/%s: token %d went from %s (attempt %d) to %s (attempt %d)'
                                   % (w, k, tok, pstate, prev[6], state, att))
            prev = row
    results.append(r1)

    # ---------------------------------------------------------------- 2
    r2 = Result('2. nothing acknowledged is lost (claims, completions, failures, heartbeats)')
    n_acked = 0
    for c in claim_ok:
        n_acked += 1
        rows = by_token.get((c['w'], c['k'], c['tok']), [])
        if c['out'] in GRANTS:
            if not any(x[4] == 'processing' and x[7] == c['e'] for x in rows):
                r2.bad('%s/%s: acknowledged %s grant of token %d to %s is not in the database'
                       % (c['w'], c['k'], c['out'], c['tok'], c['e']))
        elif (c['w'], c['k']) not in hist:
            r2.bad('%s/%s: a claim answered %s but the key has no row'
                   % (c['w'], c['k'], c['out']))
        if c['out'] in ('completed', 'needs_review'):
            # these answers carry no token: the state they saw is final
            f = fin.get((c['w'], c['k']))
            if f is None or f[2] != c['out'] or \
                    (c['out'] == 'completed' and f[6] != c['res']):
                r2.bad('%s/%s: a claim answered %s%s but the row is now %s'
                       % (c['w'], c['k'], c['out'],
                          ' with result %s' % json.dumps(c['res']) if c['res'] else '',
                          '%s (token %d) with result %s' % (f[2], f[3], json.dumps(f[6]))
                          if f else 'gone'))
    fenced = 0
    for c in completes:
        if c['st'] == 'ok':
            n_acked += 1
            f = fin.get((c['w'], c['k']))
            want = intents.get((c['w'], c['k'], c['tok']))
            if not c['ok']:
                r2.bad('%s/%s: idem_complete of token %d returned false' % (c['w'], c['k'], c['tok']))
            elif f is None or f[2] != 'completed' or f[3] != c['tok'] or f[6] != want:
                r2.bad('%s/%s: acknowledged completion of token %d lost: row is %s'
                       % (c['w'], c['k'], c['tok'], f[2:4] if f else 'gone'))
        elif c['st'] == 'err':
            n_acked += 1
            fenced += 1
            rows = hist.get((c['w'], c['k']), [])
            if c['code'] != '55000' or not any(x[5] > c['tok'] or (x[5] == c['tok'] and x[4] != 'processing')
                                               for x in rows):
                r2.bad('%s/%s: idem_complete of token %d failed with %s although no other run took the key'
                       % (c['w'], c['k'], c['tok'], c['code']))
    for c in fails:
        if c['st'] != 'ok':
            continue
        n_acked += 1
        rows = by_token.get((c['w'], c['k'], c['tok']), [])
        if not any(x[4] == c['state'] for x in rows):
            r2.bad('%s/%s: acknowledged failure of token %d (%s) is not in the database'
                   % (c['w'], c['k'], c['tok'], c['state']))
        if c['state'] == 'needs_review':
            f = fin.get((c['w'], c['k']))
            if f is None or f[2] != 'needs_review' or f[3] != c['tok']:
                r2.bad('%s/%s: acknowledged needs_review of token %d lost: row is %s'
                       % (c['w'], c['k'], c['tok'], f[2:4] if f else 'gone'))
    hb = {}
    for c in beats:
        if c['st'] == 'ok':
            n_acked += 1
            if c['ok']:
                hb[(c['w'], c['k'], c['tok'])] = hb.get((c['w'], c['k'], c['tok']), 0) + 1
    for key, n in hb.items():
        versions = sum(1 for x in by_token.get(key, []) if x[4] == 'processing')
        if versions < 1 + n:
            r2.bad('%s/%s: token %d had %d acknowledged heartbeats but %d row versions'
                   % (key[0], key[1], key[2], n, versions))
    for i, fo in enumerate(h.failovers):
        before = sum(1 for c in claim_ok if c['ta'] < fo['t'])
        r2.note('failover %d: %d acknowledged claims made before it, all checked on the new primary'
                % (i + 1, before))
    r2.note('%d acknowledged calls checked' % n_acked)
    results.append(r2)

    # ---------------------------------------------------------------- 3
    r3 = Result('3. one side effect per completed first owner; every extra one follows a stale takeover')
    grant_by = {(g['w'], g['k'], g['tok'], g['e']) for g in grants}
    se = {}
    for l in ledger:
        if (l['w'], l['k'], l['tok'], l['e']) not in grant_by:
            r3.bad('%s/%s: side effect with token %d by %s without a grant'
                   % (l['w'], l['k'], l['tok'], l['e']))
        se.setdefault((l['w'], l['k']), set()).add(l['tok'])
    extra = 0
    for key, toks in se.items():
        n_st = takeovers.get(key, 0)
        if len(toks) > 1 + n_st:
            r3.bad('%s/%s: %d side effects (tokens %s) but %d stale takeovers'
                   % (key[0], key[1], len(toks), sorted(toks), n_st))
        extra += len(toks) - 1
        rows = hist.get(key, [])
        first = [x for x in rows if x[1] == 'I']
        if first:
            t1 = first[0][5]
            if any(x[5] == t1 and x[4] == 'completed' for x in rows) and len(toks) != 1:
                r3.bad('%s/%s: its first owner (token %d) completed, yet %d side effects (tokens %s)'
                       % (key[0], key[1], t1, len(toks), sorted(toks)))
    # a stale takeover only after its owner stopped heart-beating
    live = {}
    for g in grants:
        k = (g['w'], g['k'], g['tok'])
        live[k] = max(live.get(k, 0), g['ts'])
    for c in beats:
        if c['st'] == 'ok' and c['ok']:
            k = (c['w'], c['k'], c['tok'])
            live[k] = max(live.get(k, 0), c['ts'])
    n_stale_acked = 0
    for g in grants:
        if g['out'] != 'stale_taken':
            continue
        n_stale_acked += 1
        st = STALE_OF.get(g['w'])
        if st is None:
            r3.bad('%s/%s: stale_taken with a NULL stale interval' % (g['w'], g['k']))
            continue
        prev = takeover_of.get((g['w'], g['k'], g['tok']))
        if prev is None:
            continue
        last = live.get((g['w'], g['k'], prev))
        if last is not None and g['ta'] < last + st - 0.001:
            r3.bad('%s/%s: token %d took over token %d %.3f s after its owner\'s last heartbeat'
                   ' (stale interval %g s)' % (g['w'], g['k'], g['tok'], prev, g['ta'] - last, st))
    nostale_extra = sum(len(t) - 1 for (w, k), t in se.items() if STALE_OF.get(w) is None)
    r3.note('%d side effects on %d keys; %d extra ones, each after one of %d stale takeovers'
            ' (%d acknowledged); with the NULL stale interval: %d extra, %d takeovers'
            % (sum(len(t) for t in se.values()), len(se), extra, sum(takeovers.values()),
               n_stale_acked, nostale_extra,
               sum(n for (w, k), n in takeovers.items() if STALE_OF.get(w) is None)))
    results.append(r3)

    # ---------------------------------------------------------------- 4
    r4 = Result('4. every completed row has its side effect and its owner\'s result')
    n_completed = 0
    for (w, k), f in fin.items():
        if f[2] != 'completed':
            continue
        n_completed += 1
        if f[3] not in se.get((w, k), set()):
            r4.bad('%s/%s: completed with token %d but no side effect with that token'
                   % (w, k, f[3]))
        want = intents.get((w, k, f[3]))
        if f[6] != want:
            r4.bad('%s/%s: completed with token %d and result %s; its owner sent %s'
                   % (w, k, f[3], json.dumps(f[6]), json.dumps(want)))
    r4.note('%d completed rows checked' % n_completed)
    results.append(r4)

    # ---------------------------------------------------------------- 5
    r5 = Result('5. no row in a state the contract does not allow')
    for msg in illegal:
        r5.bad(msg)
    for (w, k), f in fin.items():
        (_, _, state, tok, att, ex, res, created, claimed, updated, completed) = f
        why = []
        if state not in ('processing', 'completed', 'failed_retryable', 'needs_review'):
            why.append('unknown state')
        if (state == 'completed') != (completed is not None):
            why.append('completed_at does not match the state')
        if completed is not None and completed != updated:
            why.append('completed_at is not the last change')
        if res is not None and state != 'completed':
            why.append('a result without completion')
        if not (created <= claimed <= updated):
            why.append('timestamps out of order')
        if att < 1 or tok < 1:
            why.append('attempt or token not positive')
        if state == 'processing' and ex is None:
            why.append('processing without an execution id')
        rows = [x for x in hist.get((w, k), []) if x[1] != 'D']
        last = rows[-1] if rows else None
        if last is None or (last[4], last[5], last[6]) != (state, tok, att):
            why.append('the row disagrees with its history')
        if rows and att != len({x[5] for x in rows}):
            why.append('attempt %d after %d grants' % (att, len({x[5] for x in rows})))
        if why:
            r5.bad('%s/%s (%s, token %d): %s' % (w, k, state, tok, '; '.join(why)))
    for (w, k) in hist:
        if (w, k) not in fin and hist[(w, k)][-1][1] != 'D':
            r5.bad('%s/%s: in the history but not in the table' % (w, k))
    for msg in amcheck:
        r5.bad('amcheck: ' + msg)
    states = {}
    for f in final:
        states[f[2]] = states.get(f[2], 0) + 1
    r5.note('%d rows: %s; indexes verified with amcheck; %d rows deleted by the janitor'
            % (len(final), ', '.join('%s %d' % kv for kv in sorted(states.items())), deleted))
    results.append(r5)

    # ---------------------------------------------------------------- 6
    r6 = Result('6. the background worker works after every failover and restart')
    for i, fo in enumerate(h.failovers):
        if fo['worker_secs'] is None:
            r6.bad('failover %d: no janitor pass on the new primary within 30 s' % (i + 1))
        else:
            r6.note('failover %d: janitor passes on the new primary after %.1f s'
                    % (i + 1, fo['worker_secs']))
    if not worker_at_end:
        r6.bad('launcher and janitor not both running after the last restart')
    alerted = sum(1 for row in history if row[11] is not None and row[11] == row[5]
                  and row[4] == 'processing' and row[1] == 'U')
    r6.note('%d stuck-claim alerts recorded by the janitor' % alerted)
    results.append(r6)

    # ---------------------------------------------------------------- report
    secs = h.load_secs
    outc = {}
    for c in claim_ok:
        outc[c['out']] = outc.get(c['out'], 0) + 1
    unknown = sum(1 for c in claims if c['st'] == 'lost')
    print()
    print('claims: %d answered in %.0f s = %.0f claims/s (%d more lost to faults, outcome unknown)'
          % (len(claim_ok), secs, len(claim_ok) / secs, unknown))
    print('  outcomes: ' + ', '.join('%s %d' % kv for kv in sorted(outc.items())))
    print('  completions answered: %d (true %d, fenced %d); failures answered: %d; heartbeats answered: %d'
          % (sum(1 for c in completes if c['st'] != 'lost'),
             sum(1 for c in completes if c['st'] == 'ok' and c['ok']), fenced,
             sum(1 for c in fails if c['st'] != 'lost'),
             sum(1 for c in beats if c['st'] == 'ok')))
    steps = {}
    for d in deaths:
        steps[d['step']] = steps.get(d['step'], 0) + 1
    faults = dict(h.faults)
    for s, n in steps.items():
        faults['client_exit@' + s] = n
    server = sum(n for kind, n in faults.items() if not kind.startswith('client'))
    print('faults: %d (server %d, clients %d)' % (sum(faults.values()), server,
                                                 sum(faults.values()) - server))
    for kind in sorted(faults):
        print('  %-28s %d' % (kind, faults[kind]))
    print('failovers: %d' % len(h.failovers))
    print()
    passed = failed = 0
    for r in results:
        if r.violations:
            failed += 1
            print('FAIL %s: %d violations' % (r.name, len(r.violations)))
            for v in r.violations[:MAX_SHOWN]:
                print('    ' + v)
            if len(r.violations) > MAX_SHOWN:
                print('    ... %d more' % (len(r.violations) - MAX_SHOWN))
        else:
            passed += 1
            print('ok   %s' % r.name)
        for n in r.notes:
            print('       ' + n)
    if h.a.targets:
        t = h.a.targets
        r = Result('acceptance: >= %d claims, >= %d faults, >= %d failovers'
                   % (t['claims'], t['faults'], t['failovers']))
        if len(claim_ok) < t['claims'] or sum(faults.values()) < t['faults'] \
                or len(h.failovers) < t['failovers']:
            failed += 1
            print('FAIL %s: %d claims, %d faults, %d failovers'
                  % (r.name, len(claim_ok), sum(faults.values()), len(h.failovers)))
        else:
            passed += 1
            print('ok   %s' % r.name)
    print('%d passed, %d failed' % (passed, failed))
    return failed == 0
