#!/usr/bin/env python3
"""Check src/ against the layers that src/README.md declares.

src/README.md's "Layers" table lists idem_gate's layers from the top (the
entry point) down (the base, the JCS toolkit), and the files of each.  This
reads two kinds of arrow between the files of src/: every quoted #include,
and every use of a function or variable that another file defines (a call
arrow from the user to the file that defines the name, read as text: the
definitions are the names that open a line with "(" after a return type
line that is not static, and the ig_/idem_ variables defined at file
scope).  It prints:

  - every file of src/ that the table does not place (a newcomer would not
    find it), and every file the table names that does not exist;
  - every arrow that runs back up (a file including the header of, or using
    a name defined by, a layer above its own), and every circle between
    files (x.c and x.h counted as one unit);
  - the counts, last: "files N, arrows N (includes N, calls N), upward N,
    circles N".

Exits non-zero when a file is unplaced or missing, when there is a circle,
or when more than --max-up arrows (default 1) run back up, the goal the
re-filing set.

    scripts/layers.py [--max-up N] [--src DIR]
"""
import argparse
import os
import re
import sys


def units_of(name):
    """The unit a file belongs to: foo.c and foo.h are one."""
    return re.sub(r"\.(c|h)$", "", name)


def read_layers(readme):
    """[(layer name, [files])] from the Layers table, top first."""
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"^## Layers\n(.*?)^## ", text, re.S | re.M)
    if not m:
        sys.exit("layers: no '## Layers' section in " + readme)
    layers = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] in ("layer", "") or set(cells[0]) <= set("-"):
            continue
        files = []
        # "(each with its header)": every .c named before it has its .h
        before, _, after = cells[1].partition("(each with its header)")
        for part, headers in ((before, bool(after)), (after, False)):
            named = []
            for f in re.findall(r"`([^`]+)`", part):
                if f.startswith("."):
                    # `x.c`/`.h`: the header of the file named before it
                    if named:
                        named.append(units_of(named[-1]) + f)
                    continue
                named.append(f)
            if headers:
                named += [units_of(f) + ".h" for f in named if f.endswith(".c")]
            files += named
        layers.append((cells[0], files))
    return layers


def code_only(text):
    """The text with comments, string and character literals blanked."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def definitions(text):
    """The names a .c file defines for other files: functions whose return
    type line is not static, and ig_/idem_ variables at file scope."""
    names = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"([A-Za-z_]\w*)\(", line)
        # not a macro's use (PG_FUNCTION_INFO_V1(...);), nor what the
        # server calls by name (_PG_init, which compat.h declares for 15)
        if (m and i > 0 and lines[i - 1].strip() and not line.rstrip().endswith(";") and
                not m.group(1).startswith("_PG_") and
                not lines[i - 1].startswith(("static", "#", " ", "\t"))):
            names.add(m.group(1))
            continue
        m = re.match(r"(?!static\b|extern\b|typedef\b|#)[A-Za-z_][\w \t*]*?\b((?:ig|idem)_\w+)\s*(?:=|;|\[)", line)
        if m and "(" not in line.split("=")[0]:
            names.add(m.group(1))
    return names


def call_arrows(src, present):
    """(user, definer) for every name a file uses that another unit's .c
    defines."""
    texts = {f: code_only(open(os.path.join(src, f), encoding="utf-8", errors="replace").read())
             for f in present}
    owner = {}
    for f in present:
        if f.endswith(".c"):
            for name in definitions(texts[f]):
                owner[name] = f
    if not owner:
        return set()
    pat = re.compile(r"\b(" + "|".join(sorted(map(re.escape, owner), key=len, reverse=True)) + r")\b")
    arrows = set()
    for f in present:
        for name in set(pat.findall(texts[f])):
            d = owner[name]
            if units_of(d) != units_of(f):
                arrows.add((f, d))
    return arrows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--max-up", type=int, default=1)
    args = ap.parse_args()
    src = os.path.normpath(args.src)

    layers = read_layers(os.path.join(src, "README.md"))
    rank = {}
    for i, (name, files) in enumerate(layers):
        for f in files:
            rank[f] = (i, name)
    present = sorted(f for f in os.listdir(src) if f.endswith((".c", ".h")))
    bad = 0
    for f in present:
        if f not in rank:
            print(f"unplaced: src/{f} is in no layer of src/README.md")
            bad += 1
    for f in sorted(rank):
        if f not in present:
            print(f"missing: src/README.md places {f}, which src/ lacks")
            bad += 1

    arrows = set()
    for f in present:
        for line in open(os.path.join(src, f), encoding="utf-8", errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m and m.group(1) in present and m.group(1) != f:
                arrows.add((f, m.group(1)))

    includes = set(arrows)
    calls = call_arrows(src, present)
    arrows |= calls

    upward = 0
    for a, b in sorted(arrows):
        if a in rank and b in rank and rank[b][0] < rank[a][0]:
            # an include names a header, a use the .c that defines the name
            how = "includes" if (a, b) in includes else "uses a name of"
            print(f"upward: src/{a} ({rank[a][1]}) {how} src/{b} ({rank[b][1]})")
            upward += 1

    # circles between units: strongly connected components of two or more
    graph = {}
    for a, b in arrows:
        ua, ub = units_of(a), units_of(b)
        if ua != ub:
            graph.setdefault(ua, set()).add(ub)
            graph.setdefault(ub, set())
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    for c in comps:
        print("circle: " + " -> ".join(c))

    print(f"files {len(present)}, arrows {len(arrows)} (includes {len(includes)}, calls {len(calls)}), "
          f"upward {upward}, circles {len(comps)}")
    if bad or comps or upward > args.max_up:
        sys.exit(1)


if __name__ == "__main__":
    main()
