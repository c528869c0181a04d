// The harness of the end-to-end drills (drills.mjs): the database, n8n
// (its environment, CLI, start and stop), HTTP deliveries, n8n's REST API
// (sign-in, executions, the editor's Save and Publish), the side effect's
// sink, and the table of results that every drill records into.
import { spawn, execFileSync } from 'node:child_process';
import { openSync, writeFileSync, closeSync, rmSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { docBlock } from './doc_block.mjs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createSink } from './sink.mjs';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, '..', '..');
export const env = process.env;
export const WORK = env.E2E_WORK;
export const N8N_BIN = env.N8N_BIN;
export const N8N_PORT = Number(env.E2E_N8N_PORT);
export const SINK_PORT = Number(env.E2E_SINK_PORT);
export const BASE = `http://127.0.0.1:${N8N_PORT}`;
export const GATE = `${BASE}/webhook/idem-gate/orders`;
export const FIELDS = `${BASE}/webhook/idem-gate/orders-by-fields`;
export const CONTROL = `${BASE}/webhook/idem-gate/control`;
export const ONLY = env.E2E_ONLY ? new Set(env.E2E_ONLY.split(',').map((s) => s.trim())) : null;
export const N8N_HOME = join(WORK, 'n8n-home');
export const N8N_LOG = join(WORK, 'n8n.log');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const log = (...a) => console.error('[drills]', ...a);

// ---------------------------------------------------------------- database --
export const db = new pg.Pool({
  host: WORK,
  port: Number(env.E2E_PGPORT),
  user: 'postgres',
  database: env.E2E_DB,
  max: 4,
});
db.on('error', () => {}); // idle connections die when drill 12 stops the server
export const q = async (text, params) => (await db.query(text, params)).rows;
export const claim = async (key, workflow = 'orders') =>
  (await q('SELECT state::text, attempt, token, execution_id, result, last_error FROM idem_status($1, $2)', [key, workflow]))[0] ??
  null;

// ------------------------------------------------------------------- n8n --
// docs/n8n.md run:n8n-offline: NAME=value lines (an EnvironmentFile)
export function offlineEnv() {
  const vars = {};
  for (const line of docBlock(join(ROOT, 'docs/n8n.md'), 'n8n-offline').split('\n')) {
    if (/^\s*(#|$)/.test(line)) continue;
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!m) throw new Error(`docs/n8n.md run:n8n-offline: not NAME=value: ${line}`);
    vars[m[1]] = m[2];
  }
  if (vars.N8N_DIAGNOSTICS_ENABLED !== 'false') throw new Error('docs/n8n.md run:n8n-offline lost N8N_DIAGNOSTICS_ENABLED=false');
  return vars;
}
export const n8nEnv = {
  ...env,
  N8N_USER_FOLDER: N8N_HOME,
  N8N_ENCRYPTION_KEY: 'idem-gate-e2e-throwaway-key',
  N8N_LISTEN_ADDRESS: '127.0.0.1',
  N8N_HOST: '127.0.0.1',
  N8N_PORT: String(N8N_PORT),
  N8N_PROTOCOL: 'http',
  WEBHOOK_URL: `${BASE}/`,
  N8N_WEBHOOK_URL: `${BASE}/`, // the name in n8n 2.40 and later (WEBHOOK_URL still works there, with a deprecation warning)
  N8N_EDITOR_BASE_URL: `${BASE}/`,
  N8N_RUNNERS_BROKER_PORT: String(env.E2E_BROKER_PORT),
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: '127.0.0.1',
  N8N_SECURE_COOKIE: 'false',
  // telemetry, version checks, templates, banners and the other calls out
  // switched off: docs/n8n.md's block run:n8n-offline, as users are shown it
  ...offlineEnv(),
  N8N_LOG_LEVEL: env.E2E_N8N_LOG_LEVEL ?? 'info',
  N8N_LOG_OUTPUT: 'console',
  EXECUTIONS_MODE: 'regular',
  DB_TYPE: 'sqlite',
  NODE_OPTIONS: '--max-old-space-size=4096',
  // n8n 2.40 and later: its MCP server registry polls api.n8n.io; the name is unknown
  // to (and refused by) 2.8.4
  ...(existsSync(join(dirname(N8N_BIN), '..', 'n8n', 'dist', 'modules', 'mcp-registry')) ? { N8N_DISABLED_MODULES: 'mcp-registry' } : {}),
  // the node that this n8n needs (install_n8n.sh), first on PATH for n8n only
  PATH: `${env.E2E_N8N_NODE_DIR}:${dirname(N8N_BIN)}:${env.PATH}`,
};
delete n8nEnv.PGHOST;
delete n8nEnv.PGPORT;
delete n8nEnv.PGUSER;

export function n8nCli(args) {
  return execFileSync(N8N_BIN, args, { env: n8nEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

let n8nProc = null;
export async function startN8n() {
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
export async function stopN8n(signal = 'SIGTERM') {
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
export async function post(url, body, timeoutMs = 60000) {
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
export async function pool(tasks, width) {
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
export const order = (id, extra = {}) => ({ id, type: 'order.paid', amount: { value: 4200, currency: 'EUR' }, ...extra });
export const statusSummary = (rs) => {
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
export const BROWSER_ID = 'idem-gate-drills-browser';
export async function rest(method, path, body, again = true) {
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
  // a session that n8n dropped (seen once with n8n 2.40.7 on a loaded
  // machine, right after the owner set-up): sign in again, once
  if (r.status === 401 && again && cookie && !['/login', '/owner/setup'].includes(path)) {
    log(`${method} /rest${path}: 401, signing in again`);
    await r.text();
    cookie = null;
    await ownerLogin();
    return rest(method, path, body, false);
  }
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, json, text };
}
export const OWNER = { email: 'drills@idem-gate.invalid', password: 'Drills-e2e-1234', firstName: 'Drill', lastName: 'Runner' };
// sign in afresh (after n8n restarted, or after a browser set the owner up again)
export async function relogin() {
  cookie = null;
  await ownerLogin();
}
export async function ownerLogin() {
  const creds = OWNER;
  let r = await rest('POST', '/owner/setup', creds);
  if (r.status !== 200) r = await rest('POST', '/login', { emailOrLdapLoginId: creds.email, password: creds.password });
  if (r.status === 200 && !cookie) throw new Error('n8n login gave no n8n-auth cookie');
  if (r.status !== 200) throw new Error(`n8n login failed: ${r.status} ${r.text.slice(0, 200)}`);
}
export async function execution(id) {
  const r = await rest('GET', `/executions/${id}`);
  return r.json?.data ?? r.json;
}
// the gate's executions, to find the ones a delivery started: ids before it,
// then the new ones once they have a final status (n8n saves an execution
// when it ends)
export async function executionList(workflowId) {
  const filter = encodeURIComponent(JSON.stringify({ workflowId }));
  const r = await rest('GET', `/executions?filter=${filter}&limit=50`);
  if (r.status !== 200) throw new Error(`GET /rest/executions: ${r.status} ${r.text.slice(0, 120)}`);
  return r.json?.data?.results ?? r.json?.results ?? [];
}
export async function newExecutions(workflowId, before, want = 1, timeoutMs = 20000) {
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
export const executionIds = async (workflowId) => new Set((await executionList(workflowId)).map((e) => String(e.id)));
// an execution once it has ended (the run goes on after its answer was sent)
export async function finishedExecution(id, timeoutMs = 30000) {
  const t = Date.now();
  let ex = await execution(id);
  while (Date.now() - t < timeoutMs && ['new', 'running', 'waiting', undefined].includes(ex?.status)) {
    await sleep(500);
    ex = await execution(id);
  }
  return ex;
}
export async function retryExecution(id, loadWorkflow) {
  return rest('POST', `/executions/${id}/retry`, { loadWorkflow });
}

// the downstream of the side effect (test/n8n/sink.mjs)
export const sink = createSink({ port: SINK_PORT, delayMs: Number(env.E2E_SINK_DELAY_MS ?? 300) });
export const SINK_URL = `http://127.0.0.1:${SINK_PORT}/charge`;

// replace a placeholder that the docs name; fail when it is not there, so a
// changed example or doc cannot make the test run something else unnoticed
export function fill(text, placeholder, value, what) {
  if (!text.includes(placeholder)) throw new Error(`${what}: the placeholder ${placeholder} is gone`);
  return text.split(placeholder).join(value);
}

// the editor's Save and Publish buttons, as the editor sends them: Save is a
// PATCH of the whole workflow (a new draft version), Publish is POST
// /activate naming the version to put live (the dialog asks for its name).
export async function getWorkflow(id) {
  const r = await rest('GET', `/workflows/${id}`);
  if (r.status !== 200) throw new Error(`GET /rest/workflows/${id}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.json?.data ?? r.json;
}
export const sideEffectUrl = (wf) => wf.nodes.find((n) => n.name === 'Side effect')?.parameters?.url;
export async function editorSetSideEffectUrl(id, url) {
  const wf = await getWorkflow(id);
  if (!sideEffectUrl(wf)) throw new Error(`workflow ${id} has no Side effect URL`);
  const nodes = wf.nodes.map((n) => (n.name === 'Side effect' ? { ...n, parameters: { ...n.parameters, url } } : n));
  const body = { name: wf.name, nodes, connections: wf.connections, settings: wf.settings, pinData: wf.pinData ?? {}, versionId: wf.versionId };
  if (wf.checksum) body.expectedChecksum = wf.checksum;
  const r = await rest('PATCH', `/workflows/${id}`, body);
  if (r.status !== 200) throw new Error(`Save (PATCH /rest/workflows/${id}): ${r.status} ${r.text.slice(0, 200)}`);
  const saved = r.json?.data ?? r.json;
  if (sideEffectUrl(saved) !== url) throw new Error(`Save did not keep the URL: ${sideEffectUrl(saved)}`);
  return saved;
}
// Publish, then wait until the new version serves the webhook.  n8n 2.8.4
// applies a publication before it answers; n8n 2.40 and later answer first and
// applies it in the background (an outbox), so a delivery right after Publish
// can still run the previous version.  GET .../publication-status (2.40 and later;
// 404 before) tells when the published version is live: what the editor
// waits for before it shows "Published".
export const publishLag = [];
export async function editorPublish(id, name) {
  const wf = await getWorkflow(id);
  const body = { versionId: wf.versionId, name, description: 'published by the idem_gate drills' };
  if (wf.checksum) body.expectedChecksum = wf.checksum;
  const t0 = Date.now();
  const r = await rest('POST', `/workflows/${id}/activate`, body);
  if (r.status !== 200) throw new Error(`Publish (POST /rest/workflows/${id}/activate): ${r.status} ${r.text.slice(0, 200)}`);
  for (;;) {
    const st = await rest('GET', `/workflows/${id}/publication-status`);
    if (st.status === 404) break; // n8n without the publication service: live at once
    const d = st.json?.data ?? st.json;
    if (st.status === 200 && d?.liveVersionId === wf.versionId && !d?.pendingVersionId) break;
    if (Date.now() - t0 > 60000) throw new Error(`Publish of ${id}: version ${wf.versionId} not live after 60 s: ${st.text.slice(0, 200)}`);
    await sleep(100);
  }
  publishLag.push(Date.now() - t0);
  return r.json?.data ?? r.json;
}
// the URL that the live (published) version of a workflow calls
export async function liveSideEffectUrl(id) {
  const wf = await getWorkflow(id);
  const live = wf.activeVersion?.nodes ?? null;
  return live ? live.find((n) => n.name === 'Side effect')?.parameters?.url : null;
}

// run a documented shell block as written, in the copy of the repository,
// with the shell variables that docs/n8n.md's table names set to the test's

// -------------------------------------------------------------- results --
export const rows = [];
export function record(drill, expected, observed, pass, sent, effects) {
  rows.push({ drill, expected, observed, pass: !!pass, sent, effects });
  log(`drill ${drill}: ${pass ? 'PASS' : 'FAIL'}: ${observed}`);
}
export const want = (n) => !ONLY || ONLY.has(String(n)) || (String(n).startsWith('inbox-') && ONLY.has('inbox'));
export const okAll = (rs) => rs.every((r) => r.status >= 200 && r.status < 300);
export const execIds = {};
