// CI test: the n8n examples' SQL, run the way n8n's Postgres node runs it.
//
// n8n's Postgres node (typeVersion 2.x, operation "Execute Query", default
// "single" query batching) evaluates the Query Parameters expression for each
// input item, lets pg-promise format every item's query with its values, joins
// all items into ONE multi-statement string and sends it with db.multi() over
// node-postgres (pg).  One failing statement fails every item of the run.
// This test reads the query texts and parameter expressions from the committed
// workflow files, evaluates the expressions for sample items, and runs them
// exactly so: same pg-promise and pg versions as n8n 2.8.4, same type parsers,
// connected as a role created by the README's documented role block
// (test/suites/30_n8n_pg.sh).
//
// Env: libpq variables (PGHOST, PGPORT, PGUSER superuser, PGDATABASE with
// idem_gate installed), IDEM_N8N_ROLE / IDEM_N8N_PASSWORD (the role created by
// test/suites/30_n8n_pg.sh).  Ends with one line "N passed, N failed".
import { chownSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import pgPromise from 'pg-promise';
import { docBlock } from './doc_block.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const EX = join(ROOT, 'examples', 'n8n');
const env = process.env;
const ROLE = env.IDEM_N8N_ROLE;
if (!ROLE) {
  console.log('IDEM_N8N_ROLE is not set (run test/suites/30_n8n_pg.sh)');
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const RUN = `t${process.pid}_${Date.now().toString(36)}`; // keeps keys apart between runs

// ---- pg-promise configured as n8n's Postgres transport configures it ----
const pgp = pgPromise({ noWarnings: true });
for (const t of [pgp.pg.types.builtins.TIMESTAMP, pgp.pg.types.builtins.TIMESTAMPTZ]) {
  pgp.pg.types.setTypeParser(t, (value) => {
    const d = new Date(value);
    return isNaN(d.getTime()) ? value : d.toISOString();
  });
}
const base = {
  host: env.PGHOST || 'localhost',
  port: Number(env.PGPORT || 5432),
  database: env.PGDATABASE,
};
const admin = pgp({ ...base, user: env.PGUSER || 'postgres', password: env.PGPASSWORD });
let n8n = pgp({ ...base, user: ROLE, password: env.IDEM_N8N_PASSWORD, max: 4 });

// ---- the workflows' Postgres nodes ----
const workflows = Object.fromEntries(
  ['webhook-gate', 'webhook-gate-fields', 'error-workflow', 'inbox', 'inbox-actions', 'alerts'].map((f) => [
    f,
    JSON.parse(readFileSync(join(EX, `${f}.json`), 'utf8')),
  ]),
);
function pgNode(wf, name) {
  const n = workflows[wf].nodes.find((x) => x.name === name);
  if (!n || n.type !== 'n8n-nodes-base.postgres') throw new Error(`${wf}: no Postgres node "${name}"`);
  if (n.parameters.operation !== 'executeQuery') throw new Error(`${wf}/${name}: not Execute Query`);
  const qb = n.parameters.options?.queryBatching ?? 'single';
  if (qb !== 'single') throw new Error(`${wf}/${name}: query batching ${qb}, the test models "single"`);
  return n;
}

// Evaluate an n8n expression "={{ js }}" for one item.  The examples use only
// $json, $execution, $prevNode, $('Node').item.json and $('Node').first().json.
function evaluate(expr, ctx) {
  const m = /^=\{\{([\s\S]*)\}\}$/.exec(expr.trim());
  if (!m) throw new Error(`not a single expression: ${expr}`);
  const $ = (name) => {
    if (!(name in (ctx.nodes ?? {}))) throw new Error(`expression refers to node ${name} not given by the test`);
    return { item: { json: ctx.nodes[name] }, first: () => ({ json: ctx.nodes[name] }) };
  };
  // eslint-disable-next-line no-new-func
  const f = new Function('$json', '$execution', '$prevNode', '$', `return (${m[1]});`);
  return f(ctx.json ?? {}, { id: String(ctx.executionId ?? '1') }, ctx.prevNode ?? { name: '' }, $);
}

// What the node sends for these items: [{query, values, options}] -> one string.
function nodeQueries(wf, name, items) {
  const n = pgNode(wf, name);
  return items.map((ctx) => {
    const values = evaluate(n.parameters.options.queryReplacement, ctx);
    if (!Array.isArray(values)) throw new Error(`${name}: Query Parameters must evaluate to an array`);
    return { query: n.parameters.query, values, options: { partial: true } };
  });
}
async function runNode(wf, name, items, db = n8n) {
  const queries = nodeQueries(wf, name, items);
  const results = await db.multi(pgp.helpers.concat(queries));
  return results.map((rows) => rows); // one result set per item, in item order
}

// ---- a tiny runner ----
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(actual, expected, msg) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${msg}: expected ${e}, got ${a}`);
}

const webhookItem = (body, executionId) => ({ json: { body, headers: {}, query: {} }, executionId });
const K = (s) => `${RUN}-${s}`;
const extraKeys = [];
async function claimOne(body, executionId) {
  const [[row]] = await runNode('webhook-gate', 'Claim', [webhookItem(body, executionId)]);
  return row;
}
async function completeOne(claimRow, effectId) {
  return runNode('webhook-gate', 'Complete', [{ json: { id: effectId }, nodes: { Claim: claimRow } }]);
}

// ------------------------------------------------------------------ tests --
test('the committed example files are what build-examples.mjs generates', () => {
  execFileSync(process.execPath, [join(HERE, 'build-examples.mjs'), '--check'], { stdio: 'pipe' });
});

test('every Postgres and HTTP node of the gates routes its errors (no silent 200 on failure)', () => {
  for (const wf of ['webhook-gate', 'webhook-gate-fields']) {
    const w = workflows[wf];
    for (const n of w.nodes) {
      if (!['n8n-nodes-base.postgres', 'n8n-nodes-base.httpRequest'].includes(n.type)) continue;
      assert(['continueErrorOutput', 'continueRegularOutput'].includes(n.onError), `${wf}/${n.name}: onError ${n.onError}`);
      if (n.onError === 'continueErrorOutput')
        assert(w.connections[n.name]?.main?.[1]?.length > 0, `${wf}/${n.name}: error output not connected`);
    }
    assert(w.settings.errorWorkflow === workflows['error-workflow'].id, `${wf}: error workflow not set`);
  }
});

test('every gate error and failure answer is followed by a Stop and Error node (n8n counts the run failed)', () => {
  for (const wf of ['webhook-gate', 'webhook-gate-fields']) {
    const w = workflows[wf];
    const byName = Object.fromEntries(w.nodes.map((n) => [n.name, n]));
    const next = (name) => (w.connections[name]?.main?.[0] ?? []).map((c) => byName[c.node]);
    // the answers that report a failure: the gate error (422/500), the failed
    // side effect (503/500) and needs_review
    for (const name of ['Respond 500 (gate error)', 'Respond 5xx (failed)', 'Respond 200 (needs review)']) {
      const after = next(name);
      assert(after.length === 1 && after[0].type === 'n8n-nodes-base.stopAndError', `${wf}/${name} is not followed by Stop and Error`);
      assert(!after[0].onError || after[0].onError === 'stopWorkflow', `${wf}/${after[0].name}: onError ${after[0].onError}`);
    }
    // the Claim error output and the Switch's fallback output lead to the gate error answer
    eq(w.connections.Claim.main[1].map((c) => c.node), ['Respond 500 (gate error)'], `${wf}: Claim error output`);
    eq(w.connections['Route by outcome'].main.at(-1).map((c) => c.node), ['Respond 500 (gate error)'], `${wf}: fallback output`);
    // the message names the cause for both inputs of the gate error answer
    const stop = next('Respond 500 (gate error)')[0];
    const msg = (json) => evaluate(stop.parameters.errorMessage, { json });
    assert(/fingerprint mismatch/.test(msg({ message: 'fingerprint mismatch for key "k"', error: {} })), 'message of a Claim error');
    assert(/unexpected outcome zzz/.test(msg({ outcome: 'zzz' })), 'message of an unknown outcome');
  }
});

test('the n8n role connects with the documented grants only', async () => {
  try {
    await n8n.one('SELECT current_user AS u');
  } catch (e) {
    // servers that do not let the role log in over PGHOST: same privileges via SET ROLE
    console.log(`# direct login as ${ROLE} failed (${e.message}); using role=${ROLE} on a superuser session`);
    n8n = pgp({ ...base, user: env.PGUSER || 'postgres', password: env.PGPASSWORD, max: 4, options: `-c role=${ROLE}` });
  }
  const r = await n8n.one('SELECT current_user::text AS u, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS su');
  eq([r.u, r.su], [ROLE, false], 'role');
});

