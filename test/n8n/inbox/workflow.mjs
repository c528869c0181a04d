// The inbox page's workflow (examples/n8n/inbox.json).
import { INBOX_IDS, INBOX_PG_CREDENTIAL, INBOX_PROXY_CREDENTIAL, INBOX_PATH, PROXY_USER_HEADER, PROXY_SECRET_HEADER, GATE_URLS } from './constants.mjs';
import { setCounter, uid, pgNode, code, setNode, ifNode, sticky, inboxWebhook, ACTOR, CSRF, FORM_OK } from './nodes.mjs';
import { INBOX_SQL } from './sql.mjs';
import { HELPERS } from './page-helpers.mjs';
import { RENDER_LIST, RENDER_ITEM } from './page-list.mjs';
import { CHECK_ACTION, RENDER_RESULT } from './page-actions.mjs';

export function inboxWorkflow() {
  setCounter(400);
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

