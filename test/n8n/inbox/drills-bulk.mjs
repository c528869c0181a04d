// The inbox drills of idem_gate 1.3's page (run by inbox-browser.mjs, after
// inbox-a..g; every page through the proxy, signed in as alice):
//
//   inbox-h  bulk decisions: 20 claims found by a key prefix, "all matching
//            this filter", Resolve: retry, a reason, the confirmation; one
//            line per key, one audit row per claim naming alice; a claim that
//            starts matching after the review is not decided (the
//            confirmation carries its keys); the same confirmation sent
//            again, or with a key added, is refused and changes nothing.
//            Then 3 claims ticked by hand, Release, the same way.
//   inbox-i  search and paging: 1,200 claims (written as rows: unannounced),
//            page by page (100 each) through
//            "next page", every item seen once and in the view's order; a
//            search by exact key and by key prefix (in the browser's form);
//            "as of" and Refresh keep the filters; a bad age is 400.
//   inbox-j  the link to the n8n execution that owned a claim: a real gate
//            run whose downstream answered 500 (needs_review); the list and
//            the claim's page link /workflow/<gate's id>/executions/<id>;
//            n8n serves that URL (200) and its API has that execution, of
//            that workflow; a claim whose execution id is not a number has
//            no link.
//   inbox-k  bulk bad input answered per key: decided, not_found and
//            already_decided in one submit; not_permitted for a workflow the
//            inbox's role may not use; over 1000 keys, a forged token,
//            another person's confirmation and a bad age refused, nothing
//            changed.
import { text, basic, formPost, until, historyRows, failedClaim } from '../inbox-browser.mjs';

// n8n's owner, as drills.mjs sets n8n up (its OWNER): to ask n8n's API about an execution
const OWNER = { email: 'drills@idem-gate.invalid', password: 'Drills-e2e-1234' };
const GATE_N8N_ID = 'idemGateWebhook1';

const keysOf = (page) => page.$$eval('table.items tr[data-key]', (rs) => rs.map((r) => r.dataset.key));
const unescapeHtml = (s) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
// the hidden fields of a form on a page's HTML
const hiddenFields = (html, action) => {
  const form = new RegExp(`<form[^>]*data-action="${action}"[^>]*>([\\s\\S]*?)</form>`).exec(html)?.[1] ?? '';
  return Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1], unescapeHtml(m[2])]));
};
async function click(page, selector) {
  await page.bringToFront();
  const [resp] = await Promise.all([page.waitForNavigation({ waitUntil: 'domcontentloaded' }), page.click(selector)]);
  return resp?.status() ?? 0;
}
// a page's list as a signed-in person sees it, and its bulk form's token
async function listHtml(t, query, who = t.login) {
  const r = await fetch(`${t.INBOX}?${new URLSearchParams(query)}`, { headers: basic(who) });
  return { status: r.status, html: await r.text() };
}
const auditCount = async (t, keys, workflow = 'orders') =>
  (await t.q('SELECT count(*)::int AS n FROM idem_gate.audit WHERE workflow = $1 AND key = ANY($2)', [workflow, keys]))[0].n;
const states = async (t, keys, workflow = 'orders') =>
  Object.fromEntries((await t.q('SELECT key, state::text AS state FROM idem_gate.claims WHERE workflow = $1 AND key = ANY($2)', [workflow, keys])).map((r) => [r.key, r.state]));
const releaseAll = (t, keys, workflow = 'orders') => t.q("SELECT count(*) FROM idem_release_many($1::text[], $2, 'drill over', 'e2e')", [keys, workflow]);

// a bulk decision in the browser, from the list page on: the review, the
// decision and reason, the confirmation; answers what each page showed
async function bulkInBrowser(t, page, button, decision, reason, shot) {
  const review = await click(page, button);
  const reviewKeys = await page.$$eval('ol.keys li', (ls) => ls.map((l) => l.textContent)).catch(() => []);
  const late = shot.beforeConfirm ? await shot.beforeConfirm() : null;
  await page.click(`form[data-action="bulk-confirm"] input[name="decision"][value="${decision}"]`);
  await page.type('form[data-action="bulk-confirm"] textarea[name="reason"]', reason);
  const confirm = await click(page, 'form[data-action="bulk-confirm"] button[type="submit"]');
  const confirmKeys = await page.$$eval('ol.keys li', (ls) => ls.map((l) => l.textContent)).catch(() => []);
  const applyForm = await page.$$eval('form[data-action="bulk-apply"] input[type="hidden"]', (es) => Object.fromEntries(es.map((e) => [e.name, e.value])));
  if (shot.confirm) await t.shot(page, shot.confirm);
  const applied = await click(page, 'form[data-action="bulk-apply"] button[type="submit"]');
  const outcomes = await page.$$eval('table.outcomes tr[data-key]', (rs) => rs.map((r) => [r.dataset.key, r.dataset.outcome]));
  if (shot.result) await t.shot(page, shot.result);
  return { status: [review, confirm, applied], reviewKeys, confirmKeys, applyForm, outcomes, late };
}

