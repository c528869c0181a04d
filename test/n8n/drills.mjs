// idem_gate end-to-end drills against a real n8n.  Started by e2e.sh, which
// provides the throwaway PostgreSQL and the environment below; this script
// runs docs/n8n.md's documented n8n CLI block (import, publish) on copies of
// the examples whose placeholders are filled in, starts n8n in a fresh home,
// runs the drills, prints the table and stops n8n.
//
// E2E_ONLY=1,2,5 runs some drills only (setup is always done).
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync, closeSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { docBlock } from './doc_block.mjs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createSink } from './sink.mjs';
import { buildAll, IDS, SIDE_EFFECT_URL, CREDENTIAL } from './build-examples.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const env = process.env;
const WORK = env.E2E_WORK;
const N8N_BIN = env.N8N_BIN;
const N8N_PORT = Number(env.E2E_N8N_PORT);
const SINK_PORT = Number(env.E2E_SINK_PORT);
const BASE = `http://127.0.0.1:${N8N_PORT}`;
const GATE = `${BASE}/webhook/idem-gate/orders`;
const FIELDS = `${BASE}/webhook/idem-gate/orders-by-fields`;
const CONTROL = `${BASE}/webhook/idem-gate/control`;
const ONLY = env.E2E_ONLY ? new Set(env.E2E_ONLY.split(',').map((s) => s.trim())) : null;
const N8N_HOME = join(WORK, 'n8n-home');
const N8N_LOG = join(WORK, 'n8n.log');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.error('[drills]', ...a);

// ---------------------------------------------------------------- database --
const db = new pg.Pool({
  host: WORK,
  port: Number(env.E2E_PGPORT),
  user: 'postgres',
  database: env.E2E_DB,
  max: 4,
});
db.on('error', () => {}); // idle connections die when drill 12 stops the server
const q = async (text, params) => (await db.query(text, params)).rows;
const claim = async (key, workflow = 'orders') =>
  (await q('SELECT state::text, attempt, token, execution_id, result, last_error FROM idem_status($1, $2)', [key, workflow]))[0] ??
  null;

// ------------------------------------------------------------------- n8n --
const n8nEnv = {
  ...env,
  N8N_USER_FOLDER: N8N_HOME,
  N8N_ENCRYPTION_KEY: 'idem-gate-e2e-throwaway-key',
  N8N_LISTEN_ADDRESS: '127.0.0.1',
  N8N_HOST: '127.0.0.1',
  N8N_PORT: String(N8N_PORT),
  N8N_PROTOCOL: 'http',
  WEBHOOK_URL: `${BASE}/`,
  N8N_EDITOR_BASE_URL: `${BASE}/`,
  N8N_RUNNERS_BROKER_PORT: String(env.E2E_BROKER_PORT),
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: '127.0.0.1',
  N8N_SECURE_COOKIE: 'false',
  N8N_DIAGNOSTICS_ENABLED: 'false',
  N8N_DIAGNOSTICS_CONFIG_FRONTEND: '',
  N8N_DIAGNOSTICS_CONFIG_BACKEND: '',
  N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
  N8N_VERSION_NOTIFICATIONS_WHATS_NEW_ENABLED: 'false',
  N8N_TEMPLATES_ENABLED: 'false',
  N8N_DYNAMIC_BANNERS_ENABLED: 'false',
  N8N_HIRING_BANNER_ENABLED: 'false',
  N8N_PERSONALIZATION_ENABLED: 'false',
  N8N_LICENSE_AUTO_RENEW_ENABLED: 'false',
  N8N_COMMUNITY_PACKAGES_ENABLED: 'false',
  N8N_AI_ENABLED: 'false',
  N8N_SENTRY_DSN: '',
  // endpoints n8n would call out to, pointed at a closed loopback port
  N8N_LICENSE_SERVER_URL: 'http://127.0.0.1:9/',
  N8N_TEMPLATES_HOST: 'http://127.0.0.1:9/',
  N8N_VERSION_NOTIFICATIONS_ENDPOINT: 'http://127.0.0.1:9/',
  N8N_DYNAMIC_BANNERS_ENDPOINT: 'http://127.0.0.1:9/',
  N8N_FRONTEND_SENTRY_DSN: '',
  EXTERNAL_FRONTEND_HOOKS_URLS: '',
  N8N_LOG_LEVEL: env.E2E_N8N_LOG_LEVEL ?? 'info',
  N8N_LOG_OUTPUT: 'console',
  EXECUTIONS_MODE: 'regular',
  DB_TYPE: 'sqlite',
  NODE_OPTIONS: '--max-old-space-size=4096',
};
delete n8nEnv.PGHOST;
delete n8nEnv.PGPORT;
delete n8nEnv.PGUSER;

