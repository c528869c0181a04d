import { FORM_TTL_SECONDS, BULK_MAX_KEYS, BULK_TTL_SECONDS } from './constants.mjs';
import { FILTER_CHECK } from './page-helpers.mjs';

export const CHECK_ACTION = FILTER_CHECK + String.raw`
// the form's fields, checked before anything is changed
const a = $input.first().json;
const ACTIONS = ['resolve-completed', 'resolve-retry', 'release', 'replay', 'bulk-review', 'bulk-confirm', 'bulk-apply'];
const DECISIONS = ['retry', 'completed', 'release'];
const FORM_TTL = ${FORM_TTL_SECONDS};
const MAX = ${BULK_MAX_KEYS};
let problem = '';
let receipt = null;
let route = a.action;
let extra = {};
// a list of keys as the forms send it: a JSON array of strings
const keyList = (v) => {
  try {
    const k = JSON.parse(v);
    return Array.isArray(k) && k.every((x) => typeof x === 'string' && x.length <= 1000) ? k : null;
  } catch (e) {
    return null;
  }
};
const bulk = a.action.startsWith('bulk-');
if (!a.actor) problem = 'The proxy in front of this page named no person: sign in through it.';
else if (!ACTIONS.includes(a.action)) problem = 'Unknown action.';
else if (a.action === 'bulk-apply' ? !a.bulk_ok : !a.csrf_ok)
  problem = a.action === 'bulk-apply'
    ? 'This confirmation was not shown to ' + a.actor + ' in the last ' + (${BULK_TTL_SECONDS} / 60) + ' minutes, or its keys, decision or reason were changed: nothing was decided. Start again from the inbox.'
    : 'This form does not come from an inbox page shown to ' + a.actor + ' in the last ' + (FORM_TTL / 3600) + ' hours: reload the page and submit it again.';
else if (!a.workflow || (!bulk && !a.key)) problem = 'The form names no claim.';
else if (a.action === 'bulk-review') {
  const f = checkFilters({ reason: a.f_reason, key: a.f_key, prefix: a.f_prefix, older_than: a.f_older_than });
  const selected = keyList(a.selected) ?? [];
  if (f.problem) problem = f.problem;
  else if (!['selected', 'filter'].includes(a.scope)) problem = 'Say which claims: the selected ones, or the filter\'s.';
  else if (a.scope === 'selected' && !selected.length) problem = 'No claim is selected: tick the claims to decide, or take the filter\'s.';
  else if (selected.length > MAX) problem = 'At most ' + MAX + ' claims per decision, not ' + selected.length + '.';
  extra = { f_reason: f.reason ?? '', f_key: f.key ?? '', f_prefix: f.prefix ?? '', f_prefix_end: f.prefix_end ?? '', f_older: f.older_than ?? '', selected_json: JSON.stringify(selected) };
} else if (bulk) {
  const keys = keyList(a.keys);
  if (!keys) problem = 'The form\'s list of keys is not one the inbox made.';
  else if (!keys.length) problem = 'The form names no claim.';
  else if (keys.length > MAX) problem = 'At most ' + MAX + ' claims per decision, not ' + keys.length + '.';
  else if (!DECISIONS.includes(a.decision)) problem = 'Choose what to decide: retry, completed or release.';
  else if (!a.reason) problem = 'A reason is required.';
  if (a.action === 'bulk-apply') route = a.decision === 'release' ? 'bulk-release' : 'bulk-resolve';
  extra = { key_count: keys ? keys.length : 0, issued: Number(String(a.bulk ?? '').split('.')[0]) || 0 };
} else if (!a.reason) problem = 'A reason is required.';
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
return [{ json: { ...a, ...extra, problem, route, receipt: receipt === null ? null : JSON.stringify(receipt) } }];
`;

