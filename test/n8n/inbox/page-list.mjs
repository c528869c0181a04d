import { FILTER_CHECK } from './page-helpers.mjs';

export const PAGE_LIMIT = { default: 100, max: 500 };

// the GET request, checked: a claim's page (workflow and key), a key search
// over every workflow (its stored forms first: keyed workflows), the list,
// or a request refused with 400 before anything is read
export const CHECK_SEARCH = FILTER_CHECK + String.raw`
const query = $('Page request').first().json.query ?? {};
const text = (name) => String(query[name] ?? '');
const r = { ...$input.first().json, workflow: text('workflow').trim(), key: text('key'), reason: text('reason').trim(),
  prefix: text('prefix'), older_than: text('older_than').trim(), after: text('after').trim(), limit: text('limit').trim() };
const f = checkFilters(r);
let problem = f.problem;
let limit = ${PAGE_LIMIT.default};
let after = ['', '', ''];
if (!problem && r.limit !== '') {
  limit = /^[0-9]{1,4}$/.test(r.limit) ? Number(r.limit) : 0;
  if (limit < 1 || limit > ${PAGE_LIMIT.max}) problem = 'A page shows 1 to ${PAGE_LIMIT.max} claims, not ' + JSON.stringify(r.limit.slice(0, 20)) + '.';
}
if (!problem && r.after !== '') {
  try {
    after = JSON.parse(decodeURIComponent(escape(atob(r.after.replace(/-/g, '+').replace(/_/g, '/')))));
  } catch (e) {
    after = null;
  }
  if (!Array.isArray(after) || after.length !== 3 || !after.every((x) => typeof x === 'string') ||
      !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(after[0]) || !after[1])
    problem = 'This next-page link is not one the inbox made: go back to the first page.';
}
if (r.workflow.length > 200) problem = 'A workflow name is at most 200 characters.';
const route = problem ? 'bad' : r.workflow !== '' && r.key !== '' ? 'item' : r.key !== '' ? 'key' : 'list';
return [{ json: { ...r, ...f, older_than_typed: r.older_than, problem, route, limit, after_since: after?.[0] ?? '', after_workflow: after?.[1] ?? '', after_key: after?.[2] ?? '',
  keys_json: JSON.stringify(r.key !== '' ? [r.key] : []) } }];
`;