function n8nCli(args) {
  return execFileSync(N8N_BIN, args, { env: n8nEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

let n8nProc = null;
async function startN8n() {
  const fd = openSync(N8N_LOG, 'a');
  n8nProc = spawn(N8N_BIN, ['start'], { env: n8nEnv, detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  writeFileSync(join(WORK, 'n8n.pid'), String(n8nProc.pid));
  const t0 = Date.now();
  while (Date.now() - t0 < 180000) {
    try {
      const r = await fetch(`${BASE}/healthz/readiness`);
      if (r.status === 200) {
        // ready once the gate's webhook answers (a delivery without id: 400, no claim)
        const p = await post(GATE, { probe: true });
        if (p.status === 400) return;
      }
    } catch {}
    if (n8nProc.exitCode !== null) throw new Error(`n8n exited (${n8nProc.exitCode}); see ${N8N_LOG}`);
    await sleep(500);
  }
  throw new Error(`n8n did not become ready; see ${N8N_LOG}`);
}
async function stopN8n(signal = 'SIGTERM') {
  if (!n8nProc) return;
  const p = n8nProc;
  n8nProc = null;
  const exited = new Promise((r) => (p.exitCode !== null ? r() : p.once('exit', r)));
  try {
    process.kill(-p.pid, signal); // the whole group: n8n and its task runner
  } catch {}
  await Promise.race([exited, sleep(30000)]);
  try {
    process.kill(-p.pid, 'SIGKILL');
  } catch {}
  rmSync(join(WORK, 'n8n.pid'), { force: true });
}

// ------------------------------------------------------------------ HTTP --
async function post(url, body, timeoutMs = 60000) {
  try {
    const r = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await r.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: r.status, outcome: r.headers.get('x-idem-gate-outcome'), json, text };
  } catch (e) {
    return { status: 0, outcome: null, json: null, text: String(e.cause?.code ?? e.message) };
  }
}
async function pool(tasks, width) {
  const results = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]();
      }
    }),
  );
  return results;
}
const order = (id, extra = {}) => ({ id, type: 'order.paid', amount: { value: 4200, currency: 'EUR' }, ...extra });
const statusSummary = (rs) => {
  const m = {};
  for (const r of rs) {
    const k = `${r.status}${r.outcome ? '/' + r.outcome : ''}`;
    m[k] = (m[k] ?? 0) + 1;
  }
  return Object.entries(m)
    .map(([k, v]) => `${v}x${k}`)
    .join(' ');
};

