#!/usr/bin/env node
// Writes the importable n8n examples in examples/n8n/ from one description, so
// that the four workflows share their node settings, names and SQL exactly.
//
//   node test/n8n/build-examples.mjs          # rewrite examples/n8n/*.json
//   node test/n8n/build-examples.mjs --check  # exit 1 if the files differ
//
// The committed JSON files are the product (users import them as they are);
// this script only keeps them consistent.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildInbox } from './build-inbox.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUT = join(ROOT, 'examples', 'n8n');

export const CREDENTIAL = { id: 'idemGatePgCred01', name: 'idem_gate Postgres' };
export const SIDE_EFFECT_URL = 'https://side-effect.example/charge';
export const IDS = {
  gate: 'idemGateWebhook1',
  fields: 'idemGateFields01',
  error: 'idemGateErrorWf1',
  control: 'idemGateControl1',
  janitor: 'idemGateJanitor1',
};

// Error codes of the side effect's request that mean nothing was sent: the
// connection was refused, or the host name did not resolve (no such name, or
// no DNS answer).  Not ETIMEDOUT nor ECONNRESET: a timeout or a reset can come
// after the request was written, when the downstream may have performed it.
// The HTTP Request node's error item carries the code ({ message: "connect
// ECONNREFUSED 127.0.0.1:5690", name: "Error", code: "ECONNREFUSED" } in n8n
// 2.8.4, 2.40.7 and 2.41.1); without a code, the message is tested from its start
// (Node's own words, or n8n's for these codes), never in the middle: an HTTP
// error's message ("502 - <body>") quotes the downstream's body, which may
// name any code.
export const NOT_SENT = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN'];
const NOT_SENT_MESSAGE =
  '/^(connect ECONNREFUSED|getaddrinfo (ENOTFOUND|EAI_AGAIN)|The service refused the connection|' +
  'The connection cannot be established, this usually occurs due to an incorrect host|The DNS server returned an error)/';

// Nodes that run before the side effect: a failure there is retryable.
export const BEFORE_SIDE_EFFECT = ['Webhook', 'Has event id?', 'Has identity fields?', 'Claim', 'Route by outcome'];

// ---- SQL texts (the CI test runs exactly these, read from the JSON files) ----
const SQL = {
  // the delivery's body is sent once ($4, or $1), hashed for the fingerprint
  // and kept with the claim as the inbox's evidence (the 6th argument)
  claimById:
    'SELECT $1::text AS key, $2::text AS workflow, c.*\n' +
    'FROM (SELECT $4::jsonb AS body) AS d\n' +
    'CROSS JOIN LATERAL idem_claim_ex($1::text, $2::text, $3::interval, idem_hash(d.body), $5::text, d.body) AS c;',
  claimByFields:
    "SELECT k.key, $2::text AS workflow, c.*\n" +
    'FROM (SELECT $1::jsonb AS body) AS d\n' +
    "CROSS JOIN LATERAL (SELECT idem_hash(d.body, ARRAY['customer_id', 'order_ref', '/amount/value']) AS key) AS k\n" +
    'CROSS JOIN LATERAL idem_claim_ex(k.key, $2::text, $3::interval, NULL, $4::text, d.body) AS c;',
  complete:
    'SELECT idem_complete($1::text, $2::text, $3::bigint, $4::jsonb) AS completed;',
  fail:
    'SELECT idem_fail($1::text, $2::text, $3::bigint, $4::text, $5::boolean) AS state;',
  failRun:
    'SELECT c.workflow, c.key, idem_fail(c.key, c.workflow, c.token, $2::text, $3::boolean) AS state\n' +
    'FROM idem_gate.claims AS c\n' +
    "WHERE c.execution_id = $1::text AND c.state = 'processing';",
};

let uuidCounter = 0;
// deterministic ids keep the generated files stable between runs
function uid(prefix) {
  uuidCounter += 1;
  const n = String(uuidCounter).padStart(12, '0');
  return `${prefix}-1de0-4a7e-9a7e-${n}`;
}

const pg = (name, position, query, params, extra = {}) => ({
  parameters: {
    operation: 'executeQuery',
    query,
    options: { queryReplacement: `={{ ${params} }}` },
  },
  id: uid('0000pg00'),
  name,
  type: 'n8n-nodes-base.postgres',
  typeVersion: 2.6,
  position,
  credentials: { postgres: { ...CREDENTIAL } },
  ...extra,
});

