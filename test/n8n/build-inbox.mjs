// The operator's side of the examples: the inbox page (examples/n8n/inbox.json),
// the alerts (examples/n8n/alerts.json) and their credentials
// (examples/n8n/credentials.inbox.json).  build-examples.mjs writes them with
// the gates, from the descriptions below; the committed JSON files are the
// product.
//
// The inbox is served by n8n itself, behind a reverse proxy that signs each
// operator in (docs/security.md "The inbox's sign-in"; examples/nginx/inbox.conf):
// the proxy sends the person's name in X-Forwarded-User and a shared secret
// in X-Idem-Gate-Proxy, which the Webhook nodes check with a Header Auth
// credential, so that n8n answers 403 to a request that did not come
// through the proxy.  The page takes the actor from that name only:
//   GET  /webhook/idem-gate/inbox                         the list (?workflow=&reason= filter it)
//   GET  /webhook/idem-gate/inbox?workflow=W&key=K        one claim: payload, last_error, receipt, history
//   POST /webhook/idem-gate/inbox  (an HTML form)         action=resolve-completed | resolve-retry |
//                                                         release | replay, with a reason
// Its Postgres nodes connect as the operator role (docs/n8n.md run:operator-role),
// which reads idem_gate.inbox and idem_gate.history() and may call idem_resolve,
// idem_release, idem_replay and idem_status, for the workflows granted to it.

export const INBOX_IDS = { inbox: 'idemGateInbox001', alerts: 'idemGateAlerts01' };
export const INBOX_PG_CREDENTIAL = { id: 'idemGateInboxPg1', name: 'idem_gate inbox Postgres' };
export const INBOX_PROXY_CREDENTIAL = { id: 'idemGateInboxPxy', name: 'idem_gate inbox proxy' };
// the headers the proxy sets: the shared secret, and the signed-in person
export const PROXY_SECRET_HEADER = 'X-Idem-Gate-Proxy';
export const PROXY_USER_HEADER = 'X-Forwarded-User';
// how long a page's forms may be sent (the form token carries its time)
export const FORM_TTL_SECONDS = 12 * 3600;
export const INBOX_PATH = 'idem-gate/inbox';
// placeholders the docs name: n8n's address (the default of a local n8n: it
// works as it is there) and the chat's incoming webhook (a host that does not
// exist: nothing is posted until it is set)
export const N8N_ADDRESS = 'http://localhost:5678';
export const CHAT_URL = 'https://chat.example/hooks/idem-gate';
export const DIGEST_MINUTES = 60;
// the gates the inbox can replay a delivery to, by workflow (scope) name
export const GATE_URLS = { orders: `${N8N_ADDRESS}/webhook/idem-gate/orders` };

let counter = 0;
const uid = (prefix) => {
  counter += 1;
  return `${prefix}-1de0-4a7e-9a7e-${String(counter).padStart(12, '0')}`;
};

// ---- SQL (the CI test runs exactly these, read from the JSON files) ----
export const INBOX_SQL = {
  // the list: what the filter selects (at most 500 rows, oldest first), and
  // the count of every workflow and reason for the filter's choices
  list:
    'WITH i AS (\n' +
    '  SELECT workflow, key, reason, since, state::text AS state, attempt, left(last_error, 300) AS last_error,\n' +
    '         payload IS NOT NULL AS has_payload, payload_dropped_bytes\n' +
    '  FROM idem_gate.inbox),\n' +
    "f AS (SELECT * FROM i WHERE ($1::text = '' OR workflow = $1::text) AND ($2::text = '' OR reason = $2::text))\n" +
    'SELECT\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'key', key, 'reason', reason,\n" +
    "            'since', to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),\n" +
    "            'age_s', floor(extract(epoch FROM now() - since)), 'state', state, 'attempt', attempt,\n" +
    "            'last_error', last_error, 'has_payload', has_payload, 'payload_dropped_bytes', payload_dropped_bytes)\n" +
    "          ORDER BY since, workflow, key), '[]'::jsonb)\n" +
    '     FROM (SELECT * FROM f ORDER BY since, workflow, key LIMIT 500) AS l) AS items,\n' +
    '  (SELECT count(*)::int FROM f) AS matching,\n' +
    "  (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'reason', reason, 'n', n,\n" +
    "            'oldest_s', oldest_s) ORDER BY workflow, reason), '[]'::jsonb)\n" +
    '     FROM (SELECT workflow, reason, count(*)::int AS n, floor(extract(epoch FROM now() - min(since))) AS oldest_s\n' +
    '           FROM i GROUP BY workflow, reason) AS g) AS groups;',
  // one claim: its row without the token, why it is in the inbox, its history
  item:
    "SELECT (SELECT to_jsonb(s) - 'token' - 'alerted_token' FROM idem_status($1::text, $2::text) AS s) AS claim,\n" +
    "       (SELECT jsonb_build_object('reason', i.reason, 'age_s', floor(extract(epoch FROM now() - i.since)))\n" +
    '          FROM idem_gate.inbox AS i WHERE i.workflow = $2::text AND i.key = $1::text LIMIT 1) AS inbox,\n' +
    "       (SELECT coalesce(jsonb_agg(to_jsonb(h) ORDER BY h.at), '[]'::jsonb)\n" +
    '          FROM idem_gate.history($1::text, $2::text) AS h) AS history;',
  resolveCompleted:
    "SELECT idem_resolve($1::text, $2::text, 'completed', $3::jsonb, $4::text, $5::text)::text AS state;",
  resolveRetry:
    "SELECT idem_resolve($1::text, $2::text, 'retry', NULL, $3::text, $4::text)::text AS state;",
  release: 'SELECT idem_release($1::text, $2::text, $3::text, $4::text) AS released;',
  // records the replay (who, why) and answers the payload to send; refuses
  // a claim that cannot be replayed before anything is sent
  replay:
    'SELECT idem_replay($1::text, $2::text, $3::text, $4::text) AS payload;',
  // the alert names a workflow, a reason and a time: the item it most likely
  // is, the one of that workflow and reason whose last change is nearest to
  // the alert's time (idem_fail's needs_review and failing are announced as
  // they are written; a stuck claim's last change is older, and the nearest
  // is then the newest stuck one), how many wait in that workflow, and
  // whether the inbox's role may see that workflow at all (per-workflow
  // access): an alert about one it may not see is not posted
  alertItem:
    'SELECT $1::text AS workflow, $2::text AS reason, idem_gate.workflow_visible($1::text) AS visible,\n' +
    '       i.key, i.attempt, floor(extract(epoch FROM now() - i.since)) AS age_s,\n' +
    '       (SELECT count(*)::int FROM idem_gate.inbox AS j WHERE j.workflow = $1::text) AS waiting\n' +
    'FROM (SELECT 1) AS one\n' +
    'LEFT JOIN LATERAL (\n' +
    '  SELECT key, attempt, since FROM idem_gate.inbox\n' +
    '  WHERE workflow = $1::text AND reason = $2::text\n' +
    "  ORDER BY abs(extract(epoch FROM since - coalesce($3::timestamptz, now()))), since DESC\n" +
    '  LIMIT 1) AS i ON true;',
  // the digest: every workflow and reason with its count and oldest age, and
  // whether the live alerts' LISTEN session (the same role) still exists
  digest:
    "SELECT coalesce(sum(n), 0)::int AS total,\n" +
    "       coalesce(jsonb_agg(jsonb_build_object('workflow', workflow, 'reason', reason, 'n', n, 'oldest_s', oldest_s)\n" +
    "                ORDER BY workflow, reason), '[]'::jsonb) AS groups,\n" +
    '       (SELECT count(*)::int FROM pg_stat_activity\n' +
    "         WHERE usename = current_user AND query ILIKE 'LISTEN%idem_gate_alert%') AS listeners\n" +
    'FROM (SELECT workflow, reason, count(*)::int AS n, floor(extract(epoch FROM now() - min(since))) AS oldest_s\n' +
    '      FROM idem_gate.inbox GROUP BY workflow, reason) AS g;',
};

