#!/usr/bin/python3
"""idem_gate on Citus under faults: clients claim and complete through the
coordinator while shards move, the cluster rebalances, a worker is killed
with kill -9 and restarted, and the coordinator restarts.  Then the
invariants: no token granted twice, tokens only grow per key (with the
attempt), nothing acknowledged lost, every row consistent with its state.

Run by test/citus/faults.sh, which starts the cluster; prints
"N passed, N failed".
"""
import json
import os
import random
import subprocess
import sys
import threading
import time

import psycopg2

BASE = os.environ["CITUS_BASE"]
BIN = os.environ["CITUS_BIN"]
COORD, W1, W2 = (int(p) for p in os.environ["CITUS_PORTS"].split())
CLIENTS = int(os.environ.get("FAULT_CLIENTS", "8"))
KEYS = int(os.environ.get("FAULT_KEYS", "200"))
PHASE = float(os.environ.get("FAULT_PHASE", "15"))
SEED = int(os.environ.get("FAULT_SEED", str(int(time.time()))))

T0 = time.time()
stop = threading.Event()
lock = threading.Lock()
grants = []        # (key, token, attempt) acknowledged to a client
completions = []   # (key, token) acknowledged true
errors = {"calls": 0, "failed": 0}


def connect(port):
    conn = psycopg2.connect(host=BASE, port=port, dbname="postgres",
                            user="postgres", connect_timeout=5)
    conn.autocommit = True
    return conn


def client(n):
    rnd = random.Random(SEED * 100 + n)
    conn = None
    i = 0
    while not stop.is_set():
        try:
            if conn is None:
                conn = connect(COORD)
            cur = conn.cursor()
            # a window of KEYS keys that slides by 20 keys a second, so
            # that new keys keep arriving while the faults happen
            key = "k%d" % (int((time.time() - T0) * 20) + rnd.randrange(KEYS))
            i += 1
            ex = "c%d_%d" % (n, i)
            with lock:
                errors["calls"] += 1
            # delegated: SELECT * FROM f(...) with constants
            cur.execute("SELECT * FROM idem_claim_ex(%s, 'faults', '1 second', NULL, %s)",
                        (key, ex))
            outcome, token, attempt = cur.fetchone()[:3]
            if outcome in ("new", "stale_taken"):
                with lock:
                    grants.append((key, token, attempt))
                if rnd.random() < 0.5:
                    cur.execute("SELECT idem_complete(%s, 'faults', %s, %s)",
                                (key, token, json.dumps({"token": token})))
                    if cur.fetchone()[0]:
                        with lock:
                            completions.append((key, token))
                # else: abandoned; taken over after 1 second
        except psycopg2.Error as e:
            with lock:
                errors["failed"] += 1
            if "no longer owns" not in str(e):
                try:
                    if conn is not None:
                        conn.close()
                except psycopg2.Error:
                    pass
                conn = None
                time.sleep(0.2)


def sql(port, q, fetch=True):
    conn = connect(port)
    try:
        cur = conn.cursor()
        cur.execute(q)
        return cur.fetchall() if fetch else None
    finally:
        conn.close()


def pg_ctl(port, *args):
    subprocess.run(["runuser", "-u", "postgres", "--", BIN + "/pg_ctl", "-D",
                    "%s/n%d" % (BASE, port), "-l", "%s/n%d.log" % (BASE, port),
                    "-w", "-t", "60"] + list(args), check=True,
                   stdout=subprocess.DEVNULL)