const respond = (name, position, code, body, outcomeHeader) => ({
  parameters: {
    respondWith: 'json',
    responseBody: `={{ JSON.stringify(${body}) }}`,
    options: {
      responseCode: code,
      responseHeaders: {
        entries: [{ name: 'X-Idem-Gate-Outcome', value: outcomeHeader }],
      },
    },
  },
  id: uid('0000rs00'),
  name,
  type: 'n8n-nodes-base.respondToWebhook',
  typeVersion: 1.5,
  position,
});

const webhook = (path, position, webhookId) => ({
  parameters: {
    httpMethod: 'POST',
    path,
    responseMode: 'responseNode',
    options: {},
  },
  id: uid('0000wh00'),
  name: 'Webhook',
  type: 'n8n-nodes-base.webhook',
  typeVersion: 2.1,
  position,
  webhookId,
});

const ifNode = (name, position, expression) => ({
  parameters: {
    conditions: {
      options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
      conditions: [
        {
          id: uid('0000if00'),
          leftValue: `={{ ${expression} }}`,
          rightValue: '',
          operator: { type: 'boolean', operation: 'true', singleValue: true },
        },
      ],
      combinator: 'and',
    },
    options: {},
  },
  id: uid('0000if01'),
  name,
  type: 'n8n-nodes-base.if',
  typeVersion: 2.2,
  position,
});

const OUTCOMES = ['new', 'stale_taken', 'completed', 'in_flight', 'needs_review'];
const switchNode = (position) => ({
  parameters: {
    rules: {
      values: OUTCOMES.map((o) => ({
        conditions: {
          options: { caseSensitive: true, leftValue: '', typeValidation: 'strict', version: 2 },
          conditions: [
            {
              id: uid('0000sw00'),
              leftValue: '={{ $json.outcome }}',
              rightValue: o,
              operator: { type: 'string', operation: 'equals' },
            },
          ],
          combinator: 'and',
        },
        renameOutput: true,
        outputKey: o,
      })),
    },
    options: { fallbackOutput: 'extra', renameFallbackOutput: 'unexpected' },
  },
  id: uid('0000sw01'),
  name: 'Route by outcome',
  type: 'n8n-nodes-base.switch',
  typeVersion: 3.2,
  position,
});

const httpSideEffect = (position, body, idempotencyKey) => ({
  parameters: {
    method: 'POST',
    url: SIDE_EFFECT_URL,
    sendHeaders: true,
    headerParameters: {
      parameters: [{ name: 'Idempotency-Key', value: `={{ ${idempotencyKey} }}` }],
    },
    sendBody: true,
    specifyBody: 'json',
    jsonBody: `={{ JSON.stringify(${body}) }}`,
    options: { timeout: 30000 },
  },
  id: uid('0000ht00'),
  name: 'Side effect',
  type: 'n8n-nodes-base.httpRequest',
  typeVersion: 4.2,
  position,
  onError: 'continueErrorOutput',
});

const stopAndError = (name, position, message) => ({
  parameters: { errorMessage: `={{ ${message} }}` },
  id: uid('0000st00'),
  name,
  type: 'n8n-nodes-base.stopAndError',
  typeVersion: 1,
  position,
});

const sticky = (name, position, width, height, content, color = 7) => ({
  parameters: { content, height, width, color },
  id: uid('0000nt00'),
  name,
  type: 'n8n-nodes-base.stickyNote',
  typeVersion: 1,
  position,
});

const C = "$('Claim').item.json";

