// ---- the page helpers, the same text in every Render node ----
export const HELPERS = String.raw`// idem_gate inbox: page helpers (the same in every Render node).  Everything
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
// the runbook for when n8n is down (the page has no docs address: its path in the repository)
const RUNBOOK = 'docs/inbox-without-n8n.md';
// the opaque cursor of the list's next page: (since, workflow, key) of its last item
const b64u = (s) => btoa(unescape(encodeURIComponent(s))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const unb64u = (s) => decodeURIComponent(escape(atob(String(s).replace(/-/g, '+').replace(/_/g, '/'))));
// the n8n execution that owned a claim, as a link into n8n's editor (both
// n8n 2.x route /workflow/<workflow id>/executions/<execution id>): only for a
// numeric id, a workflow whose n8n id the node "n8n links" names, and an
// http(s) address; otherwise the id as text
const n8nLinks = () => {
  const s = $('n8n links').first().json;
  let ids = {};
  try {
    ids = JSON.parse(String(s.n8n_workflow_ids ?? '{}'));
  } catch (e) {}
  return { url: /^https?:\/\/[^\s"'<>]+$/.test(String(s.n8n_url ?? '')) ? String(s.n8n_url).replace(/\/+$/, '') : '', ids };
};
const execLink = (L, workflow, id) => {
  const e = String(id ?? '');
  const w = Object.prototype.hasOwnProperty.call(L.ids, workflow) ? String(L.ids[workflow]) : '';
  if (!/^[0-9]{1,19}$/.test(e) || !w || !L.url) return esc(e);
  return '<a class="execution" target="_blank" rel="noopener noreferrer" href="' + esc(L.url + '/workflow/' + encodeURIComponent(w) + '/executions/' + e) + '">' + esc(e) + '</a>';
};
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
  '.muted{color:#5a6272;font-size:13px}.filter input[type=text]{width:12em}.pager{display:flex;gap:16px;margin:10px 0}' +
  'form.bulk{margin:0}.bulkbar{display:flex;gap:12px;align-items:center;background:#fff;border:1px solid #e3e6eb;padding:8px 12px;margin:8px 0}' +
  'ol.keys{max-height:320px;overflow:auto;background:#fff;border:1px solid #e3e6eb;padding:8px 8px 8px 48px;font-family:monospace}';
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


// the list's filters, checked before any query (the GET list and the bulk
// form's "take the current filter"): a problem, or the normalised values
export const FILTER_CHECK = String.raw`
const REASON_NAMES = ['needs_review', 'stuck', 'failing'];
const UNITS = { s: 'seconds', sec: 'seconds', secs: 'seconds', second: 'seconds', seconds: 'seconds', m: 'minutes', min: 'minutes', mins: 'minutes',
  minute: 'minutes', minutes: 'minutes', h: 'hours', hour: 'hours', hours: 'hours', d: 'days', day: 'days', days: 'days', w: 'weeks', week: 'weeks', weeks: 'weeks' };
// an age: "90 s", "1 hour", "2 days 3 hours"; answers the interval PostgreSQL reads, or null
const ageOf = (v) => {
  const t = String(v).trim().toLowerCase();
  if (!/^(\d{1,6}\s*[a-z]+\s*){1,4}$/.test(t)) return null;
  const parts = [...t.matchAll(/(\d{1,6})\s*([a-z]+)/g)].map((m) => (UNITS[m[2]] ? m[1] + ' ' + UNITS[m[2]] : null));
  return parts.includes(null) ? null : parts.join(' ');
};
// the upper bound of a key prefix: the prefix with its last character's
// successor (keys compare byte by byte, as UTF-8 code points); '' for none
const prefixEnd = (p) => {
  const cps = [...p];
  const last = cps.pop().codePointAt(0);
  if (last >= 0x10ffff) return '';
  return cps.join('') + String.fromCodePoint(last === 0xd7ff ? 0xe000 : last + 1);
};
const checkFilters = (f) => {
  const o = { reason: String(f.reason ?? '').trim(), key: String(f.key ?? ''), prefix: String(f.prefix ?? ''), older_than: String(f.older_than ?? '').trim() };
  if (o.reason && !REASON_NAMES.includes(o.reason)) return { problem: 'Unknown reason ' + JSON.stringify(o.reason.slice(0, 40)) + ': needs_review, stuck or failing.' };
  if (o.key.length > 1000 || o.prefix.length > 1000) return { problem: 'A key or key prefix is at most 1000 characters.' };
  let older = '';
  if (o.older_than) {
    older = ageOf(o.older_than);
    if (!older) return { problem: 'Older than ' + JSON.stringify(o.older_than.slice(0, 40)) + ' is not an age: write a number and a unit, such as 90 s, 15 min, 1 hour or 2 days.' };
  }
  return { problem: '', ...o, older_than: older, prefix_end: o.prefix ? prefixEnd(o.prefix) : '' };
};
`;
