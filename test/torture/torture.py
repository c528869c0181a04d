#!/usr/bin/python3
"""idem_gate fault torture.

Starts a primary and a synchronous streaming standby (throwaway clusters on
private loopback ports), runs concurrent clients that claim, perform a side
effect recorded in a ledger outside the database, complete, fail, heartbeat,
pause and die at every step of the protocol, while the harness kills
backends, the background worker, whole servers and fails over.  At the end
it checks the invariants from the table, the audit history written by a
trigger in the same transactions, the clients' logs of acknowledged calls
and the ledger.  See docs/dev/torture.md.

Usage (through test/torture/run.sh):
    torture.py [--short | --long] [--duration S] [--clients N] [--seed N]
               [--broken MODE] [--keep]
"""
import argparse
import faulthandler
import glob
import json
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psycopg2
import psycopg2.extensions

# The PostgreSQL programs, and how to run them as postgres: the host's 15
# unless scripts/test.sh points these at another major (in a Debian root,
# run through chroot).
BIN = os.environ.get('IDEM_PG_BIN', '/usr/lib/postgresql/15/bin')
AS_POSTGRES = shlex.split(os.environ.get('IDEM_PG_AS_POSTGRES', 'runuser -u postgres --'))
HERE = os.path.dirname(os.path.abspath(__file__))
DB = 'torture'
STALE = 1.0                     # seconds: the short stale interval
WORKFLOWS = [('w0', STALE), ('w1', STALE), ('w2', STALE), ('nostale', None)]
STALE_OF = dict(WORKFLOWS)
KEY_RATE = 20.0                 # new event ids per second and workflow
STEPS = ['before_claim', 'claim_sent', 'claim_acked', 'after_side_effect',
         'heartbeat_sent', 'complete_sent', 'complete_acked', 'fail_sent']
BROKEN_MODES = ['race', 'reuse_token', 'nofence', 'review_retry', 'async', 'noworker']
GRANTS = ('new', 'stale_taken')


def now():
    return time.time()


def jdump(obj):
    return json.dumps(obj, separators=(',', ':'), sort_keys=True)


def lost_error(e):
    """True if a call's outcome is unknown: the connection or server went away."""
    code = getattr(e, 'pgcode', None)
    if code is None:
        return True
    return code[:2] in ('08', '57') or code in ('25006', '53300', 'XX000')


# --------------------------------------------------------------------------
# The client: one process per incarnation, killed or dying at random steps.
# --------------------------------------------------------------------------

