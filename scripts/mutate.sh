#!/usr/bin/env bash
# Mutation testing of idem_gate's C code: how many small, plausible bugs do
# the tests catch?
#
#   PG_CONFIG=/opt/pg15-private/.../pg_config scripts/mutate.sh [options]
#
# Generates single-operator mutants of src/*.c from a seed: comparison
# flips (< <= > >= == !=), && <-> ||, removal of !, binary + <-> -,
# += <-> -=, ++ <-> --, true <-> false, and integer literals +1/-1.
# Comments, string and character literals, preprocessor lines, array
# subscripts, the argument lists of ereport/elog (error texts) and of
# Assert (compiled out of the builds PostgreSQL's packages ship) are never
# mutated.  For each mutant, in order: apply it, build (a mutant that does
# not compile is skipped and does not count), install into PG_CONFIG, run the
# layer, revert.  A mutant is killed when the layer fails (or times out).
#
# The source tree is never modified: mutants are applied to a copy of the
# repository in a scratch directory, and the copy's own scripts run the
# layer.  PG_CONFIG must name a private PostgreSQL installation (idem_gate
# is installed into it for every mutant); at the end the unmutated code is
# installed there again.
#
# Options:
#   --seed N       mutant selection seed (default: random; always printed)
#   --count N      compiling mutants to run (default 30)
#   --layer CMD    what to run: "quick" (default, scripts/quick.sh), "tap"
#                  (the Perl TAP tests, test/t/*.pl), "full" (quick, then
#                  the Perl TAP tests: every layer that runs on PG_CONFIG's
#                  installation alone, on private sockets, without the
#                  system server or network tools), "citus" (the short
#                  Citus suite, test/suites/70_citus.sh: PG_CONFIG's
#                  installation must have Citus or its source at hand, for
#                  the mutants of src/citus.c), "all" (scripts/test.sh on
#                  PG_CONFIG's major: every suite, about 8 minutes a
#                  mutant; ports 55432 and 26801-26810), or any shell
#                  command, run in the copy's root with PG_CONFIG exported
#                  and its bindir first on PATH; it must exit non-zero when
#                  a test fails
#   --timeout S    seconds before a layer run counts as killed (default 300,
#                  1200 for tap, full and citus, 2400 for all)
#   --files GLOB   files to mutate (default src/*.c)
#   --replay FILE  run exactly the mutants listed in FILE (one JSON object a
#                  line, as written to the survivors file) instead of
#                  drawing new ones: e.g. to run the survivors of a --quick
#                  run through a slower layer
#   --list         print how many mutants each file offers, and exit
#
# Prints the seed, one line per mutant, each survivor as file:line with its
# diff, and the score; survivors listed in test/mutation/equivalent.jsonl
# (the mutants no input can tell from the code, each with why: see
# docs/dev/mutation.md) are marked, and a second score leaves them out.
# Survivors are also written, one JSON object a line, to
# mutate-survivors-<seed>.jsonl in the current directory, for --replay.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$ROOT" "$@" <<'PY'
import argparse, difflib, glob, json, os, random, re, shutil, signal, subprocess, sys, tempfile, time

ROOT = sys.argv[1]
ap = argparse.ArgumentParser(prog="mutate.sh")
ap.add_argument("--seed", type=int)
ap.add_argument("--count", type=int, default=30)
ap.add_argument("--layer", default="quick")
ap.add_argument("--timeout", type=int)
ap.add_argument("--files", default="src/*.c")
ap.add_argument("--replay")
ap.add_argument("--list", action="store_true")
args = ap.parse_args(sys.argv[2:])

# ---------------------------------------------------------------- scanning

def mask(src):
    """The source with comments, string/char literals and preprocessor
    lines replaced by spaces (newlines kept), so offsets stay valid."""
    out = list(src)
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            # a preprocessor directive, with its continuation lines
            j = i
            while j < n:
                if src[j] == "\n" and src[j - 1] != "\\":
                    break
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        line_start = False
        if c == "\n":
            line_start = True
            i += 1
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)

def blank_calls(m, names):
    """Blank the parenthesised argument lists of calls to names (error
    reports: their arguments are texts and codes, not logic)."""
    out = list(m)
    for mt in re.finditer(r"\b(?:%s)\s*\(" % "|".join(names), m):
        depth, j = 0, mt.end() - 1
        while j < len(m):
            if m[j] == "(":
                depth += 1
            elif m[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        for k in range(mt.start(), j + 1):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)