// ------------------------------------------------------------------ inbox-h --
export async function drillH(t) {
  const P = 'evt-bulk-h-';
  const twenty = Array.from({ length: 20 }, (_, i) => `${P}${String(i).padStart(2, '0')}`);
  for (const k of twenty) await failedClaim(t, k, t.order(k), 'Side effect: timeout of 30000ms exceeded', false);
  const late = `${P}late`;
  const page = await t.tab();
  await page.goto(`${t.INBOX}?workflow=orders&prefix=${encodeURIComponent(P)}`, { waitUntil: 'domcontentloaded' });
  const listed = await keysOf(page);
  const reason1 = 'the downstream was down: none of these was charged';
  const a = await bulkInBrowser(t, page, 'button.bulk-filter', 'retry', reason1, {
    // a claim that starts matching the filter after the review: the confirmation acts on the keys it showed
    beforeConfirm: () => failedClaim(t, late, t.order(late), 'Side effect: socket hang up', false),
    confirm: 'n8n-inbox-bulk.png',
    result: 'n8n-inbox-bulk-result.png',
  });
  const after1 = await states(t, [...twenty, late]);
  const hist = await Promise.all(twenty.map((k) => historyRows(t, k)));
  const oneRowEach = hist.every((h) => h.length === 1 && h[0].action === 'resolve' && h[0].actor === t.login.user && h[0].reason === reason1 && h[0].a === 'failed_retryable');
  const audit1 = await auditCount(t, [...twenty, late]);
  // the same confirmation again, and one with a key added: refused, nothing changed
  const replay = await formPost(t, a.applyForm);
  const forged = await formPost(t, { ...a.applyForm, keys: JSON.stringify([...JSON.parse(a.applyForm.keys), late]) });
  const audit2 = await auditCount(t, [...twenty, late]);
  const lateState = (await states(t, [late]))[late];
  // then 3 claims ticked by hand, released
  const three = ['s0', 's1', 's2'].map((x) => `${P}${x}`);
  for (const k of three) await failedClaim(t, k, t.order(k), 'Side effect: timeout of 30000ms exceeded', false);
  await page.goto(`${t.INBOX}?workflow=orders&prefix=${encodeURIComponent(P)}`, { waitUntil: 'domcontentloaded' });
  const listed2 = await keysOf(page);
  for (const k of three) await page.click(`tr[data-key="${k}"] input[type="checkbox"]`);
  const reason2 = 'test events of the new checkout: run them again';
  const b = await bulkInBrowser(t, page, 'button.bulk-selected', 'release', reason2, {});
  await page.close();
  const gone = Object.keys(await states(t, three)).length === 0;
  const hist2 = await Promise.all(three.map((k) => historyRows(t, k)));
  const released = hist2.every((h) => h.length === 1 && h[0].action === 'release' && h[0].actor === t.login.user && h[0].reason === reason2);
  const lateAfter = (await states(t, [late]))[late];
  await releaseAll(t, [late]);
  const pass = listed.length === 20 && a.status.join() === '200,200,200' && a.reviewKeys.length === 20 && a.confirmKeys.join() === a.reviewKeys.join() &&
    a.outcomes.length === 20 && a.outcomes.every(([, o]) => o === 'decided') && twenty.every((k) => after1[k] === 'failed_retryable') && after1[late] === 'needs_review' &&
    oneRowEach && audit1 === 20 && replay.status === 409 && /Sent already/.test(replay.html) && forged.status === 400 && audit2 === 20 && lateState === 'needs_review' &&
    listed2.length === 4 && b.status.join() === '200,200,200' && b.confirmKeys.join() === three.join() && b.outcomes.map(([k, o]) => k + ':' + o).join() === three.map((k) => k + ':decided').join() &&
    gone && released && lateAfter === 'needs_review';
  t.record('inbox-h', 'bulk by filter: 20 claims, Resolve: retry, one line per key and one audit row per claim naming the person; a claim matching after the review not decided; the confirmation sent again or with a key added refused, nothing changed; then 3 ticked claims released the same way',
    `listed ${listed.length}; pages ${a.status.join('/')}; review ${a.reviewKeys.length} keys, confirm ${a.confirmKeys.length} (same: ${a.confirmKeys.join() === a.reviewKeys.join()}); outcomes ${JSON.stringify(tally(a.outcomes))}; ` +
      `states ${JSON.stringify(tally(twenty.map((k) => [k, after1[k]])))}, late one ${after1[late]}; one audit row each by ${t.login.user}: ${oneRowEach} (${audit1}); ` +
      `sent again ${replay.status}, key added ${forged.status}, audit rows then ${audit2}, late one ${lateState}; ` +
      `ticked: listed ${listed2.length}, pages ${b.status.join('/')}, outcomes ${JSON.stringify(tally(b.outcomes))}, claims gone ${gone}, release rows by ${t.login.user}: ${released}; late one ${lateAfter}`,
    pass, 0, 0);
}
const tally = (pairs) => pairs.reduce((m, [, o]) => ({ ...m, [o]: (m[o] ?? 0) + 1 }), {});

