"""
The 1.3 levers that need databases of their own (levers13.py runs them):
caches a caller primes under its own search_path, and sessions that hold
rows, or a table, that a janitor wants.  Each cell asserts as levers13.py
says.
"""
import collections
import threading
import time

from levers13_common import OWNER_OID, attempt, connect, fresh_db, gained, install_gate

# -- 2. caches a caller primes ----------------------------------------------

# Attached code whose function is an inlinable SQL function calling
# split_part without a schema (audit defect 08): PostgreSQL inlines it
# into the expression a backend caches (the relcache for an index, the
# typcache for a domain) under the search_path of whoever first plans it.
CACHED_SETUP = r"""
CREATE FUNCTION public.key_prefix(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT split_part(k, '_', 1) $$;
-- the same careless name, an operator this time
CREATE FUNCTION public.key_tail(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT k || '_' $$;
-- the careless function one call down: inlining recurses
CREATE FUNCTION public.key_outer(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT public.key_prefix(k) $$;
CREATE DOMAIN public.mx_kdom AS text CHECK (public.key_prefix(coalesce(VALUE, 'domain_x')) IS NOT NULL);
CREATE DOMAIN public.mx_kdom2 AS text CHECK (public.key_outer(coalesce(VALUE, 'domain_x')) IS NOT NULL);
CREATE TYPE public.mx_kpair AS (a public.mx_kdom);
CREATE FUNCTION public.mx_ktrig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 'a_b'::public.mx_kdom;
    RETURN NULL;
END $$;
"""
# kind: (attach, detach, the name a refusal must give, the functions it may
# name).  The first three get every priming and every entry point; the
# others, variations on the way the careless name is reached, get the
# primed cache and one writer of each table.  The typcache keeps a domain's
# CHECKs for whatever coerces to the domain, not only for a column of it:
# an array or composite column, a cast in a CHECK, a default, a generated
# column or an index expression.
CACHED_KINDS = {
    "inlined SQL function in an index expression":
        (["CREATE INDEX mx_kie_{t} ON idem_gate.{t} ((public.key_prefix({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kie_{t}"], "mx_kie_", ["key_prefix"]),
    "inlined SQL function in an index predicate":
        (["CREATE INDEX mx_kip_{t} ON idem_gate.{t} ({c}) WHERE public.key_prefix({c}::text) IS NOT NULL"],
         ["DROP INDEX idem_gate.mx_kip_{t}"], "mx_kip_", ["key_prefix"]),
    "inlined SQL function in a domain CHECK":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcol public.mx_kdom"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcol"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function with an operator without a schema, in an index expression":
        (["CREATE INDEX mx_kio_{t} ON idem_gate.{t} ((public.key_tail({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kio_{t}"], "mx_kio_", ["key_tail"]),
    "nested inlined SQL functions in an index expression":
        (["CREATE INDEX mx_kin_{t} ON idem_gate.{t} ((public.key_outer({c}::text)))"],
         ["DROP INDEX idem_gate.mx_kin_{t}"], "mx_kin_", ["key_outer", "key_prefix"]),
    "nested inlined SQL functions in a domain CHECK":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcol2 public.mx_kdom2"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcol2"], "mx_kdom2", ["key_outer", "key_prefix"]),
    "inlined SQL function in the CHECK of an array column's element domain, with a default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_karr public.mx_kdom[] DEFAULT ARRAY['a_b']::public.mx_kdom[]"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_karr"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in the CHECK of a composite column's domain attribute, with a default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kcomp public.mx_kpair DEFAULT ROW('a_b')::public.mx_kpair"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kcomp"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a table CHECK":
        (["ALTER TABLE idem_gate.{t} ADD CONSTRAINT mx_kcc_{t} CHECK ((({c})::text::public.mx_kdom) IS NOT NULL)"],
         ["ALTER TABLE idem_gate.{t} DROP CONSTRAINT mx_kcc_{t}"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a column default":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kdef text DEFAULT ('a_b'::public.mx_kdom)::text"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kdef"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a generated column":
        (["ALTER TABLE idem_gate.{t} ADD COLUMN mx_kgen text GENERATED ALWAYS AS"
          " ((({c})::text::public.mx_kdom)::text) STORED"],
         ["ALTER TABLE idem_gate.{t} DROP COLUMN mx_kgen"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in a trigger's function":
        (["CREATE TRIGGER mx_ktr AFTER INSERT OR UPDATE OR DELETE ON idem_gate.{t}"
          " FOR EACH ROW EXECUTE FUNCTION public.mx_ktrig()"],
         ["DROP TRIGGER mx_ktr ON idem_gate.{t}"], "mx_kdom", ["key_prefix"]),
    "inlined SQL function in a domain CHECK, reached by a cast in an index expression":
        (["CREATE INDEX mx_kic_{t} ON idem_gate.{t} ((({c})::text::public.mx_kdom))"],
         ["DROP INDEX idem_gate.mx_kic_{t}"], "mx_kdom", ["key_prefix"]),
}

# The actor's split_part and ||: IMMUTABLE, so that PostgreSQL inlines
# the DBA's function into a call of them; their work is done by a
# volatile function, which says in a NOTICE who ran it (a NOTICE survives
# the rollback of a failed call) and names no operator itself.
CACHED_ACTOR = r"""
CREATE SCHEMA mx13_{a} AUTHORIZATION mx_{a};
SET ROLE mx_{a};
CREATE FUNCTION mx13_{a}.mx_lever(what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'mx13 code ran as %', current_user;
    INSERT INTO public.mx_pwned VALUES (current_user, pg_catalog.concat('cached ', what));
    BEGIN EXECUTE 'ALTER ROLE mx_{a} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    RETURN what;
END $$;
CREATE FUNCTION mx13_{a}.split_part(what text, sep text, n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT mx13_{a}.mx_lever(what) $$;
CREATE FUNCTION mx13_{a}.mx_cat(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT mx13_{a}.mx_lever(a) $$;
CREATE OPERATOR mx13_{a}.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = mx13_{a}.mx_cat);
RESET ROLE;
"""

# How the actor primes its backend's caches before the call: it plans a
# query on every extension table (refused at execution for lack of
# privilege or not: planning loads the indexes' expressions) and casts to
# the domain, under a path that lists its schema first.
PRIMINGS = {
    "caches primed": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public", "{prime}"],
    "caches primed in a rolled-back savepoint": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public",
                                                 "SAVEPOINT p", "{prime}", "ROLLBACK TO SAVEPOINT p"],
    "path only, nothing primed": ["SET LOCAL search_path = mx13_{a}, pg_catalog, public"],
}

# The entry points that write the tables the code is attached to (their
# fixtures and calls are matrix.py's)
CACHED_ENTRY_POINTS = ["idem_claim", "idem_claim_ex retry", "idem_claim_many", "idem_heartbeat",
                       "idem_complete", "idem_fail", "idem_resolve", "idem_release", "janitor_run",
                       "grant_workflow", "revoke_workflow"]
# one that inserts into each table the gate writes
CACHED_ENTRY_POINTS_FEW = ["idem_claim", "idem_resolve", "janitor_run", "grant_workflow"]


def cached_cells(su, dbname, matrix, quick):
    """
    Family 2: a DBA attaches code of one kind to every extension table,
    committed; the actor, in a fresh backend, primes its caches under its
    own path and calls an entry point that writes those tables.  On 1.2 the
    owner ran the caller's split_part.  1.3 refuses the write (55000, naming
    the index or domain and the function); never a right gained.
    """
    results = []
    sc = su.cursor()
    # no background pass: it would do the fixtures' janitor work, and
    # janitor_run() would then have nothing to write
    c = fresh_db(sc, dbname, "mx_db_owner", extension=False, quiet=True)
    cur = c.cursor()
    install_gate(sc, cur, dbname)
    cur.execute(matrix.DB_SETUP)
    cur.execute("GRANT SELECT ON public.mx_pwned TO PUBLIC")
    for a in ("client", "operator"):
        cur.execute(CACHED_ACTOR.format(a=a))
    cur.execute(CACHED_SETUP)
    eps = [ep for ep in matrix.ENTRY_POINTS if ep["name"] in CACHED_ENTRY_POINTS]
    # the fixtures, made before any code is attached (1.3 refuses the
    # writes that make them afterwards); every call is rolled back
    toks = {}
    for i, ep in enumerate(eps):
        k = "k13c%d" % i
        last = None
        for st in matrix.FIXTURES[ep["fix"]]:
            if st.startswith("SET LOCAL"):
                continue
            cur.execute(st.format(k=k))
            if cur.description is not None:
                last = cur.fetchall()
        toks[ep["name"]] = str(last[0][0]) if ep["fix"] in ("processing",) and last else "NULL"
    # LIMIT 0: planned (which loads the indexes' expressions), no row read
    prime = ["SELECT 1 FROM idem_gate.%s WHERE public.key_prefix(%s::text) IS NOT NULL LIMIT 0" % (t, col)
             for t, col in matrix.TABLES.items()]
    prime += ["SELECT 'x_y'::public.mx_kdom", "SELECT NULL::public.mx_kdom", "SELECT 'x_y'::public.mx_kdom2"]
    kinds = list(CACHED_KINDS)[:1] if quick else list(CACHED_KINDS)
    for kind in kinds:
        attach, detach, named, functions = CACHED_KINDS[kind]
        for t, col in matrix.TABLES.items():
            for st in attach:
                cur.execute(st.format(t=t, c=col))
        for priming, pstmts in PRIMINGS.items():
            if priming != "caches primed" and (quick or kind not in list(CACHED_KINDS)[:3]):
                continue
            for i, ep in enumerate(eps):
                if kind not in list(CACHED_KINDS)[:3] and ep["name"] not in CACHED_ENTRY_POINTS_FEW:
                    continue
                a = "client" if ep["who"] == "client" else "operator"
                role = "mx_" + a
                k = "k13c%d" % i
                notices = collections.deque()
                ac = connect(dbname, role, notices)
                acur = ac.cursor()
                acur.execute("BEGIN")
                problems = []
                for st in pstmts:
                    if st == "{prime}":
                        for p in prime:
                            # refused or not, each in its own savepoint
                            acur.execute("SAVEPOINT q")
                            if attempt(acur, p)[0] == "error":
                                acur.execute("ROLLBACK TO SAVEPOINT q")
                            else:
                                acur.execute("RELEASE SAVEPOINT q")
                    else:
                        acur.execute(st.format(a=a))
                acur.execute("SAVEPOINT call")
                notices.clear()		# the actor's own split_part ran while it primed
                r = attempt(acur, ep["sql"].format(k=k, tok=toks[ep["name"]]))
                if r[0] == "error":
                    acur.execute("ROLLBACK TO SAVEPOINT call")
                    if r[1] == "55000" and ep["expect"] != "55000":
                        if named not in r[2] or not any(f in r[2] for f in functions):
                            problems.append("refused without naming the %s and the function: %s" % (
                                "domain" if "domain" in kind else "index", r[2]))
                    elif r[1] != ep["expect"]:
                        problems.append("refused with %s, not 55000: %s" % (r[1], r[2]))
                # in the call's transaction: a right gained and then rolled
                # back is gained all the same
                acur.execute("SELECT r.rolsuper, pg_has_role(r.oid, " + OWNER_OID + ", 'MEMBER')"
                             " FROM pg_roles r WHERE r.rolname = current_user")
                sup, member = acur.fetchone()
                if sup:
                    problems.append("%s became superuser" % role)
                if member:
                    problems.append("%s is a member of the extension's owner" % role)
                ran = sorted({n.strip() for n in notices if "mx13 code ran as" in n and role not in n})
                if ran:
                    problems.append("the actor's split_part ran as another role: %s" % "; ".join(ran))
                acur.execute("ROLLBACK")
                ac.close()
                problems += gained(sc_db(dbname), role)
                results.append(("%s / %s / %s / every table / %s" % (a, priming, ep["name"], kind), problems))
        for t, col in matrix.TABLES.items():
            for st in detach:
                cur.execute(st.format(t=t, c=col))
    c.close()
    sc.execute("DROP DATABASE %s WITH (FORCE)" % dbname)
    return results


_sc_cache = {}


def sc_db(dbname):
    """A superuser cursor in dbname (kept for the family's cells)."""
    if dbname not in _sc_cache or _sc_cache[dbname].connection.closed:
        _sc_cache[dbname] = connect(dbname).cursor()
    return _sc_cache[dbname]


def close_sc_cache():
    for cur in _sc_cache.values():
        if not cur.connection.closed:
            cur.connection.close()
    _sc_cache.clear()


# -- 5. sessions holding rows against the janitor ----------------------------

# The janitor's steps: the state of the rows (made by STATE_MAKERS), how
# old they are made, and what a processed row looks like.  The policy of
# each cell's workflow: retention 1 hour, receipts 1 minute, stuck after
# 10 minutes; audit rows older than an hour are pruned.
JANITOR_STEPS = {
    "delete completed": ("completed", "2 hours", "gone"),
    "delete failed_retryable": ("failed", "2 hours", "gone"),
    "clear receipts": ("completed", "2 minutes", "result IS NULL"),
    "stuck alerts": ("processing", "1 hour", "alerted_token IS NOT NULL"),
    "clear payloads of processing": ("processing", "2 minutes", "payload IS NULL"),
    "clear payloads of failed_retryable": ("failed", "2 minutes", "payload IS NULL"),
    "clear payloads of needs_review": ("review", "2 minutes", "payload IS NULL"),
    "prune audit": ("audit", "2 hours", "gone"),
}

STATE_MAKERS = {
    "processing": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')"],
    "completed": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
                  "SELECT idem_complete('{k}', '{w}', {tok}, '{{\"r\": 1}}')"],
    "failed": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
               "SELECT idem_fail('{k}', '{w}', {tok}, 'before', true)"],
    "review": ["SELECT token FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-A', '{{\"p\": 1}}')",
               "SELECT idem_fail('{k}', '{w}', {tok}, 'after', false)"],
    # the trail is append-only: its rows are written old
    "audit": ["INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key, token, reason)"
              " VALUES (now() - '{age}'::interval, 'postgres', 'postgres', 'release', '{w}', '{k}', 1, 'old')"],
}