// ---- the page helpers, the same text in every Render node ----
const HELPERS = String.raw`// idem_gate inbox: page helpers (the same in every Render node).  Everything
// that comes from the database or the request goes through esc().
const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
const qs = (o) => Object.entries(o).filter(([, v]) => v !== undefined && v !== null && v !== '')
  .map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(String(v))).join('&');
// links and forms are relative to the page itself (?workflow=...): no address
// to configure, and a copy of the webhooks under another path works as well
const href = (o = {}) => esc('?' + qs(o));
const age = (s) => {
  s = Math.max(0, Math.floor(Number(s) || 0));
  if (s < 90) return s + ' s';
  const m = Math.floor(s / 60);
  if (m < 90) return m + ' min';
  const h = Math.floor(m / 60);
  if (h < 48) return h + ' h ' + (m % 60) + ' min';
  return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
};
const when = (t) => (t ? esc(String(t).replace('T', ' ').replace(/\.\d+/, '').replace(/(\+00:00|Z)$/, ' UTC')) : '');
const REASONS = {
  needs_review: 'the side effect may have happened: decide whether it did',
  stuck: 'processing for longer than its stuck_after: the run may be dead',
  failing: 'failed before the side effect at every attempt: the downstream keeps refusing',
};
const CSS = 'body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}' +
  'header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;justify-content:space-between;align-items:center}' +
  'header a{color:#fff;font-weight:600;text-decoration:none}.me{opacity:.8;font-size:13px}' +
  'main{padding:16px 24px;max-width:1200px}h1{font-size:22px;margin:8px 0 12px}h2{font-size:17px;margin:22px 0 8px}' +
  'table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid #e3e6eb;padding:6px 8px;text-align:left;vertical-align:top}' +
  'th{font-size:12px;text-transform:uppercase;color:#5a6272;background:#eef0f3}td.num{text-align:right}' +
  '.tag{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;background:#e3e6eb}' +
  '.needs_review{background:#ffe1c2;color:#8a3c00}.stuck{background:#fff1a8;color:#6b5600}.failing{background:#ffd0d0;color:#8a0010}' +
  '.completed{background:#d3f2d8;color:#0d5a1f}.failed_retryable{background:#dbe7ff;color:#173f8a}' +
  'pre{background:#fff;border:1px solid #e3e6eb;padding:10px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-word}' +
  'dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;background:#fff;padding:10px;border:1px solid #e3e6eb}dt{color:#5a6272}dd{margin:0}' +
  '.actions{display:flex;flex-wrap:wrap;gap:12px}form.action{background:#fff;border:1px solid #e3e6eb;padding:10px 12px;flex:1 1 320px}' +
  'form.action h3{margin:0 0 4px;font-size:15px}form.action p{margin:0 0 8px;font-size:13px;color:#5a6272}' +
  'label{display:block;font-size:13px;margin:6px 0}textarea,input[type=text]{width:100%;box-sizing:border-box;font:inherit;padding:4px}' +
  'button{font:inherit;padding:5px 14px;margin-top:6px;cursor:pointer}form.danger{border-color:#e9a2a2}' +
  '.filter{display:flex;gap:12px;align-items:end;margin:8px 0 12px}.filter label{margin:0}' +
  '.notice{padding:10px 12px;border:1px solid;background:#fff;margin:10px 0}.ok{border-color:#59b26b}.refused{border-color:#d9534f}' +
  '.muted{color:#5a6272;font-size:13px}';
const page = (title, body, me) => '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
  '<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="referrer" content="no-referrer">' +
  '<title>' + esc(title) + '</title><style>' + CSS + '</style></head><body><header><a href="?">idem_gate inbox</a>' +
  '<span class="me">signed in as ' + esc(me) + '</span></header><main>' + body + '</main></body></html>';
const out = (status, title, body, me) => [{ json: { status, html: page(title, body, me) } }];
// an error item of a Postgres node's error output, as n8n hands it over
const pgError = (j) => {
  const e = j?.error;
  const message = String((e && typeof e === 'object' ? e.message : e) ?? j?.message ?? 'unknown error');
  const m = /\((\w{5})\)|SQLSTATE[: ]+(\w{5})/.exec(JSON.stringify(j ?? {}));
  const code = (e && typeof e === 'object' && (e.code || e.sqlState)) || j?.code || (m && (m[1] || m[2])) || '';
  // the DETAIL (n8n hands it over as the description): who decided, and when
  const detail = String((e && typeof e === 'object' && (e.description || e.detail)) || '');
  // (n8n gives the HINT instead when there is no DETAIL: only the sentence of who decided is kept)
  return { message, code: String(code), detail: /^(The last operator action|No operator has acted)/.test(detail) ? detail : '' };
};
// the proxy named nobody: nothing is shown or done
const nobody = (status) => out(status, 'Inbox: not signed in', '<h1>Not signed in</h1><p class="notice refused">' +
  'The proxy in front of this page named no person: sign in through it (docs/n8n.md, Set up the inbox).</p>', '');
`;

