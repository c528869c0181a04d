#!/usr/bin/python3
"""Claim load through failovers, and the checks of what it was told.

    load.py load  --dsn DSN --out DIR --seconds S [--clients N]
                  [--alt-dsn DSN --alt-clients K]
    load.py check --dir DIR --dsn DSN --node NAME=PORT=LOGDIR ...

`load` runs N client processes, each looping over one run at a time:
idem_claim_ex with an execution id of its own (unique per run), and when
granted (new / stale_taken) a few ms of "side effect", then idem_complete
with the token (or idem_fail, retryable or not, or nothing at all: a stuck
claim).  A call whose connection is lost (or that gets no answer within
IDEM_HA_CALL_TIMEOUT seconds: the client then drops the connection, as a
client's own time-out does) is sent again, same arguments, same execution
id, after reconnecting: what real clients do after a broken connection.
Every call is one line in DIR/client-N.jsonl with its wall-clock send and
receive times; a line with "ack" is an answer whose result row reached the
client.  One more process samples idem_gate.stats on the current primary
every second and LISTENs to idem_gate_alert there (samples.jsonl,
alerts.jsonl).

`check` reads those files, the drill's events.jsonl, the final table on
the primary and every node's server log, and prints one line per
invariant, the figures, and `N passed, N failed`; the exit status is 1 on
any violation.  Run under /usr/bin/python3 (Debian's psycopg2).
"""
import argparse
import collections
import glob
import json
import multiprocessing
import os
import random
import re
import select
import signal
import socket
import sys
import threading
import time

import psycopg2
import psycopg2.extensions

# Workflows: ha_a and ha_b keep their rows (30 days); ha_short has a policy
# of HA_SHORT_RETENTION_S seconds, so the janitor deletes its completed rows
# during the run.  All three take over claims stale for STALE_S seconds.
STALE_S = float(os.environ.get("IDEM_HA_STALE_S", "3"))
SHORT_WF = "ha_short"
WORKFLOWS = ["ha_a", "ha_b", SHORT_WF]
KEYS = int(os.environ.get("IDEM_HA_KEYS", "50"))
# ha_a / ha_b see a stream of event ids: the 50 hot slots get new ids every
# EPOCH_S seconds (so grants keep coming after the first keys complete),
# 15 % of deliveries are of the previous batch (a late redelivery).
# ha_short's 50 keys never change: each is deleted after its retention and
# claimed `new` again.
EPOCH_S = 4.0
CALL_TIMEOUT = float(os.environ.get("IDEM_HA_CALL_TIMEOUT", "5"))
CANCEL_ON_TIMEOUT = os.environ.get("IDEM_HA_CANCEL", "1") == "1"
RETRY_FOR = 45.0   # a call is retried this long past the load's end

CLAIM_SQL = ("SELECT c.outcome::text, c.token, c.attempt, c.state::text, c.result::text,"
             " inet_server_port() FROM idem_claim_ex(%s, %s, %s::interval, NULL, %s) c")
COMPLETE_SQL = "SELECT idem_complete(%s, %s, %s, %s::jsonb), inet_server_port()"
FAIL_SQL = "SELECT idem_fail(%s, %s, %s, %s, %s)::text, inet_server_port()"

GRANTS = ("new", "stale_taken")


def now():
    return time.time()


def hms(t):
    if t is None:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(t)) + ("%.3f" % (t % 1))[1:]


def short(e):
    return " ".join(str(e).split())[:200]


# --- the client -------------------------------------------------------------