// ------------------------------------------------------------------ inbox-i --
export async function drillI(t) {
  const P = 'evt-page-i-';
  const N = 1200;
  // four transactions of 300: the claims of one share their since, and the key
  // orders them.  Written as rows, as a long outage leaves them: made through
  // idem_fail, each would be announced, and n8n would run the alerts workflow
  // 1,200 times (minutes, during which it answers the page late or not at all)
  const make = 'INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, token_issued, execution_id, last_error, created_at, claimed_at, updated_at) ' +
    "SELECT 'orders', $3 || lpad(g::text, 4, '0'), 'needs_review', 1, nextval('idem_gate.token_seq'), true, 'e2e-page', 'timeout', now(), now(), now() " +
    'FROM generate_series($1::int, $2::int) AS g';
  for (let b = 0; b < N; b += 300) await t.q(make, [b, b + 299, P]);
  const expected = (await t.q("SELECT key FROM idem_gate.inbox WHERE workflow = 'orders' AND key >= $1 AND key < $2 ORDER BY since, workflow, key", [P, 'evt-page-j'])).map((r) => r.key);
  const page = await t.tab();
  const t0 = Date.now();
  await page.goto(`${t.INBOX}?workflow=orders&prefix=${encodeURIComponent(P)}`, { waitUntil: 'domcontentloaded' });
  const asOf = await text(page, '.read-at');
  const refresh = await page.$eval('a.refresh', (a) => a.getAttribute('href')).catch(() => '');
  const seen = [];
  const ttfb = [];
  let pages = 0;
  for (;;) {
    pages += 1;
    seen.push(...(await keysOf(page)));
    ttfb.push(await page.evaluate(() => Math.round(performance.getEntriesByType('navigation')[0].responseStart - performance.getEntriesByType('navigation')[0].requestStart)));
    if (!(await page.$('a.next-page')) || pages > 20) break;
    await click(page, 'a.next-page');
  }
  const pagingMs = Date.now() - t0;
  const once = new Set(seen).size === seen.length;
  // the search form: a key prefix, then an exact key over every workflow
  await page.goto(t.INBOX, { waitUntil: 'domcontentloaded' });
  await page.type('form.filter input[name="prefix"]', `${P}004`);
  await click(page, 'form.filter button[type="submit"]');
  const byPrefix = await keysOf(page);
  await t.shot(page, 'n8n-inbox-search.png');
  await page.goto(`${t.INBOX}?key=${encodeURIComponent(`${P}0042`)}`, { waitUntil: 'domcontentloaded' });
  const byKey = await keysOf(page);
  await page.close();
  const old = await listHtml(t, { workflow: 'orders', prefix: P, older_than: '1 hour' });
  const bad = await listHtml(t, { workflow: 'orders', older_than: 'soon' });
  await releaseAll(t, expected);
  const pass = expected.length === N && seen.length === N && once && seen.join() === expected.join() && pages === 12 && /UTC$/.test(asOf ?? '') &&
    /prefix=evt-page-i-/.test(refresh) && byPrefix.join() === Array.from({ length: 10 }, (_, i) => `${P}004${i}`).join() && byKey.join() === `${P}0042` &&
    old.status === 200 && /Nothing waits here/.test(old.html) && bad.status === 400 && /is not an age/.test(bad.html);
  t.record('inbox-i', `paging through ${N} claims (100 a page, next page): each once, in order; search by key prefix and by exact key; as of and Refresh keep the filters; a bad age 400`,
    `${expected.length} made; ${seen.length} seen on ${pages} pages in ${(pagingMs / 1000).toFixed(1)} s (time to first byte per page, ms: ${ttfb.join(' ')}), each once: ${once}, in the view's order: ${seen.join() === expected.join()}; as of "${asOf}", refresh ${refresh}; ` +
      `prefix ${P}004: ${byPrefix.length} (${byPrefix[0]}..${byPrefix[byPrefix.length - 1]}); key ${P}0042: ${JSON.stringify(byKey)}; older than 1 hour ${old.status}; older_than=soon ${bad.status}`,
    pass, 0, 0);
}