const RENDER_LIST = String.raw`
const r = $('Read page request').first().json;
const d = $input.first().json;
if (!r.actor) return nobody(403);
if (d.error !== undefined) {
  const e = pgError(d);
  return out(/may not use workflow|42501/.test(e.message + e.code) ? 403 : 500, 'Inbox: error',
    '<h1>The inbox could not be read</h1><p class="notice refused">' + esc(e.message) + '</p>', r.actor);
}
const items = d.items ?? [];
const groups = d.groups ?? [];
const workflows = [...new Set(groups.map((g) => g.workflow))];
const total = groups.reduce((s, g) => s + g.n, 0);
const opt = (v, label, sel) => '<option value="' + esc(v) + '"' + (v === sel ? ' selected' : '') + '>' + esc(label) + '</option>';
let body = '<h1>Claims that need a person: ' + total + '</h1>';
body += '<form method="get" action="" class="filter">' +
  '<label>Workflow<br><select name="workflow">' + opt('', 'all', r.workflow) + workflows.map((w) => opt(w, w, r.workflow)).join('') + '</select></label>' +
  '<label>Reason<br><select name="reason">' + opt('', 'all', r.reason) + Object.keys(REASONS).map((x) => opt(x, x, r.reason)).join('') + '</select></label>' +
  '<button type="submit">Show</button></form>';
if (groups.length) {
  body += '<table class="groups"><tr><th>Workflow</th>' + Object.keys(REASONS).map((x) => '<th>' + esc(x) + '</th>').join('') + '</tr>';
  for (const w of workflows) {
    body += '<tr><td><a href="' + href({ workflow: w }) + '">' + esc(w) + '</a></td>';
    for (const x of Object.keys(REASONS)) {
      const g = groups.find((g) => g.workflow === w && g.reason === x);
      body += '<td>' + (g ? '<a href="' + href({ workflow: w, reason: x }) + '">' + g.n + '</a> <span class="muted">oldest ' + age(g.oldest_s) + '</span>' : '') + '</td>';
    }
    body += '</tr>';
  }
  body += '</table>';
}
const filtered = r.workflow || r.reason;
body += '<h2>' + (filtered ? esc([r.workflow, r.reason].filter(Boolean).join(', ')) + ': ' : '') + d.matching + ' claim' + (d.matching === 1 ? '' : 's') +
  ', oldest first' + (items.length < d.matching ? ' (the oldest ' + items.length + ' shown)' : '') + '</h2>';
if (!items.length) body += '<p class="notice ok">Nothing waits' + (filtered ? ' here' : '') + '.</p>';
else {
  body += '<table class="items"><tr><th>Waiting</th><th>Reason</th><th>Workflow</th><th>Key</th><th>Attempts</th><th>State</th><th>Last error</th></tr>';
  for (const i of items) {
    body += '<tr data-key="' + esc(i.key) + '" data-workflow="' + esc(i.workflow) + '"><td title="since ' + esc(i.since) + ' UTC">' + age(i.age_s) + '</td>' +
      '<td><span class="tag ' + esc(i.reason) + '">' + esc(i.reason) + '</span></td><td>' + esc(i.workflow) + '</td>' +
      '<td><a href="' + href({ workflow: i.workflow, key: i.key }) + '">' + esc(i.key) + '</a></td>' +
      '<td class="num">' + esc(i.attempt) + '</td><td>' + esc(i.state) + '</td><td>' + esc(i.last_error) + '</td></tr>';
  }
  body += '</table>';
}
body += '<p class="muted">needs_review: ' + esc(REASONS.needs_review) + '. stuck: ' + esc(REASONS.stuck) + '. failing: ' + esc(REASONS.failing) + '.</p>';
return out(200, 'idem_gate inbox (' + total + ')', body, r.actor);
`;