class Watchdog(threading.Thread):
    """Gives up on a call that got no answer in time: a driver's time-out.

    It shuts the socket down (libpq's blocked read returns, the call fails
    as a lost connection, so no answer can reach the client any more) and
    sends PostgreSQL a cancel request for the statement, as a driver that
    times out does.  A statement waiting for its synchronous standby
    then stops waiting ("the transaction has already committed locally")
    and its answer goes nowhere; the client sends the call again."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.fd = None
        self.conn = None
        self.deadline = 0.0
        self.fired = False

    def arm(self, conn, deadline):
        with self.lock:
            self.conn, self.fd, self.deadline, self.fired = conn, conn.fileno(), deadline, False

    def disarm(self):
        with self.lock:
            self.fd = None
            self.conn = None
            return self.fired

    def run(self):
        while True:
            time.sleep(0.05)
            with self.lock:
                if self.fd is not None and now() > self.deadline:
                    try:
                        s = socket.socket(fileno=os.dup(self.fd))
                        s.shutdown(socket.SHUT_RDWR)
                        s.close()
                    except OSError:
                        pass
                    if CANCEL_ON_TIMEOUT:
                        try:
                            self.conn.cancel()
                        except Exception:
                            pass
                    self.fired = True
                    self.fd = None
                    self.conn = None


class Stop(Exception):
    pass


# SQLSTATEs after which the call surely did nothing and the node is going
# away or is not (or no longer) the primary: reconnect and send it again
RETRY_CODES = {"25006", "57P01", "57P02", "57P03", "53300", "08006", "08003", "08000", "08001"}


class Client:
    def __init__(self, cid, dsn, out, stop_at, seed, stop_file):
        self.cid = cid
        self.dsn = dsn
        self.stop_at = stop_at
        self.stop_file = stop_file
        self.hard_stop = stop_at + RETRY_FOR
        self.rng = random.Random(seed)
        self.f = open(out, "a", buffering=1)
        self.conn = None
        self.n = 0
        self.watch = Watchdog()
        self.watch.start()

    def write(self, rec):
        rec["c"] = self.cid
        self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None

    def connect(self):
        while now() < self.hard_stop:
            t0 = now()
            try:
                conn = psycopg2.connect(self.dsn)
                conn.autocommit = True
                self.write({"ev": "connect", "ts": t0, "tr": now(), "port": conn.info.port})
                return conn
            except psycopg2.Error as e:
                self.write({"ev": "connect_fail", "ts": t0, "tr": now(), "msg": short(e)})
                time.sleep(0.2 + self.rng.random() * 0.3)
        raise Stop()

    def call(self, op, sql, params, meta):
        """One call until it is answered: the row, or ("err", SQLSTATE).

        A lost connection (or no answer in time) is an unknown outcome:
        the same statement is sent again on a new connection."""
        tries = 0
        first = None
        while True:
            if self.conn is None:
                self.conn = self.connect()
            tries += 1
            ts = now()
            if first is None:
                first = ts
            self.watch.arm(self.conn, ts + CALL_TIMEOUT)
            try:
                cur = self.conn.cursor()
                cur.execute(sql, params)
                row = cur.fetchone()
                tr = now()
                self.watch.disarm()
                rec = dict(meta, op=op, ts=ts, tr=tr, ack=1, n=tries)
                if tries > 1:
                    rec["t0"] = first     # the first attempt, lost with its connection
                if self.conn.notices:
                    rec["notice"] = [short(x) for x in self.conn.notices]
                    del self.conn.notices[:]
                return row, rec
            except psycopg2.Error as e:
                tr = now()
                timed_out = self.watch.disarm()
                code = getattr(e, "pgcode", None)
                lost = code is None or code in RETRY_CODES or code.startswith("08")
                if not lost:
                    # a definite answer: the statement failed and did nothing
                    rec = dict(meta, op=op, ts=ts, tr=tr, err=code, n=tries, msg=short(e)[:120])
                    return ("err", code), rec
                self.write(dict(meta, op=op, ts=ts, tr=tr, lost=1, n=tries,
                                timeout=1 if timed_out else 0, code=code, msg=short(e)[:120]))
                self.close()
                if now() > self.hard_stop:
                    raise Stop()
                time.sleep(0.05 + self.rng.random() * 0.1)

    def pick(self):
        wf = WORKFLOWS[self.rng.randrange(len(WORKFLOWS))]
        slot = self.rng.randrange(KEYS)
        if wf == SHORT_WF:
            return wf, "h%02d" % slot
        epoch = int(now() / EPOCH_S)
        if self.rng.random() < 0.15:
            epoch -= 1
        return wf, "e%d-%02d" % (epoch, slot)

    def one_run(self):
        wf, key = self.pick()
        self.n += 1
        ex = "c%d.%d" % (self.cid, self.n)
        meta = {"wf": wf, "key": key, "ex": ex}
        row, rec = self.call("claim", CLAIM_SQL, (key, wf, "%g seconds" % STALE_S, ex), meta)
        if row[0] == "err":
            self.write(rec)
            return
        outcome, token, attempt, state, result, port = row
        rec.update(out=outcome, tok=token, att=attempt, st=state, port=port)
        self.write(rec)
        if outcome not in GRANTS:
            time.sleep(self.rng.uniform(0.001, 0.005))
            return
        # the owner.  Now and then the run claims again (the same
        # execution id coming back): the answer must be new, same token.
        if self.rng.random() < 0.03:
            row2, rec2 = self.call("claim", CLAIM_SQL, (key, wf, "%g seconds" % STALE_S, ex), meta)
            if row2[0] != "err":
                rec2.update(out=row2[0], tok=row2[1], att=row2[2], st=row2[3], port=row2[5], reenter=1)
            self.write(rec2)
        r = self.rng.random()
        if r < 0.05:
            return                      # dies here: a stuck claim, alerted, then taken over
        if r < 0.12:
            self.fail(meta, token, True)
            return
        if r < 0.14 and wf != SHORT_WF:
            # the side effect may have happened: needs_review (never on
            # ha_short, whose 50 keys would all end there)
            self.fail(meta, token, False)
            return
        if r < 0.17:
            time.sleep(STALE_S + 0.5)   # slower than the stale interval: taken over, or not
        else:
            time.sleep(self.rng.uniform(0.002, 0.010))
        receipt = json.dumps({"tok": token, "ex": ex})
        row, rec = self.call("complete", COMPLETE_SQL, (key, wf, token, receipt), dict(meta, tok=token))
        if row[0] != "err":
            rec.update(ok=bool(row[0]), port=row[1])
        self.write(rec)

    def fail(self, meta, token, retryable):
        row, rec = self.call("fail", FAIL_SQL, (meta["key"], meta["wf"], token, "drill", retryable),
                             dict(meta, tok=token, retryable=retryable))
        if row[0] != "err":
            rec.update(st=row[0], port=row[1])
        self.write(rec)

    def stopping(self):
        """the drill says stop (after the last fault has recovered), or the
        load's longest time is over; a call being retried finishes first"""
        if now() >= self.stop_at:
            return True
        if self.stop_file and os.path.exists(self.stop_file):
            self.stop_at = now()
            self.hard_stop = self.stop_at + RETRY_FOR
            return True
        return False

    def loop(self):
        try:
            while not self.stopping():
                self.one_run()
        except Stop:
            self.write({"ev": "gave_up", "ts": now()})
        self.write({"ev": "end", "ts": now(), "runs": self.n})
        self.close()


