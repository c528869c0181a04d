#!/usr/bin/env python3
"""docs/inbox-without-n8n.md works as written, against a real server.

Every block of the runbook marked <!-- run: NAME --> is run, in the order of
the page, as an operator would paste it:

  - on a scratch database (created here, with idem_gate), as the server's
    superuser: the operator role of docs/n8n.md (its run:operator-role
    block) and the runbook's run:runbook-dba block, with the role names
    made unique to this run and the password change-me replaced;
  - claims are filled into each reason of the inbox (needs_review, stuck,
    failing) of the granted workflows orders and crm, and of a workflow of
    another team (billing), beside claims that are not in the inbox;
  - run:runbook-connect is run with bash as the person's login, its psql
    reading every other block in order (one session, as a person would
    paste them, ON_ERROR_STOP on); the list is run again for its second
    page and with each of its filters;
  - then the outcomes are checked as the superuser: the pages, the filters,
    the decided claims left the inbox in the states the decisions name,
    every audit row names the person as actor and as session role, the
    other team's workflow was never shown, and the person can neither see
    it nor UPDATE idem_gate.claims.

    python3 test/ops/check_runbook.py [REPO] [--doc FILE]

Needs psql and a server reachable through the libpq variables (PGHOST,
PGPORT, PGUSER a superuser). Ends with one line "N passed, N failed"; the
exit status is non-zero on any failure.
"""
import os
import re
import subprocess
import sys
import tempfile

args = [a for a in sys.argv[1:]]
doc_path = None
if '--doc' in args:
    i = args.index('--doc')
    doc_path = args[i + 1]
    del args[i:i + 2]
ROOT = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), '..', '..'))
DOC = doc_path or os.path.join(ROOT, 'docs', 'inbox-without-n8n.md')
MARK = re.compile(r'^\s*<!--\s*run:\s*([\w.-]+)\s*-->\s*$')

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
        for line in str(detail).rstrip().split('\n')[-40:]:
            print(f'# {line}')


def check(cond, what, detail=None):
    (ok if cond else notok)(what, *(() if cond else (detail,)))
    return cond


def finish():
    print(f'{passed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


def blocks(path):
    """[(name, lang, body)] in the page's order, as doc_block.mjs reads them."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        f = re.match(r'^(\s*)(```+)(\w*)', lines[i + 1] if i + 1 < len(lines) else '')
        if not f:
            raise SystemExit(f'{path}:{i + 1}: run:{m.group(1)} is not followed by a fenced block')
        indent = len(f.group(1))
        body = []
        for j in range(i + 2, len(lines)):
            if re.match(r'^\s*```+\s*$', lines[j]):
                break
            body.append(lines[j][min(indent, len(lines[j]) - len(lines[j].lstrip())):])
        out.append((m.group(1), f.group(3), '\n'.join(body) + '\n'))
    return out


def psql(sql, db=None, user=None, password=None, check_rc=True):
    env = dict(os.environ)
    if db:
        env['PGDATABASE'] = db
    if user:
        env['PGUSER'] = user
    if password:
        env['PGPASSWORD'] = password
    r = subprocess.run(['psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-f', '-'],
                       input=sql, env=env, capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f'psql failed: {r.stderr}\n{sql}')
    return r


tag = str(os.getpid())
DB = f'idem_runbook_{tag}'
OPS = f'idem_rb_inbox_{tag}'
PERSON = f'idem_rb_alice_{tag}'
PASSWORD = 'rb-' + os.urandom(8).hex()


def local(text):
    """The docs' names, made this run's: the roles and the password."""
    text = re.sub(r'\bn8n_inbox\b', OPS, text)
    text = re.sub(r'\balice\b', PERSON, text)
    return text.replace("'change-me'", f"'{PASSWORD}'")


try:
    doc = blocks(DOC)
except (OSError, SystemExit) as e:
    notok('the runbook is readable', e)
    finish()
n8n_blocks = {n: b for n, _, b in blocks(os.path.join(ROOT, 'docs', 'n8n.md'))}
names = [n for n, _, _ in doc]
check(len(names) == len(set(names)), 'every block of the runbook has a name of its own', names)
dba = [(n, b) for n, lang, b in doc if n.startswith('runbook-dba')]
connect = [(n, b) for n, lang, b in doc if lang == 'sh']
session = [(n, b) for n, lang, b in doc if lang == 'sql' and not n.startswith('runbook-dba')]
unknown = [n for n, lang, _ in doc if lang not in ('sh', 'sql')]
if not check(not unknown and len(connect) == 1 and dba and 'operator-role' in n8n_blocks,
             'the runbook has its DBA, connect and session blocks, and docs/n8n.md its operator role',
             f'unknown: {unknown}, connect blocks: {[n for n, _ in connect]}'):
    finish()

# the scratch database, the roles, the claims
try:
    psql(f'CREATE DATABASE {DB}', db='postgres')
except RuntimeError as e:
    notok('a scratch database on the test server', e)
    finish()


def cleanup():
    psql(f'DROP DATABASE IF EXISTS {DB}', db='postgres', check_rc=False)
    psql(f'DROP ROLE IF EXISTS {PERSON}; DROP ROLE IF EXISTS {OPS};', db='postgres', check_rc=False)


try:
    psql('CREATE EXTENSION idem_gate', db=DB)
    r = psql(local(n8n_blocks['operator-role']) + ''.join(local(b) for _, b in dba), db=DB, check_rc=False)
    check(r.returncode == 0, 'the operator role of docs/n8n.md and the runbook\'s DBA block run as written (as the superuser)',
          r.stderr)
    # orders: 40 needs_review (3 h), 30 stuck (2 h), 20 failing (30 min);
    # crm: one needs_review (1 h); billing, not granted: 5 of each, oldest of
    # all; beside them claims not in the inbox (completed, fresh processing,
    # failed_retryable below max_attempts)
    psql("""
SET idem_gate.max_attempts = 5;
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, last_error, payload,
    created_at, claimed_at, updated_at, token_issued)
