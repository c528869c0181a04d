// The inbox drills: docs/n8n.md "Operate the inbox" and "Alerts" in a real
// n8n, the page driven by headless Chromium (Debian's /usr/bin/chromium,
// through puppeteer-core from the npm registry, resolved from
// PUPPETEER_CORE_DIR; it downloads no browser).  Started by drills.mjs once
// the documented set-up is done (the operator role, the inbox and alerts
// workflows imported and published); test/n8n/browser.sh runs them alone.
//
//   inbox-a  a crash after the side effect: n8n is killed (SIGKILL) while the
//            sink holds the side effect's request, then started again; the
//            claim ends needs_review, the alert reaches the chat sink with a
//            link, the browser opens it, sees the payload (escaped) and
//            last_error, resolves completed with the downstream's receipt,
//            the history names the operator, a second operator's stale form
//            changes nothing, a redelivery answers 200 duplicate with that
//            receipt.  1 side effect.
//   inbox-b  failing: the downstream refuses 5 deliveries; the item shows as
//            failing; it is replayed from the page once the downstream
//            accepts; a second replay does nothing.  1 side effect.
//   inbox-c  resolve retry, then replay (the sender cannot resend); and the
//            page's guards: 401 without credentials, a reason required, the
//            form token, only the role's workflows.
//   inbox-d  the list with 100 items: time to first byte and to DOMContentLoaded.
//   inbox-e  the alert route after a PostgreSQL restart: what the live alerts
//            miss, the digest reports.
//   inbox-f  a team: alice and bob, each signed in as themselves at the
//            proxy (nginx, examples/nginx/inbox.conf), decide a claim each
//            and the history names each; bob's late decision on alice's
//            claim names alice and when; a name header forged through the
//            proxy is replaced by the signed-in person's; a request straight
//            to n8n (no proxy secret, a forged name) is 403 and changes
//            nothing; a form token is bound to its person.
//   inbox-g  alerts a person can act on: a claim failing 6 times (max_attempts
//            5) is announced once; a claim of a workflow the inbox's role
//            may not see is announced to nobody in this chat.
//   inbox-h..k  search, paging, execution links and bulk decisions
//            (test/n8n/inbox/drills-bulk.mjs, which describes them).
//
// Every page is opened through the proxy (ctx.INBOX), signed in as alice
// (ctx.login), or bob (ctx.login2) where a second operator acts.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, mkdirSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// <script> and an onerror handler in the payload: the page must show them as text
export const XSS = '<script>window.__idemXss = 1</script><img src="x" onerror="window.__idemXss = 2"><b>bold?</b>';