// ------------------------------------------------------------------ inbox-j --
async function n8nApi(t, path) {
  const h = { 'content-type': 'application/json', 'browser-id': 'idem-gate-inbox-j' };
  const login = await fetch(`${t.BASE}/rest/login`, { method: 'POST', headers: h, body: JSON.stringify({ emailOrLdapLoginId: OWNER.email, password: OWNER.password }) });
  const cookie = /(n8n-auth=[^;]*)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
  await login.text();
  const r = await fetch(`${t.BASE}/rest${path}`, { headers: { ...h, cookie: cookie ?? '' } });
  let json = null;
  try {
    json = await r.json();
  } catch {}
  return { status: r.status, login: login.status, data: json?.data ?? json };
}
export async function drillJ(t) {
  const key = 'evt-inbox-j';
  await t.sink.setMode('5xx');
  const r = await t.post(t.GATE, t.order(key));
  await t.sink.setMode('ok');
  const c = await until(async () => ((await t.claim(key))?.state === 'needs_review' ? t.claim(key) : null), 20000);
  const textKey = 'evt-inbox-j-text';
  await failedClaim(t, textKey, t.order(textKey), 'Side effect: socket hang up', false);
  const want = `${t.BASE}/workflow/${GATE_N8N_ID}/executions/${c?.execution_id}`;
  const page = await t.tab();
  await page.goto(`${t.INBOX}?workflow=orders&prefix=evt-inbox-j`, { waitUntil: 'domcontentloaded' });
  const inList = await page.$eval(`tr[data-key="${key}"] a.execution`, (a) => a.href).catch(() => null);
  const noLink = (await page.$(`tr[data-key="${textKey}"] a.execution`)) === null;
  await page.goto(`${t.INBOX}?workflow=orders&key=${key}`, { waitUntil: 'domcontentloaded' });
  const onItem = await page.$eval('a.execution', (a) => a.href).catch(() => null);
  const n8nPage = await t.b.browser.newPage();
  const opened = await n8nPage.goto(inList ?? want, { waitUntil: 'domcontentloaded' }).catch(() => null);
  const openedStatus = opened?.status() ?? 0;
  await n8nPage.close();
  await page.close();
  const api = await n8nApi(t, `/executions/${c?.execution_id}`);
  const apiWorkflow = api.data?.workflowId ?? api.data?.workflowData?.id;
  await releaseAll(t, [key, textKey]);
  const pass = /^[0-9]+$/.test(c?.execution_id ?? '') && inList === want && onItem === want && noLink && openedStatus === 200 && api.status === 200 && String(apiWorkflow) === GATE_N8N_ID;
  t.record('inbox-j', 'a claim links to the n8n execution that owned it (/workflow/<gate id>/executions/<id>, both n8n 2.x): n8n serves it, its API has that execution of that workflow; a non-numeric id is not linked',
    `gate answered ${r.status}, claim ${c?.state} execution ${c?.execution_id}; list link ${inList}; item link ${onItem === want ? 'the same' : onItem}; non-numeric id linked: ${!noLink}; ` +
      `n8n served the link ${openedStatus}; API login ${api.login}, GET /rest/executions/${c?.execution_id} ${api.status}, workflow ${apiWorkflow}`,
    pass, 1, 0);
}