def client_main(cid, dsn, out, stop_at, seed, stop_file):
    Client(cid, dsn, out, stop_at, seed, stop_file).loop()


# --- the sampler: stats and alerts of the current primary --------------------

STATS_SQL = ("SELECT inet_server_port(), pg_postmaster_start_time()::text,"
             " pg_is_in_recovery() OR current_setting('transaction_read_only')::bool,"
             " alerts, deleted_completed, janitor_passes, extract(epoch FROM last_pass_at)"
             " FROM idem_gate.stats")


def sampler_main(dsn, outdir, done):
    fs = open(os.path.join(outdir, "samples.jsonl"), "a", buffering=1)
    fa = open(os.path.join(outdir, "alerts.jsonl"), "a", buffering=1)
    conn = None
    port = None
    while not done.is_set():
        try:
            if conn is None:
                conn = psycopg2.connect(dsn)
                conn.autocommit = True
                conn.cursor().execute("LISTEN idem_gate_alert")
                port = conn.info.port
            cur = conn.cursor()
            cur.execute(STATS_SQL)
            p, start, ro, alerts, deleted, passes, last = cur.fetchone()
            fs.write(json.dumps({"t": now(), "port": p, "start": start, "ro": ro, "alerts": alerts,
                                 "deleted": deleted, "passes": passes, "last": float(last) if last else None}) + "\n")
            if ro:
                conn.close()
                conn = None
                continue
            end = now() + 1.0
            while now() < end:
                r, _, _ = select.select([conn], [], [], max(0.0, end - now()))
                if r:
                    conn.poll()
                    for n in conn.notifies:
                        fa.write(json.dumps({"t": now(), "port": port, "payload": n.payload}) + "\n")
                    del conn.notifies[:]
        except (psycopg2.Error, OSError, ValueError) as e:
            fs.write(json.dumps({"t": now(), "err": short(e)}) + "\n")
            try:
                if conn is not None:
                    conn.close()
            except Exception:
                pass
            conn = None
            time.sleep(0.5)


def cmd_load(a):
    """--seconds is the load's length, or with --stop-file its longest:
    the drill then ends it by creating the file (once its last fault has
    recovered and the new primary has run a while)."""
    os.makedirs(a.out, exist_ok=True)
    start = now()
    stop_at = start + a.seconds
    procs = []
    for i in range(a.clients):
        dsn = a.alt_dsn if (a.alt_dsn and i < a.alt_clients) else a.dsn
        p = multiprocessing.Process(target=client_main,
                                    args=(i, dsn, os.path.join(a.out, "client-%d.jsonl" % i), stop_at,
                                          a.seed * 1000 + i, a.stop_file))
        p.start()
        procs.append(p)
    done = multiprocessing.Event()
    s = multiprocessing.Process(target=sampler_main, args=(a.dsn, a.out, done))
    s.start()

    def stop_all(signum, frame):
        # the drill is being stopped: no client outlives the load
        for p in procs + [s]:
            if p.is_alive():
                p.kill()
        sys.exit(1)
    signal.signal(signal.SIGTERM, stop_all)
    for p in procs:
        p.join(max(1.0, stop_at + RETRY_FOR + 60 - now()))
        if p.is_alive():
            p.kill()
    end = now()
    time.sleep(2)
    done.set()
    s.join(10)
    if s.is_alive():
        s.kill()
    with open(os.path.join(a.out, "load.json"), "w") as f:
        json.dump({"start": start, "end": end, "clients": a.clients, "alt_clients": a.alt_clients if a.alt_dsn else 0,
                   "dsn": a.dsn, "alt_dsn": a.alt_dsn}, f)
    return 0