export async function launchBrowser() {
  const require = createRequire(join(process.env.PUPPETEER_CORE_DIR, 'node_modules') + '/');
  const puppeteer = require('puppeteer-core');
  const profile = mkdtempSync(join(tmpdir(), 'idem-gate-inbox-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    userDataDir: profile,
    defaultViewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
  return {
    browser,
    async close() {
      await browser.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function inboxDrills(ctx) {
  const { record, want, log } = ctx;
  const b = await launchBrowser();
  const shots = [];
  const t = {
    ...ctx,
    b,
    // a tab signed in at the proxy as alice; own = another browser
    // session, signed in as the second operator, bob
    async tab(own = false) {
      const page = own ? await (await b.browser.createBrowserContext()).newPage() : await b.browser.newPage();
      page.setDefaultTimeout(60000);
      page.setDefaultNavigationTimeout(90000);
      const who = own ? ctx.login2 : ctx.login;
      await page.authenticate({ username: who.user, password: who.password });
      return page;
    },
    async shot(page, name) {
      const dir = ctx.shotsDir;
      mkdirSync(dir, { recursive: true });
      const path = join(dir, name);
      await page.screenshot({ path, fullPage: true });
      shots.push(path);
      if (ctx.docsImgDir) copyFileSync(path, join(ctx.docsImgDir, name));
    },
  };
  try {
    const { drillH, drillI, drillJ, drillK } = await import('./inbox/drills-bulk.mjs');
    for (const [name, fn] of [['inbox-a', drillA], ['inbox-b', drillB], ['inbox-c', drillC], ['inbox-d', drillD], ['inbox-e', drillE], ['inbox-f', drillF], ['inbox-g', drillG],
      ['inbox-h', drillH], ['inbox-i', drillI], ['inbox-j', drillJ], ['inbox-k', drillK]]) {
      if (!want(name)) continue;
      const t0 = Date.now();
      try {
        await fn(t);
      } catch (e) {
        record(name, '-', `error: ${e.stack ?? e}`, false, 0, 0);
      }
      log(`${name} took ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }
  } finally {
    await b.close();
  }
  log(`inbox screenshots: ${shots.join(', ')}`);
  return shots;
}

// ------------------------------------------------------------------ helpers --
export const itemUrl = (t, workflow, key) => `${t.INBOX}?workflow=${encodeURIComponent(workflow)}&key=${encodeURIComponent(key)}`;
// the links of a Slack-formatted message: <url|label>
const links = (text) => [...String(text).matchAll(/<(https?:[^|>]+)\|[^>]*>/g)].map((m) => m[1]);
export const text = (page, sel) => page.$eval(sel, (e) => e.textContent).catch(() => null);
export const notice = (page) => text(page, '.notice');
async function submit(page, action, fields = {}) {
  const form = `form[data-action="${action}"]`;
  await page.bringToFront(); // a headless tab in the background gets no input
  await page.waitForSelector(form);
  for (const [name, value] of Object.entries(fields)) {
    await page.$eval(`${form} [name="${name}"]`, (e) => (e.value = ''));
    await page.type(`${form} [name="${name}"]`, value);
  }
  const [resp] = await Promise.all([page.waitForNavigation({ waitUntil: 'domcontentloaded' }), page.click(`${form} button[type="submit"]`)]);
  return { status: resp?.status() ?? 0, notice: await notice(page), title: await text(page, 'h1') };
}
export const basic = (who) => ({ authorization: 'Basic ' + Buffer.from(`${who.user}:${who.password}`).toString('base64') });
// a POST as the form sends it, with the page's token, from outside the
// browser: signed in at the proxy as who (default alice), or with the
// headers given in place of the sign-in (to n8n directly: url)
export async function formPost(t, fields, who = t.login, { url = t.INBOX, headers = null } = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { ...(headers ?? basic(who)), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  const html = await r.text();
  return { status: r.status, html };
}
async function csrfOf(t, workflow, key, who = t.login) {
  const r = await fetch(itemUrl(t, workflow, key), { headers: basic(who) });
  return /name="csrf" value="([0-9]+\.[0-9a-f]+)"/.exec(await r.text())?.[1] ?? '';
}
export async function until(fn, timeoutMs, stepMs = 500) {
  const t0 = Date.now();
  let v = await fn();
  while (!v && Date.now() - t0 < timeoutMs) {
    await sleep(stepMs);
    v = await fn();
  }
  return v;
}
const inboxRow = async (t, key, workflow = 'orders') =>
  (await t.q('SELECT reason, state::text AS state, attempt FROM idem_gate.inbox WHERE workflow = $1 AND key = $2', [workflow, key]))[0] ?? null;
export const historyRows = (t, key, workflow = 'orders') => t.q('SELECT action, actor, state_before::text AS b, state_after::text AS a, reason FROM idem_gate.history($1, $2)', [key, workflow]);
// a claim that the gate took and a run failed (as the error workflow does it):
// for the items that need no crash to exist
export async function failedClaim(t, key, body, error, retryable, workflow = 'orders') {
  const [c] = await t.q('SELECT token FROM idem_claim_ex($1, $2, NULL, idem_hash($3::jsonb), $4, $3::jsonb)', [key, workflow, JSON.stringify(body), `e2e-${key}`]);
  await t.q('SELECT idem_fail($1, $2, $3, $4, $5)', [key, workflow, c.token, error, retryable]);
}

// ------------------------------------------------------------------ inbox-a --
async function drillA(t) {
  const key = 'evt-inbox-a';
  const body = t.order(key, { customer: 'c-42', note: XSS });
  const since = Date.now();
  // the side effect arrives at the downstream, which holds its answer; n8n is
  // killed while the run waits for it
  const arrived = t.sink.hold(key);
  const first = t.post(t.GATE, body, 120000);
  await Promise.race([arrived, sleep(30000)]);
  const effectsAtKill = t.sink.count(key);
  const cKill = await t.claim(key);
  await t.stopN8n('SIGKILL');
  t.sink.release(key);
  await first;
  // while n8n is down the claim goes stuck (the janitor, after stuck_after)
  const stuck = await until(async () => (await inboxRow(t, key))?.reason === 'stuck', 30000);
  await t.startN8n();
  // the error workflow (n8n's crash recovery) moves it to needs_review
  const review = await until(async () => (await t.claim(key))?.state === 'needs_review', 60000);
  const hist0 = await historyRows(t, key);
  const escalated = hist0.some((h) => h.action === 'escalate');
  // the alert: live (LISTEN) with the item's link, else the digest's link to the workflow
  let route = 'live alert';
  let msg = await t.chat.waitFor((m) => m.text.includes('needs_review') && m.text.includes(key), 30000, since);
  if (!msg) {
    route = 'digest';
    msg = await t.chat.waitFor((m) => m.text.startsWith(':inbox_tray: idem_gate inbox') && m.text.includes('needs_review'), 90000, since);
  }
  const link = msg ? links(msg.text).find((u) => u.includes(`key=${encodeURIComponent(key)}`)) ?? links(msg.text).find((u) => u.includes('workflow=orders')) : null;
  if (route === 'digest' && /\(instance started\)/.test(msg.text)) route = 'digest after the start';
  t.log(`inbox-a: ${route}: ${msg?.text}`);

  // the operator opens the link, signed in
  const page = await t.tab();
  await page.bringToFront();
  let itemStatus = 0;
  if (link) {
    const resp = await page.goto(link, { waitUntil: 'domcontentloaded' });
    itemStatus = resp?.status() ?? 0;
    if (!link.includes('key=')) {
      const [r2] = await Promise.all([page.waitForNavigation({ waitUntil: 'domcontentloaded' }), page.click(`tr[data-key="${key}"] a`)]);
      itemStatus = r2?.status() ?? 0;
    }
  }
  const payloadText = await text(page, 'pre.payload');
  const lastError = await text(page, 'pre.last-error');
  const xss = await page.evaluate(() => ({ ran: window.__idemXss ?? null, injected: document.querySelectorAll('pre.payload *').length }));
  await t.shot(page, 'n8n-inbox-item.png');
  // a second operator has the same page open
  const other = await t.tab(true);
  await other.goto(page.url(), { waitUntil: 'domcontentloaded' });
  // no reason: the browser refuses to send the form, nothing changes
  await page.bringToFront();
  await page.evaluate(() => (window.__stay = 1));
  await page.click('form[data-action="resolve-completed"] button[type="submit"]');
  await sleep(1500);
  const stayed = await page.evaluate(() => window.__stay === 1);
  const stateAfterEmpty = (await t.claim(key))?.state;
  // the runbook: the downstream's record for Idempotency-Key orders:<key>
  const rec = t.sink.lookup(`orders:${key}`);
  const done = await submit(page, 'resolve-completed', { receipt: rec?.id ?? '', reason: `downstream ${rec?.id} has Idempotency-Key orders:${key}` });
  await t.shot(page, 'n8n-inbox-resolved.png');
  // the other operator's stale form: already decided, nothing changes
  const late = await submit(other, 'resolve-retry', { reason: 'I think it did not happen' });
  const cAfter = await t.claim(key);
  // the item's page now: the history names the operator
  await page.bringToFront();
  await page.goto(itemUrl(t, 'orders', key), { waitUntil: 'domcontentloaded' });
  const actors = await page.$$eval('table.history td.actor', (tds) => tds.map((td) => td.textContent));
  await t.shot(page, 'n8n-inbox-history.png');
  const hist = await historyRows(t, key);
  await other.close();
  await page.close();
  // the sender redelivers: a duplicate with the operator's receipt
  const red = await t.post(t.GATE, body);
  const n = t.sink.count(key);
  const pass =
    effectsAtKill === 1 && cKill?.state === 'processing' && !!stuck && !!review && !escalated && !!msg && !!link && itemStatus === 200 &&
    payloadText?.includes(JSON.stringify(XSS).slice(1, -1)) && xss.ran === null && xss.injected === 0 && /failed at Side effect/.test(lastError ?? '') &&
    stayed && stateAfterEmpty === 'needs_review' &&
    done.status === 200 && /completed/.test(done.notice ?? '') && late.status === 409 && /Already decided/.test(late.title ?? '') &&
    new RegExp(`by ${t.login.user} \\(role`).test(late.notice ?? '') &&
    cAfter?.state === 'completed' && cAfter?.result?.effect_id === rec?.id &&
    hist.filter((h) => h.action === 'resolve').length === 1 && actors.includes(t.login.user) &&
    red.status === 200 && red.outcome === 'completed' && red.json?.receipt?.effect_id === rec?.id && n === 1;
  t.record('inbox-a', 'n8n killed during the side effect: stuck while down, needs_review after the restart (error workflow); the alert links the item; the page shows the payload escaped and last_error; resolve completed with the downstream\'s receipt (a reason required); a second operator\'s form changes nothing; the history names the operator; the redelivery is a duplicate with that receipt; 1 side effect',
    `killed with effects=${effectsAtKill} claim=${cKill?.state}; stuck while down=${!!stuck}; needs_review after restart=${!!review} (escalated by the janitor=${escalated}); ` +
      `alert by ${msg ? route : 'nothing'}, link ${link ? 'to the ' + (link.includes('key=') ? 'item' : 'workflow') : 'none'}; page ${itemStatus}, payload escaped=${!!payloadText?.includes(JSON.stringify(XSS).slice(1, -1)) && xss.ran === null && xss.injected === 0}, last_error=${JSON.stringify(lastError?.slice(0, 80))}; ` +
      `empty reason: form not sent=${stayed}, state ${stateAfterEmpty}; resolve completed ${done.status} "${done.notice?.slice(0, 40)}"; ${t.login2.user}'s stale form ${late.status} "${late.title}": "${late.notice}"; ` +
      `claim=${cAfter?.state} receipt=${cAfter?.result?.effect_id === rec?.id ? 'the downstream\'s' : JSON.stringify(cAfter?.result)}; history actors=${JSON.stringify(actors)} (${hist.length} rows); redelivery ${red.status}/${red.outcome}; effects=${n}`,
    pass, 3, n);
}

// ------------------------------------------------------------------ inbox-b --
async function drillB(t) {
  const key = 'evt-inbox-b';
  const body = t.order(key, { customer: 'c-43' });
  const since = Date.now();
  await t.sink.setMode('refuse');
  const answers = [];
  for (let i = 0; i < 5; i++) answers.push(await t.post(t.GATE, body));
  await t.sink.setMode('ok');
  const row = await inboxRow(t, key);
  const msg = await t.chat.waitFor((m) => m.text.includes('failing') && m.text.includes(key), 30000, since);
  const link = msg ? links(msg.text).find((u) => u.includes(`key=${encodeURIComponent(key)}`)) : null;
  const page = await t.tab();
  // the list, filtered to what fails
  await page.goto(`${t.INBOX}?reason=failing`, { waitUntil: 'domcontentloaded' });
  const listed = await page.$$eval('table.items tr[data-key]', (rs) => rs.map((r) => r.dataset.key));
  // the whole list for the picture, with a claim of each reason: one more
  // needs_review, and one left processing past its stuck_after
  await failedClaim(t, 'evt-2051', t.order('evt-2051'), 'Side effect: timeout of 30000ms exceeded', false);
  await t.q("SELECT idem_claim_ex('evt-2052', 'orders', NULL, NULL, 'e2e-2052', $1::jsonb)", [JSON.stringify(t.order('evt-2052'))]);
  await until(async () => (await inboxRow(t, 'evt-2052'))?.reason === 'stuck', 30000);
  await page.goto(t.INBOX, { waitUntil: 'domcontentloaded' });
  await t.shot(page, 'n8n-inbox-list.png');
  for (const k of ['evt-2051', 'evt-2052']) await t.q("SELECT idem_release($1, 'orders', 'picture taken', 'e2e')", [k]);
  const resp = await page.goto(link ?? itemUrl(t, 'orders', key), { waitUntil: 'domcontentloaded' });
  const attempts = await text(page, 'dd.attempt');
  const forms = await page.$$eval('form[data-action]', (fs) => fs.map((f) => f.dataset.action));
  await t.shot(page, 'n8n-inbox-failing.png');
  // idem_resolve decides needs_review and processing claims only: a failing
  // claim is failed_retryable already (55000)
  const resolveRetry = await formPost(t, { action: 'resolve-retry', workflow: 'orders', key, reason: 'retry it', csrf: await csrfOf(t, 'orders', key) });
  // replay, from the page; a stale copy of the page replays again
  const other = await t.tab(true);
  await other.goto(page.url(), { waitUntil: 'domcontentloaded' });
  const r1 = await submit(page, 'replay', { reason: 'the downstream is back; the sender gave up' });
  const gate1 = { status: await text(page, '.gate-status'), outcome: await text(page, '.gate-outcome') };
  await t.shot(page, 'n8n-inbox-replayed.png');
  const r2 = await submit(other, 'replay', { reason: 'clicked again' });
  const c = await t.claim(key);
  // the replay's own row in the history: alice's, once (bob's came too late)
  const replays = (await historyRows(t, key)).filter((h) => h.action === 'replay');
  await other.close();
  await page.close();
  const n = t.sink.count(key);
  const pass =
    answers.every((a) => a.status === 503 && a.outcome === 'failed_retryable') && row?.reason === 'failing' && row?.attempt === 5 && !!link &&
    listed.includes(key) && resp?.status() === 200 && attempts === '5' && forms.includes('replay') && !forms.includes('resolve-retry') &&
    resolveRetry.status === 409 && r1.status === 200 && gate1.status === '200' && gate1.outcome === 'new' &&
    r2.status === 409 && /Nothing to replay/.test(r2.title ?? '') && c?.state === 'completed' && c?.attempt === 6 && n === 1 &&
    replays.length === 1 && replays[0].actor === t.login.user && replays[0].reason === 'the downstream is back; the sender gave up';
  t.record('inbox-b', 'the downstream refuses 5 deliveries: failing in the inbox, alerted with a link; replayed from the page once it accepts (same key, attempt 6); a second replay does nothing; 1 side effect',
    `5 deliveries ${[...new Set(answers.map((a) => `${a.status}/${a.outcome}`))].join(',')}; inbox ${row?.reason} attempt ${row?.attempt}; alert ${msg ? 'with the item\'s link' : 'none'}; ` +
      `listed under failing=${listed.includes(key)}; page shows attempts ${attempts}, actions ${forms.join('/')}; resolve retry refused ${resolveRetry.status}; ` +
      `replay ${r1.status}: gate ${gate1.status}/${gate1.outcome}; second replay ${r2.status} "${r2.title}"; claim ${c?.state} attempt ${c?.attempt}; effects=${n}; ` +
      `history replay rows ${JSON.stringify(replays.map((h) => [h.actor, h.reason]))}`,
    pass, 7, n);
}

// ------------------------------------------------------------------ inbox-c --
async function drillC(t) {
  const key = 'evt-inbox-c';
  const body = t.order(key, { customer: 'c-44' });
  // a run failed after its request may have left (as the error workflow records it)
  await failedClaim(t, key, body, 'Side effect: socket hang up', false);
  const page = await t.tab();
  await page.goto(itemUrl(t, 'orders', key), { waitUntil: 'domcontentloaded' });
  // no reason (a request that skips the browser's check): refused, nothing changes
  const csrf = await csrfOf(t, 'orders', key);
  const noReason = await formPost(t, { action: 'resolve-retry', workflow: 'orders', key, reason: '  ', csrf });
  const badToken = await formPost(t, { action: 'resolve-retry', workflow: 'orders', key, reason: 'x', csrf: 'f'.repeat(64) });
  const stateUnchanged = (await t.claim(key))?.state;
  // resolve retry: the downstream has no record of it
  const rec = t.sink.lookup(`orders:${key}`);
  const r1 = await submit(page, 'resolve-retry', { reason: 'no record downstream for Idempotency-Key orders:' + key });
  // the sender cannot resend: replay it from the claim's page, twice
  await page.goto(itemUrl(t, 'orders', key), { waitUntil: 'domcontentloaded' });
  const other = await t.tab(true);
  await other.goto(page.url(), { waitUntil: 'domcontentloaded' });
  const r2 = await submit(page, 'replay', { reason: 'the sender cannot resend' });
  const outcome = await text(page, '.gate-outcome');
  const r3 = await submit(other, 'replay', { reason: 'once more' });
  const c = await t.claim(key);
  await other.close();
  // the guards of the page
  const noAuth = await fetch(t.INBOX);
  // a wrong password: the proxy asks again (401)
  const wrongExpected = 401;
  const wrong = await fetch(t.INBOX, { headers: basic({ user: t.login.user, password: 'wrong' }) });
  // only the role's workflows: a claim of a workflow not granted to it
  await page.bringToFront();
  await failedClaim(t, 'evt-inbox-hidden', { id: 'evt-inbox-hidden', customer_id: 'c', order_ref: 'r', amount: { value: 1 } }, 'Side effect: timeout', false, 'orders-by-fields');
  await page.goto(t.INBOX, { waitUntil: 'domcontentloaded' });
  const listedWorkflows = await page.$$eval('table.items tr[data-workflow]', (rs) => [...new Set(rs.map((r) => r.dataset.workflow))]);
  const hiddenPage = await page.goto(itemUrl(t, 'orders-by-fields', 'evt-inbox-hidden'), { waitUntil: 'domcontentloaded' });
  const hiddenText = await notice(page);
  const [superSees] = await t.q("SELECT count(*)::int AS n FROM idem_gate.inbox WHERE workflow = 'orders-by-fields'");
  await page.close();
  const n = t.sink.count(key);
  const pass =
    noReason.status === 400 && /A reason is required/.test(noReason.html) && badToken.status === 400 && /does not come from an inbox page shown to/.test(badToken.html) &&
    stateUnchanged === 'needs_review' && rec === null && r1.status === 200 && /failed_retryable/.test(r1.notice ?? '') &&
    r2.status === 200 && outcome === 'new' && r3.status === 409 && c?.state === 'completed' && c?.attempt === 2 && n === 1 &&
    noAuth.status === 401 && wrong.status === wrongExpected &&
    !listedWorkflows.includes('orders-by-fields') && superSees.n === 1 && hiddenPage?.status() === 403 && /may not see workflow/.test(hiddenText ?? '');
  t.record('inbox-c', 'resolve retry, then replay (the sender cannot resend): 1 side effect, a second replay nothing; no reason or another site\'s form refused, nothing changed; 401 without credentials; only the role\'s workflows',
    `no reason ${noReason.status}, foreign form ${badToken.status}, claim still ${stateUnchanged}; downstream record ${rec ? 'found' : 'none'}; resolve retry ${r1.status}; replay ${r2.status} (gate ${outcome}); second replay ${r3.status}; ` +
      `claim ${c?.state} attempt ${c?.attempt}; effects=${n}; no credentials ${noAuth.status}, wrong password ${wrong.status} (expected ${wrongExpected}); workflows listed ${JSON.stringify(listedWorkflows)} (a needs_review claim in orders-by-fields exists: ${superSees.n}), its page ${hiddenPage?.status()}`,
    pass, 2, n);
}

// ------------------------------------------------------------------ inbox-d --
async function drillD(t) {
  const N = 100;
  const keys = Array.from({ length: N }, (_, i) => `evt-load-${String(i).padStart(3, '0')}`);
  const filler = 'x'.repeat(800);
  for (const k of keys) await failedClaim(t, k, t.order(k, { filler }), 'Side effect: timeout of 30000ms exceeded', false);
  const [{ n: waiting }] = await t.q('SELECT count(*)::int AS n FROM idem_gate.inbox');
  const page = await t.tab();
  const runs = [];
  for (let i = 0; i < 6; i++) {
    await page.goto(t.INBOX, { waitUntil: 'load' });
    const nav = await page.evaluate(() => {
      const e = performance.getEntriesByType('navigation')[0];
      return { ttfb: e.responseStart - e.requestStart, dcl: e.domContentLoadedEventEnd - e.startTime, bytes: e.transferSize };
    });
    if (i > 0) runs.push(nav); // the first warms n8n's pools up
  }
  const rows = await page.$$eval('table.items tr[data-key]', (rs) => rs.length);
  await page.close();
  const med = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ttfb = med(runs.map((r) => r.ttfb));
  const dcl = med(runs.map((r) => r.dcl));
  for (const k of keys) await t.q("SELECT idem_release($1, 'orders', 'load test over', 'e2e')", [k]);
  t.loadTimes = { ttfb, dcl, waiting, rows };
  t.record('inbox-d', `the list with ${N} items more: time to first byte and to DOMContentLoaded (median of 5, after one warm-up)`,
    `${waiting} waiting, ${rows} rows shown; TTFB ${ttfb.toFixed(0)} ms, DOMContentLoaded ${dcl.toFixed(0)} ms (runs: ${runs.map((r) => `${r.ttfb.toFixed(0)}/${r.dcl.toFixed(0)}`).join(' ')}), ${runs[0]?.bytes} bytes`,
    rows >= N, 0, 0);
}

// ------------------------------------------------------------------ inbox-e --
async function drillE(t) {
  // PostgreSQL restarts: n8n's Postgres Trigger does not LISTEN again (its
  // connection is gone, and the node has no reconnect), so a live alert is
  // missed; the digest reports the claim and says that nobody listens
  t.pgctl('-m', 'fast', '-w', 'restart', '-l', join(t.WORK, 'postgres.log'));
  await sleep(2000);
  const key = 'evt-inbox-e';
  const since = Date.now();
  await failedClaim(t, key, t.order(key), 'Side effect: socket hang up', false);
  const live = await t.chat.waitFor((m) => m.text.includes(key), 20000, since);
  const digest = await t.chat.waitFor((m) => m.text.startsWith(':inbox_tray: idem_gate inbox') && m.text.includes('needs_review'), 80000, since);
  const warned = !!digest && /not listening/.test(digest.text);
  // what the digest tells the operators to do: restart n8n, and the live
  // alerts listen again (the drills after this one need them)
  await t.stopN8n();
  await t.startN8n();
  t.record('inbox-e', 'after a PostgreSQL restart: a live alert is missed (the Postgres Trigger does not listen again); the digest reports what waits and warns that nobody listens',
    `live alert after the restart: ${live ? 'arrived' : 'missed'}; digest ${digest ? `arrived ${((digest.at - since) / 1000).toFixed(0)} s later, warning=${warned}` : 'none'}`,
    !!digest && (live ? true : warned), 0, 0);
}

// ------------------------------------------------------------------ inbox-f --
async function drillF(t) {
  const [k1, k2, k3] = ['evt-team-1', 'evt-team-2', 'evt-team-3'];
  for (const k of [k1, k2, k3]) await failedClaim(t, k, t.order(k), 'Side effect: socket hang up', false);
  const alice = t.login.user;
  const bob = t.login2.user;
  // alice and bob, each in a browser session of their own, decide one claim each
  const pa = await t.tab();
  const pb = await t.tab(true);
  // bob also has alice's claim open, in another window, before she decides it
  const pbLate = await t.tab(true);
  await pbLate.goto(itemUrl(t, 'orders', k1), { waitUntil: 'domcontentloaded' });
  await pa.goto(itemUrl(t, 'orders', k1), { waitUntil: 'domcontentloaded' });
  const signedA = await text(pa, '.me');
  await pb.goto(itemUrl(t, 'orders', k2), { waitUntil: 'domcontentloaded' });
  const signedB = await text(pb, '.me');
  const nameFields = await pa.$$eval('input[name="actor"], input[name="user"], input[name="name"]', (xs) => xs.length);
  const da = await submit(pa, 'resolve-completed', { receipt: 'fx_team_1', reason: 'downstream has fx_team_1' });
  const db = await submit(pb, 'resolve-retry', { reason: 'no record downstream' });
  // bob, late, on alice's claim from his stale window: already decided, by alice, and when
  const late = await submit(pbLate, 'resolve-retry', { reason: 'no record downstream either' });
  const lateText = (await text(pbLate, '.decided-by')) ?? '';
  await t.shot(pbLate, 'n8n-inbox-already-decided.png');
  await pbLate.close();
  const h1 = await historyRows(t, k1);
  const h2 = await historyRows(t, k2);
  // a replayed form: alice's token sent by bob is refused, nothing changes
  const aliceCsrf = await csrfOf(t, 'orders', k3);
  const replayed = await formPost(t, { action: 'release', workflow: 'orders', key: k3, reason: 'x', csrf: aliceCsrf }, t.login2);
  // a name forged through the proxy: the proxy replaces it with alice's
  const forgedViaProxy = await formPost(t, { action: 'resolve-retry', workflow: 'orders', key: k3, reason: 'forged name via the proxy', csrf: aliceCsrf },
    t.login, { headers: { ...basic(t.login), 'x-forwarded-user': 'mallory' } });
  const h3 = await historyRows(t, k3);
  // straight to n8n, around the proxy: no secret, or a wrong one, with a
  // forged name: 403, nothing changes
  const before = await t.claim(k2);
  const direct = [];
  for (const headers of [{ 'x-forwarded-user': alice }, { 'x-forwarded-user': alice, 'x-idem-gate-proxy': 'guess' }]) {
    direct.push((await formPost(t, { action: 'release', workflow: 'orders', key: k2, reason: 'forged', csrf: aliceCsrf }, null, { url: t.INBOX_DIRECT, headers })).status);
    direct.push((await fetch(itemUrl({ INBOX: t.INBOX_DIRECT }, 'orders', k2), { headers })).status);
  }
  const after = await t.claim(k2);
  const h2after = await historyRows(t, k2);
  // the secret but no name (a proxy that lets an unauthenticated request
  // through): the page shows and does nothing
  const noName = await fetch(t.INBOX, { headers: {} });
  const noNameDirect = await fetch(t.INBOX_DIRECT, { headers: { 'x-idem-gate-proxy': t.proxySecret } });
  await pa.close();
  await pb.close();
  for (const k of [k1, k2, k3]) await t.q("SELECT idem_release($1, 'orders', 'team drill over', 'e2e')", [k]);
  const pass =
    signedA?.includes(alice) && signedB?.includes(bob) && nameFields === 0 &&
    da.status === 200 && db.status === 200 &&
    h1.map((h) => h.actor).join() === alice && h2.map((h) => h.actor).join() === bob &&
    late.status === 409 && lateText.includes(`by ${alice} (role`) && / at \d{4}-\d\d-\d\d /.test(lateText) &&
    replayed.status === 400 && /does not come from an inbox page shown to bob/.test(replayed.html) &&
    forgedViaProxy.status === 200 && h3.length === 1 && h3[0].actor === alice &&
    direct.every((x) => x === 403) && after?.state === before?.state && after?.attempt === before?.attempt && h2after.length === h2.length &&
    noName.status === 401 && noNameDirect.status === 403;
  t.record('inbox-f', 'a team through nginx: alice and bob decide a claim each and the history names each; bob\'s late decision names alice and when; a name forged through the proxy is replaced; a request straight to n8n (no or a wrong secret, a forged name) is 403 and changes nothing; a form token is bound to its person; no field to type a name',
    `signed in as "${signedA}" / "${signedB}", name fields ${nameFields}; alice ${da.status}, bob ${db.status}; history ${JSON.stringify(h1.map((h) => h.actor))} ${JSON.stringify(h2.map((h) => h.actor))}; ` +
      `bob late ${late.status}: "${lateText}"; alice's token sent by bob ${replayed.status}; forged name via the proxy ${forgedViaProxy.status}, recorded as ${JSON.stringify(h3.map((h) => h.actor))}; ` +
      `straight to n8n ${JSON.stringify(direct)}, claim ${before?.state}/${before?.attempt} -> ${after?.state}/${after?.attempt}, history rows ${h2.length} -> ${h2after.length}; ` +
      `no sign-in at the proxy ${noName.status}, the secret without a name ${noNameDirect.status}`,
    pass, 0, 0);
}

// ------------------------------------------------------------------ inbox-g --
async function drillG(t) {
  const since = Date.now();
  const key = 'evt-fail-6';
  // six failures before the side effect, each a delivery the sender retried;
  // the sixth once the fifth's alert is posted: the alert looks the claim up
  // when it runs, and during the sixth attempt the claim is processing, not
  // in the inbox (the message would then name no key)
  for (let i = 0; i < 5; i++) await failedClaim(t, key, t.order(key), 'Side effect: connect ECONNREFUSED', true);
  await t.chat.waitFor((m) => m.text.includes(key), 30000, since);
  await failedClaim(t, key, t.order(key), 'Side effect: connect ECONNREFUSED', true);
  const [c] = await t.q("SELECT attempt, state::text AS state FROM idem_gate.claims WHERE workflow = 'orders' AND key = $1", [key]);
  // a needs_review claim of a workflow the inbox's role may not see, then
  // one of orders after it: when that one has arrived, the first would have
  await failedClaim(t, 'evt-hidden-g', { id: 'evt-hidden-g', customer_id: 'c', order_ref: 'r', amount: { value: 1 } }, 'Side effect: timeout', false, 'orders-by-fields');
  await failedClaim(t, 'evt-after-g', t.order('evt-after-g'), 'Side effect: timeout', false);
  const after = await t.chat.waitFor((m) => m.text.includes('evt-after-g'), 30000, since);
  await sleep(3000);
  const mine = t.chat.messages.filter((m) => m.at >= since && m.text.includes(key));
  const hidden = t.chat.messages.filter((m) => m.at >= since && m.text.includes('orders-by-fields') && !m.text.startsWith(':inbox_tray:'));
  for (const [k, w] of [[key, 'orders'], ['evt-hidden-g', 'orders-by-fields'], ['evt-after-g', 'orders']])
    await t.q('SELECT idem_release($1, $2, \'alert drill over\', \'e2e\')', [k, w]);
  t.record('inbox-g', 'alerts a person can act on: a claim failing 6 times (max_attempts 5) is announced once; an alert of a workflow the inbox\'s role may not see is not posted',
    `claim ${c?.state} attempt ${c?.attempt}; alerts naming it ${mine.length}: ${JSON.stringify(mine.map((m) => m.text.slice(0, 90)))}; ` +
      `alerts of orders-by-fields ${hidden.length}; the next alert of orders ${after ? 'arrived' : 'missing'}`,
    c?.attempt === 6 && mine.length === 1 && /failing/.test(mine[0].text) && hidden.length === 0 && !!after, 0, 0);
}
