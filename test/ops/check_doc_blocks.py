#!/usr/bin/env python3
"""The documentation's runnable blocks are safe to paste as they stand.

Every block marked <!-- run: NAME --> in a Markdown file of the repository
(the blocks test/n8n/e2e.sh runs against a real n8n) is checked here without
n8n:

  - no address is written into a block: an http(s) URL appears only as the
    default of a shell variable, ${VAR:-http://...}, as the text a sed
    substitution looks for (the placeholder it replaces), or on loopback;
  - a sed substitution writes only a shell variable, never a literal value;
  - every variable a block of docs/n8n.md reads is in that page's table of
    variables;
  - each block that edits files under examples/ is run with bash on a copy
    of examples/: with none of the variables set it either leaves every
    file byte for byte as it was (the variables it reads have working
    defaults) or stops with an error that names the variable and leaves
    every file as it was (it needs a value of the reader's); with the
    variables set, it writes their values and leaves none of the
    placeholders it replaces.

    python3 test/ops/check_doc_blocks.py [REPO]

Ends with one line "N passed, N failed"; the exit status is non-zero on any
failure.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))
MARK = re.compile(r'^\s*<!--\s*run:\s*([\w.-]+)\s*-->\s*$')
FENCE = re.compile(r'^(\s*)(```+)')
VAR = re.compile(r'\$\{([A-Z_][A-Z0-9_]*)(:[-?])')
# s|PATTERN|REPLACEMENT| with any one-character delimiter after sed's s
SED_S = re.compile(r"""(?<![\w$])s([|#,@])((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1g?""")

passed = failed = 0


def ok(what):
    global passed
    passed += 1
    print(f'ok - {what}')


def notok(what, detail=None):
    global failed
    failed += 1
    print(f'not ok - {what}')
    if detail:
        for line in str(detail).rstrip().split('\n'):
            print(f'# {line}')


def blocks(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        f = FENCE.match(lines[i + 1] if i + 1 < len(lines) else '')
        if not f:
            continue
        indent = len(f.group(1))
        body = []
        for j in range(i + 2, len(lines)):
            if re.match(r'^\s*```+\s*$', lines[j]):
                break
            body.append(lines[j][min(indent, len(lines[j]) - len(lines[j].lstrip())):])
        out.append((m.group(1), '\n'.join(body) + '\n'))
    return out


def expansions(text):
    """Remove ${...} expansions (with nested ones), return the rest."""
    out, i = [], 0
    while i < len(text):
        if text.startswith('${', i):
            depth, j = 0, i
            while j < len(text):
                if text.startswith('${', j):
                    depth += 1
                    j += 2
                    continue
                if text[j] == '}':
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append('$V')
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return ''.join(out)


docs = []
for d, dirs, files in os.walk(ROOT):
    dirs[:] = [x for x in dirs if x not in ('.git', 'node_modules') and not x.startswith('tmp_')]
    for f in files:
        if f.endswith('.md'):
            docs.append(os.path.join(d, f))
docs.sort()

n8n_md = os.path.join(ROOT, 'docs', 'n8n.md')
n8n_text = open(n8n_md, encoding='utf-8').read() if os.path.exists(n8n_md) else ''

for path in docs:
    rel = os.path.relpath(path, ROOT)
    for name, body in blocks(path):
        where = f'{rel} run:{name}'
        # addresses: only as a variable's default or as what sed looks for
        seds = list(SED_S.finditer(body))
        rest = expansions(SED_S.sub(lambda m: 's|P|' + m.group(3) + '|', body))
        # loopback addresses are values that work anywhere (n8n-offline's
        # closed port), not placeholders
        urls = [u for u in re.findall(r'https?://\S+', rest)
                if not re.match(r'https?://(127\.0\.0\.1|localhost)[:/]', u)]
        if urls:
            notok(f'{where} writes no address of its own', 'found: ' + ' '.join(urls))
        else:
            ok(f'{where} writes no address of its own')
        literal = [m.group(0) for m in seds if not re.fullmatch(r'\$\{[^}]*(\}[^}]*)*\}', m.group(3))]
        if seds:
            if literal:
                notok(f'{where}: its sed writes only a shell variable', 'literal: ' + ' '.join(literal))
            else:
                ok(f'{where}: its sed writes only a shell variable')
        names = sorted(set(v for v, _ in VAR.findall(body)))
        if rel == os.path.join('docs', 'n8n.md'):
            missing = [v for v in names if f'| `{v}` |' not in n8n_text]
            if missing:
                notok(f'{where}: its variables are in the table of docs/n8n.md', 'missing: ' + ' '.join(missing))
            elif names:
                ok(f'{where}: its variables ({" ".join(names)}) are in the table of docs/n8n.md')
        # run the blocks that edit examples/ on a copy
        if not (re.search(r'\bsed\s+-i\b', body) and 'examples/' in body):
            continue
        required = sorted(set(v for v, op in VAR.findall(body) if op == ':?'))
        placeholders = sorted(set(m.group(2).replace('\\', '') for m in seds))
        work = tempfile.mkdtemp(prefix='idem_doc_blocks.')
        try:
            shutil.copytree(os.path.join(ROOT, 'examples'), os.path.join(work, 'examples'))
            files = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(work, 'examples')) for f in fs]
            before = {f: open(f, 'rb').read() for f in files}
            env = {k: v for k, v in os.environ.items() if k not in names}
            r = subprocess.run(['bash', '-euo', 'pipefail', '-c', body], cwd=work, env=env,
                               capture_output=True, text=True)
            changed = [os.path.relpath(f, work) for f in files if open(f, 'rb').read() != before[f]]
            if required:
                if r.returncode != 0 and not changed and any(v in r.stderr for v in required):
                    ok(f'{where} pasted without {" ".join(required)} stops, naming it, and changes nothing')
                else:
                    notok(f'{where} pasted without {" ".join(required)} stops, naming it, and changes nothing',
                          f'exit {r.returncode}, changed: {changed}, stderr: {r.stderr}')
            else:
                if r.returncode == 0 and not changed:
                    ok(f'{where} pasted without its variables keeps the working values (no file changed)')
                else:
                    notok(f'{where} pasted without its variables keeps the working values (no file changed)',
                          f'exit {r.returncode}, changed: {changed}, stderr: {r.stderr}')
            values = {v: f'https://{v.lower().replace("_", "-")}.test/x' for v in names}
            env.update(values)
            r = subprocess.run(['bash', '-euo', 'pipefail', '-c', body], cwd=work, env=env,
                               capture_output=True, text=True)
            edited = [os.path.join(work, t) for t in set(re.findall(r'examples/[\w./-]+', body))]
            text = ''.join(open(f, encoding='utf-8', errors='replace').read() for f in edited if os.path.isfile(f))
            left = [p for p in placeholders if p in text]
            # a variable whose value another takes precedence over is not written
            unwritten = [v for v in names if values[v] not in text and
                         not re.search(r'\$\{[A-Z0-9_]+:-\$\{' + v + r'\b', body)]
            if r.returncode == 0 and not left and not unwritten:
                ok(f'{where} with its variables set writes them in place of {" ".join(placeholders)}')
            else:
                notok(f'{where} with its variables set writes them in place of {" ".join(placeholders)}',
                      f'exit {r.returncode}, placeholders left: {left}, values not written: {unwritten}, stderr: {r.stderr}')
        finally:
            shutil.rmtree(work)

print(f'{passed} passed, {failed} failed')
sys.exit(1 if failed else 0)