const RENDER_ITEM = String.raw`
const r = $('Read page request').first().json;
const d = $input.first().json;
if (!r.actor) return nobody(403);
const title = r.workflow + ' / ' + r.key;
if (d.error !== undefined) {
  const e = pgError(d);
  const denied = /may not use workflow|42501/.test(e.message + e.code);
  return out(denied ? 403 : 500, title, '<h1>' + esc(title) + '</h1><p class="notice refused">' +
    (denied ? 'This inbox may not see workflow ' + esc(r.workflow) + '. ' : '') + esc(e.message) + '</p>', r.actor);
}
const c = d.claim;
const hist = d.history ?? [];
let body = '<h1>' + esc(title) + ' ' + (d.inbox ? '<span class="tag ' + esc(d.inbox.reason) + '">' + esc(d.inbox.reason) + '</span>' : '') +
  (c && c.state !== d.inbox?.reason ? ' <span class="tag ' + esc(c.state) + '">' + esc(c.state) + '</span>' : '') + '</h1>';
if (!c) {
  body += '<p class="notice">' + (hist.length ? 'No claim: it was released (see its history). The next delivery of this key is new.' : 'No claim with this key in workflow ' + esc(r.workflow) + '.') + '</p>';
} else {
  if (d.inbox) body += '<p>In the inbox for ' + age(d.inbox.age_s) + ': ' + esc(REASONS[d.inbox.reason] ?? d.inbox.reason) + '.</p>';
  body += '<dl><dt>State</dt><dd class="state">' + esc(c.state) + '</dd><dt>Attempts</dt><dd class="attempt">' + esc(c.attempt) + '</dd>' +
    '<dt>Claimed</dt><dd>' + when(c.claimed_at) + '</dd><dt>Last change</dt><dd>' + when(c.updated_at) + '</dd>' +
    '<dt>n8n execution</dt><dd>' + esc(c.execution_id) + '</dd>' +
    '<dt>Idempotency-Key sent downstream</dt><dd><code>' + esc(c.workflow + ':' + c.key) + '</code></dd>' +
    '<dt>Fingerprint</dt><dd><code>' + esc(c.fingerprint ?? '') + '</code></dd></dl>';
  body += '<h2>Last error</h2>' + (c.last_error ? '<pre class="last-error">' + esc(c.last_error) + '</pre>' : '<p class="muted">none</p>');
  body += '<h2>Payload</h2>' + (c.payload != null ? '<pre class="payload">' + esc(JSON.stringify(c.payload, null, 2)) + '</pre>'
    : c.payload_dropped_bytes ? '<p class="notice">Not kept: ' + esc(c.payload_dropped_bytes) + ' bytes, over idem_gate.max_payload_bytes.</p>'
    : '<p class="muted">none kept' + (c.state === 'completed' ? ' (cleared at completion)' : '') + '</p>');
  body += '<h2>Receipt</h2>' + (c.result != null ? '<pre class="receipt">' + esc(JSON.stringify(c.result, null, 2)) + '</pre>' : '<p class="muted">none</p>');
}
body += '<h2>History</h2>';
if (!hist.length) body += '<p class="muted">no operator action yet</p>';
else {
  body += '<table class="history"><tr><th>At</th><th>Action</th><th>By</th><th>Role</th><th>State</th><th>Reason</th></tr>';
  for (const h of hist) {
    body += '<tr><td>' + when(h.at) + '</td><td>' + esc(h.action) + '</td><td class="actor">' + esc(h.actor ?? '') + '</td><td>' + esc(h.session_role) +
      (h.acting_role && h.acting_role !== h.session_role ? ' as ' + esc(h.acting_role) : '') + '</td><td>' + esc(h.state_before ?? '') + ' → ' + esc(h.state_after ?? 'released') +
      '</td><td>' + esc(h.reason ?? '') + '</td></tr>';
  }
  body += '</table>';
}
if (c) {
  const form = (action, label, note, fields = '', cls = '') => '<form method="post" action="" class="action ' + cls + '" data-action="' + action + '">' +
    '<input type="hidden" name="action" value="' + action + '"><input type="hidden" name="workflow" value="' + esc(c.workflow) + '">' +
    '<input type="hidden" name="key" value="' + esc(c.key) + '"><input type="hidden" name="csrf" value="' + esc(r.csrf) + '">' +
    '<h3>' + esc(label) + '</h3><p>' + note + '</p>' + fields +
    '<label>Reason, recorded with your name (' + esc(r.actor) + ')<textarea name="reason" rows="2" required></textarea></label>' +
    '<button type="submit">' + esc(label) + '</button></form>';
  const forms = [];
  if (c.state === 'needs_review' || c.state === 'processing') {
    forms.push(form('resolve-completed', 'Resolve: completed', 'The side effect happened (the downstream has a record for Idempotency-Key <code>' +
      esc(c.workflow + ':' + c.key) + '</code>). Redeliveries then answer 200 duplicate with this receipt.',
      '<label>Receipt: the downstream\'s id, or a JSON object<input type="text" name="receipt" placeholder="fx_123 or {&quot;effect_id&quot;: &quot;fx_123&quot;}"></label>'));
    forms.push(form('resolve-retry', 'Resolve: retry', 'The side effect did not happen. The next delivery performs it' +
      (c.payload != null ? '; if the sender cannot resend, replay it from this page afterwards' : '') + '.'));
  }
  if (c.state === 'failed_retryable' && c.payload != null)
    forms.push(form('replay', 'Replay to the gate', 'Sends the stored payload to the gate once, as a redelivery: the same key, a new attempt. Only when the sender cannot resend, and the downstream works again.'));
  forms.push(form('release', 'Release', 'Forgets the claim: the next delivery of this key is new and performs the side effect. Only for a key that must run again from scratch.', '', 'danger'));
  body += '<h2>Decide</h2><div class="actions">' + forms.join('') + '</div>';
}
body += '<p><a href="' + href({ workflow: r.workflow }) + '">← the inbox of ' + esc(r.workflow) + '</a></p>';
return out(c || hist.length ? 200 : 404, title, body, r.actor);
`;

const CHECK_ACTION = String.raw`
// the form's fields, checked before anything is changed
const a = $input.first().json;
const ACTIONS = ['resolve-completed', 'resolve-retry', 'release', 'replay'];
const FORM_TTL = ${FORM_TTL_SECONDS};
let problem = '';
let receipt = null;
if (!a.actor) problem = 'The proxy in front of this page named no person: sign in through it.';
else if (!a.csrf_ok) problem = 'This form does not come from an inbox page shown to ' + a.actor + ' in the last ' + (FORM_TTL / 3600) + ' hours: reload the page and submit it again.';
else if (!ACTIONS.includes(a.action)) problem = 'Unknown action.';
else if (!a.workflow || !a.key) problem = 'The form names no claim.';
else if (!a.reason) problem = 'A reason is required.';
else if (a.action === 'resolve-completed' && a.receipt) {
  const t = a.receipt.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      receipt = JSON.parse(t);
    } catch (e) {
      problem = 'The receipt is not valid JSON: ' + e.message;
    }
  } else receipt = { effect_id: t };
}
return [{ json: { ...a, problem, receipt: receipt === null ? null : JSON.stringify(receipt) } }];
`;