// ---- 1 and 3: the gate, keyed by event id or by payload fields ----
function gateWorkflow({ id, name, path, webhookId, scope, keyed }) {
  uuidCounter = keyed === 'id' ? 0 : 100;
  const check =
    keyed === 'id'
      ? ifNode('Has event id?', [220, 420], "String($json.body?.id ?? '').trim() !== ''")
      : ifNode(
          'Has identity fields?',
          [220, 420],
          "['customer_id', 'order_ref'].every(f => $json.body?.[f] != null) && $json.body?.amount?.value != null",
        );
  const claim =
    keyed === 'id'
      ? pg(
          'Claim',
          [440, 400],
          SQL.claimById,
          `[ String($json.body.id), '${scope}', null, JSON.stringify($json.body), $execution.id ]`,
          { onError: 'continueErrorOutput' },
        )
      : pg(
          'Claim',
          [440, 400],
          SQL.claimByFields,
          `[ JSON.stringify($json.body), '${scope}', null, $execution.id ]`,
          { onError: 'continueErrorOutput' },
        );
  const nodes = [
    webhook(path, [0, 420], webhookId),
    check,
    respond(
      keyed === 'id' ? 'Respond 400 (no event id)' : 'Respond 400 (no identity)',
      [440, 640],
      400,
      keyed === 'id'
        ? "{ status: 'rejected', error: 'the delivery has no event id (body.id)' }"
        : "{ status: 'rejected', error: 'the delivery lacks an identity field (customer_id, order_ref, amount.value)' }",
      'none',
    ),
    claim,
    switchNode([680, 400]),
    httpSideEffect(
      [960, 120],
      `{ event: ${C}.key, workflow: ${C}.workflow, token: ${C}.token, attempt: ${C}.attempt, payload: $('Webhook').item.json.body }`,
      `${C}.workflow + ':' + ${C}.key`,
    ),
    pg(
      'Complete',
      [1200, 100],
      SQL.complete,
      `[ ${C}.key, ${C}.workflow, ${C}.token, JSON.stringify({ effect_id: $json.id ?? null }) ]`,
      { onError: 'continueErrorOutput' },
    ),
    respond(
      'Respond 200 (done)',
      [1440, 100],
      200,
      `{ status: 'done', key: ${C}.key, receipt: { effect_id: $('Side effect').item.json.id ?? null } }`,
      `={{ ${C}.outcome }}`,
    ),
    pg(
      'Fail claim',
      [1200, 320],
      SQL.fail,
      // retryable only when the side effect surely did not happen: its HTTP
      // request never left, because the connection was refused or the host
      // name did not resolve (NOT_SENT), and no HTTP answer came back
      `[ ${C}.key, ${C}.workflow, ${C}.token, ` +
        `$prevNode.name + ': ' + ($json.error?.message ?? 'failed'), ` +
        `$prevNode.name === 'Side effect' && !($json.error?.httpCode ?? $json.error?.statusCode ?? $json.error?.status) && ` +
        `(${JSON.stringify(NOT_SENT).replace(/"/g, "'")}.includes($json.error?.code ?? $json.error?.cause?.code) || ${NOT_SENT_MESSAGE}.test($json.error?.message ?? '')) ]`,
      { onError: 'continueRegularOutput' },
    ),
    respond(
      'Respond 5xx (failed)',
      [1440, 320],
      `={{ $json.state === 'failed_retryable' ? 503 : 500 }}`,
      `{ status: 'failed', state: $json.state ?? 'unknown', key: ${C}.key }`,
      '={{ $json.state ?? \'error\' }}',
    ),
    stopAndError(
      'Mark execution failed',
      [1680, 320],
      `'side effect or completion failed for key ' + ${C}.key + ', claim now ' + ($('Fail claim').item.json.state ?? 'unknown')`,
    ),
    respond(
      'Respond 200 (duplicate)',
      [960, 420],
      200,
      `{ status: 'duplicate', key: $json.key, receipt: $json.result }`,
      'completed',
    ),
    respond(
      'Respond 200 (accepted)',
      [960, 600],
      200,
      `{ status: 'accepted', key: $json.key, detail: 'another run is processing this event' }`,
      'in_flight',
    ),
    respond(
      'Respond 200 (needs review)',
      [960, 780],
      200,
      `{ status: 'needs_review', key: $json.key, detail: 'held for an operator; not performed again' }`,
      'needs_review',
    ),
    stopAndError(
      'Flag for review',
      [1200, 780],
      `'idem_gate: key ' + $('Route by outcome').item.json.key + ' in workflow ' + $('Route by outcome').item.json.workflow + ' needs review (a delivery arrived for it)'`,
    ),
    respond(
      'Respond 500 (gate error)',
      [960, 960],
      `={{ /fingerprint mismatch/i.test($json.error?.message ?? $json.message ?? '') ? 422 : 500 }}`,
      `{ status: 'error', error: $json.error?.message ?? $json.message ?? ('unexpected outcome ' + $json.outcome) }`,
      'error',
    ),
    // after the answer, so that n8n counts the run as failed: its execution
    // list, its failed-execution alerts and the error workflow see it
    stopAndError(
      'Mark gate error failed',
      [1200, 960],
      `'idem_gate: the gate could not decide, nothing was performed: ' + ($json.error?.message ?? $json.message ?? ('unexpected outcome ' + $json.outcome))`,
    ),
    sticky(
      'Note: the gate',
      [-60, -80],
      660,
      300,
      '## idem_gate: exactly one side effect per event\n' +
        (keyed === 'id'
          ? 'Key = the provider\'s event id (`body.id`), scope `' + scope + '`, fingerprint = `idem_hash(body)`.\n'
          : 'Key = `idem_hash(body, [customer_id, order_ref, /amount/value])`, scope `' + scope + '`.\n') +
        '\n**Claim** answers one outcome:\n' +
        '- `new` / `stale_taken` → perform the side effect, then **Complete** with the token and the receipt\n' +
        '- `completed` → 200 with the stored receipt\n' +
        '- `in_flight` → 200 "accepted" (another run owns it)\n' +
        '- `needs_review` → 200, and the run is flagged\n\n' +
        'Stale interval `null` = fail closed: a run that crashed after the side effect is never repeated; ' +
        'the stuck claim is alerted instead.',
      5,
    ),
    sticky(
      'Note: failures',
      [1140, 500],
      600,
      160,
      '## Failures never answer 200\n' +
        'Every error output goes to **Fail claim** (`idem_fail`) and a 5xx: `failed_retryable` (503) only when ' +
        'the side effect\'s request surely was not sent (' + NOT_SENT.map((c) => '`' + c + '`').join(', ') + '), otherwise `needs_review` (500). ' +
        'Settings → Error workflow = **idem_gate: error workflow** covers what is left.',
      3,
    ),
  ];
  const connections = {
    Webhook: { main: [[{ node: check.name, type: 'main', index: 0 }]] },
    [check.name]: {
      main: [
        [{ node: 'Claim', type: 'main', index: 0 }],
        [{ node: nodes[2].name, type: 'main', index: 0 }],
      ],
    },
    Claim: {
      main: [
        [{ node: 'Route by outcome', type: 'main', index: 0 }],
        [{ node: 'Respond 500 (gate error)', type: 'main', index: 0 }],
      ],
    },
    'Route by outcome': {
      main: [
        [{ node: 'Side effect', type: 'main', index: 0 }],
        [{ node: 'Side effect', type: 'main', index: 0 }],
        [{ node: 'Respond 200 (duplicate)', type: 'main', index: 0 }],
        [{ node: 'Respond 200 (accepted)', type: 'main', index: 0 }],
        [{ node: 'Respond 200 (needs review)', type: 'main', index: 0 }],
        [{ node: 'Respond 500 (gate error)', type: 'main', index: 0 }],
      ],
    },
    'Side effect': {
      main: [
        [{ node: 'Complete', type: 'main', index: 0 }],
        [{ node: 'Fail claim', type: 'main', index: 0 }],
      ],
    },
    Complete: {
      main: [
        [{ node: 'Respond 200 (done)', type: 'main', index: 0 }],
        [{ node: 'Fail claim', type: 'main', index: 0 }],
      ],
    },
    'Fail claim': { main: [[{ node: 'Respond 5xx (failed)', type: 'main', index: 0 }]] },
    'Respond 5xx (failed)': { main: [[{ node: 'Mark execution failed', type: 'main', index: 0 }]] },
    'Respond 200 (needs review)': { main: [[{ node: 'Flag for review', type: 'main', index: 0 }]] },
    'Respond 500 (gate error)': { main: [[{ node: 'Mark gate error failed', type: 'main', index: 0 }]] },
  };
  return {
    id,
    name,
    nodes,
    connections,
    active: false,
    settings: {
      executionOrder: 'v1',
      errorWorkflow: IDS.error,
      saveDataErrorExecution: 'all',
      saveDataSuccessExecution: 'all',
      saveManualExecutions: true,
    },
    pinData: {},
    tags: [],
  };
}

