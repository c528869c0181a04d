// The inbox page's two workflows: the page (examples/n8n/inbox.json, GET)
// and its decisions (examples/n8n/inbox-actions.json, POST to the same
// path).  Two workflows, not one: n8n loads and prepares a webhook's whole
// workflow for every request, and the page answered 15 to 24 ms sooner
// without the decisions' nodes beside it (bench/README.md).
import { INBOX_IDS, INBOX_PG_CREDENTIAL, INBOX_PROXY_CREDENTIAL, INBOX_PATH, PROXY_USER_HEADER, PROXY_SECRET_HEADER, GATE_URLS, N8N_ADDRESS } from './constants.mjs';
import { setCounter, uid, pgNode, code, setNode, ifNode, sticky, inboxWebhook, ACTOR, CSRF, FORM_OK, BULK_NEXT, BULK_OK } from './nodes.mjs';
import { INBOX_SQL } from './sql.mjs';
import { HELPERS } from './page-helpers.mjs';
import { CHECK_SEARCH, RENDER_LIST, RENDER_ITEM } from './page-list.mjs';
import { CHECK_ACTION, RENDER_RESULT, RENDER_BULK } from './page-actions.mjs';

// the n8n workflow ids of the gates (build-examples.mjs IDS), for the links
// to their executions: the inbox's workflow (scope) name -> n8n's workflow id
export const N8N_WORKFLOW_IDS = { orders: 'idemGateWebhook1', 'orders-by-fields': 'idemGateFields01' };

// a Switch node whose outputs are named after the values of an expression
const switchNode = (name, position, outputs, value, fallback) => ({
  parameters: {
    rules: {
      values: outputs.map((a) => ({
        conditions: {
          options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
          conditions: [{ id: uid('0000sw10'), leftValue: `={{ ${value} }}`, rightValue: a, operator: { type: 'string', operation: 'equals' } }],
          combinator: 'and',
        },
        renameOutput: true,
        outputKey: a,
      })),
    },
    options: { fallbackOutput: 'extra', renameFallbackOutput: fallback },
  },
  id: uid('0000sw11'),
  name,
  type: 'n8n-nodes-base.switch',
  typeVersion: 3.2,
  position,
});
const C = "$('Check search').first().json";
const A = "$('Check action').first().json";

// The respond node both workflows end with: the HTML the Render node made,
// with its status and headers
const respondNode = (position) => ({
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
  position,
});

// a connection to a node's input
const to = (node, index = 0) => ({ node, type: 'main', index });

// Both workflows: the Webhook node's output holds the operator's headers and
// the claims' payloads, so n8n keeps no execution data of either
const workflowOf = (id, name, nodes, connections) => ({
  id,
  name,
  nodes,
  connections,
  active: false,
  settings: {
    executionOrder: 'v1',
    saveDataErrorExecution: 'none',
    saveDataSuccessExecution: 'none',
    saveManualExecutions: false,
    saveExecutionProgress: false,
  },
  pinData: {},
  tags: [],
});