const RENDER_RESULT = String.raw`
const a = $('Check action').first().json;
const d = $input.first().json;
const title = a.workflow + ' / ' + a.key;
const back = '<p><a href="' + href({ workflow: a.workflow, key: a.key }) + '">← ' + esc(title) + '</a> · <a href="' + href({ workflow: a.workflow }) + '">the inbox of ' + esc(a.workflow) + '</a></p>';
const say = (status, cls, head, text) => out(status, head + ': ' + title, '<h1>' + esc(head) + '</h1><p class="notice ' + cls + '">' + text + '</p>' + back, a.actor);
const label = { 'resolve-completed': 'Resolved as completed', 'resolve-retry': 'Resolved as retry', release: 'Released', replay: 'Replayed' }[a.action] ?? a.action;
if (a.problem) return say(a.actor ? 400 : 403, 'refused', 'Refused, nothing was changed', esc(a.problem));
if (d.error !== undefined && d.statusCode === undefined) {
  const e = pgError(d);
  const m = /the claim is (\w+)/.exec(e.message);
  // who decided it, and when (the error's DETAIL, from the audit trail)
  const who = e.detail ? ' <span class="decided-by">' + esc(e.detail) + '</span>' : '';
  if (a.action === 'replay' && (m || /no payload/.test(e.message) || e.code === '55000' || /no claim|P0002/i.test(e.message + e.code)))
    return say(409, 'refused', 'Nothing to replay, nothing was changed', esc(e.message) + '.' + who +
      ' Only a failed_retryable claim with a stored payload is replayed.');
  if (m || e.code === '55000')
    return say(409, 'refused', 'Already decided, nothing was changed', 'The claim is ' + esc(m ? m[1] : 'no longer open') +
      ': another operator, or an earlier submit of this form, decided it.' + who + ' (' + esc(e.message) + ')');
  if (/may not use workflow|42501/.test(e.message + e.code)) return say(403, 'refused', 'Not allowed, nothing was changed', esc(e.message));
  if (/no claim|P0002/i.test(e.message + e.code)) return say(404, 'refused', 'No such claim, nothing was changed', esc(e.message) + who);
  return say(400, 'refused', 'Refused, nothing was changed', esc(e.message));
}
if (a.action === 'release')
  return d.released === true
    ? say(200, 'ok', label, 'The claim is forgotten: the next delivery of this key is new. Recorded for ' + esc(a.actor) + ': ' + esc(a.reason))
    : say(409, 'refused', 'Nothing to release, nothing was changed', 'There is no claim for this key: it was released already.');
if (a.action === 'replay') {
  if (d.statusCode === undefined)
    return say(409, 'refused', 'Nothing to replay, nothing was changed', esc(d.problem || 'The gate was not reached.'));
  const body = typeof d.body === 'string' ? d.body : JSON.stringify(d.body ?? null);
  const outcome = d.headers?.['x-idem-gate-outcome'] ?? '';
  const ok = d.statusCode >= 200 && d.statusCode < 300;
  return say(ok ? 200 : 502, ok ? 'ok' : 'refused', ok ? label : 'Replayed, and the gate failed',
    'Recorded for ' + esc(a.actor) + ': ' + esc(a.reason) + '. The gate answered <b class="gate-status">' + esc(d.statusCode) + '</b> <code class="gate-outcome">' + esc(outcome) + '</code>: <code class="gate-body">' + esc(body) + '</code>' +
    (outcome === 'in_flight' || outcome === 'completed' ? ' (the claim was taken already: nothing more was done)' : ''));
}
return say(200, 'ok', label, 'The claim is now <b class="new-state">' + esc(d.state) + '</b>. Recorded for ' + esc(a.actor) + ': ' + esc(a.reason) +
  (a.action === 'resolve-retry' ? '. The next delivery performs the side effect; if the sender cannot resend, replay it from the claim\'s page.' : '.'));
`;

const ALERT_MESSAGE = String.raw`
// one chat message per alert: no payload, no error text (they may hold personal data)
const s = $('Settings').first().json;
const a = $('Alert or digest?').first().json.payload ?? {};
const i = $input.first().json;
// a workflow the inbox's role may not see: its link would open a 403, and
// nobody here can act on it; the team whose inbox sees it gets the alert
if (i.visible === false) return [];
const base = s.inbox_url;
const u = (o) => base + '?' + Object.entries(o).map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(String(v))).join('&');
const age = (x) => { x = Math.floor(Number(x) || 0); return x < 90 ? x + ' s' : x < 5400 ? Math.floor(x / 60) + ' min' : Math.floor(x / 3600) + ' h'; };
// Slack's mrkdwn needs &, < and > escaped in text
const t = (v) => String(v ?? '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const what = { needs_review: 'needs a decision (needs_review)', stuck: 'is stuck in processing', failing: 'keeps failing (failing)' }[a.reason] ?? String(a.reason);
let text = ':rotating_light: idem_gate: a claim of workflow *' + t(a.workflow) + '* ' + t(what);
if (i.key != null) text += ': key <' + u({ workflow: a.workflow, key: i.key }) + '|' + t(i.key) + '>, attempt ' + i.attempt + ', waiting ' + age(i.age_s);
else text += ' (no longer in the inbox, or not visible to the inbox role)';
text += '. ' + (i.waiting ?? 0) + ' waiting in ' + t(a.workflow) + ': <' + u({ workflow: a.workflow }) + '|open the inbox>';
return [{ json: { text } }];
`;

const DIGEST_MESSAGE = String.raw`
const s = $('Settings').first().json;
const d = $input.first().json;
const age = (x) => { x = Math.floor(Number(x) || 0); return x < 90 ? x + ' s' : x < 5400 ? Math.floor(x / 60) + ' min' : x < 172800 ? Math.floor(x / 3600) + ' h' : Math.floor(x / 86400) + ' d'; };
const t = (v) => String(v ?? '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const byWf = {};
for (const g of d.groups ?? []) (byWf[g.workflow] ??= []).push(g.n + ' ' + t(g.reason) + ' (oldest ' + age(g.oldest_s) + ')');
const link = (wf) => s.inbox_url + '?workflow=' + encodeURIComponent(wf);
const started = $('Alert or digest?').first().json.event;
let text = ':inbox_tray: idem_gate inbox' + (started ? ' (' + String(started).toLowerCase() + ')' : '') + ': ' + d.total + (d.total === 1 ? ' claim waits' : ' claims wait') + ' for a person. ' +
  Object.entries(byWf).map(([wf, parts]) => '<' + link(wf) + '|' + t(wf) + '>: ' + parts.join(', ')).join('; ') + '. <' + s.inbox_url + '|Open the inbox>';
if (!d.listeners) text += '\n:warning: The live alerts are not listening (their PostgreSQL session is gone, for example after a database restart): republish idem_gate: alerts, or restart n8n.';
return [{ json: { text } }];
`;