test('Claim returns flat columns with the outcome as text, token as a digit string', async () => {
  const row = await claimOne({ id: K('shape'), amount: 1 }, 'exec-shape');
  eq(Object.keys(row), ['key', 'workflow', 'outcome', 'token', 'attempt', 'state', 'result', 'claimed_at'], 'columns');
  eq([row.key, row.workflow, row.outcome, row.state, row.attempt, row.result], [K('shape'), 'orders', 'new', 'processing', 1, null], 'values');
  assert(typeof row.outcome === 'string' && typeof row.state === 'string', 'enums come back as strings');
  assert(typeof row.token === 'string' && /^[1-9][0-9]*$/.test(row.token), `token ${row.token}`);
  assert(/^\d{4}-\d\d-\d\dT.*Z$/.test(row.claimed_at), `claimed_at ${row.claimed_at}`);
});

test('Complete takes the token as given by Claim and stores the receipt; Claim then returns it', async () => {
  const c = await claimOne({ id: K('complete') }, 'exec-c1');
  const [[done]] = await completeOne(c, 'fx_42');
  eq(done, { completed: true }, 'complete');
  const again = await claimOne({ id: K('complete') }, 'exec-c2');
  eq([again.outcome, again.state, again.result], ['completed', 'completed', { effect_id: 'fx_42' }], 'duplicate');
  eq(again.token, null, 'a duplicate is granted no token');
});

test('single-query mode: five items, five expected outcomes, none fails the others', async () => {
  // prepare: one completed, one needs_review, one failed_retryable, one processing
  const done = await claimOne({ id: K('m-done') }, 'exec-m0');
  await completeOne(done, 'fx_m');
  const rev = await claimOne({ id: K('m-review') }, 'exec-m0');
  await runNode('webhook-gate', 'Fail claim', [
    { json: { error: { message: 'timeout' } }, prevNode: { name: 'Side effect' }, nodes: { Claim: rev } },
  ]);
  const retry = await claimOne({ id: K('m-retry') }, 'exec-m0');
  await runNode('webhook-gate', 'Fail claim', [
    { json: { error: { message: 'connect ECONNREFUSED 127.0.0.1:9' } }, prevNode: { name: 'Side effect' }, nodes: { Claim: retry } },
  ]);
  await claimOne({ id: K('m-busy') }, 'exec-m0');

  const items = [
    webhookItem({ id: K('m-new') }, 'exec-m1'),
    webhookItem({ id: K('m-busy') }, 'exec-m1'),
    webhookItem({ id: K('m-done') }, 'exec-m1'),
    webhookItem({ id: K('m-review') }, 'exec-m1'),
    webhookItem({ id: K('m-retry') }, 'exec-m1'),
  ];
  const sent = pgp.helpers.concat(nodeQueries('webhook-gate', 'Claim', items));
  assert(sent.split('idem_claim_ex(').length - 1 === 5, 'the five items travel in one string');
  const res = await runNode('webhook-gate', 'Claim', items);
  eq(res.map((r) => r.length), [1, 1, 1, 1, 1], 'one row per item');
  eq(res.map((r) => r[0].outcome), ['new', 'in_flight', 'completed', 'needs_review', 'new'], 'outcomes');
  eq(res.map((r) => r[0].state), ['processing', 'processing', 'completed', 'needs_review', 'processing'], 'states');
  eq(res[4][0].attempt, 2, 'the retryable claim is taken again');
  eq(res[2][0].result, { effect_id: 'fx_m' }, 'receipt');
});

