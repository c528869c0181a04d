#!/usr/bin/python3
"""Reproducer: a claim racing with idem_release can be granted an older token.

Three sessions claim one key with idem_claim_ex (stale_interval NULL,
1 microsecond or 20 milliseconds, an execution id kept for a few calls so
that runs re-enter), fail some of their claims as retryable, and release the
key now and then (as the superuser).  Each grant (outcome new or
stale_taken) is logged with the time its call was sent and answered.  The
contract says tokens only grow: a grant whose call started after another
grant's call was answered must carry a token at least as large.  This
prints the grants that break that, with what happened around them, and
exits 1 if there are any.

    PGHOST=... PGPORT=... PGUSER=postgres PGDATABASE=<db with idem_gate 1.1> \\
        /usr/bin/python3 test/model/race_release.py [SECONDS] [SESSIONS]

Without the releases (RELEASE=0 in the environment) no grant goes down.
"""
import os
import random
import sys
import threading
import time

import psycopg2

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 15
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3
RELEASE = float(os.environ.get('RELEASE', '0.05'))
wf = 'race_release_%d' % os.getpid()
log, releases = [], []
lock = threading.Lock()


def worker(i):
    conn = psycopg2.connect('')
    conn.autocommit = True
    cur = conn.cursor()
    rng = random.Random(i)
    ex = 'x%d_0' % i
    n = 0
    end = time.time() + SECS
    while time.time() < end:
        n += 1
        if rng.random() < 0.3:
            ex = 'x%d_%d' % (i, n)
        iv = rng.choice([None, '1 microsecond', '20 milliseconds'])
        t0 = time.time()
        cur.execute("SELECT outcome::text, token FROM idem_claim_ex('k', %s, %s::interval, NULL, %s)",
                    (wf, iv, ex))
        outcome, token = cur.fetchone()
        with lock:
            log.append((t0, time.time(), i, ex, outcome, token))
        try:
            if token is not None and rng.random() < 0.1:
                cur.execute("SELECT idem_fail('k', %s, %s, 'failed before the side effect', true)",
                            (wf, token))
            elif rng.random() < RELEASE:
                t0 = time.time()
                cur.execute("SELECT idem_release('k', %s, 'race')", (wf,))
                with lock:
                    releases.append((t0, time.time(), i, cur.fetchone()[0]))
        except psycopg2.Error:
            pass                # a stale token: another run took the claim over
    conn.close()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()

grants = sorted((g for g in log if g[4] in ('new', 'stale_taken')), key=lambda g: g[0])
answered = sorted(grants, key=lambda g: g[1])
bad = 0
j = 0
best = None
for g in grants:
    while j < len(answered) and answered[j][1] < g[0]:
        if best is None or answered[j][5] > best[5]:
            best = answered[j]
        j += 1
    if best is not None and best[5] > g[5]:
        bad += 1
        if bad <= 2:
            print('token went down: %r was answered before %r was sent' % (best, g))
            lo, hi = best[0] - 0.03, g[1]
            events = [('claim',) + x for x in log if lo <= x[0] <= hi]
            events += [('release',) + x for x in releases if lo <= x[0] <= hi]
            for e in sorted(events, key=lambda e: e[1]):
                print('   %-8s sent %.6f answered %.6f session %d %s' % (
                    e[0], e[1], e[2], e[3], ' '.join(str(x) for x in e[4:])))
print('%d grants, %d releases, %d grants with a token lower than an earlier answered grant'
      % (len(grants), len(releases), bad))
sys.exit(1 if bad else 0)