# Who holds the row, and how: a client's or operator's gate call left
# uncommitted, a DBA's row lock, or a DBA's table lock (then nothing of the
# table can be written: the pass must only not wait on it, and the next
# one do the work).  (The client's repeated idem_complete and idem_fail on
# a failed claim take no row lock in 1.2: nothing to hold.)
HOLDERS = {
    "client heartbeat": ("mx_client13", "SELECT idem_heartbeat('{k}', '{w}', {tok})", ["processing"]),
    "client retry": ("mx_client13", "SELECT outcome FROM idem_claim_ex('{k}', '{w}', NULL, NULL, 'run-H')",
                     ["failed"]),
    "operator release": ("mx_oper13", "SELECT idem_release('{k}', '{w}', 'held open')",
                         ["processing", "completed", "failed", "review"]),
    "operator resolve": ("mx_oper13", "SELECT idem_resolve('{k}', '{w}', 'completed', '{{}}', 'held open')",
                         ["review"]),
    "DBA row lock": ("postgres", "SELECT 1 FROM ONLY idem_gate.audit WHERE key = '{k}' FOR UPDATE", ["audit"]),
    "DBA table lock": ("postgres", "LOCK TABLE ONLY idem_gate.{table} IN SHARE MODE", ["completed", "audit"]),
}
# the steps a table lock is tried against: one per table
TABLE_LOCK_STEPS = ["delete completed", "prune audit"]