test('the same new event twice in one batch: the second item is in_flight, not an error', async () => {
  const res = await runNode('webhook-gate', 'Claim', [
    webhookItem({ id: K('twice') }, 'exec-t1'),
    webhookItem({ id: K('twice') }, 'exec-t2'),
  ]);
  eq(res.map((r) => r[0].outcome), ['new', 'in_flight'], 'outcomes');
});

test('re-entry of the owning execution gets new with the same token', async () => {
  const a = await claimOne({ id: K('reentry') }, 'exec-r1');
  const b = await claimOne({ id: K('reentry') }, 'exec-r1');
  eq([b.outcome, b.token], ['new', a.token], 're-entry');
});

test('event ids with commas, quotes, backslashes and numbers pass intact (array parameters)', async () => {
  const odd = `${K('odd')},"quoted",'single'\\back;DROP`;
  const a = await claimOne({ id: odd }, 'exec-o');
  eq(a.key, odd, 'key');
  const status = await admin.one('SELECT count(*)::int AS n FROM idem_gate.claims WHERE key = $1', [odd]);
  eq(status.n, 1, 'stored once under the exact key');
  const num = 9000000 + (process.pid % 100000);
  extraKeys.push(String(num));
  const b = await claimOne({ id: num }, 'exec-o');
  eq([b.key, b.outcome], [String(num), b.outcome], 'numeric id becomes text');
});

test('fingerprint: same id with another payload is an error whose text the gate maps to 422', async () => {
  await claimOne({ id: K('fp'), amount: 1 }, 'exec-f1');
  let err = null;
  try {
    await claimOne({ id: K('fp'), amount: 2 }, 'exec-f2');
  } catch (e) {
    err = e;
  }
  assert(err, 'no error');
  assert(/fingerprint mismatch/i.test(err.message), `message: ${err.message}`);
  eq(err.code, 'IG001', 'SQLSTATE');
  const respond = workflows['webhook-gate'].nodes.find((n) => n.name === 'Respond 500 (gate error)');
  eq(evaluate(respond.parameters.options.responseCode, { json: { error: { message: err.message } } }), 422, 'status');
  // canonical: member order and number spelling do not change the fingerprint
  await claimOne({ id: K('fp2'), a: 1, b: [1.0, 'x'] }, 'exec-f3');
  const same = await claimOne({ b: [1, 'x'], a: 1.0, id: K('fp2') }, 'exec-f4');
  eq(same.outcome, 'in_flight', 'same payload in another order');
});

test('an error in one item fails the whole batch: why expected outcomes must never raise', async () => {
  await claimOne({ id: K('batch-fp'), v: 1 }, 'exec-b0');
  let err = null;
  try {
    await runNode('webhook-gate', 'Claim', [
      webhookItem({ id: K('batch-ok') }, 'exec-b1'),
      webhookItem({ id: K('batch-fp'), v: 2 }, 'exec-b1'),
    ]);
  } catch (e) {
    err = e;
  }
  assert(err && /fingerprint/i.test(err.message), 'the batch fails');
  const n = await admin.one("SELECT count(*)::int AS n FROM idem_gate.claims WHERE key = $1", [K('batch-ok')]);
  eq(n.n, 0, 'the other item was rolled back with it');
});