SELECT wf, k, st::idem_gate.state, att, nextval('idem_gate.token_seq'), err,
       jsonb_build_object('order', k, 'amount', 1999), t, t, t, true
  FROM (SELECT 'orders' wf, 'evt-' || lpad(g::text, 6, '0') k,
               CASE WHEN g <= 140 THEN 'needs_review' WHEN g <= 230 THEN 'processing'
                    WHEN g <= 320 THEN 'failed_retryable' WHEN g <= 340 THEN 'processing'
                    ELSE 'failed_retryable' END st,
               CASE WHEN g BETWEEN 301 AND 320 THEN 5 ELSE 1 END att,
               CASE WHEN g <= 140 THEN 'timeout after the request was sent'
                    ELSE 'connect ECONNREFUSED 10.0.0.7:443' END err,
               now() - CASE WHEN g <= 140 THEN interval '3 hours' WHEN g <= 230 THEN interval '2 hours'
                            WHEN g <= 320 THEN interval '30 minutes' ELSE interval '10 seconds' END
                     + make_interval(secs => g % 100) t
          FROM (SELECT generate_series(101, 140) UNION ALL SELECT generate_series(201, 230)
                UNION ALL SELECT generate_series(301, 320) UNION ALL SELECT generate_series(321, 350)) s(g)
        UNION ALL
        SELECT 'billing', 'evt-' || lpad(g::text, 6, '0'),
               (ARRAY['needs_review', 'processing', 'failed_retryable'])[1 + g % 3], CASE WHEN g % 3 = 2 THEN 5 ELSE 1 END,
               'billing error', now() - interval '5 hours' + make_interval(secs => g)
          FROM generate_series(1, 15) g
        UNION ALL
        SELECT 'crm', 'ann@example.com', 'needs_review', 1, 'timeout after the request was sent',
               now() - interval '1 hour') AS c(wf, k, st, att, err, t);
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result, created_at, claimed_at,
    updated_at, completed_at, token_issued)
SELECT 'orders', 'evt-' || lpad(g::text, 6, '0'), 'completed', 1, nextval('idem_gate.token_seq'),
       '{"effect_id": "x"}', now() - interval '4 hours', now() - interval '4 hours',
       now() - interval '4 hours', now() - interval '4 hours', true
  FROM generate_series(1, 100) g;