JANITOR_SETUP = r"""
GRANT USAGE ON SCHEMA idem_gate TO mx_client13, mx_oper13;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
    idem_claim_ex(text, text, interval, text, text, jsonb), idem_heartbeat(text, text, bigint),
    idem_complete(text, text, bigint, jsonb), idem_fail(text, text, bigint, text, boolean)
    TO mx_client13;
GRANT EXECUTE ON FUNCTION idem_release(text, text, text), idem_resolve(text, text, text, jsonb, text),
    idem_gate.janitor_run() TO mx_oper13;
SELECT idem_gate.grant_workflow('mx_client13', 'mx13%');
SELECT idem_gate.grant_workflow('mx_oper13', 'mx13%');
"""


def make_claim(cur, state, k, w, age):
    tok = None
    for st in STATE_MAKERS[state]:
        cur.execute(st.format(k=k, w=w, age=age, tok=tok))
        if tok is None and cur.description is not None:
            tok = cur.fetchone()[0]
    if state != "audit":
        cur.execute("UPDATE ONLY idem_gate.claims SET created_at = created_at - d, claimed_at = claimed_at - d,"
                    " updated_at = updated_at - d, completed_at = completed_at - d"
                    " FROM (SELECT %s::interval) v(d) WHERE workflow = %s AND key = %s", (age, w, k))
    return tok