// ---- 2: the error workflow ----
function errorWorkflow() {
  uuidCounter = 200;
  const nodes = [
    {
      parameters: {},
      id: uid('0000et00'),
      name: 'Error Trigger',
      type: 'n8n-nodes-base.errorTrigger',
      typeVersion: 1,
      position: [0, 300],
    },
    pg(
      'Fail the run\'s claims',
      [260, 300],
      SQL.failRun,
      `[ $json.execution.id, ` +
        `'n8n execution ' + $json.execution.id + ' failed at ' + ($json.execution.lastNodeExecuted ?? 'an unknown node') + ': ' + ($json.execution.error?.message ?? 'no message'), ` +
        `${JSON.stringify(BEFORE_SIDE_EFFECT).replace(/"/g, "'")}.includes($json.execution.lastNodeExecuted) ]`,
    ),
    sticky(
      'Note: error workflow',
      [-40, 0],
      620,
      260,
      '## idem_gate: error workflow\n' +
        'Set it as **Settings → Error workflow** of every gated workflow. When a run fails outside the wired ' +
        'error outputs (a crash, a node without an error output), it moves the run\'s `processing` claims with `idem_fail`:\n' +
        '- **retryable** when the run stopped before the side effect (' +
        BEFORE_SIDE_EFFECT.map((n) => '`' + n + '`').join(', ') +
        '): the redelivery performs it;\n' +
        '- otherwise **needs_review**: the side effect may have happened, an operator decides.\n\n' +
        'Claims that are no longer `processing` are left alone, so it is harmless after the in-workflow `Fail claim`.',
      6,
    ),
  ];
  return {
    id: IDS.error,
    name: 'idem_gate: error workflow',
    nodes,
    connections: {
      'Error Trigger': { main: [[{ node: "Fail the run's claims", type: 'main', index: 0 }]] },
    },
    active: false,
    settings: { executionOrder: 'v1' },
    pinData: {},
    tags: [],
  };
}