class Client:
    def __init__(self, a):
        self.slot, self.inc = a.slot, a.inc
        self.work = a.work
        self.t0, self.deadline = a.t0, a.deadline
        self.deadline_file = os.path.join(self.work, 'deadline')
        self.rng = random.Random(a.seed * 1000003 + self.slot * 7919 + self.inc)
        self.api = a.api
        self.async_commit = a.async_commit
        base = os.path.join(self.work, 'clients', 'c%d.%d' % (self.slot, self.inc))
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self.log_fd = os.open(base + '.log', flags, 0o644)
        self.ledger_fd = os.open(base + '.ledger', flags, 0o644)
        self.progress = os.path.join(self.work, 'progress', 'c%d.%d' % (self.slot, self.inc))
        self.conn = None
        self.claims = 0
        self.sql_claim = ('SELECT outcome::text, token, attempt, state::text, result'
                          ' FROM %s.idem_claim_ex(%%s, %%s, %%s::interval, NULL, %%s)' % self.api)
        self.sql_complete = 'SELECT %s.idem_complete(%%s, %%s, %%s, %%s::jsonb)' % self.api
        self.sql_fail = 'SELECT %s.idem_fail(%%s, %%s, %%s, %%s, %%s)::text' % self.api
        self.sql_heartbeat = 'SELECT %s.idem_heartbeat(%%s, %%s, %%s)' % self.api

    # One line per record, one write(2) each: a kill never tears a line, and
    # what was written survives the process.
    def log(self, **rec):
        os.write(self.log_fd, (jdump(rec) + '\n').encode())

    def ledger(self, **rec):
        os.write(self.ledger_fd, (jdump(rec) + '\n').encode())

    def dsn(self):
        try:
            with open(os.path.join(self.work, 'primary_port')) as f:
                port = int(f.read().strip())
        except (OSError, ValueError):
            port = 0
        return ('host=127.0.0.1 port=%d user=postgres dbname=%s connect_timeout=3 '
                'application_name=torture-c%d keepalives=1 keepalives_idle=5 '
                'keepalives_interval=2 keepalives_count=2' % (port, DB, self.slot))

    def alive(self):
        """Before the deadline, which the harness moves later while a short
        run is below its claims target (Harness.extend)."""
        if now() < self.deadline:
            return True
        try:
            with open(self.deadline_file) as f:
                self.deadline = max(self.deadline, float(f.read()))
        except (OSError, ValueError):
            pass
        return now() < self.deadline

    def connect(self):
        while self.alive():
            try:
                c = psycopg2.connect(self.dsn())
                c.autocommit = True
                if self.async_commit:
                    c.cursor().execute('SET synchronous_commit = off')
                self.conn = c
                return True
            except psycopg2.Error:
                time.sleep(0.1 + self.rng.random() * 0.2)
        return False

    def call(self, sql, args):
        """('ok', row) | ('err', sqlstate) | ('lost', message)"""
        if self.conn is None and not self.connect():
            return 'lost', 'deadline'
        try:
            cur = self.conn.cursor()
            cur.execute(sql, args)
            return 'ok', cur.fetchone()
        except psycopg2.Error as e:
            if lost_error(e):
                try:
                    self.conn.close()
                except psycopg2.Error:
                    pass
                self.conn = None
                return 'lost', (e.pgcode or str(e).strip().split('\n')[0])[:80]
            return 'err', e.pgcode

    def die(self, step):
        self.log(op='die', step=step, t=now())
        os.kill(os.getpid(), signal.SIGKILL)

    def send_and_die(self, step, sql, args):
        """Send a call on a fresh connection and die before reading its answer."""
        self.log(op='die', step=step, t=now())
        try:
            c = psycopg2.connect(self.dsn(), async_=1)
            while c.poll() != psycopg2.extensions.POLL_OK:
                time.sleep(0.001)
            c.cursor().execute(sql, args)
            c.poll()
        except psycopg2.Error:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    def pick(self):
        w, stale = WORKFLOWS[self.rng.randrange(len(WORKFLOWS))]
        n = int((now() - self.t0) * KEY_RATE)
        r = self.rng.random()
        if r < 0.1:
            i = self.rng.randint(0, n)          # a late redelivery
        elif r < 0.25:                          # the sender retries after a timeout
            i = max(0, n - int(KEY_RATE * self.rng.uniform(STALE, 3 * STALE)))
        else:                                   # the hot spot: the newest events
            i = max(0, n - int(self.rng.expovariate(1 / 3.0)))
        return w, stale, 'e%d' % i

    def run(self):
        rng = self.rng
        die_at = rng.randint(20, 600)
        die_step = rng.choice(STEPS)
        it = 0
        while self.alive():
            it += 1
            dying = it >= die_at
            w, stale, k = self.pick()
            e = 'x%d.%d.%d' % (self.slot, self.inc, it)
            sint = None if stale is None else '%g seconds' % stale
            cargs = (k, w, sint, e)
            if dying and die_step == 'before_claim':
                self.die(die_step)
            if dying and die_step == 'claim_sent':
                self.send_and_die(die_step, self.sql_claim, cargs)
            ts = now()
            st, row = self.call(self.sql_claim, cargs)
            ta = now()
            self.claims += 1
            if self.claims % 50 == 0:
                with open(self.progress, 'w') as f:
                    f.write(str(self.claims))
            if st != 'ok':
                self.log(op='claim', w=w, k=k, e=e, ts=ts, ta=ta, st=st, code=row)
                continue
            out, tok, att, state, res = row
            self.log(op='claim', w=w, k=k, e=e, ts=ts, ta=ta, st='ok', out=out,
                     tok=tok, att=att, state=state, res=res)
            if out not in GRANTS:
                continue
            if dying and die_step == 'claim_acked':
                self.die(die_step)
            r = rng.random()
            if r < 0.06:
                # a failure before any side effect: retryable
                self.fail(w, k, tok, True, dying and die_step == 'fail_sent')
                continue
            # the side effect, outside the gate's database
            self.ledger(w=w, k=k, tok=tok, e=e, t=now())
            if dying and die_step == 'after_side_effect':
                self.die(die_step)
            if r < 0.09:
                # the side effect may have happened: ambiguous
                self.fail(w, k, tok, False, dying and die_step == 'fail_sent')
                continue
            if r < 0.11:
                # a long job that keeps its claim fresh
                owned = True
                for _ in range(rng.randint(4, 6)):
                    time.sleep(STALE * 0.3)
                    hargs = (k, w, tok)
                    if dying and die_step == 'heartbeat_sent':
                        self.send_and_die(die_step, self.sql_heartbeat, hargs)
                    hs = now()
                    st, row = self.call(self.sql_heartbeat, hargs)
                    ha = now()
                    self.log(op='heartbeat', w=w, k=k, tok=tok, ts=hs, ta=ha, st=st,
                             ok=row[0] if st == 'ok' else None,
                             code=row if st != 'ok' else None)
                    if st == 'ok' and not row[0]:
                        owned = False
                        break
                if not owned and rng.random() < 0.5:
                    continue                    # lost the claim: give up
            elif r < 0.15:
                # a pause longer than the stale interval
                time.sleep(STALE * rng.uniform(1.2, 2.0))
            elif r < 0.17:
                # the owning run re-enters (n8n retries the node)
                ts = now()
                st, row = self.call(self.sql_claim, cargs)
                ta = now()
                self.claims += 1
                if st == 'ok':
                    self.log(op='claim', w=w, k=k, e=e, ts=ts, ta=ta, st='ok', out=row[0],
                             tok=row[1], att=row[2], state=row[3], res=row[4], reentry=True)
                else:
                    self.log(op='claim', w=w, k=k, e=e, ts=ts, ta=ta, st=st, code=row)
            result = {'token': tok, 'exec': e, 'receipt': rng.randint(1, 10**9)}
            self.log(op='complete_intent', w=w, k=k, tok=tok, e=e, res=result)
            dargs = (k, w, tok, jdump(result))
            if dying and die_step == 'complete_sent':
                self.send_and_die(die_step, self.sql_complete, dargs)
            for _ in range(3):
                ts = now()
                st, row = self.call(self.sql_complete, dargs)
                self.log(op='complete', w=w, k=k, tok=tok, ts=ts, ta=now(), st=st,
                         ok=row[0] if st == 'ok' else None,
                         code=row if st != 'ok' else None)
                if st != 'lost':
                    break
            if dying and die_step == 'complete_acked':
                self.die(die_step)
        self.log(op='end', t=now())

    def fail(self, w, k, tok, retryable, die_now):
        fargs = (k, w, tok, 'torture: injected failure', retryable)
        if die_now:
            self.send_and_die('fail_sent', self.sql_fail, fargs)
        for _ in range(3):
            ts = now()
            st, row = self.call(self.sql_fail, fargs)
            self.log(op='fail', w=w, k=k, tok=tok, retryable=retryable, ts=ts, ta=now(),
                     st=st, state=row[0] if st == 'ok' else None,
                     code=row if st != 'ok' else None)
            if st != 'lost':
                break