def processed(cur, state, done, k, w):
    if state == "audit":
        cur.execute("SELECT count(*) = 0 FROM ONLY idem_gate.audit WHERE key = %s", (k,))
    elif done == "gone":
        cur.execute("SELECT count(*) = 0 FROM ONLY idem_gate.claims WHERE workflow = %s AND key = %s", (w, k))
    else:
        cur.execute("SELECT count(*) = 1 FROM ONLY idem_gate.claims WHERE workflow = %%s AND key = %%s AND %s"
                    % done, (w, k))
    return cur.fetchone()[0]


class Janitor(threading.Thread):
    """idem_gate.janitor_run() in a connection of its own, lock_timeout unset."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.conn = connect(db)
        cur = self.conn.cursor()
        cur.execute("SET lock_timeout = 0; SET idem_gate.audit_retention = '1h'")
        cur.execute("SELECT pg_backend_pid()")
        self.pid = cur.fetchone()[0]
        self.result = None

    def run(self):
        self.result = attempt(self.conn.cursor(), "SELECT deleted, alerts FROM idem_gate.janitor_run()")


class Victim(threading.Thread):
    """Another claim's call, with 3 s to answer, while a row is held."""

    def __init__(self, db, what, sql, want):
        super().__init__(daemon=True)
        self.db, self.what, self.sql, self.want = db, what, sql, want
        self.problems = []

    def run(self):
        v = connect(self.db, "mx_client13")
        vc = v.cursor()
        vc.execute("SET statement_timeout = '3s'")
        r = attempt(vc, self.sql)
        v.close()
        got = r[1][0][0] if r[0] == "rows" else "%s %s" % (r[1], r[2])
        if got != self.want:
            self.problems.append("%s of another claim answered %s" % (self.what, got))


