export const RENDER_LIST = String.raw`
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

export const RENDER_ITEM = String.raw`
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