// ---- node builders ----
const pgNode = (name, position, query, params, extra = {}) => ({
  parameters: { operation: 'executeQuery', query, options: { queryReplacement: `={{ ${params} }}` } },
  id: uid('0000pg10'),
  name,
  type: 'n8n-nodes-base.postgres',
  typeVersion: 2.6,
  position,
  credentials: { postgres: { ...INBOX_PG_CREDENTIAL } },
  ...extra,
});
const code = (name, position, jsCode) => ({
  parameters: { jsCode },
  id: uid('0000cd10'),
  name,
  type: 'n8n-nodes-base.code',
  typeVersion: 2,
  position,
});
const setNode = (name, position, fields, includeOther = false) => ({
  parameters: {
    assignments: {
      assignments: fields.map(([n, value, type = 'string']) => ({ id: uid('0000as10'), name: n, value, type })),
    },
    ...(includeOther ? { includeOtherFields: true } : {}),
    options: {},
  },
  id: uid('0000se10'),
  name,
  type: 'n8n-nodes-base.set',
  typeVersion: 3.4,
  position,
});
const ifNode = (name, position, expression) => ({
  parameters: {
    conditions: {
      options: { caseSensitive: true, leftValue: '', typeValidation: 'loose', version: 2 },
      conditions: [{ id: uid('0000if10'), leftValue: `={{ ${expression} }}`, rightValue: '', operator: { type: 'boolean', operation: 'true', singleValue: true } }],
      combinator: 'and',
    },
    looseTypeValidation: true,
    options: {},
  },
  id: uid('0000if11'),
  name,
  type: 'n8n-nodes-base.if',
  typeVersion: 2.2,
  position,
});
const sticky = (name, position, width, height, content, color = 7) => ({
  parameters: { content, height, width, color },
  id: uid('0000nt10'),
  name,
  type: 'n8n-nodes-base.stickyNote',
  typeVersion: 1,
  position,
});
const inboxWebhook = (name, method, position, webhookId) => ({
  parameters: {
    httpMethod: method,
    path: INBOX_PATH,
    authentication: 'headerAuth',
    responseMode: 'responseNode',
    options: {},
  },
  id: uid('0000wh10'),
  name,
  type: 'n8n-nodes-base.webhook',
  typeVersion: 2.1,
  position,
  webhookId,
  credentials: { httpHeaderAuth: { ...INBOX_PROXY_CREDENTIAL } },
});
// who is signed in: the name the proxy sends, trusted because the Webhook
// node has checked the proxy's secret header (n8n answered 403 otherwise);
// empty when the proxy named nobody, and then the page shows and does
// nothing.  The form token binds a form to that person and to the time the
// page was shown: a hash of the proxy's secret, the name and that time,
// which another site cannot compute (it does not know the secret), another
// operator cannot use (another name), and which expires after FORM_TTL_SECONDS.
const SECRET = `($json.headers['${PROXY_SECRET_HEADER.toLowerCase()}'] ?? '')`;
const NAME = `String($json.headers['${PROXY_USER_HEADER.toLowerCase()}'] ?? '').trim().slice(0, 200)`;
const ACTOR = `={{ ${NAME} }}`;
// The token is "<time>.<hash>", the time in seconds since 1970.
const token = (issued) => `('idem_gate inbox form|' + ${SECRET} + '|' + ${NAME} + '|' + ${issued}).hash('sha256')`;
const CSRF = `={{ (() => { const i = String(Math.floor($now.toMillis() / 1000)); return i + '.' + ${token('i')}; })() }}`;
const FORM_OK = `={{ (() => { const [i, h] = String($json.body?.csrf ?? '').split('.'); const age = Math.floor($now.toMillis() / 1000) - Number(i); ` +
  `return /^[0-9]{1,12}$/.test(i ?? '') && age >= -60 && age <= ${FORM_TTL_SECONDS} && h === ${token('i')}; })() }}`;