def watch_locks(sc, db, pids, seconds, done=lambda: False, enough=1.0):
    """
    Sample the lock waits for seconds (or until done(), or a wait of
    enough seconds): the longest wait on a lock of any janitor (the given
    backends, and the background janitors in db, or in any database), as
    pg_locks.waitstart tells it.
    """
    longest = 0.0
    end = time.time() + seconds
    while True:
        sc.execute("SELECT coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)), 0)"
                   " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                   " WHERE NOT l.granted AND (l.pid = ANY(%s::int[]) OR (a.backend_type = 'idem_gate janitor'"
                   " AND (%s::name IS NULL OR a.datname = %s)))", (list(pids), db, db))
        longest = max(longest, float(sc.fetchone()[0]))
        if longest >= enough or time.time() >= end or done():
            return longest
        time.sleep(0.05)


def janitor_cells(su, dbname, quick):
    """
    Family 5: an open transaction holds one row each janitor step wants.
    The janitor (janitor_run() in another connection) must not wait for
    it, must still do the step's other rows, and a completion and a
    takeover of other claims must not wait behind it; once the holder is
    gone, the next pass does the held row too.  On 1.2 the deletion of
    completed rows, receipt and payload clearing and the audit's pruning
    waited as long as the holder stayed open.
    """
    results = []
    sc = su.cursor()
    c = fresh_db(sc, dbname)
    cur = c.cursor()
    cur.execute(JANITOR_SETUP)
    n = 0
    for step, (state, age, done) in JANITOR_STEPS.items():
        for holder, (role, hold_sql, states) in HOLDERS.items():
            if state not in states or (hold_sql.startswith("LOCK") and step not in TABLE_LOCK_STEPS):
                continue
            n += 1
            if quick and (step not in ("clear payloads of processing", "delete completed")
                          or hold_sql.startswith("LOCK")):
                continue
            w = "mx13_j%d" % n
            problems = []
            cur.execute("INSERT INTO idem_gate.policies (workflow, retention, failed_retention,"
                        " receipt_retention, stuck_after) VALUES (%s, '1 hour', '1 hour', '1 minute',"
                        " '10 minutes')", (w,))
            held_tok = make_claim(cur, state, w + "_held", w, age)
            make_claim(cur, state, w + "_other", w, age)
            # other claims, to complete and to take over meanwhile
            v1 = make_claim(cur, "processing", w + "_v1", w, "2 minutes")
            make_claim(cur, "processing", w + "_v2", w, "1 hour")

            h = connect(dbname, role)
            hc = h.cursor()
            hc.execute("BEGIN")
            table_lock = hold_sql.startswith("LOCK")
            r = attempt(hc, hold_sql.format(k=w + "_held", w=w, tok=held_tok,
                                            table="audit" if state == "audit" else "claims"))
            if r[0] == "error":
                problems.append("the holder's call failed: %s %s" % (r[1], r[2]))
            j = Janitor(dbname)
            j.start()
            waited = watch_locks(sc, dbname, [j.pid], 2.5, lambda: not j.is_alive())
            if waited >= 1.0:
                problems.append("the janitor waited %.1f s on a lock" % waited)
            # both at once, each given 3 s (a DBA's table lock holds them
            # up by itself)
            others = [] if table_lock else [Victim(dbname, what, sql, want) for what, sql, want in [
                ("a completion", "SELECT idem_complete('%s_v1', '%s', %d, '{\"v\": 1}')::text" % (w, w, v1),
                 "true"),
                ("a takeover", "SELECT outcome::text FROM idem_claim_ex('%s_v2', '%s', '1 minute', NULL,"
                               " 'run-T')" % (w, w), "stale_taken")]]
            for v in others:
                v.start()
            for v in others:
                v.join()
                problems += v.problems
            if j.is_alive():
                sc.execute("SELECT pg_cancel_backend(%s)", (j.pid,))
                j.join(10)
                problems.append("the janitor's pass did not end while the holder was open")
            elif j.result[0] == "error":
                problems.append("the janitor's pass failed: %s %s" % (j.result[1], j.result[2]))
            elif not table_lock and not processed(cur, state, done, w + "_other", w):
                problems.append("the step's other row was not done (%s)" % done)
            j.conn.close()
            hc.execute("ROLLBACK")
            h.close()
            # the holder gone, the next pass does the held row
            j2 = connect(dbname)
            r = attempt(j2.cursor(), "SET statement_timeout = '10s'; SET idem_gate.audit_retention = '1h';"
                                     " SELECT * FROM idem_gate.janitor_run()")
            j2.close()
            if r[0] == "error":
                problems.append("the next pass failed: %s %s" % (r[1], r[2]))
            elif not all(processed(cur, state, done, w + x, w) for x in ("_held", "_other")):
                problems.append("the held row was not done by the next pass after its holder ended")
            cur.execute("DELETE FROM ONLY idem_gate.claims WHERE workflow = %s", (w,))
            results.append(("%s / holds %s of %s / janitor_run() / claims, audit / none"
                            % (holder, "the table" if table_lock else "a row", step), problems))
    c.close()
    sc.execute("DROP DATABASE %s WITH (FORCE)" % dbname)
    return results


def worker_lock_cells(su, dbprefix, naptime):
    """
    Family 5, background janitor (naptime already 1 s): hostile sessions
    in max_janitors databases each hold a processing claim whose payload
    is due for clearing; a claim stuck in another database is still
    announced within stuck_after + 2 x naptime, no janitor waits on a lock
    for more than about a second, and the hostile databases' other rows
    are done.  On 1.2 every janitor slot waited forever.
    """
    sc = su.cursor()
    sc.execute("SHOW idem_gate.max_janitors")
    slots = int(sc.fetchone()[0])
    names = ["%s_13h%d" % (dbprefix, i) for i in range(slots)]
    victim = "%s_13hv" % dbprefix
    holders = []
    problems = []
    try:
        for name in names:
            c = fresh_db(sc, name)
            cur = c.cursor()
            cur.execute(JANITOR_SETUP)
            cur.execute("INSERT INTO idem_gate.policies (workflow, receipt_retention, stuck_after)"
                        " VALUES ('mx13_h', '1 minute', '10 minutes')")
            tok = make_claim(cur, "processing", "h_held", "mx13_h", "2 minutes")
            make_claim(cur, "processing", "h_other", "mx13_h", "2 minutes")
            c.close()
            h = connect(name, "mx_client13")
            hc = h.cursor()
            hc.execute("BEGIN")
            hc.execute("SELECT idem_heartbeat('h_held', 'mx13_h', %d)" % tok)
            holders.append(h)
        vconn = fresh_db(sc, victim)
        vcur = vconn.cursor()
        stuck_after = 3
        vcur.execute("INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('mx13_v', '%d seconds')"
                     % stuck_after)
        vcur.execute("SELECT idem_claim('v_stuck', 'mx13_v')")
        t0 = time.time()
        # polled every 0.2 s: half a second of slack for the polling
        deadline = t0 + stuck_after + 2 * naptime + 0.5
        alerted_at = None
        longest = 0.0
        while time.time() < deadline + 3 and alerted_at is None:
            longest = max(longest, watch_locks(sc, None, [], 0.2))
            vcur.execute("SELECT alerted_token IS NOT NULL FROM ONLY idem_gate.claims WHERE key = 'v_stuck'")
            if vcur.fetchone()[0]:
                alerted_at = time.time()
        if alerted_at is None or alerted_at > deadline:
            problems.append("the stuck claim of another database was announced %s (deadline %.1f s)"
                            % ("after %.1f s" % (alerted_at - t0) if alerted_at else "not at all",
                               deadline - t0))
        longest = max(longest, watch_locks(sc, None, [], 1.5))
        if longest >= 1.0:
            problems.append("a janitor waited %.1f s on a lock" % longest)
        for name in names:
            c = connect(name)
            if not processed(c.cursor(), "processing", "payload IS NULL", "h_other", "mx13_h"):
                problems.append("%s: the payload nobody held was not cleared" % name)
            c.close()
        vconn.close()
    finally:
        for h in holders:
            h.close()
        for name in names + [victim]:
            sc.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)
    return [("client / holds a row in %d databases (max_janitors) / background janitor / claims / none" % slots,
             problems)]