// ----------------------------------------------------------- REST (retry) --
let cookie = null;
const BROWSER_ID = 'idem-gate-drills-browser';
async function rest(method, path, body) {
  const r = await fetch(`${BASE}/rest${path}`, {
    method,
    headers: {
      'content-type': 'application/json',
      'browser-id': BROWSER_ID, // n8n binds its auth cookie to this header
      ...(cookie ? { cookie } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const setCookie = r.headers.get('set-cookie');
  const auth = setCookie && /(^|,\s*)(n8n-auth=[^;]*)/.exec(setCookie);
  if (auth && auth[2] !== 'n8n-auth=') cookie = auth[2];
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, json, text };
}
const SHOT_ID = 'idemGateShot0001';
const OWNER = { email: 'drills@idem-gate.invalid', password: 'Drills-e2e-1234', firstName: 'Drill', lastName: 'Runner' };
async function ownerLogin() {
  const creds = OWNER;
  let r = await rest('POST', '/owner/setup', creds);
  if (r.status !== 200) r = await rest('POST', '/login', { emailOrLdapLoginId: creds.email, password: creds.password });
  if (r.status === 200 && !cookie) throw new Error('n8n login gave no n8n-auth cookie');
  if (r.status !== 200) throw new Error(`n8n login failed: ${r.status} ${r.text.slice(0, 200)}`);
}
async function execution(id) {
  const r = await rest('GET', `/executions/${id}`);
  return r.json?.data ?? r.json;
}
// the gate's executions, to find the ones a delivery started: ids before it,
// then the new ones once they have a final status (n8n saves an execution
// when it ends)
async function executionList(workflowId) {
  const filter = encodeURIComponent(JSON.stringify({ workflowId }));
  const r = await rest('GET', `/executions?filter=${filter}&limit=50`);
  if (r.status !== 200) throw new Error(`GET /rest/executions: ${r.status} ${r.text.slice(0, 120)}`);
  return r.json?.data?.results ?? r.json?.results ?? [];
}
async function newExecutions(workflowId, before, want = 1, timeoutMs = 20000) {
  const t = Date.now();
  let list = [];
  while (Date.now() - t < timeoutMs) {
    list = (await executionList(workflowId))
      .filter((e) => !before.has(String(e.id)))
      .filter((e) => !['new', 'running', 'waiting'].includes(e.status));
    if (list.length >= want) break;
    await sleep(500);
  }
  return list.map((e) => ({ id: String(e.id), status: e.status }));
}
const executionIds = async (workflowId) => new Set((await executionList(workflowId)).map((e) => String(e.id)));
// an execution once it has ended (the run goes on after its answer was sent)
async function finishedExecution(id, timeoutMs = 30000) {
  const t = Date.now();
  let ex = await execution(id);
  while (Date.now() - t < timeoutMs && ['new', 'running', 'waiting', undefined].includes(ex?.status)) {
    await sleep(500);
    ex = await execution(id);
  }
  return ex;
}
async function retryExecution(id, loadWorkflow) {
  return rest('POST', `/executions/${id}/retry`, { loadWorkflow });
}

// --------------------------------------------------------------- setup --
const sink = createSink({ port: SINK_PORT, delayMs: Number(env.E2E_SINK_DELAY_MS ?? 300) });
const SINK_URL = `http://127.0.0.1:${SINK_PORT}/charge`;

// replace a placeholder that the docs name; fail when it is not there, so a
// changed example or doc cannot make the test run something else unnoticed
function fill(text, placeholder, value, what) {
  if (!text.includes(placeholder)) throw new Error(`${what}: the placeholder ${placeholder} is gone`);
  return text.split(placeholder).join(value);
}

async function setup() {
  mkdirSync(N8N_HOME, { recursive: true });
  const files = buildAll();
  for (const f of ['webhook-gate.json', 'webhook-gate-fields.json', 'error-workflow.json', 'ungated-control.json', 'credentials.postgres.json']) {
    if (readFileSync(join(ROOT, 'examples/n8n', f), 'utf8') !== JSON.stringify(files[f], null, 2) + '\n')
      log(`warning: examples/n8n/${f} differs from build-examples.mjs`);
  }
  // a copy of the repository's examples/n8n with the placeholders that
  // docs/n8n.md names filled in: the credential's port and password (step 3),
  // the side effect's URL (step 4)
  const dir = join(WORK, 'import');
  const ex = join(dir, 'examples', 'n8n');
  mkdirSync(ex, { recursive: true });
  let cred = readFileSync(join(ROOT, 'examples/n8n/credentials.postgres.json'), 'utf8');
  cred = fill(cred, '"port": 5432', `"port": ${Number(env.E2E_PGPORT)}`, 'credentials.postgres.json');
  cred = fill(cred, '"password": "change-me"', `"password": ${JSON.stringify(env.E2E_ROLE_PASSWORD)}`, 'credentials.postgres.json');
  const c = JSON.parse(cred)[0].data;
  if (c.host !== '127.0.0.1' || c.database !== env.E2E_DB || c.user !== env.E2E_ROLE)
    throw new Error(`credentials.postgres.json: host/database/user ${c.host}/${c.database}/${c.user} are not the documented ones`);
  writeFileSync(join(ex, 'credentials.postgres.json'), cred);
  for (const f of ['webhook-gate.json', 'webhook-gate-fields.json', 'error-workflow.json', 'ungated-control.json']) {
    const text = readFileSync(join(ROOT, 'examples/n8n', f), 'utf8');
    writeFileSync(join(ex, f), f === 'error-workflow.json' ? text : fill(text, SIDE_EFFECT_URL, SINK_URL, f));
  }
  // docs/n8n.md step 3, as written, with the n8n under test first on PATH
  const block = docBlock(join(ROOT, 'docs/n8n.md'), 'n8n-import');
  log(`docs/n8n.md run:n8n-import:\n${block.trimEnd()}`);
  execFileSync('bash', ['-euo', 'pipefail', '-c', block], {
    cwd: dir,
    env: { ...n8nEnv, PATH: `${dirname(N8N_BIN)}:${env.PATH}` },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // the workflows that only the drills use: the fields variant and the control
  for (const [f, id] of [['webhook-gate-fields.json', IDS.fields], ['ungated-control.json', IDS.control]]) {
    log(`n8n import:workflow ${f}; publish:workflow --id=${id}`);
    n8nCli(['import:workflow', `--input=${join(ex, f)}`]);
    n8nCli(['publish:workflow', `--id=${id}`]);
  }
  // for the picture in docs/img: the gate exactly as committed (the documented
  // side effect URL), as a second, unpublished workflow
  if (env.E2E_SCREENSHOT_DIR) {
    const shot = JSON.parse(readFileSync(join(ROOT, 'examples/n8n/webhook-gate.json'), 'utf8'));
    shot.id = SHOT_ID;
    writeFileSync(join(dir, 'webhook-gate-shot.json'), JSON.stringify(shot));
    n8nCli(['import:workflow', `--input=${join(dir, 'webhook-gate-shot.json')}`]);
  }
  await sink.start();
  log('starting n8n');
  await startN8n();
  await ownerLogin();
  if (env.E2E_SCREENSHOT_DIR) {
    const { screenshots } = await import('./screenshot.mjs');
    const files = await screenshots({
      base: BASE,
      email: OWNER.email,
      password: OWNER.password,
      outDir: env.E2E_SCREENSHOT_DIR,
      workflows: [
        { id: SHOT_ID, file: 'n8n-webhook-gate.png' },
        { id: IDS.error, file: 'n8n-error-workflow.png' },
      ],
    });
    log(`screenshots: ${files.join(', ')}`);
    editorImport = await checkEditorImportSafely();
    // the browser may have set the owner up again (see screenshot.mjs): sign in afresh
    cookie = null;
    await ownerLogin();
  }
}

// docs/n8n.md step 3's editor route, in the browser (see editor-import.mjs)
let editorImport = null;
async function checkEditorImportSafely() {
  try {
    const { checkEditorImport } = await import('./editor-import.mjs');
    const r = await checkEditorImport({
      base: BASE,
      email: OWNER.email,
      password: OWNER.password,
      gateFile: readFileSync(join(ROOT, 'examples/n8n/webhook-gate.json'), 'utf8'),
      credentialId: CREDENTIAL.id,
      workDir: WORK,
      rest,
    });
    log(`editor import: ${JSON.stringify(r)}`);
    return r;
  } catch (e) {
    return { error: String(e.stack ?? e) };
  }
}
function recordEditorImport() {
  const r = editorImport;
  if (!r) return;
  const all = (m, v) => m && Object.keys(m).length === 3 && Object.values(m).every((x) => x === v);
  record('editor', 'Import from file (docs/n8n.md step 3): a known credential id is kept; an unknown one is dropped and opening each Postgres node selects the credential; the Error workflow setting is not imported',
    r.error ? `error: ${r.error}` :
      `known id: ${JSON.stringify(r.known.credentials)}; unknown id: after import ${r.unknown.issuesAfterImport} nodes with issues, after opening the nodes ${r.unknown.issuesBeforeSave}, saved ${JSON.stringify(r.unknown.credentials)}; error workflow setting after import: ${r.known.errorWorkflow}/${r.unknown.errorWorkflow}`,
    !r.error && all(r.known.credentials, CREDENTIAL.id) && r.unknown.issuesAfterImport > 0 &&
      all(r.unknown.credentials, CREDENTIAL.id) && r.unknown.issuesBeforeSave === 0 &&
      r.known.errorWorkflow === null && r.unknown.errorWorkflow === null,
    0, 0);
}

// -------------------------------------------------------------- drills --
const rows = [];
function record(drill, expected, observed, pass, sent, effects) {
  rows.push({ drill, expected, observed, pass: !!pass, sent, effects });
  log(`drill ${drill}: ${pass ? 'PASS' : 'FAIL'}: ${observed}`);
}
const want = (n) => !ONLY || ONLY.has(String(n));
const okAll = (rs) => rs.every((r) => r.status >= 200 && r.status < 300);
const execIds = {};

async function drill1() {
  const r = await post(GATE, order('evt-d1'));
  const c = await claim('evt-d1');
  const n = sink.count('evt-d1');
  record(1, '1 side effect, 200, claim completed', `${statusSummary([r])}, effects=${n}, claim=${c?.state}`,
    r.status === 200 && n === 1 && c?.state === 'completed', 1, n);
}

async function drill2() {
  const a = await post(GATE, order('evt-d2'));
  const b = await post(GATE, order('evt-d2'));
  const n = sink.count('evt-d2');
  const sameReceipt = a.json?.receipt?.effect_id && a.json.receipt.effect_id === b.json?.receipt?.effect_id;
  record(2, '1 side effect, two 200s (2nd: completed + receipt)',
    `${statusSummary([a, b])}, effects=${n}, same receipt=${!!sameReceipt}`,
    a.status === 200 && b.status === 200 && b.outcome === 'completed' && n === 1 && sameReceipt, 2, n);
}

async function drill3() {
  const rs = await Promise.all(Array.from({ length: 20 }, () => post(GATE, order('evt-d3'))));
  const n = sink.count('evt-d3');
  record(3, '1 side effect, 20 x 2xx', `${statusSummary(rs)}, effects=${n}`, okAll(rs) && n === 1, 20, n);
}

async function drill4() {
  const ids = Array.from({ length: 200 }, (_, i) => `evt-d4-${String(i).padStart(3, '0')}`);
  const deliveries = ids.flatMap((id) => [id, id, id]);
  for (let i = deliveries.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [deliveries[i], deliveries[j]] = [deliveries[j], deliveries[i]];
  }
  const t0 = Date.now();
  const rs = await pool(deliveries.map((id) => () => post(GATE, order(id))), 16);
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  const effects = ids.reduce((s, id) => s + sink.count(id), 0);
  const exactlyOnce = ids.every((id) => sink.count(id) === 1);
  const [{ n: completed }] = await q(
    "SELECT count(*)::int AS n FROM idem_gate.claims WHERE workflow = 'orders' AND key LIKE 'evt-d4-%' AND state = 'completed'");
  record(4, '200 side effects (each event once), all 2xx',
    `${statusSummary(rs)}, effects=${effects}, each once=${exactlyOnce}, completed claims=${completed}, ${secs}s`,
    okAll(rs) && effects === 200 && exactlyOnce && completed === 200, 600, effects);
}

async function drill5() {
  await sink.setMode('refuse'); // the side effect's host refuses connections
  const a = await post(GATE, order('evt-d5'));
  const c1 = await claim('evt-d5');
  execIds.d5 = c1?.execution_id;
  const ex = c1?.execution_id ? await finishedExecution(c1.execution_id) : null;
  await sink.setMode('ok');
  const b = await post(GATE, order('evt-d5'));
  const c2 = await claim('evt-d5');
  const c = await post(GATE, order('evt-d5'));
  const n = sink.count('evt-d5');
  record(5, 'refused: 503 + failed_retryable, execution error; redelivery performs once',
    `1st ${statusSummary([a])} claim=${c1?.state} execution=${ex?.status}; 2nd ${statusSummary([b])} claim=${c2?.state} attempt=${c2?.attempt}; 3rd ${statusSummary([c])}; effects=${n}`,
    a.status === 503 && c1?.state === 'failed_retryable' && ex?.status === 'error' && b.status === 200 && c2?.state === 'completed' &&
      c2?.attempt === 2 && c.outcome === 'completed' && n === 1, 3, n);
}

async function drill6() {
  const alertsBefore = await alertCount();
  const listener = new pg.Client({ host: WORK, port: Number(env.E2E_PGPORT), user: 'postgres', database: env.E2E_DB });
  await listener.connect();
  const alerts = [];
  listener.on('notification', (m) => alerts.push(m.payload));
  await listener.query('LISTEN idem_gate_alert');

  const arrived = sink.hold('evt-d6');
  const first = post(GATE, order('evt-d6'), 120000);
  await Promise.race([arrived, sleep(30000)]);
  const effectsAtKill = sink.count('evt-d6');
  const cKill = await claim('evt-d6');
  execIds.d6 = cKill?.execution_id;
  await stopN8n('SIGKILL'); // crash after the side effect, before idem_complete
  sink.release('evt-d6');
  const a = await first;
  await startN8n();
  // n8n marks the killed run crashed and runs the published error workflow,
  // which moves the claim to needs_review (the run stopped at Side effect)
  const t1 = Date.now();
  let cAfter = await claim('evt-d6');
  while (Date.now() - t1 < 60000 && cAfter?.state !== 'needs_review') {
    await sleep(500);
    cAfter = await claim('evt-d6');
  }
  const reviewSecs = ((Date.now() - t1) / 1000).toFixed(0);
  const b = await post(GATE, order('evt-d6'));
  let alerted = null;
  if (env.E2E_HAS_STUCK_AFTER === '1') {
    const t0 = Date.now();
    while (Date.now() - t0 < 60000 && alerts.length === 0) await sleep(500);
    alerted = alerts.length > 0 || (await alertCount()) > alertsBefore;
  }
  const c = await post(GATE, order('evt-d6'));
  const cEnd = await claim('evt-d6');
  await listener.end();
  const n = sink.count('evt-d6');
  const alertText = alerted === null ? 'alert: not checked (no background worker)' : `alerted=${alerted} (${alerts.length} NOTIFY)`;
  record(6, 'kill n8n after the effect: after the restart the claim is needs_review (error workflow), redeliveries 200 needs_review, alerted, never a 2nd effect',
    `killed with effects=${effectsAtKill} claim=${cKill?.state}; sender saw ${a.status || a.text}; after restart claim=${cAfter?.state} (${reviewSecs}s) last_error=${JSON.stringify(cAfter?.last_error ?? null)}; redelivery ${statusSummary([b])}; ${alertText}; later ${statusSummary([c])} claim=${cEnd?.state}; effects=${n}`,
    effectsAtKill === 1 && cKill?.state === 'processing' && cAfter?.state === 'needs_review' &&
      b.status === 200 && b.outcome === 'needs_review' && c.status === 200 && cEnd?.state === 'needs_review' &&
      n === 1 && alerted !== false,
    3, n);
}
async function alertCount() {
  try {
    const [r] = await q('SELECT alerts FROM idem_gate.stats');
    return Number(r?.alerts ?? 0);
  } catch {
    return 0;
  }
}

async function drill7() {
  // retry, from n8n's REST API, the failed execution of drill 5 (side effect
  // refused) and the crashed one of drill 6 (killed after the side effect);
  // log in afresh: n8n was restarted by drill 6
  cookie = null;
  await ownerLogin();
  const parts = [];
  let pass = true;
  let sent = 0;
  for (const [name, id, key] of [['d5', execIds.d5, 'evt-d5'], ['d6', execIds.d6, 'evt-d6']]) {
    if (!id) {
      parts.push(`${name}: no execution id`);
      pass = false;
      continue;
    }
    const before = sink.count(key);
    const ex = await execution(id);
    for (const loadWorkflow of [false, true]) {
      const r = await retryExecution(id, loadWorkflow);
      sent += 1;
      await sleep(1500);
      const rs = r.json?.data ?? r.json;
      const what = r.status === 200 ? `retry ran, status ${rs?.status ?? rs}` : `refused ${r.status} ${r.json?.message ?? r.text.slice(0, 80)}`;
      parts.push(`${name} exec ${id} (${ex?.status}) retry(loadWorkflow=${loadWorkflow}): ${what}`);
      // n8n must have accepted the retry of the failed run of drill 5
      if (name === 'd5' && r.status !== 200) pass = false;
      if (r.status === 401 || r.status === 403) pass = false;
    }
    const after = sink.count(key);
    const c = await claim(key);
    parts.push(`${key} effects ${before}->${after}, claim=${c?.state}`);
    if (after !== before || after !== 1) pass = false;
  }
  const n = sink.count('evt-d5') + sink.count('evt-d6');
  record(7, 'retrying failed/crashed executions from n8n performs no extra effect', parts.join('; '), pass, sent, n);
}

async function drill8() {
  const payload = { type: 'order.paid', amount: { value: 990, currency: 'EUR' }, customer: 'c-8' };
  const a = await post(GATE, { id: 'evt-d8-a', ...payload });
  const b = await post(GATE, { id: 'evt-d8-b', ...payload });
  const n = sink.count('evt-d8-a') + sink.count('evt-d8-b');
  record(8, 'two event ids, identical payloads: 2 side effects', `${statusSummary([a, b])}, effects=${n}`,
    a.status === 200 && b.status === 200 && n === 2, 2, n);
}

async function drill9() {
  const [{ n: before }] = await q('SELECT count(*)::int AS n FROM idem_gate.claims');
  const totalBefore = sink.total();
  const r = await post(GATE, { type: 'order.paid', amount: { value: 1, currency: 'EUR' } });
  const [{ n: after }] = await q('SELECT count(*)::int AS n FROM idem_gate.claims');
  const effects = sink.total() - totalBefore;
  record(9, '400, no claim, no side effect', `${statusSummary([r])}, claims ${before}->${after}, effects=${effects}`,
    r.status === 400 && after === before && effects === 0, 1, effects);
}

async function drill10() {
  // drills 2 and 3's traffic against the ungated control workflow
  const a = await post(CONTROL, order('ctl-d2'));
  const b = await post(CONTROL, order('ctl-d2'));
  const rs = await Promise.all(Array.from({ length: 20 }, () => post(CONTROL, order('ctl-d3'))));
  const n2 = sink.count('ctl-d2');
  const n3 = sink.count('ctl-d3');
  record(10, 'ungated control: duplicates performed (2 events, 22 deliveries -> 22 effects)',
    `${statusSummary([a, b, ...rs])}, effects: twice-delivered event=${n2}, 20-concurrent event=${n3}; gated drills 2+3 gave ${sink.count('evt-d2') + sink.count('evt-d3')}`,
    n2 === 2 && n3 === 20, 22, n2 + n3);
}

async function drill11() {
  // the variant keyed by payload fields: same identity -> one effect
  const base = { customer_id: 'c-11', order_ref: 'R-11', amount: { value: 1500, currency: 'EUR' } };
  const a = await post(FIELDS, { ...base, sent_at: '2024-01-01T00:00:00Z' });
  const b = await post(FIELDS, { ...base, sent_at: '2024-01-01T00:05:00Z' });
  const c = await post(FIELDS, { ...base, order_ref: 'R-12' });
  const d = await post(FIELDS, { customer_id: 'c-11' });
  const keys = await q("SELECT key, state::text FROM idem_gate.claims WHERE workflow = 'orders-by-fields' ORDER BY created_at");
  const n = keys.reduce((s, k) => s + sink.count(k.key), 0);
  record(11, 'fields-keyed variant: resend of same identity 1 effect, other identity 1, none 400',
    `${statusSummary([a, b, c, d])}, claims=${keys.length}, effects=${n}`,
    a.status === 200 && b.outcome === 'completed' && c.status === 200 && d.status === 400 && keys.length === 2 && n === 2,
    4, n);
}

async function drill12() {
  // gate errors answer the sender and end the execution as failed
  cookie = null;
  await ownerLogin();
  const a = await post(GATE, order('evt-d12'));
  let before = await executionIds(IDS.gate);
  const b = await post(GATE, order('evt-d12', { amount: { value: 9999, currency: 'EUR' } }));
  const exB = await newExecutions(IDS.gate, before);
  const cB = await claim('evt-d12');
  // the database down: stop the server, deliver, start it again
  const pgctl = (...args) =>
    execFileSync('runuser', ['-u', 'postgres', '--', join(env.E2E_PG_BIN, 'pg_ctl'), '-D', env.E2E_PGDATA, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  before = await executionIds(IDS.gate);
  pgctl('-m', 'fast', '-w', 'stop');
  let c;
  try {
    c = await post(GATE, order('evt-d12-down'));
  } finally {
    pgctl('-l', join(WORK, 'postgres.log'), '-w', 'start');
  }
  const exC = await newExecutions(IDS.gate, before);
  const cC = await claim('evt-d12-down');
  // the gate works again once the database is back
  let d = null;
  for (let i = 0; i < 10; i++) {
    d = await post(GATE, order('evt-d12-back'));
    if (d.status === 200) break;
    await sleep(1000);
  }
  const n = sink.count('evt-d12') + sink.count('evt-d12-down');
  record(12, 'gate errors: another payload under a used id 422, database down 500; both executions error; no effect',
    `1st ${statusSummary([a])}; other payload ${statusSummary([b])} execution=${exB.map((e) => e.status).join(',')} claim=${cB?.state}; database down ${statusSummary([c])} execution=${exC.map((e) => e.status).join(',')} claim=${cC?.state ?? 'none'}; back up ${statusSummary([d])}; effects=${n}`,
    a.status === 200 && b.status === 422 && b.outcome === 'error' && exB.length === 1 && exB[0].status === 'error' &&
      cB?.state === 'completed' && c.status === 500 && c.outcome === 'error' && exC.length === 1 &&
      exC[0].status === 'error' && cC === null && d?.status === 200 && n === 1,
    4, n);
}

// ----------------------------------------------------------------- main --
function printTable() {
  const head = ['drill', 'expected', 'observed', 'sent', 'effects', 'result'];
  const lines = rows.map((r) => [String(r.drill), r.expected, r.observed, String(r.sent), String(r.effects), r.pass ? 'PASS' : 'FAIL']);
  console.log(`\nidem_gate n8n end-to-end drills (n8n ${n8nVersion}, PostgreSQL ${pgVersion})\n`);
  console.log('| ' + head.join(' | ') + ' |');
  console.log('|' + head.map(() => '---').join('|') + '|');
  for (const l of lines) console.log('| ' + l.map((c) => c.replace(/\|/g, '/')).join(' | ') + ' |');
  const failed = rows.filter((r) => !r.pass).length;
  console.log(`\n${rows.length - failed} passed, ${failed} failed`);
  return failed;
}

let n8nVersion = '?';
let pgVersion = '?';
let failed = 1;
try {
  n8nVersion = n8nCli(['--version']).trim();
  pgVersion = (await q('SHOW server_version'))[0].server_version;
  await setup();
  const drills = [drill1, drill2, drill3, drill4, drill5, drill6, drill7, drill8, drill9, drill10, drill11, drill12];
  for (let i = 0; i < drills.length; i++) {
    if (!want(i + 1)) continue;
    try {
      await drills[i]();
    } catch (e) {
      record(i + 1, '-', `error: ${e.stack ?? e}`, false, 0, 0);
    }
  }
  recordEditorImport();
  failed = printTable();
} catch (e) {
  console.error(e);
} finally {
  await stopN8n();
  await sink.stop();
  await db.end();
}
process.exit(failed ? 1 : 0);