// ---- the managed edition's janitor, for services without pg_cron ----
// The managed edition (managed/idem_gate.sql) has no background worker:
// retention and stuck-claim alerts run when idem_gate.janitor_run() is
// called.  Where the service has no pg_cron (or runs it only while the
// compute is up, as Neon), this workflow calls it every minute.  Its
// credential's role needs EXECUTE on idem_gate.janitor_run() (docs/managed.md).
function janitorScheduleWorkflow() {
  uuidCounter = 900;
  const nodes = [
    {
      parameters: { rule: { interval: [{ field: 'minutes', minutesInterval: 1 }] } },
      id: uid('0000js00'),
      name: 'Every minute',
      type: 'n8n-nodes-base.scheduleTrigger',
      typeVersion: 1.2,
      position: [0, 300],
    },
    pg('Janitor pass', [260, 300], 'SELECT * FROM idem_gate.janitor_run();', '[]'),
    sticky(
      'Note: janitor schedule',
      [-40, 0],
      620,
      260,
      '## idem_gate: janitor schedule (managed edition)\n' +
        'The managed edition has no background worker. This workflow runs `idem_gate.janitor_run()` every minute: ' +
        'retention, receipt clearing and stuck-claim alerts. Without it (or pg_cron) the gate still answers correctly; ' +
        'only those wait. Not needed with the C extension, whose janitor runs by itself.',
      6,
    ),
  ];
  return {
    id: IDS.janitor,
    name: 'idem_gate: janitor schedule (managed edition)',
    nodes,
    connections: {
      'Every minute': { main: [[{ node: 'Janitor pass', type: 'main', index: 0 }]] },
    },
    active: false,
    settings: { executionOrder: 'v1' },
    pinData: {},
    tags: [],
  };
}