export const RENDER_RESULT = String.raw`
const a = $('Check action').first().json;
const d = $input.first().json;
const title = a.action.startsWith('bulk-') ? 'several claims of ' + a.workflow : a.workflow + ' / ' + a.key;
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


// the bulk decision's three pages: what to decide for which keys (after
// "the selected" or "the filter's"), the confirmation (the keys, the
// decision and the reason, bound to the person by its token), and one line
// per key with what happened
export const RENDER_BULK = String.raw`
const a = $('Check action').first().json;
const d = $input.first().json;
const MAX = ${BULK_MAX_KEYS};
const back = '<p><a href="' + href({ workflow: a.workflow }) + '">← the inbox of ' + esc(a.workflow) + '</a></p>';
const say = (status, head, text) => out(status, head + ': several claims of ' + a.workflow, '<h1>' + esc(head) + '</h1><p class="notice refused">' + text + '</p>' + back, a.actor);
const LABEL = { retry: 'Resolve: retry', completed: 'Resolve: completed', release: 'Release' };
const NOTE = {
  retry: 'the side effect did not happen: each claim becomes failed_retryable, and its next delivery performs it',
  completed: 'the side effect happened (no receipt is recorded): each claim becomes completed, and its redeliveries answer duplicate',
  release: 'each claim is forgotten: the next delivery of each key is new and performs the side effect',
};
const hidden = (n, v) => '<input type="hidden" name="' + n + '" value="' + esc(v) + '">';
const keyList = (keys) => '<ol class="keys">' + keys.map((k) => '<li>' + esc(k) + '</li>').join('') + '</ol>';
if (d.error !== undefined) {
  const e = pgError(d);
  if (/may not use workflow|42501/.test(e.message + e.code)) return say(403, 'Not allowed, nothing was changed', esc(e.message));
  return say(400, 'Refused, nothing was changed', esc(e.message));
}
if (a.action === 'bulk-review') {
  let keys = Array.isArray(d.keys) ? d.keys : [];
  const over = keys.length > MAX;
  keys = keys.slice(0, MAX);
  if (!keys.length) return say(404, 'Nothing to decide', 'No claim of ' + esc(a.workflow) + ' matches this filter any more.');
  const f = [a.f_reason, a.f_key && 'key ' + a.f_key, a.f_prefix && 'keys starting with ' + a.f_prefix, a.f_older_than && 'older than ' + a.f_older_than].filter(Boolean);
  let body = '<h1>Decide <span class="count">' + keys.length + '</span> claim' + (keys.length === 1 ? '' : 's') + ' of ' + esc(a.workflow) + '</h1>';
  body += '<p>' + (a.scope === 'filter' ? 'The claims that match ' + (f.length ? esc(f.join(', ')) : 'the whole workflow') + ' as of ' + esc(d.read_at) +
    (over ? ', the oldest ' + MAX + ' (more match: decide the rest afterwards)' : '') : 'The claims you selected') +
    '. Each is decided on its own and recorded with your name; the next page shows what will be done before anything is.</p>' + keyList(keys);
  body += '<form method="post" action="" class="action" data-action="bulk-confirm">' + hidden('action', 'bulk-confirm') + hidden('workflow', a.workflow) +
    hidden('keys', JSON.stringify(keys)) + hidden('csrf', a.csrf_next) + '<h3>What to decide</h3>' +
    Object.keys(LABEL).map((x) => '<label><input type="radio" name="decision" value="' + x + '"' + (x === 'retry' ? ' checked' : '') + '> <b>' + esc(LABEL[x]) + '</b>: ' + esc(NOTE[x]) + '</label>').join('') +
    '<label>Reason, recorded with your name (' + esc(a.actor) + ') for each claim<textarea name="reason" rows="2" required></textarea></label>' +
    '<button type="submit">Review the decision</button></form>' + back;
  return out(200, 'Decide ' + keys.length + ' claims of ' + a.workflow, body, a.actor);
}
const keys = JSON.parse(a.keys);
if (a.action === 'bulk-confirm') {
  let body = '<h1>Confirm: ' + esc(LABEL[a.decision]) + ' for <span class="count">' + keys.length + '</span> claim' + (keys.length === 1 ? '' : 's') + ' of ' + esc(a.workflow) + '</h1>';
  body += '<p class="notice">' + esc(NOTE[a.decision].charAt(0).toUpperCase() + NOTE[a.decision].slice(1)) + '. Reason: <b class="reason">' + esc(a.reason) + '</b>, recorded for <b>' + esc(a.actor) +
    '</b>. Exactly these keys are decided, whatever the inbox shows by then; a claim someone decided meanwhile is left as it is and named below.</p>' + keyList(keys);
  body += '<form method="post" action="" class="action danger" data-action="bulk-apply">' + hidden('action', 'bulk-apply') + hidden('workflow', a.workflow) +
    hidden('keys', a.keys) + hidden('decision', a.decision) + hidden('reason', a.reason) + hidden('bulk', a.bulk_next) +
    '<h3>' + esc(LABEL[a.decision]) + ': ' + keys.length + ' claim' + (keys.length === 1 ? '' : 's') + '</h3><button type="submit">Confirm</button></form>' + back;
  return out(200, 'Confirm: ' + keys.length + ' claims of ' + a.workflow, body, a.actor);
}
// the bulk function's rows, one per key
const rows = $input.all().map((x) => x.json);
if (rows[0]?.replayed === true)
  return say(409, 'Sent already, nothing was changed', 'This confirmation was submitted before (its keys have your decision with this reason since it was shown). Start again from the inbox to decide them anew.');
const n = {};
for (const x of rows) n[x.outcome] = (n[x.outcome] ?? 0) + 1;
const WHAT = { decided: 'decided', already_decided: 'already decided: left as it is', not_found: 'no such claim', not_permitted: 'not allowed for this inbox' };
let body = '<h1>' + esc(LABEL[a.decision]) + ': ' + esc(a.workflow) + '</h1><p class="notice ' + (n.decided === rows.length ? 'ok' : 'refused') + ' summary">' +
  Object.keys(WHAT).filter((o) => n[o]).map((o) => '<span class="n-' + o + '">' + n[o] + '</span> ' + esc(o)).join(', ') + ' of ' + rows.length +
  '. Recorded for ' + esc(a.actor) + ': ' + esc(a.reason) + '</p>';
body += '<table class="outcomes"><tr><th>#</th><th>Key</th><th>Outcome</th><th>State now</th><th>Last action</th></tr>' +
  rows.map((x) => '<tr data-key="' + esc(x.key) + '" data-outcome="' + esc(x.outcome) + '"><td class="num">' + esc(x.ord) + '</td><td><a href="' + href({ workflow: a.workflow, key: x.key }) + '">' + esc(x.key) + '</a></td><td>' +
    esc(WHAT[x.outcome] ?? x.outcome) + '</td><td>' + esc(x.state ?? (a.decision === 'release' && x.outcome === 'decided' ? 'released' : '')) + '</td><td>' + esc(x.last_action ?? '') + '</td></tr>').join('') + '</table>' + back;
return out(200, 'Decided: ' + a.workflow, body, a.actor);
`;