test('Fail claim: retryable only when the side effect was surely not sent (refused, unresolvable), else needs_review', async () => {
  // the HTTP Request node's error items, as n8n 2.8.4, 2.40.7 and 2.41.1 hand them
  // to the error output ({ message, name, code }), and shapes without a code
  const cases = [
    ['refused', 'Side effect', { message: 'connect ECONNREFUSED 127.0.0.1:5690', name: 'Error', code: 'ECONNREFUSED' }, 'failed_retryable'],
    ['no such host', 'Side effect', { message: 'getaddrinfo ENOTFOUND side-effect.example', name: 'Error', code: 'ENOTFOUND' }, 'failed_retryable'],
    ['no DNS answer', 'Side effect', { message: 'getaddrinfo EAI_AGAIN api.example.com', name: 'Error', code: 'EAI_AGAIN' }, 'failed_retryable'],
    ['refused, no code', 'Side effect', { message: 'connect ECONNREFUSED 10.0.0.1:443' }, 'failed_retryable'],
    ["refused, n8n's words", 'Side effect', { message: 'The service refused the connection - perhaps it is offline' }, 'failed_retryable'],
    ["no such host, n8n's words", 'Side effect', { message: 'The connection cannot be established, this usually occurs due to an incorrect host (domain) value' }, 'failed_retryable'],
    ['timeout', 'Side effect', { message: 'timeout of 30000ms exceeded', name: 'AxiosError', code: 'ECONNABORTED' }, 'needs_review'],
    ['connect timeout', 'Side effect', { message: 'connect ETIMEDOUT 10.0.0.1:443', name: 'Error', code: 'ETIMEDOUT' }, 'needs_review'],
    ['reset', 'Side effect', { message: 'read ECONNRESET', name: 'Error', code: 'ECONNRESET' }, 'needs_review'],
    ['hang up', 'Side effect', { message: 'socket hang up', name: 'Error', code: 'ECONNRESET' }, 'needs_review'],
    ['5xx quoting a code', 'Side effect', { message: '502 - "upstream: getaddrinfo ENOTFOUND db.internal"', name: 'AxiosError', status: 502 }, 'needs_review'],
    ['5xx quoting a code, httpCode', 'Side effect', { message: 'getaddrinfo ENOTFOUND db.internal', httpCode: '502', code: 'ENOTFOUND' }, 'needs_review'],
    ['code mid-message', 'Side effect', { message: 'Bad gateway: connect ECONNREFUSED 10.0.0.9:80' }, 'needs_review'],
    ['completion failed', 'Complete', { message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' }, 'needs_review'],
  ];
  const items = [];
  for (const [name, node, error] of cases) {
    const c = await claimOne({ id: K(`fail-${name}`) }, 'exec-x');
    items.push({ json: { error }, prevNode: { name: node }, nodes: { Claim: c } });
  }
  const res = await runNode('webhook-gate', 'Fail claim', items);
  eq(res.map((r, i) => `${cases[i][0]}: ${r[0].state}`), cases.map(([name, , , want]) => `${name}: ${want}`), 'states');
  const respond = workflows['webhook-gate'].nodes.find((n) => n.name === 'Respond 5xx (failed)');
  eq(res.map((r) => evaluate(respond.parameters.options.responseCode, { json: r[0] })), cases.map(([, , , want]) => (want === 'failed_retryable' ? 503 : 500)), 'status codes');
  // the fields-keyed variant has the same rule
  const fieldsFail = workflows['webhook-gate-fields'].nodes.find((n) => n.name === 'Fail claim');
  const gateFail = workflows['webhook-gate'].nodes.find((n) => n.name === 'Fail claim');
  eq(fieldsFail.parameters.options.queryReplacement, gateFail.parameters.options.queryReplacement, 'the same Fail claim parameters in both gates');
});

test('error workflow: fails only the failed run\'s processing claims, retryable before the side effect', async () => {
  const early = await claimOne({ id: K('ew-early') }, 'exec-ew1');
  const late = await claimOne({ id: K('ew-late') }, 'exec-ew2');
  const other = await claimOne({ id: K('ew-other') }, 'exec-ew3');
  const done = await claimOne({ id: K('ew-done') }, 'exec-ew2');
  await completeOne(done, 'fx_ew');
  const trigger = (id, lastNode) => ({
    json: {
      execution: { id, lastNodeExecuted: lastNode, error: { message: 'boom' }, mode: 'webhook' },
      workflow: { id: 'w', name: 'gate' },
    },
  });
  const res = await runNode('error-workflow', "Fail the run's claims", [
    trigger('exec-ew1', 'Route by outcome'),
    trigger('exec-ew2', 'Side effect'),
    trigger('exec-ew-none', 'Claim'),
  ]);
  eq(res.map((r) => r.map((x) => [x.key, x.state])), [[[K('ew-early'), 'failed_retryable']], [[K('ew-late'), 'needs_review']], []], 'results');
  const rows = await admin.any(
    'SELECT key, state::text, last_error FROM idem_gate.claims WHERE key = ANY($1) ORDER BY key',
    [[K('ew-other'), K('ew-done'), K('ew-late')]],
  );
  eq(rows.map((r) => [r.key, r.state]), [[K('ew-done'), 'completed'], [K('ew-late'), 'needs_review'], [K('ew-other'), 'processing']], 'others untouched');
  assert(/exec-ew2 failed at Side effect: boom/.test(rows[1].last_error), `last_error ${rows[1].last_error}`);
  void early, late, other;
});

test('fields variant: key = idem_hash of the identity fields; other fields do not matter', async () => {
  const body = { customer_id: K('cust'), order_ref: 'R-1', amount: { value: 12.5, currency: 'EUR' }, sent_at: 'a' };
  const res = await runNode('webhook-gate-fields', 'Claim', [
    webhookItem(body, 'exec-fv1'),
    webhookItem({ ...body, sent_at: 'b' }, 'exec-fv2'),
    webhookItem({ ...body, order_ref: 'R-2' }, 'exec-fv3'),
  ]);
  const rows = res.map((r) => r[0]);
  extraKeys.push(...rows.map((r) => r.key));
  assert(/^[0-9a-f]{64}$/.test(rows[0].key), `key ${rows[0].key}`);
  eq(rows.map((r) => r.outcome), ['new', 'in_flight', 'new'], 'outcomes');
  eq(rows[0].key === rows[1].key && rows[0].key !== rows[2].key, true, 'keys');
  const [[done]] = await runNode('webhook-gate-fields', 'Complete', [{ json: { id: 'fx_f' }, nodes: { Claim: rows[0] } }]);
  eq(done.completed, true, 'complete');
  let err = null;
  try {
    await runNode('webhook-gate-fields', 'Claim', [webhookItem({ customer_id: K('cust') }, 'exec-fv4')]);
  } catch (e) {
    err = e;
  }
  assert(err && err.code === '22023', `a missing identity field is an error (22023), got ${err?.code} ${err?.message}`);
});


// ---- the inbox and the alerts, as the operator role of docs/n8n.md ----
// (idem_gate 1.2: idem_gate.inbox).  The role is created by docs/n8n.md's
// run:operator-role block as written, with its name and password replaced.
const HAS_INBOX = (await admin.one("SELECT count(*)::int AS n FROM pg_views WHERE schemaname = 'idem_gate' AND viewname = 'inbox'")).n === 1;
const OPS = `idem_ops_ci_${process.pid}`;
const OPS_PASSWORD = `ci-${Date.now().toString(36)}${process.pid}`;
let ops = null;
async function opsRole() {
  if (ops) return ops;
  const block = docBlock(join(ROOT, 'docs/n8n.md'), 'operator-role');
  assert(block.includes("'change-me'") && /\bn8n_inbox\b/.test(block), 'docs/n8n.md run:operator-role lost its placeholders');
  await admin.multi(block.replace(/\bn8n_inbox\b/g, OPS).replace("'change-me'", `'${OPS_PASSWORD}'`));
  // idem_gate 1.3: the bulk decisions (docs/n8n.md run:operator-role-bulk)
  if ((await admin.one("SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'idem_resolve_many'")).n > 0)
    await admin.multi(docBlock(join(ROOT, 'docs/n8n.md'), 'operator-role-bulk').replace(/\bn8n_inbox\b/g, OPS));
  ops = pgp({ ...base, user: OPS, password: OPS_PASSWORD, max: 2 });
  try {
    await ops.one('SELECT 1 AS x');
  } catch (e) {
    // no password login over PGHOST here: the same role and setting on a superuser session
    console.log(`# direct login as ${OPS} failed (${e.message}); using role=${OPS} on a superuser session`);
    ops = pgp({ ...base, user: env.PGUSER || 'postgres', password: env.PGPASSWORD, max: 2, options: `-c role=${OPS} -c idem_gate.workflow_acl=on` });
  }
  return ops;
}
const inboxTest = (name, fn) => test(name, async () => (HAS_INBOX ? fn() : console.log(`# skipped (no idem_gate.inbox): ${name}`)));

inboxTest('the operator role block of docs/n8n.md is the README\'s (run:operator-role in both, identical)', () => {
  const docs = docBlock(join(ROOT, 'docs/n8n.md'), 'operator-role');
  let readme = null;
  try {
    readme = docBlock(join(ROOT, 'README.md'), 'operator-role');
  } catch (e) {
    throw new Error(`README.md: ${e.message}`);
  }
  eq(readme, docs, 'README.md run:operator-role against docs/n8n.md run:operator-role');
});

inboxTest('the gate keeps the delivery as the claim\'s payload (6th argument), cleared at completion', async () => {
  const body = { id: K('payload'), amount: { value: 1, currency: 'EUR' }, note: '<b>x</b>' };
  const c = await claimOne(body, 'exec-p1');
  const [row] = await admin.any("SELECT payload = $2::jsonb AS same FROM idem_gate.claims WHERE workflow = 'orders' AND key = $1", [K('payload'), JSON.stringify(body)]);
  eq(row.same, true, 'payload while processing');
  await completeOne(c, 'fx_p');
  const [done] = await admin.any("SELECT payload FROM idem_gate.claims WHERE workflow = 'orders' AND key = $1", [K('payload')]);
  eq(done.payload, null, 'payload after completion');
});

inboxTest('the inbox\'s queries as the operator role: only its workflows, no token, decisions named, a second one refused', async () => {
  const db = await opsRole();
  const pgNodeOf = (wf, name) => workflows[wf].nodes.find((n) => n.name === name && n.type === 'n8n-nodes-base.postgres');
  const run = async (wf, name, json, nodes = {}) => {
    const n = pgNodeOf(wf, name);
    const values = evaluate(n.parameters.options.queryReplacement, { json, nodes });
    return db.multi(pgp.helpers.concat([{ query: n.parameters.query, values, options: { partial: true } }]));
  };
  // a needs_review claim of orders (granted) and one of a workflow not granted
  const body = { id: K('inbox'), amount: 2 };
  const c = await claimOne(body, 'exec-i1');
  await runNode('webhook-gate', 'Fail claim', [{ json: { error: { message: 'socket hang up', code: 'ECONNRESET' } }, prevNode: { name: 'Side effect' }, nodes: { Claim: c } }]);
  await admin.any("SELECT idem_claim_ex($1, 'idem-ci-hidden', NULL, NULL, 'x', '{}'::jsonb)", [K('hidden')]);
  const [[list]] = await run('inbox', 'Read inbox', {}, { 'Check search': searchOf({ prefix: RUN }) });
  const mine = list.items.find((i) => i.key === K('inbox'));
  assert(mine && mine.reason === 'needs_review' && mine.has_payload === true, `list: ${JSON.stringify(mine)}`);
  assert(!list.items.some((i) => i.workflow === 'idem-ci-hidden') && !list.groups.some((g) => g.workflow === 'idem-ci-hidden'), 'a workflow not granted is listed');
  const [[item]] = await run('inbox', 'Read item', { key: K('inbox'), workflow: 'orders' });
  eq([item.claim.state, item.claim.payload?.id, 'token' in item.claim, item.inbox.reason], ['needs_review', body.id, false, 'needs_review'], 'item');
  let denied = null;
  try {
    await run('inbox', 'Read item', { key: K('hidden'), workflow: 'idem-ci-hidden' });
  } catch (e) {
    denied = e;
  }
  eq(denied?.code, '42501', 'another workflow\'s item');
  const a = { key: K('inbox'), workflow: 'orders', receipt: JSON.stringify({ effect_id: 'fx_ops' }), reason: 'downstream has fx_ops', actor: 'alice' };
  const [[r1]] = await run('inbox-actions', 'Resolve completed', a);
  eq(r1.state, 'completed', 'resolve');
  let again = null;
  try {
    await run('inbox-actions', 'Resolve retry', { ...a, actor: 'bob' });
  } catch (e) {
    again = e;
  }
  assert(again?.code === '55000' && /the claim is completed/.test(again.message), `a second decision: ${again?.code} ${again?.message}`);
  // "already decided" names who decided, and when (the DETAIL, which n8n shows as the error's description)
  assert(/^The last operator action on it was resolve \(needs_review to completed\) by alice \(role [^)]+\) at \d{4}-/.test(again?.detail ?? ''),
    `a second decision's detail: ${again?.detail}`);
  const [[h]] = await run('inbox', 'Read item', { key: K('inbox'), workflow: 'orders' });
  eq(h.history.map((x) => [x.action, x.actor, x.state_before, x.state_after, x.reason]), [['resolve', 'alice', 'needs_review', 'completed', 'downstream has fx_ops']], 'history');
  eq(h.claim.result, { effect_id: 'fx_ops' }, 'receipt');
  // replay: refused for a completed claim (nothing recorded), naming who decided it
  let noReplay = null;
  try {
    await run('inbox-actions', 'Record replay', a);
  } catch (e) {
    noReplay = e;
  }
  assert(noReplay?.code === '55000' && /cannot replay/.test(noReplay.message) && /by alice/.test(noReplay.detail ?? ''), `replay of a completed claim: ${noReplay?.code} ${noReplay?.message}`);
  const [[rel]] = await run('inbox-actions', 'Release', a);
  const [[rel2]] = await run('inbox-actions', 'Release', a);
  eq([rel.released, rel2.released], [true, false], 'release, twice');
  // a replay: recorded with the person and reason, the stored payload answered
  const rb = { id: K('replay'), amount: 3 };
  await admin.one("SELECT idem_fail($1, 'orders', c.token, 'refused', true) FROM idem_claim_ex($1, 'orders', NULL, NULL, 'exec-r', $2::jsonb) c", [K('replay'), JSON.stringify(rb)]);
  const [[rp]] = await run('inbox-actions', 'Record replay', { key: K('replay'), workflow: 'orders', reason: 'the sender gave up', actor: 'carol' });
  eq(rp.payload, rb, 'the replay\'s payload');
  const [[hr]] = await run('inbox', 'Read item', { key: K('replay'), workflow: 'orders' });
  eq(hr.history.map((x) => [x.action, x.actor, x.state_before, x.state_after, x.reason]),
    [['replay', 'carol', 'failed_retryable', 'failed_retryable', 'the sender gave up']], 'the replay in the history');
  await admin.any("SELECT idem_release($1, 'orders', 'test over', 'ci')", [K('replay')]);
  for (const sql of ['SELECT key FROM idem_gate.claims LIMIT 1', "SELECT idem_claim('x', 'orders')"]) {
    let err = null;
    try {
      await db.any(sql);
    } catch (e) {
      err = e;
    }
    eq(err?.code, '42501', sql);
  }
});

inboxTest('the alerts\' queries as the operator role: the alerted item, the digest', async () => {
  const db = await opsRole();
  const node = (name) => workflows.alerts.nodes.find((n) => n.name === name);
  const body = { id: K('alert'), amount: 3 };
  const c = await claimOne(body, 'exec-a1');
  const [[st]] = await runNode('webhook-gate', 'Fail claim', [{ json: { error: { message: 'timeout of 30000ms exceeded', code: 'ECONNABORTED' } }, prevNode: { name: 'Side effect' }, nodes: { Claim: c } }]);
  eq(st.state, 'needs_review', 'failed');
  const [{ at }] = await admin.any("SELECT to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') AS at FROM idem_gate.claims WHERE workflow = 'orders' AND key = $1", [K('alert')]);
  const find = node('Find the item');
  const values = evaluate(find.parameters.options.queryReplacement, { json: { channel: 'idem_gate_alert', payload: { workflow: 'orders', reason: 'needs_review', at } } });
  const [[i]] = await db.multi(pgp.helpers.concat([{ query: find.parameters.query, values, options: { partial: true } }]));
  eq([i.key, i.attempt, i.visible], [K('alert'), 1, true], 'the alerted item');
  // an alert about a workflow the role may not see: not visible, nothing of it shown (Alert message posts nothing)
  const hv = evaluate(find.parameters.options.queryReplacement, { json: { channel: 'idem_gate_alert', payload: { workflow: 'idem-ci-hidden', reason: 'stuck', at } } });
  const [[hidden]] = await db.multi(pgp.helpers.concat([{ query: find.parameters.query, values: hv, options: { partial: true } }]));
  eq([hidden.visible, hidden.key, hidden.waiting], [false, null, 0], 'an alert of a workflow not granted');
  const msg = node('Alert message').parameters.jsCode;
  assert(/if \(i\.visible === false\) return \[\];/.test(msg), 'Alert message posts nothing for a workflow the role may not see');
  const dig = node('Inbox summary');
  const [[d]] = await db.multi(pgp.helpers.concat([{ query: dig.parameters.query, values: evaluate(dig.parameters.options.queryReplacement, { json: {} }), options: { partial: true } }]));
  assert(d.total >= 1 && d.groups.some((g) => g.workflow === 'orders' && g.reason === 'needs_review') && !d.groups.some((g) => g.workflow === 'idem-ci-hidden'), `digest ${JSON.stringify(d)}`);
  await admin.any("SELECT idem_release($1, 'orders')", [K('alert')]);
});

// the alert's and the digest's message, run as n8n's Code node runs them:
// each names the runbook for deciding without n8n, as the repository's
// path until runbook_url is set to an address, then as a link
test('the alerts name the runbook for deciding without n8n (docs/inbox-without-n8n.md)', () => {
  const node = (name) => workflows.alerts.nodes.find((n) => n.name === name);
  const settings = Object.fromEntries(node('Settings').parameters.assignments.assignments.map((a) => [a.name, a.value]));
  eq(settings.runbook_url, 'docs/inbox-without-n8n.md', 'Settings runbook_url');
  readFileSync(join(ROOT, settings.runbook_url));
  const run = (name, runbook, input, trigger) => {
    const $ = (n) => ({ first: () => ({ json: n === 'Settings' ? { ...settings, runbook_url: runbook } : trigger }) });
    const $input = { first: () => ({ json: input }) };
    return new Function('$', '$input', node(name).parameters.jsCode)($, $input)[0].json.text;
  };
  const alert = ['Alert message', { workflow: 'orders', key: 'evt-1', attempt: 1, age_s: 3, waiting: 1, visible: true },
    { payload: { workflow: 'orders', reason: 'needs_review' } }];
  const digest = ['Digest message', { total: 1, groups: [{ workflow: 'orders', reason: 'stuck', n: 1, oldest_s: 60 }], listeners: 1 }, {}];
  for (const [name, input, trigger] of [alert, digest]) {
    const text = run(name, settings.runbook_url, input, trigger);
    assert(text.endsWith('\nIf the inbox does not open (n8n down), decide from psql: docs/inbox-without-n8n.md in the idem_gate repository.'), `${name}: ${text}`);
    const linked = run(name, 'https://wiki.example/idem/inbox-without-n8n', input, trigger);
    assert(linked.endsWith('decide from psql: <https://wiki.example/idem/inbox-without-n8n|the runbook>.'), `${name}: ${linked}`);
    assert(!run(name, '', input, trigger).includes('psql'), `${name} without runbook_url`);
  }
});

// the page's own Code node that checks a GET request (its output feeds Read inbox)
const codeNode = (name) => workflows.inbox.nodes.find((n) => n.name === name && n.type === 'n8n-nodes-base.code').parameters.jsCode;
// its input: who is signed in (Read page request); the filters: the
// request's query string, read from the Webhook node's output
function searchOf(query) {
  const $input = { first: () => ({ json: { actor: 'alice', csrf: '' } }) };
  const $ = (name) => {
    if (name !== 'Page request') throw new Error(`Check search reads node ${name}`);
    return { first: () => ({ json: { query } }) };
  };
  // eslint-disable-next-line no-new-func
  return new Function('$input', '$', codeNode('Check search'))($input, $)[0].json;
}
inboxTest('the inbox\'s search, paging and bulk queries as the operator role: index ranges, every item once, one row per key', async () => {
  if ((await admin.one("SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'idem_resolve_many'")).n === 0) return console.log('# skipped (idem_gate before 1.3)');
  const db = await opsRole();
  const run = async (name, json, nodes = {}) => {
    const n = [...workflows.inbox.nodes, ...workflows['inbox-actions'].nodes].find((x) => x.name === name);
    const values = evaluate(n.parameters.options.queryReplacement, { json, nodes });
    return (await db.multi(pgp.helpers.concat([{ query: n.parameters.query, values, options: { partial: true } }])))[0];
  };
  // 30 needs_review claims of orders in three transactions (so that some share their since), a
  // key with LIKE's metacharacters and one that they would match, and one of a workflow not granted
  const keys = Array.from({ length: 30 }, (_, i) => K(`pg-${String(i).padStart(3, '0')}`));
  const fail = "SELECT idem_fail(k, 'orders', (idem_claim_ex(k, 'orders', NULL, NULL, 'exec-pg', '{}'::jsonb)).token, 'timeout', false) FROM unnest($1::text[]) AS k";
  for (let i = 0; i < 30; i += 10) await admin.any(fail, [keys.slice(i, i + 10)]);
  await admin.any(fail, [[K('lk_%a'), K('lkXYa')]]);
  await admin.any("SELECT idem_fail($1, 'idem-ci-hidden', c.token, 'x', false) FROM idem_claim_ex($1, 'idem-ci-hidden', NULL, NULL, 'x', '{}'::jsonb) c", [K('pg-hidden')]);
  const order = (await admin.any("SELECT key FROM idem_gate.claims WHERE workflow = 'orders' AND key LIKE $1 ORDER BY updated_at, workflow, key COLLATE \"C\"", [`${RUN}-pg-%`])).map((x) => x.key);
  eq(order.length, 30, 'claims made');
  // paging by 7: every item once, in order; the cursor is the page's own (the Render list code makes it the same way)
  const seen = [];
  let after = '';
  for (let pages = 0; pages < 10; pages++) {
    const c = searchOf({ workflow: 'orders', prefix: K('pg-'), limit: '7', after });
    eq(c.problem, '', 'the search');
    const [page] = await run('Read inbox', {}, { 'Check search': c });
    const items = page.items.slice(0, 7);
    seen.push(...items.map((i) => i.key));
    if (page.items.length <= 7) break;
    const last = items[items.length - 1];
    after = Buffer.from(JSON.stringify([last.since_exact, last.workflow, last.key])).toString('base64url');
  }
  eq(seen, order, 'pages of 7');
  // a key, over every workflow; a prefix with LIKE's metacharacters means itself; an age
  const [byKey] = await run('Read inbox', {}, { 'Check search': searchOf({ key: keys[3] }) });
  eq(byKey.items.map((i) => [i.workflow, i.key]), [['orders', keys[3]]], 'a key search');
  const [meta] = await run('Read inbox', {}, { 'Check search': searchOf({ prefix: K('lk_%') }) });
  eq(meta.items.map((i) => i.key), [K('lk_%a')], 'a prefix with _ and %');
  const [old] = await run('Read inbox', {}, { 'Check search': searchOf({ prefix: K('pg-'), older_than: '1 hour' }) });
  eq([old.matching, typeof old.read_at], [0, 'string'], 'older than an hour');
  eq(searchOf({ older_than: "1 hour'; DROP TABLE x; --" }).route, 'bad', 'a bad age is refused before any query');
  eq(searchOf({ after: 'bm90IGEgY3Vyc29y' }).route, 'bad', 'a cursor the page did not make');
  eq(searchOf({ limit: '501' }).route, 'bad', 'a page over 500');
  // idem_key_forms is not the operator role's (docs/n8n.md): Key forms fails, and the page searches the key as typed
  let noKeyForms = null;
  try {
    await run('Key forms', { key: keys[3] });
  } catch (e) {
    noKeyForms = e;
  }
  eq(noKeyForms?.code, '42501', 'Key forms without EXECUTE on idem_key_forms');
  // in a keyed workflow (the C edition's secret file), a key over every workflow finds the claim by the
  // person's value once the DBA grants EXECUTE on idem_key_forms (Key forms, then the list), and not before
  if ((await admin.one("SELECT count(*)::int AS n FROM pg_settings WHERE name = 'idem_gate.secret_file'")).n === 1) {
    const wf = `idem-ci-keyed-${process.pid}`;
    const value = `${K('ann')}@example.com`;
    const file = `${(await admin.one("SELECT current_setting('data_directory') AS d")).d}/idem_ci_secrets_${process.pid}`;
    const retry55000 = async (fn) => {
      // a session reads the secret file at its first statement after the reload
      for (let i = 0; ; i++) {
        try {
          return await fn();
        } catch (e) {
          if (e.code !== '55000' || i >= 100) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    // the file as the server's user keeps it (0600, owned by the data directory's owner)
    const dataDir = statSync(dirname(file));
    writeFileSync(file, `ci1 ${'5a'.repeat(32)}\n`, { mode: 0o600 });
    chownSync(file, dataDir.uid, dataDir.gid);
    await admin.none(`ALTER SYSTEM SET idem_gate.secret_file = ${pgp.as.text(file)}`);
    await admin.one('SELECT pg_reload_conf() AS ok');
    try {
      await admin.none('INSERT INTO idem_gate.policies (workflow, keyed) VALUES ($1, true)', [wf]);
      await admin.one('SELECT idem_gate.grant_workflow($1, $2) AS ok', [OPS, wf]);
      const stored = await retry55000(async () => (await admin.one('SELECT idem_key($1, $2) AS k', [wf, value])).k);
      assert(/^ci1:[0-9a-f]{64}$/.test(stored), `the stored form: ${stored}`);
      await admin.one("SELECT idem_fail($1, $2, c.token, 'x', false) AS ok FROM idem_claim_ex($1, $2, NULL, NULL, 'x', '{}'::jsonb) AS c", [value, wf]);
      // the page's two steps: Key forms (its error output goes on with the key as typed), then the list
      const search = async () => {
        let forms;
        try {
          forms = (await retry55000(() => run('Key forms', { key: value })))[0].forms;
        } catch (e) {
          if (e.code !== '42501') throw e;
        }
        const [found] = await run('Read inbox', forms === undefined ? {} : { forms }, { 'Check search': searchOf({ key: value }) });
        return found.items.map((x) => [x.workflow, x.key]);
      };
      eq(await search(), [], 'a keyed claim by the person\'s value, without EXECUTE on idem_key_forms');
      await admin.none(`GRANT EXECUTE ON FUNCTION idem_key_forms(text) TO ${OPS}`);
      eq(await search(), [[wf, stored]], 'a keyed claim by the person\'s value, with EXECUTE on idem_key_forms');
    } finally {
      await admin.none(`REVOKE EXECUTE ON FUNCTION idem_key_forms(text) FROM ${OPS}`);
      await admin.none('DELETE FROM idem_gate.claims WHERE workflow = $1', [wf]);
      await admin.none('DELETE FROM idem_gate.policies WHERE workflow = $1', [wf]);
      await admin.none('ALTER SYSTEM RESET idem_gate.secret_file');
      await admin.one('SELECT pg_reload_conf() AS ok');
      rmSync(file, { force: true });
    }
  } else console.log('# no idem_gate.secret_file (the managed edition has no keyed workflows): the keyed key search skipped');
  // bulk: the filter's keys, then retry for five, an unknown key and a repeated one
  const bulkIn = { scope: 'filter', workflow: 'orders', f_reason: 'needs_review', f_key: '', f_prefix: K('pg-'), f_prefix_end: searchOf({ prefix: K('pg-') }).prefix_end, f_older: '', selected_json: '[]' };
  const [bk] = await run('Read bulk keys', bulkIn);
  eq(bk.keys, order, 'the filter\'s keys');
  const [sel] = await run('Read bulk keys', { ...bulkIn, scope: 'selected', selected_json: JSON.stringify([keys[0], 'x']) });
  eq(sel.keys, [keys[0], 'x'], 'the selected keys, as they are');
  const issued = Math.floor(Date.now() / 1000) - 5;
  const five = order.slice(0, 5);
  const apply = { keys: JSON.stringify([...five, K('nope'), five[0]]), workflow: 'orders', decision: 'retry', reason: 'downstream never got them', actor: 'alice', issued };
  const rows = await run('Resolve many', apply);
  eq(rows.map((r) => [r.replayed, r.key, r.outcome, r.state]), [...five.map((k) => [false, k, 'decided', 'failed_retryable']), [false, K('nope'), 'not_found', null], [false, five[0], 'already_decided', null]], 'resolve many');
  const hist = await admin.any("SELECT a.key, a.actor, a.action FROM idem_gate.audit a WHERE a.workflow = 'orders' AND a.key = ANY($1) ORDER BY a.key", [five]);
  eq(hist.map((h) => [h.key, h.actor, h.action]), five.map((k) => [k, 'alice', 'resolve']), 'one audit row per claim, naming the person');
  // the same confirmation again: refused, nothing decided
  const again = await run('Resolve many', apply);
  eq(again.map((r) => [r.replayed, r.key]), [[true, null]], 'a replayed confirmation');
  eq((await admin.one("SELECT count(*)::int AS n FROM idem_gate.audit WHERE workflow = 'orders' AND key = ANY($1)", [five])).n, 5, 'audit rows after the replay');
  // a second person's retry on them later: already decided, naming alice
  const late = await run('Resolve many', { ...apply, keys: JSON.stringify([five[1]]), actor: 'bob', reason: 'late' });
  assert(late[0].outcome === 'already_decided' && /^resolve by alice at \d{4}-/.test(late[0].last_action ?? ''), `late: ${JSON.stringify(late)}`);
  const rel = await run('Release many', { ...apply, keys: JSON.stringify(order.slice(5, 8)), decision: 'release', reason: 'test events' });
  eq(rel.map((r) => r.outcome), ['decided', 'decided', 'decided'], 'release many');
  const hidden = await run('Release many', { ...apply, keys: JSON.stringify([K('pg-hidden')]), workflow: 'idem-ci-hidden', decision: 'release' });
  eq(hidden.map((r) => [r.key, r.outcome]), [[K('pg-hidden'), 'not_permitted']], 'a workflow not granted');
});

test('the n8n role cannot write the claims table nor read more than the granted columns', async () => {
  for (const sql of [
    "UPDATE idem_gate.claims SET state = 'completed'",
    'DELETE FROM idem_gate.claims',
    'SELECT result FROM idem_gate.claims LIMIT 1',
  ]) {
    let err = null;
    try {
      await n8n.any(sql);
    } catch (e) {
      err = e;
    }
    assert(err && err.code === '42501', `${sql}: expected permission denied, got ${err?.code ?? 'success'}`);
  }
});

// ------------------------------------------------------------------- main --
let passed = 0;
let failed = 0;
for (const t of tests) {
  try {
    await t.fn();
    passed += 1;
    console.log(`ok - ${t.name}`);
  } catch (e) {
    failed += 1;
    console.log(`not ok - ${t.name}\n#   ${String(e.stack ?? e).split('\n').slice(0, 3).join('\n#   ')}`);
  }
}
await admin
  .none("DELETE FROM idem_gate.claims WHERE key LIKE $1 OR (workflow IN ('orders', 'orders-by-fields') AND key = ANY($2))", [`${RUN}-%`, extraKeys])
  .catch(() => {});
if (ops) {
  await admin
    .multi(`SELECT idem_gate.revoke_workflow('${OPS}', 'orders'); DROP OWNED BY ${OPS}; DROP ROLE ${OPS};`)
    .catch((e) => console.log(`# could not drop ${OPS}: ${e.message}`));
}
pgp.end();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
