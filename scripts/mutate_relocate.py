#!/usr/bin/env python3
"""Carry the mutants a seed drew at an older tree onto a newer one.

A seed of scripts/mutate.sh draws among the candidate tokens of the files as
they are, so once code moves the same seed draws other mutants.  To compare
the tests before and after a move on the same mutants, this reads the log of
a mutate.sh run at the older tree, draws that run's mutants again (same
seed, same order), and finds each one in the newer tree:

  - the same source line (stripped), the same column of the token, the same
    change; where several lines match, the one whose preceding text is most
    alike;
  - failing that, the line of the newer tree whose text before and after the
    token is most alike (a renamed identifier), printed for review;
  - failing that, nothing: the code is gone, and the line says so.

It writes the mutants it found to relocated-SEED.jsonl, for
`scripts/mutate.sh --replay relocated-SEED.jsonl` at the newer tree, and
prints one line a mutant: the old place, the old verdict, the new place.

    scripts/mutate_relocate.py OLD_TREE NEW_TREE SEED OLD_RUN_LOG

Headers are not mutated by default; a mutant whose code moved into a header
is reported as gone, and can be added by hand with its header listed in
--files of the replay.
"""
import difflib
import glob
import json
import os
import random
import re
import sys


def load_mutate(root):
    """The functions of root's scripts/mutate.sh (its Python part)."""
    text = open(os.path.join(root, "scripts", "mutate.sh"), encoding="utf-8").read()
    py = text.split("<<'PY'\n", 1)[1].rsplit("\nPY", 1)[0]
    py = py.replace("sys.exit(main())", "")
    ns = {}
    saved = sys.argv
    sys.argv = ["mutate.sh", root]
    try:
        exec(compile(py, os.path.join(root, "scripts", "mutate.sh"), "exec"), ns)
    finally:
        sys.argv = saved
    return ns


def pool_of(ns, root):
    """Every candidate mutant of root's src/*.c, and the files' texts."""
    pool, sources = [], {}
    for path in sorted(glob.glob(os.path.join(root, "src", "*.c"))):
        src, cands = ns["candidates"](path)
        sources[os.path.relpath(path, root)] = src
        pool += cands
    return pool, sources


def ran_mutants(log):
    """(file, line, orig, repl, verdict) of each mutant the log reports."""
    out = []
    pat = re.compile(r"\[\s*\d+/\d+\] (\S+):(\d+)\s+(\S+) -> (\S+)\s+(killed.*?|SURVIVED) \(")
    for line in open(log, encoding="utf-8"):
        m = pat.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3), m.group(4), m.group(5)))
    return out


def before(src, offset, width=400):
    """The text above a token's line, to tell identical lines apart."""
    start = src.rfind("\n", 0, offset)
    return src[max(0, start - width):max(0, start)]


def similar(a, b):
    return difflib.SequenceMatcher(None, a, b).ratio()


def relocate(O, osrc, N, npool, nsrc, mu):
    """The newer tree's candidate for mutant mu, how it was found, and its line."""
    code, at, above = O["line_and_column"](osrc[mu["file"]], mu["offset"])
    # the same change in the newer tree, each with its line, column and the line above
    same = [(c,) + tuple(N["line_and_column"](nsrc[c["file"]], c["offset"]))
            for c in npool if c["orig"] == mu["orig"] and c["repl"] == mu["repl"]]
    hits = [c for c, c_code, c_at, _ in same if c_code == code and c_at == at]
    if len(hits) == 1:
        return hits[0], "same line", code
    if len(hits) > 1:
        ctx = before(osrc[mu["file"]], mu["offset"])
        ranked = sorted(hits, key=lambda c: -similar(ctx, before(nsrc[c["file"]], c["offset"])))
        return ranked[0], "same line, %d alike: nearest context" % len(hits), code
    pre, post = code[:at], code[at + len(mu["orig"]):]
    best = []
    for c, c_code, c_at, c_above in same:
        score = (min(similar(pre, c_code[:c_at]), similar(post, c_code[c_at + len(c["orig"]):]))
                 + 0.2 * similar(above, c_above))
        best.append((score, c, c_code))
    best.sort(key=lambda b: -b[0])
    if best and best[0][0] >= 0.8 and (len(best) == 1 or best[1][0] < best[0][0] - 0.05):
        return best[0][1], "renamed: " + best[0][2], code
    return None, "gone", code


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    old, new, seed, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    O, N = load_mutate(old), load_mutate(new)
    opool, osrc = pool_of(O, old)
    npool, nsrc = pool_of(N, new)
    order = opool[:]
    random.Random(seed).shuffle(order)
    draw = iter(order)
    found = []
    for f, line, orig, repl, verdict in ran_mutants(log):
        for mu in draw:
            if (mu["file"], mu["line"], mu["orig"], mu["repl"] or "(removed)") == (f, line, orig, repl):
                break
        else:
            sys.exit("the draw of seed %d at %s does not give %s:%d; is the log of this tree?" % (seed, old, f, line))
        c, how, code = relocate(O, osrc, N, npool, nsrc, mu)
        print("%s:%d %s -> %s  %s  =>  %s  (%s)  | %s"
              % (f, line, orig, repl, verdict, "%s:%d" % (c["file"], c["line"]) if c else "-", how, code[:60]))
        if c:
            found.append(c)
    out = "relocated-%d.jsonl" % seed
    with open(out, "w") as o:
        for c in found:
            o.write(json.dumps({k: c[k] for k in ("file", "offset", "orig", "repl", "line")}) + "\n")
    print("%d mutants carried over to %s" % (len(found), out))


if __name__ == "__main__":
    main()