# --- the checks -------------------------------------------------------------

LOG_RE = re.compile(r"^(\d+\.\d+) \[(\d+)\] \{([^}]*)\} ([^:]*): (ERROR|FATAL|PANIC|WARNING):  (.*)$")
IDEM_PROCS = ("idem_gate janitor", "idem_gate launcher")
LOOP_N, LOOP_WINDOW = 3, 10.0   # the same error 3 times within 10 s: a loop


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def inv(self, n, ok, text, examples=()):
        print("%s inv%d %s" % ("PASS" if ok else "FAIL", n, text))
        for e in list(examples)[:12]:
            print("      " + e)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def read_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass   # a line cut by a kill
    return out


def cmd_check(a):
    d = a.dir
    load = json.load(open(os.path.join(d, "out", "load.json")))
    recs = []
    for p in sorted(glob.glob(os.path.join(d, "out", "client-*.jsonl"))):
        recs.extend(read_jsonl(p))
    events = read_jsonl(os.path.join(d, "events.jsonl"))
    faults = [e for e in events if e["kind"] == "fault"]
    samples = [s for s in read_jsonl(os.path.join(d, "out", "samples.jsonl")) if "err" not in s]
    alerts = read_jsonl(os.path.join(d, "out", "alerts.jsonl"))
    nodes = []
    for spec in a.node:
        name, port, logdir = spec.split("=", 2)
        nodes.append((name, int(port), logdir))
    port_name = {p: n for n, p, _ in nodes}
    R = a.retention

    def where(t):
        """the last fault before t, for the examples"""
        last = None
        for f in faults:
            if f["t"] <= t:
                last = f
        if last is None:
            return "before any fault"
        return "%.1f s after %s #%d" % (t - last["t"], last["fault"], last["n"])

    def node(p):
        return port_name.get(p, str(p))

    def tried(r):
        if r.get("n", 1) == 1:
            return ""
        return ", attempt %d: the first, sent %s, was lost with its connection" % (r["n"], hms(r.get("t0")))

    calls = [r for r in recs if "op" in r]
    acks = [r for r in calls if r.get("ack")]
    claims = [r for r in acks if r["op"] == "claim"]
    grants = [r for r in claims if r.get("out") in GRANTS]
    comps = [r for r in acks if r["op"] == "complete" and r.get("ok")]
    fails = [r for r in acks if r["op"] == "fail"]
    errs = collections.Counter((r["op"], r["err"]) for r in calls if "err" in r)
    lost = [r for r in calls if r.get("lost")]

    # the final table on the primary, and every node's role; kept in
    # final.json, so that `check --offline` can judge a kept run again
    fj = os.path.join(d, "final.json")
    if a.offline:
        saved = json.load(open(fj))
    else:
        saved = {"rows": [], "roles": {}}
        conn = psycopg2.connect(a.dsn)
        cur = conn.cursor()
        cur.execute("SELECT workflow, key, state::text, token, execution_id, result::text, attempt FROM idem_gate.claims")
        saved["rows"] = [list(r) for r in cur.fetchall()]
        cur.execute("SELECT inet_server_port()")
        saved["port"] = cur.fetchone()[0]
        conn.close()
        for name, port, _ in nodes:
            try:
                c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=3)
                cu = c.cursor()
                cu.execute("SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver LIMIT 1)")
                rec_, st = cu.fetchone()
                saved["roles"][name] = "primary" if not rec_ else ("standby (%s)" % st)
                c.close()
            except psycopg2.Error as e:
                saved["roles"][name] = "down (%s)" % short(e)[:60]
        with open(fj, "w") as f:
            json.dump(saved, f)
    final = {}
    for wf, key, st, tok, ex, res, att in saved["rows"]:
        final[(wf, key)] = {"st": st, "tok": tok, "ex": ex, "res": json.loads(res) if res else None, "att": att}
    final_port = saved["port"]

    rep = Report()
    print("--- invariants (%s, final primary %s)" % (a.name, node(final_port)))

    # 1. no token acknowledged to two runs for the same (workflow, key)
    bytok = collections.defaultdict(list)
    for g in grants:
        bytok[(g["wf"], g["key"], g["tok"])].append(g)
    dup = []
    for (wf, key, tok), gs in sorted(bytok.items(), key=lambda kv: min(x["tr"] for x in kv[1])):
        exs = sorted(set(g["ex"] for g in gs))
        if len(exs) > 1:
            firsts = []
            for ex in exs:
                g = min((x for x in gs if x["ex"] == ex), key=lambda x: x["tr"])
                firsts.append(g)
            desc = "; ".join("%s %s sent %s acked %s by %s (%s%s)" % (g["ex"], g["out"], hms(g["ts"]), hms(g["tr"]), node(g["port"]), where(g["tr"]), tried(g))
                             for g in firsts)
            dup.append("%s/%s token %d granted to %d runs: %s" % (wf, key, tok, len(exs), desc))
    rep.inv(1, not dup, "one run per token: %d tokens granted (%d grants acknowledged), %d granted to two runs"
            % (len(bytok), len(grants), len(dup)), dup)

    # 2. tokens grow in real-time order per key
    bykey = collections.defaultdict(list)
    for g in grants:
        bykey[(g["wf"], g["key"])].append(g)
    order = []
    for k, gs in bykey.items():
        by_recv = sorted(gs, key=lambda x: x["tr"])
        by_send = sorted(gs, key=lambda x: x["ts"])
        i, best = 0, None
        for b in by_send:
            while i < len(by_recv) and by_recv[i]["tr"] < b["ts"]:
                if best is None or by_recv[i]["tok"] > best["tok"]:
                    best = by_recv[i]
                i += 1
            if best is None:
                continue
            if best["tok"] > b["tok"] or (best["tok"] == b["tok"] and best["ex"] != b["ex"]):
                order.append("%s/%s: token %d (%s, acked %s by %s%s) then token %d (%s, sent %s, acked %s by %s; %s%s)"
                             % (k[0], k[1], best["tok"], best["ex"], hms(best["tr"]), node(best["port"]), tried(best),
                                b["tok"], b["ex"], hms(b["ts"]), hms(b["tr"]), node(b["port"]), where(b["tr"]), tried(b)))
    rep.inv(2, not order, "tokens grow in real-time order per key: %d keys, %d grants out of order" % (len(bykey), len(order)), order)

    # 3. every acknowledged completion survives (or ha_short's retention removed it)
    lostc, kept, expired = [], 0, 0
    bykey_c = collections.defaultdict(list)
    for c in comps:
        bykey_c[(c["wf"], c["key"])].append(c)
    for k, cs in bykey_c.items():
        f = final.get(k)
        later_grants = sorted(bykey.get(k, []), key=lambda x: x["tr"])
        seen = set()
        for c in sorted(cs, key=lambda x: x["tr"]):
            if c["tok"] in seen:
                continue            # a retried completion of the same claim
            seen.add(c["tok"])
            survived = f is not None and f["st"] == "completed" and f["res"] and f["res"].get("tok") == c["tok"]
            if survived:
                kept += 1
                continue
            if k[0] == SHORT_WF:
                # completed_at is no earlier than the first attempt of the
                # call (a retried completion may have committed the first
                # time), so the row may be gone from that time + retention
                nxt = [g for g in later_grants if g["tr"] > c["tr"] and g["tok"] != c["tok"]]
                if not nxt or nxt[0]["tr"] >= c.get("t0", c["ts"]) + R - 0.05:
                    expired += 1
                    continue
                why = "claimed %s again %.2f s after the completion (retention %g s): token %d to %s acked %s by %s" % (
                    nxt[0]["out"], nxt[0]["tr"] - c["tr"], R, nxt[0]["tok"], nxt[0]["ex"], hms(nxt[0]["tr"]), node(nxt[0]["port"]))
            else:
                if f is None:
                    why = "no row in the final table"
                else:
                    why = "final row %s token %s exec %s receipt %s" % (f["st"], f["tok"], f["ex"], json.dumps(f["res"]))
            lostc.append("%s/%s completion token %d by %s sent %s acked %s by %s (%s)%s: %s" % (
                k[0], k[1], c["tok"], c["ex"], hms(c["ts"]), hms(c["tr"]), node(c.get("port")), where(c["tr"]), tried(c), why))
    rep.inv(3, not lostc, "acknowledged completions survive: %d claims completed, %d in the final table, "
            "%d deleted by %s's retention (%g s) after it ran out, %d lost" % (
                kept + expired + len(lostc), kept, expired, SHORT_WF, R, len(lostc)), lostc)

    # 4. the final token of each key is at least the largest acknowledged one
    low, gone_short = [], 0
    for k, gs in bykey.items():
        top = max(gs, key=lambda x: x["tok"])
        f = final.get(k)
        if f is None:
            if k[0] == SHORT_WF:
                gone_short += 1
                continue
            low.append("%s/%s: no row at the end; largest token acknowledged %d to %s (%s) at %s by %s (%s%s)" % (
                k[0], k[1], top["tok"], top["ex"], top["out"], hms(top["tr"]), node(top["port"]), where(top["tr"]), tried(top)))
        elif f["tok"] < top["tok"]:
            low.append("%s/%s: final token %d (%s, %s) < token %d acknowledged to %s (%s) at %s by %s (%s%s)" % (
                k[0], k[1], f["tok"], f["st"], f["ex"], top["tok"], top["ex"], top["out"], hms(top["tr"]), node(top["port"]),
                where(top["tr"]), tried(top)))
    rep.inv(4, not low, "final token >= largest acknowledged: %d keys, %d behind (%d %s keys deleted by retention, not judged)"
            % (len(bykey), len(low), gone_short, SHORT_WF), low)

    # 5. the janitor alerts and deletes on each new primary
    epochs = []
    for s in samples:
        if s.get("ro"):
            continue
        if epochs and epochs[-1]["port"] == s["port"] and epochs[-1]["start"] == s["start"]:
            epochs[-1]["last"] = s
        else:
            epochs.append({"port": s["port"], "start": s["start"], "first": s, "last": s})
    bad5, judged, lines5 = [], 0, []
    for i, e in enumerate(epochs):
        t0, t1 = e["first"]["t"], e["last"]["t"]
        na = sum(1 for x in alerts if x["port"] == e["port"] and t0 - 1 <= x["t"] <= t1 + 1)
        dal = e["last"]["alerts"] - e["first"]["alerts"]
        ddel = e["last"]["deleted"] - e["first"]["deleted"]
        first_pass = None
        for s in samples:
            if s.get("port") == e["port"] and s.get("start") == e["start"] and s.get("last") and s["last"] >= t0 - 0.5:
                first_pass = s["last"] - t0
                break
        txt = "%s from %s for %.0f s: %d alerts heard, counters alerts +%d deleted +%d%s" % (
            node(e["port"]), hms(t0), t1 - t0, na, dal, ddel,
            "" if first_pass is None else ", a pass %.1f s after it was first seen read-write" % first_pass)
        lines5.append(txt)
        if i == 0 or t1 - t0 < 12:
            continue            # the first primary, or too short to judge
        judged += 1
        if not ((na > 0 or dal > 0) and ddel > 0):
            bad5.append("no %s on %s" % ("alerts" if not (na or dal) else "deletions", txt))
    ok5 = judged > 0 and not bad5
    if judged == 0:
        bad5.append("no primary after a failover lasted 12 s to be judged (%d primaries seen)" % len(epochs))
    rep.inv(5, ok5, "janitor alerts and deletes on each new primary: %d primaries seen, %d judged, %d without: %d alerts heard in all"
            % (len(epochs), judged, len(bad5) if judged else 0, len(alerts)), bad5 + lines5)

    # 6. no error loop of idem_gate's processes in any node's log
    counts = collections.Counter()
    times = collections.defaultdict(list)
    committed_locally = collections.Counter()
    for name, port, logdir in nodes:
        for path in sorted(glob.glob(os.path.join(logdir, "*.log"))):
            with open(path, errors="replace") as f:
                for line in f:
                    if "already committed locally" in line:
                        committed_locally[name] += 1
                    m = LOG_RE.match(line.rstrip("\n"))
                    if not m:
                        continue
                    t, pid, btype, app, sev, msg = m.groups()
                    proc = btype if btype in IDEM_PROCS else (app.strip() if app.strip() in IDEM_PROCS else None)
                    if proc is None or sev == "WARNING":
                        continue
                    msg = re.sub(r"\d+", "N", msg)
                    k = (name, proc, sev, msg)
                    counts[k] += 1
                    times[k].append(float(t))
    loops, lines6 = [], []
    for k, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        ts = sorted(times[k])
        burst = max(sum(1 for u in ts if t <= u < t + LOOP_WINDOW) for t in ts)
        line = "%s %s %s x%d (at most %d within %g s; first %s, last %s): %s" % (
            k[0], k[1], k[2], n, burst, LOOP_WINDOW, hms(ts[0]), hms(ts[-1]), k[3][:150])
        lines6.append(line)
        if burst >= LOOP_N:
            loops.append(line)
    rep.inv(6, not loops, "no error loop in idem_gate's processes: %d distinct ERROR/FATAL lines, %d repeated %d+ times within %g s"
            % (len(counts), len(loops), LOOP_N, LOOP_WINDOW), loops + [l for l in lines6 if l not in loops])

    # 7. the old primary rejoins as a standby (each fault, and at the end)
    bad7, lines7 = [], []
    changed = [f for f in faults if f.get("failover")]
    for f in faults:
        if (f.get("failover") or f["fault"] == "partition") and f.get("rejoin") != "ok":
            bad7.append("%s #%d: %s %s did not come back as a standby (%s)" % (
                f["fault"], f["n"], "old primary" if f.get("failover") else "partitioned standby",
                f.get("before") if f.get("failover") else f.get("victim"), f.get("rejoin")))
    roles = saved["roles"]
    nprim = sum(1 for v in roles.values() if v == "primary")
    nstream = sum(1 for v in roles.values() if v == "standby (streaming)")
    if nprim != 1 or nstream != len(nodes) - 1:
        bad7.append("at the end: " + ", ".join("%s %s" % kv for kv in sorted(roles.items())))
    rewinds = sum(1 for f in faults if f.get("rewind") in ("rewound", "ran"))
    rep.inv(7, not bad7, "old primaries rejoin as standbys: %d faults moved the primary, %d rejoined (%d rewound by pg_rewind), at the end %s"
            % (len(changed), sum(1 for f in changed if f.get("rejoin") == "ok"), rewinds,
               ", ".join("%s %s" % kv for kv in sorted(roles.items()))), bad7)

    # 8. one owner at a time: a run is granted a key only when the claim
    # acknowledged before it no longer holds it: stale (stale_taken no
    # sooner than STALE_S after that claim was first sent), failed as
    # retryable (new), or, on ha_short, completed and deleted after the
    # retention (new).  A `new` while that claim still held means the row
    # of an acknowledged grant was lost: two runs own the event.
    fails_by_ex = collections.defaultdict(list)
    compl_by_ex = collections.defaultdict(list)
    for r in calls:
        # answered, or lost with the connection (it may have committed)
        if not (r.get("ack") or r.get("lost")):
            continue
        if r["op"] == "fail" and r.get("retryable"):
            fails_by_ex[r["ex"]].append(r)
        elif r["op"] == "complete":
            compl_by_ex[r["ex"]].append(r)
    excl = []
    for k, gs in bykey.items():
        firsts = {}
        for g in sorted(gs, key=lambda x: x["tr"]):
            firsts.setdefault((g["ex"], g["tok"]), g)
        seq = sorted(firsts.values(), key=lambda x: x["tr"])
        for a_, b_ in zip(seq, seq[1:]):
            if a_["ex"] == b_["ex"]:
                continue
            a0 = a_.get("t0", a_["ts"])
            why = None
            if b_["out"] == "stale_taken":
                if b_["tr"] < a0 + STALE_S - 0.05:
                    why = "taken over %.2f s after the claim before it was first sent (stale interval %g s)" % (b_["tr"] - a0, STALE_S)
            elif b_.get("n", 1) > 1 and b_["tr"] >= a0 + STALE_S - 0.05:
                # a call sent again after its connection was lost: its
                # first attempt may have taken the stale claim over, and
                # the owning run coming back is answered `new`
                pass
            else:
                failed = any(f.get("t0", f["ts"]) < b_["tr"] for f in fails_by_ex.get(a_["ex"], []))
                expired = k[0] == SHORT_WF and any(
                    b_["tr"] >= c.get("t0", c["ts"]) + R - 0.05 for c in compl_by_ex.get(a_["ex"], []))
                if not failed and not expired:
                    why = "granted new while that claim held the key (no retryable fail by %s before it%s)" % (
                        a_["ex"], "" if k[0] != SHORT_WF else ", no completion by it %g s before" % R)
            if why:
                excl.append("%s/%s: token %d to %s (%s, acked %s by %s%s), then token %d to %s (%s, sent %s, acked %s by %s; %s%s): %s" % (
                    k[0], k[1], a_["tok"], a_["ex"], a_["out"], hms(a_["tr"]), node(a_["port"]), tried(a_),
                    b_["tok"], b_["ex"], b_["out"], hms(b_["ts"]), hms(b_["tr"]), node(b_["port"]), where(b_["tr"]), tried(b_), why))
    # ... and fencing: a completion with a token is never acknowledged
    # once a later grant of the key to another run was acknowledged
    for k, cs in bykey_c.items():
        gs = bykey.get(k, [])
        for c in cs:
            c0 = c.get("t0", c["ts"])
            newer = [g for g in gs if g["tok"] > c["tok"] and g["ex"] != c["ex"] and g["tr"] < c0]
            if newer:
                g = min(newer, key=lambda x: x["tr"])
                excl.append("%s/%s: completion with token %d by %s acknowledged %s by %s%s, after token %d was granted to %s (%s, acked %s by %s): the older owner completed" % (
                    k[0], k[1], c["tok"], c["ex"], hms(c["tr"]), node(c.get("port")), tried(c),
                    g["tok"], g["ex"], g["out"], hms(g["tr"]), node(g["port"])))
    rep.inv(8, not excl, "one owner at a time: %d keys, %d grants while an acknowledged claim still held the key, or completions by an owner after a later acknowledged grant" % (len(bykey), len(excl)), excl)

    # figures
    print("--- figures")
    dur = load["end"] - load["start"]
    byout = collections.Counter(r.get("out") for r in claims)
    reent = sum(1 for r in claims if r.get("reenter"))
    retried_acks = sum(1 for r in acks if r.get("n", 1) > 1)
    print("load: %d clients (%d through %s) for %.0f s" % (load["clients"], load["alt_clients"], load.get("alt_dsn") or "-", dur))
    print("calls: %d sent (%d answered, %d lost with the connection of which %d client time-outs, %d SQL errors)"
          % (len(calls), len(acks), len(lost), sum(1 for r in lost if r.get("timeout")), sum(errs.values())))
    print("claims answered: %d (%s); re-entries by the owning run %d; answers after a retry %d"
          % (len(claims), ", ".join("%s %d" % kv for kv in sorted(byout.items(), key=lambda kv: str(kv[0]))), reent, retried_acks))
    print("grants: %d acknowledged; completions: %d acknowledged true; fails: %d (%s)"
          % (len(grants), len(comps), len(fails), ", ".join("%s %d" % kv for kv in collections.Counter(r.get("st") for r in fails).items())))
    if errs:
        print("SQL errors: " + ", ".join("%s %s x%d" % (k[0], k[1], v) for k, v in sorted(errs.items())))
    # what each kind of client saw (the HAProxy ones are clients 0.. alt-1)
    groups = collections.defaultdict(lambda: {"lost": collections.Counter(), "cfail": 0, "gap": 0.0, "last": {}})
    for r in sorted((r for r in recs if "ts" in r), key=lambda r: r["ts"]):
        g = groups["one host (HAProxy)" if r["c"] < load["alt_clients"] else "multi-host"]
        if r.get("lost"):
            g["lost"]["time-out" if r.get("timeout") else (r.get("code") or "connection")] += 1
        elif r.get("ev") == "connect_fail":
            g["cfail"] += 1
        elif r.get("ack"):
            if r["c"] in g["last"]:
                g["gap"] = max(g["gap"], r["tr"] - g["last"][r["c"]])
            g["last"][r["c"]] = r["tr"]
    for name, g in sorted(groups.items()):
        print("clients %s: calls lost %s; failed connection attempts %d; longest time a client had no answer %.1f s" % (
            name, ", ".join("%s %d" % kv for kv in sorted(g["lost"].items())) or "none", g["cfail"], g["gap"]))
    kinds = collections.Counter(f["fault"] for f in faults)
    moved = collections.Counter(f["fault"] for f in faults if f.get("failover"))
    print("faults: %d (%s); primary moved by %d (%s)" % (
        len(faults), ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
        sum(moved.values()), ", ".join("%s %d" % kv for kv in sorted(moved.items())) or "none"))
    for f in faults:
        back = "n/a"
        if f.get("failover") or f["fault"] == "partition":
            back = "%s %s %s" % ("old primary" if f.get("failover") else "standby " + str(f.get("victim")),
                                  "back as a standby" if f.get("rejoin") == "ok" else "NOT back: " + str(f.get("rejoin")),
                                  ("after %s s" % f["rejoin_s"]) if f.get("rejoin_s") is not None else "")
            if f.get("rewind"):
                back += " (pg_rewind %s)" % f["rewind"]
        print("  #%d %-10s at %s: primary %s -> %s (first read-write %s after %s s, healthy after %s s); %s" % (
            f["n"], f["fault"], hms(f["t"]), f.get("before"), f.get("after"), f.get("first_rw"),
            f.get("recovered_s", "?"), f.get("healthy_s", "?"), back))
    print("server logs: 'already committed locally' warnings: %s" % (
        ", ".join("%s %d" % kv for kv in sorted(committed_locally.items())) or "none"))
    print("final table: %d rows (%s)" % (len(final), ", ".join(
        "%s %d" % kv for kv in sorted(collections.Counter(v["st"] for v in final.values()).items()))))
    print("violations: inv1 %d, inv2 %d, inv3 %d, inv4 %d, inv5 %d, inv6 %d, inv7 %d, inv8 %d" % (
        len(dup), len(order), len(lostc), len(low), len(bad5) if not ok5 else 0, len(loops), len(bad7), len(excl)))
    with open(os.path.join(d, "violations.json"), "w") as f:
        json.dump({"inv1": dup, "inv2": order, "inv3": lostc, "inv4": low, "inv5": bad5, "inv6": loops, "inv7": bad7,
                   "inv8": excl}, f, indent=1)
    print("%d passed, %d failed" % (rep.passed, rep.failed))
    return 1 if rep.failed else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    l = sub.add_parser("load")
    l.add_argument("--dsn", required=True)
    l.add_argument("--alt-dsn")
    l.add_argument("--alt-clients", type=int, default=0)
    l.add_argument("--clients", type=int, default=8)
    l.add_argument("--seconds", type=float, default=150)
    l.add_argument("--out", required=True)
    l.add_argument("--seed", type=int, default=1)
    l.add_argument("--stop-file")
    c = sub.add_parser("check")
    c.add_argument("--dir", required=True)
    c.add_argument("--dsn", required=True)
    c.add_argument("--name", default="drill")
    c.add_argument("--retention", type=float, required=True)
    c.add_argument("--node", action="append", default=[], help="NAME=PORT=LOGDIR")
    c.add_argument("--offline", action="store_true", help="judge a kept run again from its final.json")
    a = ap.parse_args()
    sys.exit(cmd_load(a) if a.cmd == "load" else cmd_check(a))


if __name__ == "__main__":
    main()