// GET: the list, a search, one claim
export function inboxWorkflow() {
  setCounter(400);
  const nodes = [
    inboxWebhook('Page request', 'GET', [0, 200], 'a3c0ffee-0000-4000-8000-0000000000b1'),
    // who is signed in, and the form token: expressions, since a Code node
    // cannot hash; the filters are read by Check search (each expression
    // here costs about a millisecond of every page)
    setNode('Read page request', [220, 200], [
      ['actor', ACTOR],
      ['csrf', CSRF],
    ]),
    // where the operators' browsers reach n8n's editor, and each gate's n8n
    // workflow id: the page links a claim to its execution there
    setNode('n8n links', [440, 200], [
      ['n8n_url', N8N_ADDRESS],
      ['n8n_workflow_ids', JSON.stringify(N8N_WORKFLOW_IDS)],
    ], true),
    code('Check search', [660, 200], CHECK_SEARCH),
    switchNode('Route page', [880, 200], ['item', 'key', 'list'], "$json.route", 'bad'),
    pgNode('Read item', [1120, 40], INBOX_SQL.item, '[ $json.key, $json.workflow ]', { onError: 'continueErrorOutput' }),
    code('Render item', [1360, 40], HELPERS + RENDER_ITEM),
    // a key search over every workflow: its stored forms in keyed workflows
    // (idem_key_forms); without EXECUTE on it, the key as typed only
    pgNode('Key forms', [1120, 200], INBOX_SQL.keyForms, '[ $json.key ]', { onError: 'continueErrorOutput' }),
    pgNode('Read inbox', [1360, 320], INBOX_SQL.list,
      `[ ${C}.workflow, ${C}.reason, Array.isArray($json.forms) ? JSON.stringify($json.forms) : ${C}.keys_json, ${C}.prefix, ${C}.prefix_end, ` +
        `${C}.older_than, ${C}.after_since, ${C}.after_workflow, ${C}.after_key, ${C}.limit ]`,
      { onError: 'continueErrorOutput' }),
    code('Render list', [1600, 320], HELPERS + RENDER_LIST),

    respondNode([2040, 400]),
    sticky('Note: inbox', [-40, -160], 900, 300,
      '## idem_gate: the inbox\n' +
        '`GET /webhook/' + INBOX_PATH + '` lists the claims that need a person (`idem_gate.inbox`), `?workflow=…&key=…` shows one: ' +
        'payload, last_error, receipt, history. Decisions are HTML forms (POST, a reason required) that the workflow ' +
        '*idem_gate: inbox actions* answers, recorded with the signed-in person (the proxy\'s `' + PROXY_USER_HEADER + '`) as `actor`.\n\n' +
        '- The webhook: **Header Auth** (credential *' + INBOX_PROXY_CREDENTIAL.name + '*): the proxy\'s secret `' + PROXY_SECRET_HEADER + '`; ' +
        'n8n answers 403 without it\n' +
        '- Postgres: the operator role (credential *' + INBOX_PG_CREDENTIAL.name + '*), which sees only its granted workflows\n' +
        '- **n8n links**: where the operators\' browsers reach n8n\'s editor, for the links to executions', 5),
  ];
  const connections = {
    'Page request': { main: [[to('Read page request')]] },
    'Read page request': { main: [[to('n8n links')]] },
    'n8n links': { main: [[to('Check search')]] },
    'Check search': { main: [[to('Route page')]] },
    'Route page': { main: [[to('Read item')], [to('Key forms')], [to('Read inbox')], [to('Render list')]] },
    'Key forms': { main: [[to('Read inbox')], [to('Read inbox')]] },
    'Read item': { main: [[to('Render item')], [to('Render item')]] },
    'Render item': { main: [[to('Respond with the page')]] },
    'Read inbox': { main: [[to('Render list')], [to('Render list')]] },
    'Render list': { main: [[to('Respond with the page')]] },
  };
  return workflowOf(INBOX_IDS.inbox, 'idem_gate: inbox', nodes, connections);
}

