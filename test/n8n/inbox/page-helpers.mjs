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