def log(msg):
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def faults():
    time.sleep(PHASE)
    # a shard of claims (and its co-located audit shard) moves to the other worker
    shard, port = sql(COORD, """
        SELECT s.shardid, n.nodeport FROM pg_dist_shard s
          JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
         WHERE s.logicalrelid = 'idem_gate.claims'::regclass ORDER BY s.shardid LIMIT 1""")[0]
    target = W2 if port == W1 else W1
    log("move shard %d from %d to %d" % (shard, port, target))
    sql(COORD, "SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d, "
               "shard_transfer_mode := 'force_logical')" % (shard, port, target))
    time.sleep(PHASE)
    # drain a worker, then rebalance across both
    log("rebalance: drain %d" % W1)
    sql(COORD, "SELECT citus_drain_node('127.0.0.1', %d, shard_transfer_mode := 'force_logical')" % W1)
    time.sleep(PHASE)
    log("rebalance")
    sql(COORD, "SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)" % W1)
    sql(COORD, "SELECT rebalance_table_shards(shard_transfer_mode := 'force_logical')", fetch=False)
    log("placements: %s" % sql(COORD, """
        SELECT n.nodeport, count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
          JOIN pg_dist_node n USING (groupid)
         WHERE s.logicalrelid = 'idem_gate.claims'::regclass GROUP BY 1 ORDER BY 1"""))
    time.sleep(PHASE)
    log("kill -9 worker %d" % W2)
    with open("%s/n%d/postmaster.pid" % (BASE, W2)) as f:
        os.kill(int(f.readline()), 9)
    time.sleep(3)
    subprocess.run(["rm", "-f", "%s/n%d/postmaster.pid" % (BASE, W2)])
    pg_ctl(W2, "start")
    log("worker %d restarted" % W2)
    time.sleep(PHASE)
    log("restart the coordinator (immediate)")
    pg_ctl(COORD, "-m", "immediate", "restart")
    time.sleep(PHASE)


def main():
    log("faults: %d clients, %d keys, phases of %.0f s, seed %d" % (CLIENTS, KEYS, PHASE, SEED))
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        faults()
    finally:
        stop.set()
        for t in threads:
            t.join()
    log("calls %d, failed %d (connections lost during faults and fenced tokens), "
        "grants %d, completions %d" % (errors["calls"], errors["failed"], len(grants),
                                       len(completions)))

    rows = {}
    for key, state, token, attempt, result, ok in sql(COORD, """
            SELECT key, state, token, attempt, result,
                   (state = 'completed') = (completed_at IS NOT NULL)
                   AND (result IS NULL OR state = 'completed')
                   AND created_at <= claimed_at AND claimed_at <= updated_at
              FROM idem_gate.claims WHERE workflow = 'faults'"""):
        rows[key] = (state, token, attempt, result, ok)

    passed = failed = 0

    def check(name, bad):
        nonlocal passed, failed
        if bad:
            failed += 1
            print("not ok - %s: %s" % (name, bad[:5]))
        else:
            passed += 1
            print("ok - %s" % name)

    tokens = [g[1] for g in grants]
    dup = sorted({t for t in tokens if tokens.count(t) > 1}) if len(set(tokens)) != len(tokens) else []
    check("no token granted twice (%d grants)" % len(grants), dup)

    by_key = {}
    for key, token, attempt in grants:
        by_key.setdefault(key, []).append((attempt, token))
    bad = []
    for key, lst in by_key.items():
        lst.sort()
        for (a1, t1), (a2, t2) in zip(lst, lst[1:]):
            if a1 == a2 or t2 <= t1:
                bad.append((key, a1, t1, a2, t2))
    check("tokens only grow per key, one grant per attempt", bad)

    lost = []
    for key, token in completions:
        r = rows.get(key)
        if r is None or r[0] != "completed" or r[1] != token or r[3] != {"token": token}:
            lost.append((key, token, r))
    check("every acknowledged completion is kept (%d)" % len(completions), lost)

    lost = []
    for key, lst in by_key.items():
        r = rows.get(key)
        top_attempt, top_token = max(lst)
        if r is None or r[2] < top_attempt or r[1] < top_token:
            lost.append((key, top_attempt, top_token, r))
    check("every acknowledged grant is kept (%d keys)" % len(by_key), lost)

    moved = [k for k, lst in by_key.items() if len(lst) > 1]
    check("keys granted more than once (taken over): %d" % len(moved), [] if moved else ["none"])

    check("every row consistent with its state (%d rows)" % len(rows),
          [k for k, r in rows.items() if not r[4]])
    check("the workers hold all the rows, the coordinator none",
          [] if sql(COORD, "SELECT pg_relation_size('idem_gate.claims')")[0][0] == 0 else ["shell not empty"])
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