// ------------------------------------------------------------------ inbox-k --
export async function drillK(t) {
  const [k1, k2] = ['evt-inbox-k-1', 'evt-inbox-k-2'];
  for (const k of [k1, k2]) await failedClaim(t, k, t.order(k), 'Side effect: socket hang up', false);
  const hiddenKey = 'evt-inbox-k-hidden';
  await failedClaim(t, hiddenKey, { id: hiddenKey, customer_id: 'c', order_ref: 'r', amount: { value: 1 } }, 'Side effect: timeout', false, 'orders-by-fields');
  const list = await listHtml(t, { workflow: 'orders', prefix: 'evt-inbox-k' });
  const csrf = hiddenFields(list.html, 'bulk-review').csrf ?? '';
  // the confirmation of a decision, as the page makes it, then its submit
  const confirmAndApply = async (workflow, keys, decision = 'retry', reason = 'per-key answers') => {
    const c = await formPost(t, { action: 'bulk-confirm', workflow, keys: JSON.stringify(keys), decision, reason, csrf });
    const f = hiddenFields(c.html, 'bulk-apply');
    const a = f.bulk ? await formPost(t, f) : { status: 0, html: '' };
    return { confirm: c.status, apply: a.status, form: f, outcomes: [...a.html.matchAll(/data-key="([^"]*)" data-outcome="([^"]*)"/g)].map((m) => `${unescapeHtml(m[1])}:${m[2]}`) };
  };
  const mixed = await confirmAndApply('orders', [k1, 'evt-no-such-key', k1]);
  const hidden = await confirmAndApply('orders-by-fields', [hiddenKey]);
  const before = await auditCount(t, [k2]);
  const tooMany = await formPost(t, { action: 'bulk-confirm', workflow: 'orders', keys: JSON.stringify(Array.from({ length: 1001 }, (_, i) => `evt-x-${i}`)), decision: 'retry', reason: 'r', csrf });
  const c2 = await formPost(t, { action: 'bulk-confirm', workflow: 'orders', keys: JSON.stringify([k2]), decision: 'release', reason: 'forgery test', csrf });
  const f2 = hiddenFields(c2.html, 'bulk-apply');
  const forgedToken = await formPost(t, { ...f2, bulk: `${Math.floor(Date.now() / 1000)}.${'0'.repeat(64)}` });
  const otherPerson = await formPost(t, f2, t.login2);
  const otherReason = await formPost(t, { ...f2, reason: 'another reason' });
  const badAge = await formPost(t, { action: 'bulk-review', workflow: 'orders', scope: 'filter', f_older_than: 'since monday', csrf });
  const noCsrf = await formPost(t, { action: 'bulk-confirm', workflow: 'orders', keys: JSON.stringify([k2]), decision: 'release', reason: 'r' });
  const k2State = (await states(t, [k2]))[k2];
  const after = await auditCount(t, [k2]);
  const hiddenState = (await states(t, [hiddenKey], 'orders-by-fields'))[hiddenKey];
  await releaseAll(t, [k1, k2]);
  await releaseAll(t, [hiddenKey], 'orders-by-fields');
  const pass = csrf !== '' && mixed.apply === 200 && mixed.outcomes.join() === `${k1}:decided,evt-no-such-key:not_found,${k1}:already_decided` &&
    hidden.apply === 200 && hidden.outcomes.join() === `${hiddenKey}:not_permitted` && hiddenState === 'needs_review' &&
    tooMany.status === 400 && /At most 1000/.test(tooMany.html) && c2.status === 200 && forgedToken.status === 400 && otherPerson.status === 400 && otherReason.status === 400 &&
    badAge.status === 400 && /is not an age/.test(badAge.html) && noCsrf.status === 400 && k2State === 'needs_review' && after === before;
  t.record('inbox-k', 'bulk bad input: decided, not_found, already_decided answered per key in one submit; not_permitted for a workflow not granted; over 1000 keys, a forged token, another person\'s or another reason\'s confirmation, a bad age and a form without token refused, nothing changed',
    `csrf ${csrf ? 'found' : 'missing'}; mixed ${mixed.confirm}/${mixed.apply} ${JSON.stringify(mixed.outcomes)}; not granted ${hidden.confirm}/${hidden.apply} ${JSON.stringify(hidden.outcomes)} (claim ${hiddenState}); ` +
      `1001 keys ${tooMany.status}; forged token ${forgedToken.status}; bob with alice's confirmation ${otherPerson.status}; reason changed ${otherReason.status}; bad age ${badAge.status}; no token ${noCsrf.status}; ` +
      `${k2} ${k2State}, audit rows ${before} -> ${after}`,
    pass, 0, 0);
}
