#!/usr/bin/env python3
"""Build idem_gate's managed edition from the same parts as the C extension.

managed/idem_gate.sql is the C extension's install script as the Makefile
assembles it (idem_gate--1.0.sql, then src/sql/1.1/, 1.2/ and 1.3/ in name
order), statement by statement, so that the SQL both editions share (types,
tables, indexes, views, row security, the PL/pgSQL functions) is written
once.  What only C can do is replaced:

- each CREATE FUNCTION ... LANGUAGE C is replaced by the managed part's
  function of the same signature (managed/parts/*.sql), or dropped when the
  managed edition has none (the update scripts' helpers, Citus);
- statements about a dropped function, the DO blocks that carry grants
  over from an older version (a fresh install has none), psql's \\echo
  guards and pg_extension_config_dump() are left out;
- a setting the shared views read (idem_gate.stuck_after, max_attempts)
  reads as the C edition's default when unset;
- managed/parts/00_*.sql opens the file and 99_*.sql closes it; the other
  parts' functions that replace none of C's come before the first use.

It writes managed/idem_gate.sql (psql -f, API in schema public) and
managed/idem_gate.pg_tle.sql (the same statements as a pg_tle extension,
API in the schema CREATE EXTENSION gives).  --check exits 1 when either
differs from what is committed, which the test command checks; --body
prints the statements alone (no psql commands, no transaction).
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = "1.3"
# what the managed edition leaves out entirely: Citus, and the update
# scripts' helpers
# the C edition's settings the shared views read, with the C edition's
# defaults: the managed edition defines no settings, so an unset one reads
# as its default instead of failing
SETTING_DEFAULTS = {"idem_gate.stuck_after": "15min", "idem_gate.max_attempts": "5"}
LEFT_OUT = {"distribute", "distribute_steps", "cluster_counters", "claim_many_group"}


def split(sql):
    """Split a script into statements (psql meta lines apart), aware of
    quotes, dollar quotes and comments."""
    out, i, n, start = [], 0, len(sql), 0
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            depth, i = 1, i + 2
            while depth and i < n:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        if c == "'":
            i += 1
            while i < n:
                if sql[i] == "'":
                    if i + 1 < n and sql[i + 1] == "'":
                        i += 2
                        continue
                    break
                i += 1
            i += 1
            continue
        if c == '"':
            i = sql.find('"', i + 1) + 1
            continue
        if c == "$":
            m = re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", sql[i:])
            if m:
                tag = m.group(0)
                i = sql.find(tag, i + len(tag)) + len(tag)
                continue
        if c == "\\" and (i == 0 or sql[i - 1] == "\n"):
            j = sql.find("\n", i)
            j = n if j < 0 else j + 1
            out.append(sql[start:j])
            start = i = j
            continue
        if c == ";":
            out.append(sql[start:i + 1])
            start = i + 1
        i += 1
    if sql[start:].strip():
        out.append(sql[start:])
    return out


def code(stmt):
    """A statement without its comments, on one line."""
    s = re.sub(r"/\*.*?\*/", " ", stmt, flags=re.S)
    s = re.sub(r"--[^\n]*", " ", s)
    return " ".join(s.split())


TYPE_WORDS = re.compile(r"\b(pg_catalog|public)\.")


def norm_type(t):
    t = TYPE_WORDS.sub("", t.strip()).lower()
    t = re.sub(r"\s+default\s+.*$", "", t)
    t = re.sub(r"\s*=\s*.*$", "", t)
    t = {"integer": "int4", "int": "int4", "bigint": "int8", "boolean": "bool",
         "double precision": "float8", "timestamp with time zone": "timestamptz"}.get(t, t)
    return t.replace("integer[]", "int4[]")


def split_args(args):
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def signature(name, args, named):
    """name(type, ...) of the input arguments; named: the list has names."""
    types = []
    for a in split_args(args):
        a = a.strip()
        if not a:
            continue
        words = a.split()
        if words[0].upper() == "OUT":
            continue
        if words[0].upper() in ("IN", "INOUT"):
            words = words[1:]
        if named and len(words) > 1 and not words[0].startswith("pg_catalog."):
            words = words[1:]
        types.append(norm_type(" ".join(words)))
    name = name.replace("@extschema@.", "").replace("public.", "")
    return "%s(%s)" % (name, ",".join(types))


CREATE_FN = re.compile(r"^CREATE FUNCTION ([\w@.]+)\s*\(", re.I)
ON_FN = re.compile(r"\b(?:ON FUNCTION|ALTER FUNCTION|DROP FUNCTION)\s+([\w@.]+)\s*\(([^)]*)\)", re.I)


def created(stmt):
    """The signature a CREATE FUNCTION statement creates, or None."""
    text = code(stmt)
    m = CREATE_FN.match(text)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return signature(m.group(1), text[i + 1:j], True)
    return None


def mentioned(stmt):
    """The signatures an ALTER, COMMENT, GRANT, REVOKE or DROP names."""
    return [signature(m.group(1), m.group(2), False) for m in ON_FN.finditer(code(stmt))]


def base_name(sig):
    return sig.split("(")[0].split(".")[-1]


def shared_script():
    """The C extension's 1.3 install script, as the Makefile assembles it."""
    parts = [os.path.join(ROOT, "idem_gate--1.0.sql")]
    for v in ("1.1", "1.2", "1.3"):
        parts += sorted(glob.glob(os.path.join(ROOT, "src/sql", v, "*.sql")))
    return "".join(open(p).read() for p in parts)


