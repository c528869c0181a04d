#!/usr/bin/env python3
"""Check the relative links of every Markdown file of the repository:

  check_links.py [ROOT]

Reads every *.md file under ROOT (default: the repository this script is
in), outside node_modules and .git, and checks that each relative link
([text](path), ![alt](path), [ref]: path) points to a file or directory
that exists, and that a #anchor names a heading of the target file (as
GitHub makes its slugs: lower case, punctuation dropped, spaces to
hyphens, -1, -2 ... for repeated headings) or an HTML anchor
(<a name="..."> or id="...").  Links to other sites (http:, https:,
mailto:, ...) are not followed.  Code, fenced or inline, is not read for
links or headings.

Prints one "not ok" line per dead link, one "ok" line per file, and ends
with "N passed, N failed", counting links; exits non-zero on any dead link.
"""
import os
import re
import sys
import urllib.parse

SKIP_DIRS = {"node_modules", ".git"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
# [text](target) and ![alt](target); target may be <...> and carry a title
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(root):
    """Every *.md file under root, outside SKIP_DIRS, sorted."""
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in files:
            if f.endswith(".md"):
                found.append(os.path.join(top, f))
    return sorted(found)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            continue
        yield n, line


def heading_text(raw):
    """A heading's text as GitHub renders it: markup dropped, code kept."""
    s = CODE_SPAN.sub(lambda m: m.group(2), raw)
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)      # links, images
    s = re.sub(r"<[^>]+>", "", s)                           # inline HTML
    s = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", s)            # emphasis
    return s.strip()


def slug(text):
    """GitHub's anchor for a heading's text."""
    s = text.lower()
    s = "".join(c for c in s if c.isalnum() or c in " -_")
    return s.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors a Markdown file defines."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = set()
    seen = {}
    previous = None
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        title = None
        if m:
            title = heading_text(m.group(2))
        elif previous is not None and previous.strip() and SETEXT.match(line) \
                and not HEADING.match(previous):
            title = heading_text(previous)
        if title is not None:
            base = slug(title)
            k = seen.get(base, 0)
            found.add(base if k == 0 else "%s-%d" % (base, k))
            seen[base] = k + 1
        for a in HTML_ANCHOR.findall(line):
            found.add(a)
        previous = line
    cache[path] = found
    return found


def links(text):
    """(line number, target) of every link outside code."""
    for n, line in prose_lines(text):
        bare = CODE_SPAN.sub("", line)
        for m in INLINE.finditer(bare):
            yield n, m.group(1)
        m = REFDEF.match(bare)
        if m:
            yield n, m.group(1)


def check_link(root, source, target):
    """None if the link works, else why not."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if SCHEME.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    path = urllib.parse.unquote(path)
    anchor = urllib.parse.unquote(anchor)
    if path == "":
        dest = source
    elif path.startswith("/"):
        dest = os.path.normpath(os.path.join(root, path.lstrip("/")))
    else:
        dest = os.path.normpath(os.path.join(os.path.dirname(source), path))
    if not os.path.exists(dest):
        return "no such file: %s" % os.path.relpath(dest, root)
    if anchor and dest.endswith(".md") and os.path.isfile(dest):
        if anchor.lower() not in {a.lower() for a in anchors(dest)}:
            return "no heading #%s in %s" % (anchor, os.path.relpath(dest, root))
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    passed = failed = 0
    for source in markdown_files(root):
        with open(source, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(source, root)
        bad = 0
        count = 0
        for n, target in links(text):
            count += 1
            why = check_link(root, source, target)
            if why is None:
                passed += 1
            else:
                failed += 1
                bad += 1
                print("not ok - %s:%d: %s (%s)" % (rel, n, target, why))
        if bad == 0:
            print("ok - %s: %d links" % (rel, count))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