# --------------------------------------------------------------------------
# The clusters
# --------------------------------------------------------------------------

def as_postgres(args, **kw):
    return subprocess.run(AS_POSTGRES + args,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('127.0.0.1', port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_ports(n, rng):
    base = int(os.environ.get('IDEM_TORTURE_PORT', '0'))
    candidates = ([base + i for i in range(40)] if base
                  else rng.sample(range(56100, 56900), 200))
    ports = [p for p in candidates if p != 5432 and port_free(p)][:n]
    if len(ports) < n:
        sys.exit('torture: no free loopback ports')
    return ports


class Node:
    def __init__(self, h, name, port):
        self.h, self.name, self.port = h, name, port
        self.dir = os.path.join(h.work, name)
        self.data = os.path.join(self.dir, 'data')
        self.log = os.path.join(self.dir, 'server.log')

    def pg_ctl(self, *args, check=True):
        r = as_postgres([BIN + '/pg_ctl', '-D', self.data] + list(args), timeout=300)
        if check and r.returncode != 0:
            raise RuntimeError('pg_ctl %s on %s failed: %s' % (args[0] if args else '', self.name, r.stdout))
        return r

    def start(self):
        self.pg_ctl('-l', self.log, '-w', '-t', '120', 'start')

    def stop_immediate(self):
        self.pg_ctl('-m', 'immediate', '-w', '-t', '60', 'stop', check=False)

    def stop_fast(self):
        if os.path.exists(os.path.join(self.data, 'postmaster.pid')):
            self.pg_ctl('-m', 'fast', '-w', '-t', '60', 'stop', check=False)

    def pm_pid(self):
        try:
            with open(os.path.join(self.data, 'postmaster.pid')) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def children(self, pid):
        out = []
        for p in glob.glob('/proc/[0-9]*/stat'):
            try:
                with open(p) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(p.split('/')[2]))
            except (OSError, IndexError, ValueError):
                pass
        return out

    def kill9_all(self):
        """kill -9 the postmaster and every process it started."""
        pm = self.pm_pid()
        if pm is None:
            return
        kids = self.children(pm)
        for pid in [pm] + kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        end = now() + 30
        while now() < end and any(os.path.exists('/proc/%d' % p) for p in [pm] + kids):
            time.sleep(0.05)

    def connect(self, db=DB, timeout=3):
        c = psycopg2.connect(host='127.0.0.1', port=self.port, user='postgres',
                             dbname=db, connect_timeout=timeout,
                             application_name='torture-harness')
        c.autocommit = True
        return c

    def query(self, sql, args=None, db=DB):
        c = self.connect(db)
        try:
            cur = c.cursor()
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def wait_ready(self, timeout=120, primary=True):
        end = now() + timeout
        while now() < end:
            try:
                rows = self.query('SELECT pg_is_in_recovery()')
                if not primary or not rows[0][0]:
                    return True
            except psycopg2.Error:
                pass
            time.sleep(0.1)
        return False


CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{dir}'
shared_preload_libraries = 'idem_gate'
restart_after_crash = on
fsync = on
synchronous_commit = remote_apply
synchronous_standby_names = ''
wal_level = replica
max_wal_senders = 4
wal_keep_size = '1GB'
hot_standby = on
wal_retrieve_retry_interval = '200ms'
max_connections = 100
checkpoint_timeout = '60s'
max_wal_size = '2GB'
log_line_prefix = '%m [%p] %b '
log_min_messages = warning
idem_gate.database = '{db}'
idem_gate.naptime = 1
idem_gate.stuck_after = '3s'
"""


# --------------------------------------------------------------------------
# The harness
# --------------------------------------------------------------------------

class Harness:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = tempfile.mkdtemp(prefix='idem_torture.')   # in TMPDIR, default /tmp
        os.chmod(self.work, 0o755)
        for d in ('clients', 'progress'):
            os.mkdir(os.path.join(self.work, d))
        self.ports = pick_ports(2, self.rng)
        self.nodes = 0
        self.primary = self.standby = None
        self.clients = {}               # slot -> (Popen, incarnation)
        self.faults = {}
        self.fault_log = []
        self.failovers = []             # dicts: time, worker_secs, acked_before
        self.worker_fail = []
        self.t_start = self.t_end = None
        self.claims_done = 0

    def say(self, msg):
        t = now() - self.t_start if self.t_start else 0.0
        print('[%7.1f] %s' % (t, msg), flush=True)

    def fault(self, kind, detail=''):
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.fault_log.append((now(), kind, detail))
        if not kind.startswith('client'):
            self.say('fault: %s %s' % (kind, detail))

    def new_node(self, port):
        self.nodes += 1
        n = Node(self, 'node%d' % self.nodes, port)
        os.mkdir(n.dir)
        shutil.chown(n.dir, 'postgres')
        return n

    def write_port(self, port):
        tmp = os.path.join(self.work, 'primary_port.tmp')
        with open(tmp, 'w') as f:
            f.write(str(port))
        os.rename(tmp, os.path.join(self.work, 'primary_port'))

    # -- setup -------------------------------------------------------------

    def setup(self):
        p = self.new_node(self.ports[0])
        r = as_postgres([BIN + '/initdb', '-D', p.data, '-A', 'trust', '-E', 'UTF8',
                         '--locale=C.UTF-8', '-N'])
        if r.returncode != 0:
            raise RuntimeError('initdb failed: ' + r.stdout)
        with open(os.path.join(p.data, 'postgresql.conf'), 'a') as f:
            f.write(CONF.format(port=p.port, dir=p.dir, db=DB))
        p.start()
        p.query('CREATE DATABASE %s' % DB, db='postgres')
        c = p.connect()
        cur = c.cursor()
        with open(os.path.join(HERE, 'setup.sql')) as f:
            cur.execute(f.read())
        if self.a.broken and self.a.broken not in ('async', 'noworker'):
            with open(os.path.join(HERE, 'broken.sql')) as f:
                cur.execute(f.read())
            cur.execute("ALTER DATABASE %s SET torture.broken = '%s'" % (DB, self.a.broken))
        c.close()
        self.primary = p
        self.write_port(p.port)
        self.make_standby()

    def make_standby(self):
        """Base backup of the primary, streaming, then made synchronous."""
        p = self.primary
        port = [x for x in self.ports if x != p.port][0]
        s = self.new_node(port)
        r = as_postgres([BIN + '/pg_basebackup', '-h', '127.0.0.1', '-p', str(p.port),
                         '-U', 'postgres', '-D', s.data, '-X', 'stream', '-c', 'fast'],
                        timeout=300)
        if r.returncode != 0:
            raise RuntimeError('pg_basebackup failed: ' + r.stdout)
        with open(os.path.join(s.data, 'postgresql.auto.conf'), 'a') as f:
            f.write("port = %d\nunix_socket_directories = '%s'\n"
                    "primary_conninfo = 'host=127.0.0.1 port=%d user=postgres "
                    "application_name=standby'\n" % (s.port, s.dir, p.port))
            if self.a.broken == 'noworker':
                # the deliberately broken standby: its worker looks for a
                # database that does not exist, so it never works after promotion
                f.write("idem_gate.database = 'no_such_database'\n")
        open(os.path.join(s.data, 'standby.signal'), 'w').close()
        shutil.chown(os.path.join(s.data, 'standby.signal'), 'postgres')
        s.start()
        self.standby = s
        self.wait_sync(120, configure=True)

    def wait_sync(self, timeout, configure=False):
        """Wait until the standby is the primary's synchronous standby."""
        end = now() + timeout
        configured = False
        while now() < end:
            try:
                rows = self.primary.query(
                    "SELECT state, sync_state FROM pg_stat_replication"
                    " WHERE application_name = 'standby'")
                if rows and rows[0][0] == 'streaming':
                    if configure and not configured:
                        self.primary.query("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
                        self.primary.query('SELECT pg_reload_conf()')
                        configured = True
                    if rows[0][1] == 'sync':
                        return True
            except psycopg2.Error:
                pass
            time.sleep(0.1)
        return False

    # -- clients -----------------------------------------------------------

    def spawn(self, slot):
        inc = self.clients[slot][1] + 1 if slot in self.clients else 1
        api = 'broken' if self.a.broken in ('race', 'reuse_token', 'nofence', 'review_retry') else 'public'
        args = [sys.executable, os.path.abspath(__file__), 'client', '--slot', str(slot),
                '--inc', str(inc), '--work', self.work, '--t0', repr(self.t_start),
                '--deadline', repr(self.t_end), '--seed', str(self.a.seed), '--api', api]
        if self.a.broken == 'async':
            args.append('--async-commit')
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        self.clients[slot] = (proc, inc)

    def reap(self):
        for slot, (proc, inc) in list(self.clients.items()):
            rc = proc.poll()
            if rc is None:
                continue
            if rc == -signal.SIGKILL or rc == 137:
                pass                    # died by its own hand or ours; counted later
            elif rc != 0:
                self.say('client %d.%d exited with %s' % (slot, inc, rc))
            if now() < self.t_end - 1:
                self.spawn(slot)

    def set_deadline(self, t):
        """The clients' deadline, where a running client reads it when it
        reaches the one it was started with: written whole, then renamed."""
        self.t_end = t
        tmp = os.path.join(self.work, 'deadline.tmp')
        with open(tmp, 'w') as f:
            f.write(repr(t))
        os.rename(tmp, os.path.join(self.work, 'deadline'))

    def extend(self):
        """At the deadline of a short run whose clients answered fewer claims
        than its target (a loaded machine claims more slowly), go on 15 s
        more, up to twice the duration: the acceptance line asks for a
        volume of claims under faults, not a speed."""
        a = self.a
        if a.long or not a.targets or now() >= self.t_start + 2 * a.duration:
            return False
        done = self.progress()
        if done >= a.targets['claims'] * 1.1:
            return False
        self.say('at the deadline: ~%d claims of %d; 15 s more' % (done, a.targets['claims']))
        self.set_deadline(now() + 15)
        return True

    def progress(self):
        total = 0
        for p in glob.glob(os.path.join(self.work, 'progress', '*')):
            try:
                with open(p) as f:
                    total += int(f.read() or 0)
            except (OSError, ValueError):
                pass
        return total

    # -- faults ------------------------------------------------------------

    def server_fault(self):
        p = self.primary
        kinds = ['backend_kill9'] * 4 + ['immediate_restart'] * 3 + ['worker_kill9'] * 3
        kind = self.rng.choice(kinds)
        t = now()
        try:
            if kind == 'immediate_restart':
                p.stop_immediate()
                p.start()
                self.fault(kind)
            else:
                if kind == 'backend_kill9':
                    rows = p.query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                                   " AND datname = %s AND pid <> pg_backend_pid()"
                                   " AND application_name LIKE 'torture-c%%'", (DB,))
                else:
                    rows = p.query("SELECT pid, backend_type FROM pg_stat_activity"
                                   " WHERE backend_type IN ('idem_gate janitor', 'idem_gate launcher')")
                if not rows:
                    return
                row = self.rng.choice(rows)
                os.kill(row[0], signal.SIGKILL)
                self.fault(kind, row[1] if len(row) > 1 else '')
        except (psycopg2.Error, RuntimeError, ProcessLookupError) as e:
            self.say('fault %s not injected: %s' % (kind, str(e).strip().split('\n')[0]))
            return
        if not p.wait_ready(120):
            raise RuntimeError('primary did not come back after %s' % kind)
        self.say('  primary back after %.1f s' % (now() - t))

    def failover(self):
        if not self.wait_sync(60):
            self.say('failover skipped: the standby is not synchronous')
            return
        old, new = self.primary, self.standby
        acked_before = self.progress()
        t = now()
        old.kill9_all()
        self.fault('failover', '%s -> %s' % (old.name, new.name))
        new.pg_ctl('-w', '-t', '120', 'promote')
        new.wait_ready(120)
        new.query("ALTER SYSTEM SET synchronous_standby_names = ''")
        new.query('SELECT pg_reload_conf()')
        self.primary, self.standby = new, None
        self.write_port(new.port)
        self.say('  promoted %s in %.1f s' % (new.name, now() - t))
        # its background worker must start working there
        end = now() + 30
        ws = None
        while now() < end:
            try:
                # janitors come for one pass each: count passes, not processes
                rows = new.query("SELECT (SELECT janitor_passes FROM idem_gate.stats_counters())")
                if rows[0][0] and rows[0][0] > 0:
                    ws = now() - t
                    break
            except psycopg2.Error:
                pass
            time.sleep(0.2)
        self.failovers.append({'t': t, 'worker_secs': ws, 'claims_before': acked_before})
        self.say('  janitor working on the new primary: %s' %
                 ('after %.1f s' % ws if ws is not None else 'NO'))
        shutil.rmtree(old.dir, ignore_errors=True)
        self.make_standby()
        self.say('  new synchronous standby %s ready' % self.standby.name)

    # -- the run -----------------------------------------------------------

    def run(self):
        a = self.a
        self.t_start = now()
        self.say('idem_gate torture: %d clients, %d s load, seed %d%s, work dir %s' %
                 (a.clients, a.duration, a.seed,
                  ', BROKEN GATE: ' + a.broken if a.broken else '', self.work))
        self.setup()
        self.say('primary %s on port %d, synchronous standby %s on port %d' %
                 (self.primary.name, self.primary.port, self.standby.name, self.standby.port))
        self.t_start = now()
        self.t_end = self.t_start + a.duration
        for slot in range(a.clients):
            self.spawn(slot)
        fo_times = [self.t_start + a.duration * (i + 1) / (a.failovers + 1)
                    for i in range(a.failovers)]
        next_fault = self.t_start + self.rng.uniform(*a.fault_gap)
        next_client_kill = self.t_start + self.rng.uniform(0.5, 2.0)
        next_report = self.t_start + 15
        self.set_deadline(self.t_end)
        while now() < self.t_end or self.extend():
            self.reap()
            t = now()
            if fo_times and t >= fo_times[0] and t < self.t_end - 10:
                fo_times.pop(0)
                self.failover()
                next_fault = now() + self.rng.uniform(*a.fault_gap)
            elif t >= next_fault and t < self.t_end - 8:
                self.server_fault()
                next_fault = now() + self.rng.uniform(*a.fault_gap)
            if t >= next_client_kill:
                slot = self.rng.randrange(a.clients)
                proc = self.clients[slot][0]
                if proc.poll() is None:
                    proc.kill()
                    self.fault('client_kill9')
                next_client_kill = now() + self.rng.uniform(0.5, 2.0)
            if t >= next_report:
                self.claims_done = self.progress()
                self.say('progress: ~%d claims, %d faults' %
                         (self.claims_done, sum(self.faults.values())))
                next_report = t + 15
            time.sleep(0.05)
        # the clients stop by themselves at the deadline; a client stuck in a
        # call is killed after a grace period
        end = now() + 30
        while now() < end and any(p.poll() is None for p, _ in self.clients.values()):
            time.sleep(0.1)
        for slot, (p, inc) in self.clients.items():
            if p.poll() is None:
                self.say('client %d.%d still busy 30 s after the deadline: its stack' % (slot, inc))
                p.send_signal(signal.SIGUSR1)
                time.sleep(0.5)
                p.kill()
                p.wait()
        self.load_secs = now() - self.t_start
        # one last crash: everything acknowledged must survive it
        self.primary.stop_immediate()
        self.primary.start()
        self.fault('immediate_restart', '(final)')
        if not self.primary.wait_ready(120):
            raise RuntimeError('primary did not come back after the final restart')
        return self.check()

    def cleanup(self):
        for p, _ in self.clients.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for n in (self.primary, self.standby):
            if n is not None:
                n.stop_immediate()
        if self.a.keep:
            print('work dir kept: %s' % self.work)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    # -- the invariants ----------------------------------------------------

    def check(self):
        import checks
        worker_end = None
        end = now() + 30
        passes = None
        while now() < end:
            # the launcher runs, and janitor passes still complete
            rows = self.primary.query(
                "SELECT (SELECT janitor_passes FROM idem_gate.stats_counters()),"
                " (SELECT count(*) FROM pg_stat_activity"
                "   WHERE backend_type = 'idem_gate launcher')")
            if passes is None:
                passes = rows[0][0]
            elif rows[0][0] > passes and rows[0][1] > 0:
                worker_end = now()
                break
            time.sleep(0.2)
        c = self.primary.connect()
        cur = c.cursor()
        cur.execute('SELECT id, op, workflow, key, state::text, token, attempt, execution_id,'
                    ' result, claimed_at, updated_at, alerted_token FROM torture.history ORDER BY id')
        history = cur.fetchall()
        cur.execute('SELECT workflow, key, state::text, token, attempt, execution_id, result,'
                    ' created_at, claimed_at, updated_at, completed_at FROM idem_gate.claims')
        final = cur.fetchall()
        amcheck = []
        for idx in ('idem_gate.claims_pkey', 'idem_gate.claims_state_workflow_updated_at'):
            try:
                cur.execute('SELECT bt_index_check(%s::regclass, true)', (idx,))
            except psycopg2.Error as e:
                amcheck.append('%s: %s' % (idx, str(e).strip()))
        c.close()
        return checks.check_all(self, history, final, amcheck, worker_end is not None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('mode', nargs='?', default='harness')
    g = ap.add_mutually_exclusive_group()
    g.add_argument('--short', action='store_true')
    g.add_argument('--long', action='store_true')
    ap.add_argument('--duration', type=float)
    ap.add_argument('--clients', type=int, default=16)
    ap.add_argument('--failovers', type=int)
    ap.add_argument('--seed', type=int)
    ap.add_argument('--broken', choices=BROKEN_MODES)
    ap.add_argument('--keep', action='store_true')
    # client mode
    ap.add_argument('--slot', type=int)
    ap.add_argument('--inc', type=int)
    ap.add_argument('--work')
    ap.add_argument('--t0', type=float)
    ap.add_argument('--deadline', type=float)
    ap.add_argument('--api', default='public')
    ap.add_argument('--async-commit', action='store_true')
    a = ap.parse_args()
    if a.mode == 'client':
        faulthandler.register(signal.SIGUSR1)   # the harness asks a stuck client where it is
        Client(a).run()
        return 0
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 10**6)
    if a.long:
        a.duration = a.duration or 3600
        a.failovers = 6 if a.failovers is None else a.failovers
        a.fault_gap = (2.0, 5.0)
        a.targets = {'claims': 1000000, 'faults': 500, 'failovers': 5}
    else:
        a.duration = a.duration or 160
        a.failovers = 1 if a.failovers is None else a.failovers
        a.fault_gap = (2.0, 4.0)
        a.targets = {'claims': 50000, 'faults': 20, 'failovers': 1}
        if a.duration != 160 or a.broken:
            a.targets = None            # a custom run: no acceptance targets
    if a.clients < 1:
        sys.exit('--clients must be positive')
    sys.path.insert(0, HERE)
    h = Harness(a)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        ok = h.run()
    except KeyboardInterrupt:
        print('interrupted')
        ok = False
        print('0 passed, 1 failed')
    except Exception as e:          # a harness failure is a failed run
        print('torture: harness error: %s' % e)
        ok = False
        print('0 passed, 1 failed')
    finally:
        h.cleanup()
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