def managed_parts():
    """The managed parts: the opening, the groups by signature, the close."""
    opening, closing, groups, order = [], [], {}, []
    for path in sorted(glob.glob(os.path.join(ROOT, "managed/parts/*.sql"))):
        base = os.path.basename(path)
        stmts = [s for s in split(open(path).read()) if code(s)]
        if base.startswith("00_"):
            opening += stmts
            continue
        if base.startswith("99_"):
            closing += stmts
            continue
        current = None
        for s in stmts:
            sig = created(s)
            if sig:
                if sig in groups:
                    sys.exit("managed/parts: %s is defined twice" % sig)
                current = sig
                groups[sig] = []
                order.append(sig)
            elif current is None:
                sys.exit("managed/parts/%s: a statement before any function: %s" % (base, code(s)[:80]))
            groups[current].append(s)
    return opening, closing, groups, order


PLACEHOLDER = ("LANGUAGE plpgsql AS $ph$BEGIN RAISE EXCEPTION 'this function of an older "
               "version is not in the managed edition' USING ERRCODE = '0A000'; END$ph$")


def placeholder(stmt):
    """A C function of an older version that a later shared step replaces
    or drops (idem_resolve of 1.0): a PL/pgSQL stand-in with its signature,
    so that the step runs as written; none is left at the end."""
    out = re.sub(r"AS\s+'MODULE_PATHNAME'\s*,\s*'[^']*'", "", stmt)
    out = re.sub(r"\bLANGUAGE C\b", PLACEHOLDER, out)
    if out == stmt:
        sys.exit("cannot make a stand-in of: " + code(stmt)[:80])
    return out


def requote(stmt):
    """A managed CREATE FUNCTION with its body under another dollar quote,
    to sit inside a DO block's $$ body."""
    if "$m$" in stmt:
        sys.exit("managed/parts use the quote $m$")
    return stmt.replace("$$", "$m$")


def replace_inner(stmt, groups, c_only, emitted):
    """A DO block of the shared SQL with each C function it creates replaced
    by the managed one (its CREATE and what follows it in its part), and the
    statements about C functions the managed edition has none of left out."""
    m = re.match(r"(?s)(.*?\bDO\s+)(\$\w*\$)(.*)(\2)(\s*;?\s*)$", stmt)
    if not m:
        return stmt
    inner = split(m.group(3))
    out = []
    for part in inner:
        text = code(part)
        sig = created(part)
        if sig and re.search(r"\bLANGUAGE C\b", text):
            lead = part[:len(part) - len(part.lstrip())]
            if sig in groups:
                emitted.add(sig)
                out.append(lead + "\n".join(requote(g.strip()) for g in groups[sig]))
            else:
                c_only.add(sig)
                out.append(placeholder(part))
            continue
        out.append(part)
    return m.group(1) + m.group(2) + "".join(out) + m.group(3)[len("".join(inner)):] + \
        m.group(4) + m.group(5)