// ---- 4: the control for drill 10: the same side effect without the gate ----
function controlWorkflow() {
  uuidCounter = 300;
  const nodes = [
    webhook('idem-gate/control', [0, 300], 'a3c0ffee-0000-4000-8000-00000000c0de'),
    {
      ...httpSideEffect(
        [240, 300],
        "{ event: String($json.body.id), workflow: 'control', token: null, payload: $json.body }",
        "'control:' + $json.body.id",
      ),
      onError: 'stopWorkflow',
    },
    respond('Respond 200', [480, 300], 200, "{ status: 'done', receipt: { effect_id: $json.id ?? null } }", 'ungated'),
    sticky(
      'Note: control',
      [-40, 40],
      560,
      200,
      '## Control: no gate (drill 10)\nThe same side effect without idem_gate: every duplicate delivery performs it again. ' +
        'Do not use this pattern; it exists to show what the gate prevents.',
      4,
    ),
  ];
  return {
    id: IDS.control,
    name: 'idem_gate drill: ungated control',
    nodes,
    connections: {
      Webhook: { main: [[{ node: 'Side effect', type: 'main', index: 0 }]] },
      'Side effect': { main: [[{ node: 'Respond 200', type: 'main', index: 0 }]] },
    },
    active: false,
    settings: { executionOrder: 'v1' },
    pinData: {},
    tags: [],
  };
}

export function buildAll() {
  return {
    'webhook-gate.json': gateWorkflow({
      id: IDS.gate,
      name: 'idem_gate: webhook gate (event id)',
      path: 'idem-gate/orders',
      webhookId: 'a3c0ffee-0000-4000-8000-0000000000a1',
      scope: 'orders',
      keyed: 'id',
    }),
    'webhook-gate-fields.json': gateWorkflow({
      id: IDS.fields,
      name: 'idem_gate: webhook gate (key from payload fields)',
      path: 'idem-gate/orders-by-fields',
      webhookId: 'a3c0ffee-0000-4000-8000-0000000000a2',
      scope: 'orders-by-fields',
      keyed: 'fields',
    }),
    'error-workflow.json': errorWorkflow(),
    'ungated-control.json': controlWorkflow(),
    'janitor-schedule.json': janitorScheduleWorkflow(),
    ...withRunbook(buildInbox()),
    'credentials.postgres.json': [
      {
        id: CREDENTIAL.id,
        name: CREDENTIAL.name,
        type: 'postgres',
        data: {
          host: '127.0.0.1',
          port: 5432,
          database: 'app',
          user: 'n8n_gate',
          password: 'change-me',
          ssl: 'disable',
          allowUnauthorizedCerts: false,
          maxConnections: 100,
        },
      },
    ],
  };
}

// The runbook for deciding the inbox from psql while n8n is down
// (docs/inbox-without-n8n.md): every alert and digest ends with it, so that
// whoever is paged knows where it is when the inbox's link does not open.
// The alerts workflow's node Settings holds it as runbook_url: the
// repository's path, shown as text, until it is set to an address (your
// copy of the docs), which is shown as a link.
export const RUNBOOK = 'docs/inbox-without-n8n.md';
const RUNBOOK_LINE = String.raw`
const rb = String($('Settings').first().json.runbook_url ?? '');
if (rb) text += '\nIf the inbox does not open (n8n down), decide from psql: ' +
  (/^https?:\/\//.test(rb) ? '<' + rb + '|the runbook>' : t(rb) + ' in the idem_gate repository') + '.';
`;

// the alerts workflow of build-inbox.mjs, with the runbook's line
function withRunbook(files) {
  const wf = files['alerts.json'];
  const node = (name) => {
    const n = wf.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`alerts.json has no node ${name}`);
    return n;
  };
  node('Settings').parameters.assignments.assignments.push({
    id: '0000as10-1de0-4a7e-9a7e-0000000006a1',
    name: 'runbook_url',
    value: RUNBOOK,
    type: 'string',
  });
  const end = 'return [{ json: { text } }];\n';
  for (const name of ['Alert message', 'Digest message']) {
    const p = node(name).parameters;
    if (!p.jsCode.endsWith(end) || !/const t = /.test(p.jsCode)) throw new Error(`alerts.json: ${name} does not end as expected`);
    p.jsCode = p.jsCode.slice(0, -end.length) + RUNBOOK_LINE.slice(1) + end;
  }
  return files;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes('--check');
  let differs = 0;
  for (const [file, doc] of Object.entries(buildAll())) {
    const text = JSON.stringify(doc, null, 2) + '\n';
    const path = join(OUT, file);
    if (check) {
      let old = '';
      try {
        old = readFileSync(path, 'utf8');
      } catch {}
      if (old !== text) {
        console.error(`${path} differs from the generator`);
        differs = 1;
      }
    } else {
      writeFileSync(path, text);
      console.log(`wrote ${path}`);
    }
  }
  process.exit(differs);
}