function inboxWorkflow() {
  counter = 400;
  const nodes = [
    inboxWebhook('Page request', 'GET', [0, 200], 'a3c0ffee-0000-4000-8000-0000000000b1'),
    setNode('Read page request', [220, 200], [
      ['actor', ACTOR],
      ['csrf', CSRF],
      ['workflow', "={{ String($json.query.workflow ?? '').trim() }}"],
      ['key', "={{ String($json.query.key ?? '') }}"],
      ['reason', "={{ String($json.query.reason ?? '').trim() }}"],
    ]),
    ifNode('Item page?', [440, 200], "$json.key !== '' && $json.workflow !== ''"),
    pgNode('Read item', [660, 80], INBOX_SQL.item, '[ $json.key, $json.workflow ]', { onError: 'continueErrorOutput' }),
    code('Render item', [900, 80], HELPERS + RENDER_ITEM),
    pgNode('Read inbox', [660, 320], INBOX_SQL.list, '[ $json.workflow, $json.reason ]', { onError: 'continueErrorOutput' }),
    code('Render list', [900, 320], HELPERS + RENDER_LIST),

    inboxWebhook('Action request', 'POST', [0, 700], 'a3c0ffee-0000-4000-8000-0000000000b2'),
    setNode('Read action', [220, 700], [
      ['actor', ACTOR],
      ['csrf_ok', FORM_OK, 'boolean'],
      ['action', "={{ String($json.body?.action ?? '') }}"],
      ['workflow', "={{ String($json.body?.workflow ?? '') }}"],
      ['key', "={{ String($json.body?.key ?? '') }}"],
      ['reason', "={{ String($json.body?.reason ?? '').trim() }}"],
      ['receipt', "={{ String($json.body?.receipt ?? '').trim() }}"],
    ]),
    code('Check action', [440, 700], CHECK_ACTION),
    {
      parameters: {
        rules: {
          values: ['resolve-completed', 'resolve-retry', 'release', 'replay'].map((a) => ({
            conditions: {
              options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
              conditions: [
                { id: uid('0000sw10'), leftValue: "={{ $json.problem === '' ? $json.action : 'refused' }}", rightValue: a, operator: { type: 'string', operation: 'equals' } },
              ],
              combinator: 'and',
            },
            renameOutput: true,
            outputKey: a,
          })),
        },
        options: { fallbackOutput: 'extra', renameFallbackOutput: 'refused' },
      },
      id: uid('0000sw11'),
      name: 'Route by action',
      type: 'n8n-nodes-base.switch',
      typeVersion: 3.2,
      position: [660, 700],
    },
    pgNode('Resolve completed', [900, 480], INBOX_SQL.resolveCompleted, '[ $json.key, $json.workflow, $json.receipt, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    pgNode('Resolve retry', [900, 640], INBOX_SQL.resolveRetry, '[ $json.key, $json.workflow, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    pgNode('Release', [900, 800], INBOX_SQL.release, '[ $json.key, $json.workflow, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    setNode('Gate URLs', [900, 960], [
      // the gate's webhook for each workflow (scope) the inbox may replay to
      ['gate_url', `={{ (${JSON.stringify(GATE_URLS).replace(/"/g, "'")})[$('Check action').first().json.workflow] ?? '' }}`],
      ['problem', `={{ (${JSON.stringify(GATE_URLS).replace(/"/g, "'")})[$('Check action').first().json.workflow] ? '' : 'No gate URL is set for workflow ' + $('Check action').first().json.workflow + ': add it to the node Gate URLs of idem_gate: inbox.' }}`],
    ], true),
    ifNode('Gate URL set?', [1120, 960], "$json.gate_url !== ''"),
    // the replay's own record (who, why) and the payload to send; a claim
    // that cannot be replayed is refused here, before anything is sent
    pgNode('Record replay', [1340, 900], INBOX_SQL.replay, '[ $json.key, $json.workflow, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    {
      parameters: {
        method: 'POST',
        url: "={{ $('Gate URLs').first().json.gate_url }}",
        sendHeaders: true,
        headerParameters: { parameters: [{ name: 'X-Idem-Gate-Replay', value: "={{ encodeURIComponent($('Check action').first().json.actor + ': ' + $('Check action').first().json.reason) }}" }] },
        sendBody: true,
        specifyBody: 'json',
        jsonBody: '={{ JSON.stringify($json.payload) }}',
        options: { timeout: 60000, response: { response: { fullResponse: true, neverError: true } } },
      },
      id: uid('0000ht10'),
      name: 'Replay to the gate',
      type: 'n8n-nodes-base.httpRequest',
      typeVersion: 4.2,
      position: [1560, 840],
      onError: 'continueErrorOutput',
    },
    code('Render result', [1800, 700], HELPERS + RENDER_RESULT),
    {
      parameters: {
        respondWith: 'text',
        responseBody: '={{ $json.html }}',
        options: {
          responseCode: '={{ $json.status }}',
          responseHeaders: {
            entries: [
              { name: 'Content-Type', value: 'text/html; charset=utf-8' },
              { name: 'Cache-Control', value: 'no-store' },
              { name: 'Referrer-Policy', value: 'no-referrer' },
              { name: 'X-Content-Type-Options', value: 'nosniff' },
            ],
          },
        },
      },
      id: uid('0000rs10'),
      name: 'Respond with the page',
      type: 'n8n-nodes-base.respondToWebhook',
      typeVersion: 1.5,
      position: [2040, 400],
    },
    sticky('Note: inbox', [-40, -160], 900, 300,
      '## idem_gate: the inbox\n' +
        '`GET /webhook/' + INBOX_PATH + '` lists the claims that need a person (`idem_gate.inbox`), `?workflow=…&key=…` shows one: ' +
        'payload, last_error, receipt, history. Decisions are HTML forms (POST, a reason required), recorded with the ' +
        'signed-in person (the proxy\'s `' + PROXY_USER_HEADER + '`) as `actor`.\n\n' +
        '- Both webhooks: **Header Auth** (credential *' + INBOX_PROXY_CREDENTIAL.name + '*): the proxy\'s secret `' + PROXY_SECRET_HEADER + '`; ' +
        'n8n answers 403 without it\n' +
        '- Postgres: the operator role (credential *' + INBOX_PG_CREDENTIAL.name + '*), which sees only its granted workflows\n' +
        '- **Gate URLs**: the gate\'s webhook per workflow, for *Replay*', 5),
  ];
  const to = (node, index = 0) => ({ node, type: 'main', index });
  const connections = {
    'Page request': { main: [[to('Read page request')]] },
    'Read page request': { main: [[to('Item page?')]] },
    'Item page?': { main: [[to('Read item')], [to('Read inbox')]] },
    'Read item': { main: [[to('Render item')], [to('Render item')]] },
    'Render item': { main: [[to('Respond with the page')]] },
    'Read inbox': { main: [[to('Render list')], [to('Render list')]] },
    'Render list': { main: [[to('Respond with the page')]] },
    'Action request': { main: [[to('Read action')]] },
    'Read action': { main: [[to('Check action')]] },
    'Check action': { main: [[to('Route by action')]] },
    'Route by action': {
      main: [[to('Resolve completed')], [to('Resolve retry')], [to('Release')], [to('Gate URLs')], [to('Render result')]],
    },
    'Resolve completed': { main: [[to('Render result')], [to('Render result')]] },
    'Resolve retry': { main: [[to('Render result')], [to('Render result')]] },
    Release: { main: [[to('Render result')], [to('Render result')]] },
    'Gate URLs': { main: [[to('Gate URL set?')]] },
    'Gate URL set?': { main: [[to('Record replay')], [to('Render result')]] },
    'Record replay': { main: [[to('Replay to the gate')], [to('Render result')]] },
    'Replay to the gate': { main: [[to('Render result')], [to('Render result')]] },
    'Render result': { main: [[to('Respond with the page')]] },
  };
  return {
    id: INBOX_IDS.inbox,
    name: 'idem_gate: inbox',
    nodes,
    connections,
    active: false,
    // the Webhook nodes' output holds the operator's Authorization header and
    // the claims' payloads: n8n keeps no execution data of this workflow
    settings: {
      executionOrder: 'v1',
      saveDataErrorExecution: 'none',
      saveDataSuccessExecution: 'none',
      saveManualExecutions: false,
      saveExecutionProgress: false,
    },
    pinData: {},
    tags: [],
  };
}

function alertsWorkflow() {
  counter = 600;
  const nodes = [
    {
      parameters: { triggerMode: 'listenTrigger', channelName: 'idem_gate_alert', options: {} },
      id: uid('0000tr10'),
      name: 'Alert (LISTEN idem_gate_alert)',
      type: 'n8n-nodes-base.postgresTrigger',
      typeVersion: 1,
      position: [0, 160],
      credentials: { postgres: { ...INBOX_PG_CREDENTIAL } },
    },
    {
      parameters: { rule: { interval: [{ field: 'minutes', minutesInterval: DIGEST_MINUTES }] } },
      id: uid('0000tr11'),
      name: 'Digest (schedule)',
      type: 'n8n-nodes-base.scheduleTrigger',
      typeVersion: 1.2,
      position: [0, 420],
    },
    // after a start of n8n (or a publication of this workflow): its crash
    // recovery may have moved claims to needs_review before the Postgres
    // Trigger listened, and what was announced while n8n was down reached
    // nobody: a digest once the recovery is over
    {
      parameters: { events: ['init', 'activate', 'update'] },
      id: uid('0000tr12'),
      name: 'n8n started or published',
      type: 'n8n-nodes-base.n8nTrigger',
      typeVersion: 1,
      position: [-220, 620],
    },
    {
      parameters: { amount: 30, unit: 'seconds' },
      id: uid('0000wt10'),
      name: 'Wait for the recovery',
      type: 'n8n-nodes-base.wait',
      typeVersion: 1.1,
      position: [0, 620],
      webhookId: 'a3c0ffee-0000-4000-8000-0000000000c1',
    },
    setNode('Settings', [240, 280], [
      ['inbox_url', `${N8N_ADDRESS}/webhook/${INBOX_PATH}`],
      ['chat_url', CHAT_URL],
    ], true),
    ifNode('Alert or digest?', [460, 280], "$json.channel === 'idem_gate_alert'"),
    // retried: after a restart of PostgreSQL the first queries can meet a
    // pooled connection that is gone
    pgNode('Find the item', [700, 160], INBOX_SQL.alertItem,
      "[ String($json.payload?.workflow ?? ''), String($json.payload?.reason ?? ''), $json.payload?.at ?? null ]",
      { retryOnFail: true, maxTries: 5, waitBetweenTries: 3000 }),
    code('Alert message', [940, 160], ALERT_MESSAGE),
    pgNode('Inbox summary', [700, 420], INBOX_SQL.digest, '[]', { retryOnFail: true, maxTries: 5, waitBetweenTries: 3000 }),
    ifNode('Anything waiting?', [940, 420], '$json.total > 0 || !$json.listeners'),
    code('Digest message', [1160, 420], DIGEST_MESSAGE),
    {
      parameters: {
        method: 'POST',
        url: "={{ $('Settings').first().json.chat_url }}",
        sendBody: true,
        specifyBody: 'json',
        jsonBody: '={{ JSON.stringify({ text: $json.text }) }}',
        options: { timeout: 20000 },
      },
      id: uid('0000ht11'),
      name: 'Post to chat',
      type: 'n8n-nodes-base.httpRequest',
      typeVersion: 4.2,
      position: [1400, 280],
      retryOnFail: true,
      maxTries: 3,
      waitBetweenTries: 5000,
    },
    sticky('Note: alerts', [-40, -120], 900, 250,
      '## idem_gate: alerts\n' +
        '**Alert**: every claim that enters the inbox raises `NOTIFY idem_gate_alert` `{workflow, reason, at}` ' +
        '(`idem_fail`, the janitor). One chat message each, with a link to the item.\n\n' +
        '**Digest**: every ' + DIGEST_MINUTES + ' minutes, and 30 s after n8n starts or this workflow is published: what waits ' +
        '(what a restart or a lost connection missed), and a warning when the LISTEN session is gone.\n\n**Settings**: the inbox\'s address and the chat\'s incoming webhook (Slack-compatible `{"text"}`).', 6),
  ];
  const to = (node, index = 0) => ({ node, type: 'main', index });
  return {
    id: INBOX_IDS.alerts,
    name: 'idem_gate: alerts',
    nodes,
    connections: {
      'Alert (LISTEN idem_gate_alert)': { main: [[to('Settings')]] },
      'Digest (schedule)': { main: [[to('Settings')]] },
      'n8n started or published': { main: [[to('Wait for the recovery')]] },
      'Wait for the recovery': { main: [[to('Settings')]] },
      Settings: { main: [[to('Alert or digest?')]] },
      'Alert or digest?': { main: [[to('Find the item')], [to('Inbox summary')]] },
      'Find the item': { main: [[to('Alert message')]] },
      'Alert message': { main: [[to('Post to chat')]] },
      'Inbox summary': { main: [[to('Anything waiting?')]] },
      'Anything waiting?': { main: [[to('Digest message')], []] },
      'Digest message': { main: [[to('Post to chat')]] },
    },
    active: false,
    settings: { executionOrder: 'v1', saveDataErrorExecution: 'all', saveDataSuccessExecution: 'all', saveManualExecutions: true },
    pinData: {},
    tags: [],
  };
}

export function buildInbox() {
  return {
    'inbox.json': inboxWorkflow(),
    'alerts.json': alertsWorkflow(),
    'credentials.inbox.json': [
      {
        id: INBOX_PG_CREDENTIAL.id,
        name: INBOX_PG_CREDENTIAL.name,
        type: 'postgres',
        data: {
          host: '127.0.0.1',
          port: 5432,
          database: 'app',
          user: 'n8n_inbox',
          password: 'change-me',
          ssl: 'disable',
          allowUnauthorizedCerts: false,
          maxConnections: 10,
        },
      },
      {
        id: INBOX_PROXY_CREDENTIAL.id,
        name: INBOX_PROXY_CREDENTIAL.name,
        type: 'httpHeaderAuth',
        data: { name: PROXY_SECRET_HEADER, value: 'change-me-too' },
      },
    ],
  };
}