""", db=DB)
    counts = psql("SELECT string_agg(workflow || ' ' || reason || ' ' || n, ', ' ORDER BY workflow, reason) "
                  "FROM (SELECT workflow, reason, count(*) n FROM idem_gate.inbox GROUP BY 1, 2) s", db=DB).stdout.strip()
    if not check(counts == 'billing failing 5, billing needs_review 5, billing stuck 5, crm needs_review 1, '
                 'orders failing 20, orders needs_review 40, orders stuck 30',
                 f'claims filled into each reason of the inbox ({counts})', counts):
        raise RuntimeError('the inbox is not as expected')
    start = psql('SELECT clock_timestamp()', db=DB).stdout.strip()
    q = lambda sql: psql(sql, db=DB).stdout.split()
    # the inbox's order before the session decides anything
    order = q("SELECT key FROM idem_gate.inbox WHERE workflow = 'orders' ORDER BY since, workflow, key")

    # the session: connect's psql reads every other block in order; the list
    # again for its second page, then with each filter set
    def section(name, body):
        return f"\\echo '@@@ {name}'\n{local(body)}"
    script = []
    for name, body in session:
        script.append(section(name, body))
        if name == 'runbook-list':
            script.append(section('runbook-list#2', body))
            for label, var, value in (('prefix', 'f_prefix', 'evt-0002'), ('key', 'f_key', 'evt-000305'),
                                      ('reason', 'f_reason', 'failing'), ('age', 'f_older_than', '90 minutes'),
                                      ('every workflow', 'f_workflow', '')):
                filters = dict(session)['runbook-filters']
                script.append(section(f'runbook-list {label}', f"{filters}\\set {var} '{value}'\n{body}"))
    rc_file = tempfile.NamedTemporaryFile('w', suffix='.psqlrc', delete=False)
    rc_file.write('\\set ON_ERROR_STOP on\n')
    rc_file.close()
    env = dict(os.environ, PGDATABASE=DB, PGUSER=PERSON, PGPASSWORD=PASSWORD, PSQLRC=rc_file.name)
    conn = local(connect[0][1])
    r = subprocess.run(['bash', '-euo', 'pipefail', '-c', conn], input=''.join(script), env=env,
                       capture_output=True, text=True, cwd=ROOT)
    os.unlink(rc_file.name)
    out = {}
    cur = None
    for line in r.stdout.split('\n'):
        if line.startswith('@@@ '):
            cur = line[4:]
            out[cur] = []
        elif cur:
            out[cur].append(line)
    check(r.returncode == 0 and set(out) >= {n for n, _ in session},
          f'run:{connect[0][0]} runs every block as {PERSON} ({len(session)} blocks, ON_ERROR_STOP)',
          f'exit {r.returncode}\n{r.stderr}\nlast sections: {list(out)[-3:]}')

    def keys(name):
        return re.findall(r'\bevt-\d{6}\b', '\n'.join(out.get(name, [])))

    p1, p2 = keys('runbook-list'), keys('runbook-list#2')
    check(len(p1) == 50 and p1 == order[:50], 'run:runbook-list shows the oldest 50 of the workflow, in the inbox\'s order',
          f'{len(p1)} keys: {p1[:5]}…, expected {order[:5]}…')
    check(p2 == order[50:100] and not set(p1) & set(p2),
          'run:runbook-list run again shows the next page from its cursor, no claim twice',
          f'{len(p2)} keys: {p2[:5]}…, expected {order[50:55]}…')
    want = {
        'prefix': [f'evt-{g:06d}' for g in range(201, 231)],
        'key': ['evt-000305'],
        'reason': [f'evt-{g:06d}' for g in range(301, 321)],
        'age': order[:70],
    }
    for label, expect in want.items():
        got = keys(f'runbook-list {label}')
        if label != 'age':
            expect = [k for k in order if k in expect]
        check(got == expect[:50], f'run:runbook-list with the {label} filter shows exactly its claims',
              f'got {len(got)}: {got[:5]}…, expected {len(expect[:50])}: {expect[:5]}…')
    shown = '\n'.join('\n'.join(v) for v in out.values())
    check('billing' not in shown and 'crm' in '\n'.join(out.get('runbook-summary', [])),
          'the workflow of another team (billing) is in no output of the session; crm and orders are',
          '\n'.join(out.get('runbook-summary', [])))
    check(any('evt-000101' in l for l in out.get('runbook-claim', [])) and
          any('"amount": 1999' in l for l in out.get('runbook-claim', [])),
          'run:runbook-claim shows the claim with its payload', '\n'.join(out.get('runbook-claim', [])))

    decided = ['evt-000101', 'evt-000102', 'evt-000201', 'evt-000301', 'evt-000302', 'evt-000303'] + \
        [f'evt-{g:06d}' for g in range(110, 120)]
    left = q("SELECT key FROM idem_gate.inbox WHERE (workflow = 'orders' AND key IN (%s)) "
             "OR (workflow = 'crm' AND key = 'ann@example.com')" % ','.join(f"'{k}'" for k in decided))
    check(left == [], 'every claim decided in the session left the inbox (17 claims)', left)
    states = dict(tuple(l.split('|')) for l in psql(
        "SELECT key, coalesce(state::text, 'released') || coalesce(' ' || (result->>'effect_id'), '') "
        "FROM unnest(ARRAY[%s, 'ann@example.com']) k(key) LEFT JOIN idem_gate.claims c USING (key) "
        "WHERE c.workflow IS NULL OR c.workflow IN ('orders', 'crm')" % ','.join(f"'{k}'" for k in decided),
        db=DB).stdout.split('\n') if l)
    expect = {'evt-000101': 'completed ch_3PZ1', 'evt-000301': 'released', 'evt-000302': 'released',
              'evt-000303': 'released'}
    wrong = {k: v for k, v in states.items() if v != expect.get(k, 'failed_retryable')}
    check(len(states) == 17 and not wrong, 'each decided claim is in the state its decision names', wrong or states)
    audit = psql(f"SELECT action, workflow, key, coalesce(actor, '-'), session_role, coalesce(reason, '-') "
                 f"FROM idem_gate.audit WHERE at >= '{start}' ORDER BY at", db=DB).stdout.strip().split('\n')
    audit = [a.split('|') for a in audit if a]
    bad = [a for a in audit if a[3] != PERSON or a[4] != PERSON or a[5] == '-']
    check(len(audit) == 17 and not bad and sorted(a[2] for a in audit if a[1] == 'orders') == sorted(decided),
          f'17 audit rows, one per decided claim, each naming {PERSON} as actor and session role, with a reason',
          f'{len(audit)} rows, wrong: {bad}')
    hist = '\n'.join(out.get('runbook-check', []))
    check(hist.count(PERSON) >= 8 and re.search(r'^\s*0\s*$', hist, re.M),
          'run:runbook-check shows the history naming the person, and nothing of it still waiting', hist)
    bulk = '\n'.join(out.get('runbook-bulk-retry', []))
    check(re.search(r'decided\s*\|\s*10\s*\|', bulk) is not None, 'run:runbook-bulk-retry says decided for its 10 keys', bulk)
    rel = '\n'.join(out.get('runbook-bulk-release', []))
    check(re.search(r'evt-000399\s*\|\s*not_found', rel) and len(re.findall(r'\|\s*decided\b', rel)) == 2,
          'run:runbook-bulk-release says decided twice and not_found for the key never claimed', rel)

    # what the person cannot do, as the runbook says
    r = psql("SELECT count(*) FROM idem_gate.inbox WHERE workflow = 'billing'", db=DB, user=PERSON,
             password=PASSWORD, check_rc=False)
    check(r.returncode == 0 and r.stdout.strip() == '0' and
          q("SELECT count(*) FROM idem_gate.inbox WHERE workflow = 'billing'") == ['15'],
          'the person does not see billing in the inbox (the superuser sees its 15)', r.stdout + r.stderr)
    r = psql("UPDATE idem_gate.claims SET state = 'completed' WHERE workflow = 'orders' AND key = 'evt-000104'",
             db=DB, user=PERSON, password=PASSWORD, check_rc=False)
    check(r.returncode != 0 and 'permission denied' in r.stderr and
          q("SELECT state FROM idem_gate.claims WHERE workflow = 'orders' AND key = 'evt-000104'") == ['needs_review'],
          'the person cannot UPDATE idem_gate.claims', r.stderr)
    r = psql("SELECT idem_release('evt-000001', 'billing', 'x', 'y')", db=DB, user=PERSON, password=PASSWORD,
             check_rc=False)
    check(r.returncode != 0 and 'billing' in r.stderr,
          'a decision on billing is refused, naming the workflow', r.stderr)
except RuntimeError as e:
    notok('the runbook test ran to its end', e)
finally:
    cleanup()
finish()