def build():
    opening, closing, groups, order = managed_parts()
    history = split(shared_script())
    c_only = set()          # C signatures the managed edition has no body for
    emitted = set()
    body = []

    def emit(sig):
        emitted.add(sig)
        body.extend(groups[sig])

    for stmt in history:
        text = code(stmt)
        if not text or text.startswith("\\") or text.startswith("SET LOCAL search_path"):
            continue
        if "pg_extension_config_dump" in text:
            continue
        sig = created(stmt)
        if sig and base_name(sig) in LEFT_OUT:
            c_only.add(sig)
            continue
        if text.startswith("DO "):
            if any(re.search(r"\b%s\(" % n, text) for n in LEFT_OUT):
                continue
            body.append(replace_inner(stmt, groups, c_only, emitted))
            continue
        if sig and re.search(r"\bLANGUAGE C\b", text):
            if sig in groups:
                emit(sig)
            else:
                c_only.add(sig)
                body.append(placeholder(stmt))
            continue
        if sig and sig in groups:
            # a function C replaced later (grant_workflow was PL/pgSQL in
            # 1.0): the managed one, at its first place
            if sig not in emitted:
                emit(sig)
            continue
        refs = mentioned(stmt)
        if any(base_name(r) in LEFT_OUT for r in refs):
            continue
        if text.startswith("ALTER FUNCTION") and "RENAME TO" in text:
            continue
        for name, dflt in SETTING_DEFAULTS.items():
            stmt = stmt.replace("pg_catalog.current_setting('%s')" % name,
                                "COALESCE(NULLIF(pg_catalog.current_setting('%s', true), ''), '%s')" % (name, dflt))
        if re.search(r"current_setting\('idem_gate\.\w+'\)", stmt):
            sys.exit("a shared statement reads a setting build.py has no default for: " + text[:80])
        body.append(stmt)
    # the stand-ins no shared step dropped
    for sig in sorted(c_only):
        if base_name(sig) not in LEFT_OUT:
            q = sig if "." in sig.split("(")[0] else "@extschema@." + sig
            body.append("DO $$ BEGIN IF pg_catalog.to_regprocedure('%s') IS NOT NULL THEN "
                        "DROP FUNCTION %s; END IF; END $$;" % (q.replace("'", "''"), q))
    return opening, closing, groups, order, body, emitted


def assemble():
    opening, closing, groups, order, body, placed = build()
    # Every managed function no C statement placed goes right after the
    # claims table: list them and insert them there.
    rest = []
    for sig in order:
        if sig not in placed:
            rest.extend(groups[sig])
    out, inserted = [], False
    for s in body:
        out.append(s)
        if not inserted and code(s).startswith("CREATE TABLE idem_gate.claims"):
            out.extend(rest)
            inserted = True
    if not inserted:
        sys.exit("the shared SQL creates no idem_gate.claims")
    return opening + out + closing


HEADER = """-- idem_gate %(version)s, managed edition: generated by managed/build.py from
-- idem_gate--1.0.sql, src/sql/ and managed/parts/.  Do not edit: edit the
-- parts and run `python3 managed/build.py`.
--
-- Install (docs/managed.md), as a role that owns the database:
--   psql -v ON_ERROR_STOP=1 -1 -f managed/idem_gate.sql "$DATABASE_URL"
"""


def render(stmts, schema):
    text = "\n".join(s.strip("\n") + "\n" for s in stmts)
    return text.replace("@extschema@", schema)


def outputs():
    stmts = assemble()
    psql = HEADER % {"version": VERSION} + "\\set ON_ERROR_STOP on\nBEGIN;\n\n" + \
        render(stmts, "public") + "\nCOMMIT;\n"
    body = render(stmts, "@extschema@")
    if "$_pgtle_$" in body:
        sys.exit("the managed edition contains the pg_tle quote")
    tle = ("-- idem_gate %s, managed edition, as a pg_tle extension: generated by\n"
           "-- managed/build.py.  Install it with psql as a role granted pgtle_admin, then\n"
           "-- CREATE EXTENSION idem_gate_managed (docs/managed.md).\n"
           "SELECT pgtle.install_extension(\n  'idem_gate_managed',\n  '%s',\n"
           "  'idempotency gate (managed edition): atomic claims with fencing tokens, receipts, canonical JSON',\n"
           "$_pgtle_$\n%s$_pgtle_$\n);\n") % (VERSION, VERSION, body)
    return {"managed/idem_gate.sql": psql, "managed/idem_gate.pg_tle.sql": tle}


def main():
    if "--body" in sys.argv[1:]:
        # the statements alone, API in schema public, for a test that runs
        # them without psql (an isolation spec's setup reads them with
        # pg_read_file())
        sys.stdout.write(render(assemble(), "public"))
        return
    check = "--check" in sys.argv[1:]
    stale = []
    for rel, text in outputs().items():
        path = os.path.join(ROOT, rel)
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            if check:
                stale.append(rel)
            else:
                with open(path, "w") as f:
                    f.write(text)
    if stale:
        print("not up to date (run python3 managed/build.py): " + ", ".join(stale))
        sys.exit(1)


if __name__ == "__main__":
    main()
