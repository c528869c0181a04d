// The operator's side of the examples: the inbox page (examples/n8n/inbox.json,
// and inbox-actions.json for its decisions), the alerts (examples/n8n/alerts.json) and their credentials
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
//   GET  /webhook/idem-gate/inbox                         the list (?workflow=&reason=&key=&prefix=&older_than=
//                                                         filter it; ?after=&limit= page it)
//   GET  /webhook/idem-gate/inbox?workflow=W&key=K        one claim: payload, last_error, receipt, history
//   POST /webhook/idem-gate/inbox  (an HTML form)         action=resolve-completed | resolve-retry |
//                                                         release | replay, with a reason; bulk-review |
//                                                         bulk-confirm | bulk-apply for several claims
// Its Postgres nodes connect as the operator role (docs/n8n.md run:operator-role),
// which reads idem_gate.inbox and idem_gate.history() and may call idem_resolve,
// idem_release, idem_replay and idem_status, for the workflows granted to it.
//
// The page's parts are in test/n8n/inbox/: constants.mjs (names, placeholders),
// sql.mjs (its queries), nodes.mjs (node builders, the sign-in and form-token
// expressions), page-helpers.mjs (the code every Render node starts with, and
// the filters' check), page-list.mjs (the list and a claim), page-actions.mjs
// (the decisions, single and bulk), workflow.mjs (the nodes and connections).
// This file keeps the alerts and writes the four files.
import { INBOX_PG_CREDENTIAL, INBOX_PROXY_CREDENTIAL, PROXY_SECRET_HEADER, N8N_ADDRESS, CHAT_URL, DIGEST_MINUTES, INBOX_IDS, INBOX_PATH } from './inbox/constants.mjs';
import { setCounter, uid, pgNode, code, setNode, ifNode, sticky } from './inbox/nodes.mjs';
import { INBOX_SQL } from './inbox/sql.mjs';
import { inboxWorkflow, inboxActionsWorkflow } from './inbox/workflow.mjs';

export * from './inbox/constants.mjs';
export { INBOX_SQL };

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

function alertsWorkflow() {
  setCounter(600);
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
    'inbox-actions.json': inboxActionsWorkflow(),
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