export const RENDER_LIST = String.raw`
const r = $('Check search').first().json;
const d = $input.first().json;
if (!r.actor) return nobody(403);
const filters = { workflow: r.workflow, reason: r.reason, key: r.key, prefix: r.prefix, older_than: String(r.older_than_typed ?? '') };
const runbook = '<p class="muted runbook">n8n down? The inbox without n8n: <code>' + esc(RUNBOOK) + '</code> in the idem_gate repository.</p>';
if (r.problem) return out(400, 'Inbox: refused', '<h1>Not a search the inbox can run</h1><p class="notice refused">' + esc(r.problem) +
  ' Nothing was read or changed.</p><p><a href="?">← the whole inbox</a></p>' + runbook, r.actor);
if (d.error !== undefined) {
  const e = pgError(d);
  return out(/may not use workflow|42501/.test(e.message + e.code) ? 403 : /22007|22008|22P02|invalid input syntax/.test(e.code + e.message) ? 400 : 500, 'Inbox: error',
    '<h1>The inbox could not be read</h1><p class="notice refused">' + esc(e.message) + '</p>' + runbook, r.actor);
}
const L = n8nLinks();
const all = d.items ?? [];
const items = all.slice(0, r.limit);
const more = all.length > r.limit;
const groups = d.groups ?? [];
const workflows = [...new Set(groups.map((g) => g.workflow))];
if (r.workflow && !workflows.includes(r.workflow)) workflows.push(r.workflow);
const total = groups.reduce((s, g) => s + g.n, 0);
const opt = (v, label, sel) => '<option value="' + esc(v) + '"' + (v === sel ? ' selected' : '') + '>' + esc(label) + '</option>';
const text = (name, label, value, ph) => '<label>' + label + '<br><input type="text" name="' + name + '" value="' + esc(value) + '" placeholder="' + esc(ph) + '"></label>';
const paging = { ...filters, limit: r.limit === ${PAGE_LIMIT.default} ? '' : r.limit };
let body = '<h1>Claims that need a person: ' + total + '</h1>';
body += '<p class="muted asof">as of <span class="read-at">' + esc(d.read_at) + '</span> · <a class="refresh" href="' + href({ ...paging, after: r.after }) + '">Refresh</a></p>';
body += '<form method="get" action="" class="filter">' +
  '<label>Workflow<br><select name="workflow">' + opt('', 'all', r.workflow) + workflows.map((w) => opt(w, w, r.workflow)).join('') + '</select></label>' +
  '<label>Reason<br><select name="reason">' + opt('', 'all', r.reason) + Object.keys(REASONS).map((x) => opt(x, x, r.reason)).join('') + '</select></label>' +
  text('key', 'Key (exact)', r.key, 'evt-1') + text('prefix', 'Key starts with', r.prefix, 'evt-2026-') + text('older_than', 'Older than', filters.older_than, '1 hour') +
  '<button type="submit">Show</button> <a href="?">clear</a></form>';
if (groups.length) {
  body += '<table class="groups"><tr><th>Workflow</th>' + Object.keys(REASONS).map((x) => '<th>' + esc(x) + '</th>').join('') + '</tr>';
  for (const w of workflows.filter((w) => groups.some((g) => g.workflow === w))) {
    body += '<tr><td><a href="' + href({ workflow: w }) + '">' + esc(w) + '</a></td>';
    for (const x of Object.keys(REASONS)) {
      const g = groups.find((g) => g.workflow === w && g.reason === x);
      body += '<td>' + (g ? '<a href="' + href({ workflow: w, reason: x }) + '">' + g.n + '</a> <span class="muted">oldest ' + age(g.oldest_s) + '</span>' : '') + '</td>';
    }
    body += '</tr>';
  }
  body += '</table>';
}
const said = [r.workflow, r.reason, r.key && 'key ' + r.key, r.prefix && 'keys starting with ' + r.prefix, filters.older_than && 'older than ' + filters.older_than].filter(Boolean);
body += '<h2>' + (said.length ? esc(said.join(', ')) + ': ' : '') + '<span class="matching">' + d.matching + '</span> claim' + (d.matching === 1 ? '' : 's') +
  ', oldest first' + (r.after ? ', after the previous page' : '') + (items.length ? ' (' + items.length + ' on this page)' : '') + '</h2>';
// bulk decisions act on one workflow: the selected claims, or the filter's
const bulk = r.workflow !== '' && items.length > 0;
if (!items.length) body += '<p class="notice ok">Nothing waits' + (said.length || r.after ? ' here' : '') + '.</p>';
else {
  if (bulk) {
    body += '<form method="post" action="" class="bulk" data-action="bulk-review">' +
      '<input type="hidden" name="action" value="bulk-review"><input type="hidden" name="workflow" value="' + esc(r.workflow) + '">' +
      '<input type="hidden" name="csrf" value="' + esc(r.csrf) + '"><input type="hidden" name="f_reason" value="' + esc(r.reason) + '">' +
      '<input type="hidden" name="f_key" value="' + esc(r.key) + '"><input type="hidden" name="f_prefix" value="' + esc(r.prefix) + '">' +
      '<input type="hidden" name="f_older_than" value="' + esc(filters.older_than) + '">' +
      '<div class="bulkbar"><b>Decide several claims of ' + esc(r.workflow) + ':</b>' +
      '<button type="submit" name="scope" value="selected" class="bulk-selected">the selected</button>' +
      '<button type="submit" name="scope" value="filter" class="bulk-filter">all ' + d.matching + ' matching this filter' + (d.matching > 1000 ? ' (the oldest 1000)' : '') + '</button>' +
      '<span class="muted">the next page asks what to decide, and a reason</span></div>';
  }
  body += '<table class="items"><tr>' + (bulk ? '<th></th>' : '') + '<th>Waiting</th><th>Reason</th><th>Workflow</th><th>Key</th><th>Attempts</th><th>State</th><th>n8n execution</th><th>Last error</th></tr>';
  for (const i of items) {
    body += '<tr data-key="' + esc(i.key) + '" data-workflow="' + esc(i.workflow) + '">' +
      (bulk ? '<td><input type="checkbox" name="k" value="' + esc(i.key) + '" aria-label="select ' + esc(i.key) + '"></td>' : '') +
      '<td title="since ' + esc(i.since) + ' UTC">' + age(i.age_s) + '</td>' +
      '<td><span class="tag ' + esc(i.reason) + '">' + esc(i.reason) + '</span></td><td>' + esc(i.workflow) + '</td>' +
      '<td><a class="key" href="' + href({ workflow: i.workflow, key: i.key }) + '">' + esc(i.key) + '</a></td>' +
      '<td class="num">' + esc(i.attempt) + '</td><td>' + esc(i.state) + '</td><td>' + execLink(L, i.workflow, i.execution_id) + '</td><td>' + esc(i.last_error) + '</td></tr>';
  }
  body += '</table>' + (bulk ? '</form>' : '');
  if (!bulk) body += '<p class="muted">Pick a workflow to decide several of its claims at once.</p>';
}
const last = items[items.length - 1];
body += '<p class="pager">' + (r.after ? '<a class="first-page" href="' + href(paging) + '">← first page</a>' : '') +
  (more ? '<a class="next-page" href="' + href({ ...paging, after: b64u(JSON.stringify([last.since_exact, last.workflow, last.key])) }) + '">next page →</a>' : '') + '</p>';
body += '<p class="muted">needs_review: ' + esc(REASONS.needs_review) + '. stuck: ' + esc(REASONS.stuck) + '. failing: ' + esc(REASONS.failing) + '.</p>' + runbook;
return out(200, 'idem_gate inbox (' + total + ')', body, r.actor);
`;

export const RENDER_ITEM = String.raw`
const r = $('Check search').first().json;
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
    '<dt>n8n execution</dt><dd>' + execLink(n8nLinks(), c.workflow, c.execution_id) + '</dd>' +
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