def blank_subscripts(m):
    """Blank integer literals directly inside [...]: changing an array's
    size or a constant subscript gives memory corruption, not a logic
    mutant."""
    return re.sub(r"\[\s*\d+\s*\]", lambda x: " " * len(x.group(0)), m)

SWAPS = {
    "<": ["<=", ">="], "<=": ["<", ">"], ">": [">=", "<="], ">=": [">", "<"],
    "==": ["!="], "!=": ["=="], "&&": ["||"], "||": ["&&"],
    "+=": ["-="], "-=": ["+="], "++": ["--"], "--": ["++"],
}
TOKEN = re.compile(r"<<=|>>=|<<|>>|->|\+\+|--|\+=|-=|<=|>=|==|!=|&&|\|\||[<>!+\-]"
                   r"|\b(?:true|false)\b|\b0[xX][0-9a-fA-F]+[uUlL]*\b|\b\d+[uUlL]*\b(?!\.)"
                   r"|[A-Za-z_]\w*|\d+\.\d*|\S")

def candidates(path):
    src = open(path, encoding="utf-8").read()
    m = blank_subscripts(blank_calls(mask(src), ["ereport", "elog", "GUC_check_errdetail",
                                                  "GUC_check_errmsg", "GUC_check_errhint",
                                                  "Assert", "StaticAssertDecl",
                                                  "StaticAssertStmt"]))
    found = []
    prev = None
    for t in TOKEN.finditer(m):
        tok, pos = t.group(0), t.start()
        kind_prev = prev
        prev = tok
        reps = []
        if tok in SWAPS:
            reps = SWAPS[tok]
        elif tok == "!":
            reps = [""]
        elif tok in ("+", "-"):
            # binary only: after an operand
            if (kind_prev is not None and re.match(r"[\w)\]]", kind_prev[-1])
                    and kind_prev not in ("return", "case", "sizeof")):
                reps = ["-" if tok == "+" else "+"]
        elif tok in ("true", "false"):
            reps = ["false" if tok == "true" else "true"]
        elif re.match(r"0[xX]|\d", tok) and not re.match(r"\d+\.", tok):
            mm = re.match(r"(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)$", tok)
            if mm:
                v = int(mm.group(1), 0)
                hexa = mm.group(1).lower().startswith("0x")
                for d in (1, -1):
                    if v + d >= 0:
                        reps.append((("0x%X" if mm.group(1)[2:].isupper() or mm.group(1)[2:].isdigit() else "0x%x") % (v + d)
                                     if hexa else str(v + d)) + mm.group(2))
        for r in reps:
            found.append({"file": os.path.relpath(path, ROOT), "offset": pos,
                          "orig": tok, "repl": r,
                          "line": src.count("\n", 0, pos) + 1})
    return src, found

def line_and_column(src, offset):
    """The text of the line holding offset, stripped, where the token at
    offset starts in it, and the text of the nearest non-blank line above
    (for the register's entries whose line occurs more than once)."""
    start = src.rfind("\n", 0, offset) + 1
    end = src.find("\n", offset)
    line = src[start:end if end >= 0 else len(src)]
    lead = len(line) - len(line.lstrip())
    above = [l.strip() for l in src[:start].splitlines() if l.strip()]
    return line.strip(), offset - start - lead, above[-1] if above else ""

def load_equivalents():
    """The register of equivalent mutants: (file, the source line's text
    stripped, where the token starts in it, original, replacement) -> the
    entries (why, and the line above when the entry names it).  By the
    line's text, not its number, so that the register survives edits
    elsewhere in the file."""
    known = {}
    path = os.path.join(ROOT, "test", "mutation", "equivalent.jsonl")
    if os.path.exists(path):
        for l in open(path, encoding="utf-8"):
            if l.strip():
                e = json.loads(l)
                known.setdefault((e["file"], e["code"], e["at"], e["orig"], e["repl"]), []).append(e)
    return known

