import { FORM_TTL_SECONDS } from './constants.mjs';

export const CHECK_ACTION = String.raw`
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

export const RENDER_RESULT = String.raw`
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

