// The managed edition's janitor in n8n (e2e.sh with IDEM_EDITION=managed).
// The managed edition has no background worker: examples/n8n/janitor-schedule.json
// calls idem_gate.janitor_run() every minute (docs/managed.md).  setupJanitor
// copies the file unchanged, imports and publishes it with docs/managed.md's
// run:janitor-import, and leaves work for the passes to do before n8n starts:
// a completed claim past its retention and a claim stuck in processing, in a
// scope of their own.  drillJanitor checks that n8n ran the schedule, that
// its passes succeeded, and that they did that work: the completed claim
// deleted, the stuck ones announced (alerted_token, and a NOTIFY on
// idem_gate_alert for a claim made stuck during the drill).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { ROOT, env, WORK, sleep, log, q, executionList, record } from './harness.mjs';

export const JANITOR_ID = 'idemGateJanitor1';
const WF = 'janitor-e2e';
let setupAt = null;

export async function setupJanitor(ex, dir, runDocBlock) {
  writeFileSync(join(ex, 'janitor-schedule.json'), readFileSync(join(ROOT, 'examples/n8n/janitor-schedule.json'), 'utf8'));
  await runDocBlock('janitor-import', dir, {}, 'docs/managed.md');
  await q("INSERT INTO idem_gate.policies (workflow, retention, stuck_after) VALUES ($1, '1 second', '1 second')", [WF]);
  await q("SELECT idem_claim('jan-done', $1)", [WF]);
  await q("SELECT idem_complete('jan-done', $1, NULL, '{\"id\": \"r-jan\"}')", [WF]);
  await q("SELECT idem_claim('jan-stuck', $1)", [WF]);
  setupAt = Date.now();
  log(`janitor: ${WF} has a completed claim past its 1 s retention and a claim stuck in processing, for the schedule's passes`);
}

const claimsOf = async () =>
  q('SELECT key, state::text AS state, alerted_token IS NOT DISTINCT FROM token AS alerted FROM idem_gate.claims WHERE workflow = $1 ORDER BY key', [WF]);

export async function drillJanitor() {
  const listener = new pg.Client({ host: WORK, port: Number(env.E2E_PGPORT), user: 'postgres', database: env.E2E_DB });
  await listener.connect();
  const alerts = [];
  listener.on('notification', (m) => {
    try {
      if (JSON.parse(m.payload).workflow === WF) alerts.push(m.payload);
    } catch {}
  });
  await listener.query('LISTEN idem_gate_alert');
  // a claim stuck from now on: the next pass (within a minute and its 1 s stuck_after) announces it
  await q("SELECT idem_claim('jan-stuck-2', $1)", [WF]);
  const t0 = Date.now();
  let rs = await claimsOf();
  while (Date.now() - t0 < 100000 && (alerts.length === 0 || !rs.find((r) => r.key === 'jan-stuck-2')?.alerted)) {
    await sleep(1000);
    rs = await claimsOf();
  }
  const waited = ((Date.now() - t0) / 1000).toFixed(0);
  await listener.end();
  const runs = (await executionList(JANITOR_ID)).filter((e) => !['new', 'running', 'waiting'].includes(e.status));
  const ok = runs.filter((e) => e.status === 'success').length;
  const minutes = setupAt ? ((Date.now() - setupAt) / 60000).toFixed(1) : '?';
  const byKey = Object.fromEntries(rs.map((r) => [r.key, r]));
  record('janitor', 'managed edition: examples/n8n/janitor-schedule.json, imported unchanged, runs janitor_run() every minute as n8n_gate: its passes succeed, a completed claim past retention is deleted, stuck claims are announced (alerted, NOTIFY idem_gate_alert)',
    `${runs.length} schedule executions in ${minutes} min (${ok} success: ${[...new Set(runs.map((e) => e.status))].join(',')}); ` +
      `jan-done ${byKey['jan-done'] ? byKey['jan-done'].state : 'deleted'}; jan-stuck ${byKey['jan-stuck']?.state} alerted=${byKey['jan-stuck']?.alerted}; ` +
      `jan-stuck-2 ${byKey['jan-stuck-2']?.state} alerted=${byKey['jan-stuck-2']?.alerted} after ${waited}s, NOTIFY: ${alerts.slice(0, 2).join(' ') || 'none'}`,
    // at least one pass succeeded (a pass that met the server stopped by
    // drill 12, or n8n killed by drill 6, may fail; it is shown above)
    ok >= 1 && !byKey['jan-done'] && byKey['jan-stuck']?.alerted === true &&
      byKey['jan-stuck-2']?.alerted === true && alerts.length >= 1,
    0, 0);
}