def equivalent_why(known, r, src):
    """Why the survivor r is equivalent, or None."""
    code, at, above = line_and_column(src, r["offset"])
    for e in known.get((r["file"], code, at, r["orig"], r["repl"]), []):
        if e.get("above") in (None, above):
            return e["why"]
    return None

# ---------------------------------------------------------------- running

RUNNING = []

def stop_group(p):
    """TERM the process group of p (it runs its own cleanup), then KILL."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    except ProcessLookupError:
        pass

def sh(cmd, cwd, env, timeout=None, log=None):
    """Run cmd in its own process group; on timeout, TERM then KILL it."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str),
                         stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT,
                         start_new_session=True)
    RUNNING.append(p)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(p)
        return None
    except KeyboardInterrupt:
        stop_group(p)
        raise
    finally:
        RUNNING.remove(p)

def stop_leftover_servers(scratch):
    """Servers a killed layer run left behind in our scratch directory:
    stop them by the pid in their postmaster.pid."""
    for pidfile in glob.glob(os.path.join(scratch, "tmp", "*", "**", "postmaster.pid"), recursive=True):
        try:
            pid = int(open(pidfile).readline())
            os.kill(pid, signal.SIGQUIT)
        except (OSError, ValueError):
            pass

def main():
    pg_config = os.environ.get("PG_CONFIG")
    files = sorted(glob.glob(os.path.join(ROOT, args.files)))
    pool = []
    sources = {}
    for f in files:
        src, c = candidates(f)
        sources[os.path.relpath(f, ROOT)] = src
        pool += c
    if args.list:
        for f in sources:
            print("%-24s %5d mutants" % (f, sum(1 for c in pool if c["file"] == f)))
        print("%-24s %5d mutants" % ("total", len(pool)))
        return 0
    if not pg_config:
        print("mutate.sh: set PG_CONFIG to a private PostgreSQL installation's pg_config", file=sys.stderr)
        return 2
    bindir = subprocess.check_output([pg_config, "--bindir"], text=True).strip()

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    if args.replay:
        order = [json.loads(l) for l in open(args.replay) if l.strip()]
        target = len(order)
    else:
        order = pool[:]
        random.Random(seed).shuffle(order)
        target = args.count
    print("seed %d: %d candidate mutants in %d files, running %d compiling ones, layer: %s"
          % (seed, len(pool), len(files), target, args.layer), flush=True)

    scratch = tempfile.mkdtemp(prefix="idem_gate_mutate.")
    os.chmod(scratch, 0o755)
    copy = os.path.join(scratch, "tree")
    os.makedirs(copy)
    subprocess.check_call("tar -C '%s' --exclude=.git --exclude=node_modules --exclude='tmp_*' "
                          "--exclude='*.o' --exclude='*.so' --exclude='*.gc*' -cf - . | tar -C '%s' -xf -"
                          % (ROOT, copy), shell=True)
    os.makedirs(os.path.join(scratch, "tmp"))
    os.chmod(os.path.join(scratch, "tmp"), 0o1777)
    env = dict(os.environ, PG_CONFIG=pg_config, PATH=bindir + ":" + os.environ["PATH"],
               TMPDIR=os.path.join(scratch, "tmp"))
    make = ["make", "-s", "PG_CONFIG=" + pg_config, "with_llvm=no"]
    tap = ("chown -R postgres . && runuser -u postgres -- "
           "make -s installcheck REGRESS= ISOLATION= PG_CONFIG=\"$PG_CONFIG\"")
    # the Citus suite ends with its count; it stops early with a non-zero
    # status, but a failed check alone does not
    citus = ("bash test/suites/70_citus.sh > citus.log 2>&1; rc=$?; cat citus.log; "
             "[ $rc = 0 ] && tail -1 citus.log | grep -Eq '^[1-9][0-9]* passed, 0 failed$'")
    # every suite of the test command on PG_CONFIG's major, the stress,
    # model, vector, n8n, torture and Citus suites included
    major = re.sub(r"^PostgreSQL (\d+).*", r"\1",
                   subprocess.check_output([pg_config, "--version"], text=True).strip())
    layer = {"quick": "scripts/quick.sh",
             "tap": tap,
             "full": "scripts/quick.sh && " + tap,
             "citus": citus,
             "all": "PG_MAJORS=%s scripts/test.sh" % major,
             }.get(args.layer, args.layer)
    if args.timeout is None:
        args.timeout = {"tap": 1200, "full": 1200, "citus": 1200, "all": 2400}.get(args.layer, 300)

    # the unmutated code must build and pass, or every mutant looks killed
    if sh(make, copy, env) != 0:
        print("the unmutated code does not build"); return 1
    print("checking that the unmutated code passes the layer ...", flush=True)
    t0 = time.time()
    with open(os.path.join(scratch, "baseline.log"), "w") as log:
        rc = sh(make + ["install"], copy, env, log=log)
        rc = rc or sh(layer, copy, env, args.timeout, log)
    if rc != 0:
        print("the unmutated code fails the layer (see %s/baseline.log)" % scratch); return 1
    print("baseline passes in %.1f s" % (time.time() - t0), flush=True)

    current = {"file": None}

    def restore():
        f = current["file"]
        if f:
            with open(os.path.join(copy, f), "w", encoding="utf-8") as o:
                o.write(sources[f])
            current["file"] = None

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    results = []
    skipped = 0
    survivors_path = os.path.abspath("mutate-survivors-%d.jsonl" % seed)
    try:
        for mu in order:
            if len(results) >= target:
                break
            src = sources.get(mu["file"])
            if src is None or src[mu["offset"]:mu["offset"] + len(mu["orig"])] != mu["orig"]:
                print("  (mutant no longer applies: %s:%d %s)" % (mu["file"], mu["line"], mu["orig"]))
                continue
            mutated = src[:mu["offset"]] + mu["repl"] + src[mu["offset"] + len(mu["orig"]):]
            current["file"] = mu["file"]
            with open(os.path.join(copy, mu["file"]), "w", encoding="utf-8") as o:
                o.write(mutated)
            label = "%s:%d  %s -> %s" % (mu["file"], mu["line"], mu["orig"], mu["repl"] or "(removed)")
            if sh(make, copy, env) != 0:
                skipped += 1
                restore()
                continue
            t0 = time.time()
            logname = os.path.join(scratch, "mutant-%d.log" % (len(results) + 1))
            with open(logname, "w") as log:
                rc = sh(make + ["install"], copy, env, log=log)
                if rc == 0:
                    rc = sh(layer, copy, env, args.timeout, log)
            if rc is None:
                stop_leftover_servers(scratch)
                verdict = "killed (timeout)"
            else:
                verdict = "killed" if rc != 0 else "SURVIVED"
            restore()
            a = src.splitlines(True)
            b = mutated.splitlines(True)
            diff = "".join(difflib.unified_diff(a, b, mu["file"], mu["file"] + " (mutant)", n=0))
            results.append(dict(mu, verdict=verdict, diff=diff))
            print("[%2d/%d] %-44s %s (%.0f s)" % (len(results), target, label, verdict, time.time() - t0),
                  flush=True)
    except KeyboardInterrupt:
        print("interrupted")
        stop_leftover_servers(scratch)
    finally:
        restore()
        # leave the unmutated code installed
        sh(make, copy, env)
        sh(make + ["install"], copy, env)

    survived = [r for r in results if r["verdict"] == "SURVIVED"]
    known = load_equivalents()
    for r in survived:
        r["why"] = equivalent_why(known, r, sources[r["file"]])
    with open(survivors_path, "w") as o:
        for r in survived:
            o.write(json.dumps({k: r[k] for k in ("file", "offset", "orig", "repl", "line")}) + "\n")
    print()
    print("seed %d, layer %s: %d survivors" % (seed, args.layer, len(survived)))
    for r in survived:
        print("-- %s:%d%s" % (r["file"], r["line"], "  (equivalent: %s)" % r["why"] if r["why"] else ""))
        print(r["diff"].rstrip())
    killed = len(results) - len(survived)
    print()
    print("score: %d of %d compiling mutants killed (%.0f%%); %d did not compile; survivors in %s"
          % (killed, len(results), 100.0 * killed / max(len(results), 1), skipped, survivors_path))
    equivalent = sum(1 for r in survived if r["why"])
    real = len(results) - equivalent
    print("%d survivors are known equivalent: %d of the other %d killed (%.0f%%)"
          % (equivalent, killed, real, 100.0 * killed / max(real, 1)))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0

sys.exit(main())
PY
