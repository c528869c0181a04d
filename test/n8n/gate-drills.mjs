// Drills 1-14 of the end-to-end test (run by drills.mjs): what the gate
// workflows do with real deliveries, crashes, retries and edits in n8n.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import {
  env, WORK, SINK_PORT, GATE, FIELDS, CONTROL, sleep, q, claim, stopN8n, startN8n, post, pool, order, statusSummary,
  relogin, execution, newExecutions, executionIds, finishedExecution, retryExecution, sink, SINK_URL,
  editorSetSideEffectUrl, editorPublish, liveSideEffectUrl, publishLag, record, okAll, execIds,
} from './harness.mjs';
import { IDS } from './build-examples.mjs';

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
  // a redelivery while n8n is down: nothing listens on its port
  const down = await post(GATE, order('evt-d6'), 10000);
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
  const alertText = alerted === null ? `alert: ${env.E2E_NO_ALERT_REASON ?? 'not checked (no background worker)'}` : `alerted=${alerted} (${alerts.length} NOTIFY)`;
  record(6, 'kill n8n after the effect: a redelivery while it is down is refused; after the restart the claim is needs_review (error workflow), redeliveries 200 needs_review, alerted, never a 2nd effect',
    `killed with effects=${effectsAtKill} claim=${cKill?.state}; sender saw ${a.status || a.text}; redelivery while down: ${down.status || down.text}; after restart claim=${cAfter?.state} (${reviewSecs}s) last_error=${JSON.stringify(cAfter?.last_error ?? null)}; redelivery ${statusSummary([b])}; ${alertText}; later ${statusSummary([c])} claim=${cEnd?.state}; effects=${n}`,
    effectsAtKill === 1 && cKill?.state === 'processing' && down.status === 0 && down.text === 'ECONNREFUSED' && cAfter?.state === 'needs_review' &&
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
  await relogin();
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
  await relogin();
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

async function drill13() {
  // docs/n8n.md "Changing a published workflow": the gate is published (step
  // 5); Save in the editor changes the draft, the webhook keeps running the
  // published version; Publish puts the change live
  const v2 = `http://127.0.0.1:${SINK_PORT}/charge-v2`;
  await editorSetSideEffectUrl(IDS.gate, v2);
  const liveAfterSave = await liveSideEffectUrl(IDS.gate);
  const a = await post(GATE, order('evt-d13-a'));
  await editorPublish(IDS.gate, 'drill 13: charge-v2');
  const liveAfterPublish = await liveSideEffectUrl(IDS.gate);
  const b = await post(GATE, order('evt-d13-b'));
  // back to the documented URL, the same way
  await editorSetSideEffectUrl(IDS.gate, SINK_URL);
  await editorPublish(IDS.gate, 'drill 13: back to charge');
  const c = await post(GATE, order('evt-d13-c'));
  const at = (path, ev) => sink.countAt(path, ev);
  const n = sink.count('evt-d13-a') + sink.count('evt-d13-b') + sink.count('evt-d13-c');
  record(13, 'Save of a published gate changes nothing live (still the old URL); Publish does',
    `after Save: live URL ${liveAfterSave}, delivery ${statusSummary([a])} went to /charge ${at('/charge', 'evt-d13-a')}x, /charge-v2 ${at('/charge-v2', 'evt-d13-a')}x; ` +
      `after Publish: live URL ${liveAfterPublish}, delivery ${statusSummary([b])} went to /charge-v2 ${at('/charge-v2', 'evt-d13-b')}x; ` +
      `published back: ${statusSummary([c])} /charge ${at('/charge', 'evt-d13-c')}x; Publish took ${publishLag.slice(-2).join(', ')} ms to go live`,
    liveAfterSave === SINK_URL && a.status === 200 && at('/charge', 'evt-d13-a') === 1 && at('/charge-v2', 'evt-d13-a') === 0 &&
      liveAfterPublish === v2 && b.status === 200 && at('/charge-v2', 'evt-d13-b') === 1 &&
      c.status === 200 && at('/charge', 'evt-d13-c') === 1 && n === 3,
    3, n);
}

async function drill14() {
  // a side effect whose host name does not resolve (ENOTFOUND, or EAI_AGAIN
  // when no DNS server answers): nothing was sent, so the claim is retryable
  // and the redelivery, once the URL is fixed, performs it.  The name is under
  // .invalid, which never resolves (RFC 6761).
  const bad = `http://idem-gate-e2e.invalid:${SINK_PORT}/charge`;
  await editorSetSideEffectUrl(IDS.gate, bad);
  await editorPublish(IDS.gate, 'drill 14: an unresolvable host');
  const a = await post(GATE, order('evt-d14'));
  const c1 = await claim('evt-d14');
  const ex = c1?.execution_id ? await finishedExecution(c1.execution_id) : null;
  await editorSetSideEffectUrl(IDS.gate, SINK_URL);
  await editorPublish(IDS.gate, 'drill 14: back to the sink');
  const b = await post(GATE, order('evt-d14'));
  const c2 = await claim('evt-d14');
  const c = await post(GATE, order('evt-d14'));
  const n = sink.count('evt-d14');
  record(14, 'unresolvable host: 503 + failed_retryable, execution error; the redelivery performs it once',
    `1st ${statusSummary([a])} claim=${c1?.state} last_error=${JSON.stringify(c1?.last_error ?? null)} execution=${ex?.status}; ` +
      `after the fix ${statusSummary([b])} claim=${c2?.state} attempt=${c2?.attempt}; 3rd ${statusSummary([c])}; effects=${n}`,
    a.status === 503 && a.outcome === 'failed_retryable' && c1?.state === 'failed_retryable' && ex?.status === 'error' &&
      b.status === 200 && c2?.state === 'completed' && c2?.attempt === 2 && c.outcome === 'completed' && n === 1,
    3, n);
}

export const drills = [drill1, drill2, drill3, drill4, drill5, drill6, drill7, drill8, drill9, drill10, drill11, drill12, drill13, drill14];