// POST: the decisions the page's forms send, single and bulk, and replay
export function inboxActionsWorkflow() {
  setCounter(500);
  const nodes = [
    inboxWebhook('Action request', 'POST', [0, 700], 'a3c0ffee-0000-4000-8000-0000000000b2'),
    setNode('Read action', [220, 700], [
      ['actor', ACTOR],
      ['csrf_ok', FORM_OK, 'boolean'],
      ['action', "={{ String($json.body?.action ?? '') }}"],
      ['workflow', "={{ String($json.body?.workflow ?? '') }}"],
      ['key', "={{ String($json.body?.key ?? '') }}"],
      ['reason', "={{ String($json.body?.reason ?? '').trim() }}"],
      ['receipt', "={{ String($json.body?.receipt ?? '').trim() }}"],
      // the bulk forms: which claims (the selected, or the filter's), what to decide, the keys
      ['scope', "={{ String($json.body?.scope ?? '') }}"],
      ['selected', "={{ JSON.stringify([].concat($json.body?.k ?? []).map(String)) }}"],
      ['f_reason', "={{ String($json.body?.f_reason ?? '') }}"],
      ['f_key', "={{ String($json.body?.f_key ?? '') }}"],
      ['f_prefix', "={{ String($json.body?.f_prefix ?? '') }}"],
      ['f_older_than', "={{ String($json.body?.f_older_than ?? '') }}"],
      ['decision', "={{ String($json.body?.decision ?? '') }}"],
      ['keys', "={{ String($json.body?.keys ?? '') }}"],
      ['bulk', "={{ String($json.body?.bulk ?? '') }}"],
      ['csrf_next', CSRF],
      ['bulk_next', BULK_NEXT],
      ['bulk_ok', BULK_OK, 'boolean'],
    ]),
    code('Check action', [440, 700], CHECK_ACTION),
    switchNode('Route by action', [660, 700],
      ['resolve-completed', 'resolve-retry', 'release', 'replay', 'bulk-review', 'bulk-confirm', 'bulk-resolve', 'bulk-release'],
      "$json.problem === '' ? $json.route : 'refused'", 'refused'),
    pgNode('Resolve completed', [900, 480], INBOX_SQL.resolveCompleted, '[ $json.key, $json.workflow, $json.receipt, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    pgNode('Resolve retry', [900, 640], INBOX_SQL.resolveRetry, '[ $json.key, $json.workflow, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    pgNode('Release', [900, 800], INBOX_SQL.release, '[ $json.key, $json.workflow, $json.reason, $json.actor ]', { onError: 'continueErrorOutput' }),
    setNode('Gate URLs', [900, 960], [
      // the gate's webhook for each workflow (scope) the inbox may replay to
      ['gate_url', `={{ (${JSON.stringify(GATE_URLS).replace(/"/g, "'")})[$('Check action').first().json.workflow] ?? '' }}`],
      ['problem', `={{ (${JSON.stringify(GATE_URLS).replace(/"/g, "'")})[$('Check action').first().json.workflow] ? '' : 'No gate URL is set for workflow ' + $('Check action').first().json.workflow + ': add it to the node Gate URLs of idem_gate: inbox actions.' }}`],
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
    // the bulk decisions (idem_gate 1.3): the keys, then one row per key
    pgNode('Read bulk keys', [900, 1160], INBOX_SQL.bulkKeys,
      '[ $json.scope, $json.workflow, $json.f_reason, $json.f_key, $json.f_prefix, $json.f_prefix_end, $json.f_older, $json.selected_json ]',
      { onError: 'continueErrorOutput' }),
    pgNode('Resolve many', [900, 1320], INBOX_SQL.resolveMany, '[ $json.keys, $json.workflow, $json.decision, $json.reason, $json.actor, $json.issued ]',
      { onError: 'continueErrorOutput' }),
    pgNode('Release many', [900, 1480], INBOX_SQL.releaseMany, '[ $json.keys, $json.workflow, $json.decision, $json.reason, $json.actor, $json.issued ]',
      { onError: 'continueErrorOutput' }),
    code('Render bulk', [1800, 1240], HELPERS + RENDER_BULK),
    respondNode([2040, 700]),
    sticky('Note: inbox actions', [-40, 460], 900, 220,
      '## idem_gate: the inbox\'s decisions\n' +
        '`POST /webhook/' + INBOX_PATH + '`: the forms of the page (workflow *idem_gate: inbox*, `GET` on the same path). ' +
        'Each decision needs a reason and is recorded with the signed-in person (the proxy\'s `' + PROXY_USER_HEADER + '`) as `actor`.\n\n' +
        '- The webhook: **Header Auth** (credential *' + INBOX_PROXY_CREDENTIAL.name + '*), as the page\'s\n' +
        '- Postgres: the operator role (credential *' + INBOX_PG_CREDENTIAL.name + '*)\n' +
        '- **Gate URLs**: the gate\'s webhook per workflow, for *Replay*', 5),
  ];
  const connections = {
    'Action request': { main: [[to('Read action')]] },
    'Read action': { main: [[to('Check action')]] },
    'Check action': { main: [[to('Route by action')]] },
    'Route by action': {
      main: [[to('Resolve completed')], [to('Resolve retry')], [to('Release')], [to('Gate URLs')],
        [to('Read bulk keys')], [to('Render bulk')], [to('Resolve many')], [to('Release many')], [to('Render result')]],
    },
    'Resolve completed': { main: [[to('Render result')], [to('Render result')]] },
    'Resolve retry': { main: [[to('Render result')], [to('Render result')]] },
    Release: { main: [[to('Render result')], [to('Render result')]] },
    'Gate URLs': { main: [[to('Gate URL set?')]] },
    'Gate URL set?': { main: [[to('Record replay')], [to('Render result')]] },
    'Record replay': { main: [[to('Replay to the gate')], [to('Render result')]] },
    'Replay to the gate': { main: [[to('Render result')], [to('Render result')]] },
    'Render result': { main: [[to('Respond with the page')]] },
    'Read bulk keys': { main: [[to('Render bulk')], [to('Render bulk')]] },
    'Resolve many': { main: [[to('Render bulk')], [to('Render bulk')]] },
    'Release many': { main: [[to('Render bulk')], [to('Render bulk')]] },
    'Render bulk': { main: [[to('Respond with the page')]] },
  };
  return workflowOf(INBOX_IDS.actions, 'idem_gate: inbox actions', nodes, connections);
}

