// n8n's floor for the inbox page, measured beside it by bench/inbox/run.sh:
// three throwaway workflows, written to the directory given, that do the
// least an n8n page can do, each one step more than the last:
//   bench-bare    GET /webhook/bench-bare: a Webhook node and a Respond
//                 node, nothing read (n8n's own cost of an answer);
//   bench-sql     GET /webhook/bench-sql: the same with one Postgres node
//                 between them, running the page's list query (the first
//                 page of 100, or ?key= as the page sends a key search) on
//                 the page's own credential, answered as JSON, unrendered;
//   bench-auth    GET /webhook/bench-auth: bench-sql behind the page's
//                 sign-in, the Header Auth credential that refuses a
//                 request not sent through the proxy.
//   bench-set     GET /webhook/bench-set: bench-bare with one Set node of
//                 one expression between them (what a node costs n8n);
//   bench-code    GET /webhook/bench-code: the same with a Code node that
//                 answers its input (what a Code node costs: its JavaScript
//                 runs in n8n's task runner, another process).
// The page adds to bench-auth what makes it a page: reading the sign-in
// and the filters, checking them, routing, rendering the HTML.
//   node bench/inbox/floor.mjs DIR
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const inbox = JSON.parse(readFileSync(join(root, 'examples/n8n/inbox.json'), 'utf8'));
const byName = (name) => {
  const node = inbox.nodes.find((n) => n.name === name);
  if (!node) throw new Error(`examples/n8n/inbox.json has no node "${name}"`);
  return node;
};
const listNode = byName('Read inbox');
const pageHook = byName('Page request');
const settings = {
  executionOrder: 'v1', saveDataErrorExecution: 'none', saveDataSuccessExecution: 'none',
  saveManualExecutions: false, saveExecutionProgress: false,
};
const id = (n, k) => `be0c${String(n).padStart(4, '0')}-0000-4000-8000-${String(k).padStart(12, '0')}`;

function workflow(n, name, { sql, auth, step }) {
  const hook = {
    parameters: { httpMethod: 'GET', path: name, responseMode: 'responseNode', options: {} },
    id: id(n, 1), name: 'Request', type: 'n8n-nodes-base.webhook', typeVersion: pageHook.typeVersion,
    position: [0, 0], webhookId: id(n, 2),
  };
  if (auth) {
    hook.parameters.authentication = pageHook.parameters.authentication;
    hook.credentials = pageHook.credentials;
  }
  const respond = {
    parameters: { respondWith: sql ? 'firstIncomingItem' : 'text', responseBody: sql ? undefined : 'ok', options: {} },
    id: id(n, 3), name: 'Respond', type: 'n8n-nodes-base.respondToWebhook', typeVersion: 1.1, position: [400, 0],
  };
  const nodes = [hook];
  const connections = {};
  if (sql) {
    nodes.push({
      ...listNode,
      id: id(n, 4), name: 'List', position: [200, 0], onError: undefined,
      parameters: {
        ...listNode.parameters,
        options: {
          queryReplacement:
            "={{ [ '', '', $json.query.key ? JSON.stringify([$json.query.key]) : '[]', '', '', '', '', '', '', 100 ] }}",
        },
      },
    });
    connections.Request = { main: [[{ node: 'List', type: 'main', index: 0 }]] };
    connections.List = { main: [[{ node: 'Respond', type: 'main', index: 0 }]] };
  } else if (step) {
    nodes.push(step === 'set' ? {
      parameters: {
        assignments: { assignments: [{ id: id(n, 6), name: 'actor', value: "={{ String($json.headers['user-agent'] ?? '').slice(0, 200) }}", type: 'string' }] },
        options: {},
      },
      id: id(n, 5), name: 'Step', type: 'n8n-nodes-base.set', typeVersion: 3.4, position: [200, 0],
    } : {
      parameters: { jsCode: 'return [{ json: { ok: $input.first().json.query ?? {} } }];' },
      id: id(n, 5), name: 'Step', type: 'n8n-nodes-base.code', typeVersion: 2, position: [200, 0],
    });
    connections.Request = { main: [[{ node: 'Step', type: 'main', index: 0 }]] };
    connections.Step = { main: [[{ node: 'Respond', type: 'main', index: 0 }]] };
  } else {
    connections.Request = { main: [[{ node: 'Respond', type: 'main', index: 0 }]] };
  }
  nodes.push(respond);
  return { id: `benchFloor000${n}`, name, active: false, settings, nodes, connections };
}

const dir = process.argv[2];
if (!dir) throw new Error('usage: node bench/inbox/floor.mjs DIR');
const flows = [
  workflow(1, 'bench-bare', { sql: false, auth: false }),
  workflow(2, 'bench-sql', { sql: true, auth: false }),
  workflow(3, 'bench-auth', { sql: true, auth: true }),
  workflow(4, 'bench-set', { sql: false, auth: false, step: 'set' }),
  workflow(5, 'bench-code', { sql: false, auth: false, step: 'code' }),
];
// one line per workflow: its id and its file, for import and publish
for (const w of flows) {
  const file = join(dir, `${w.name}.json`);
  writeFileSync(file, JSON.stringify(w, null, 1));
  console.log(`${w.id} ${file}`);
}
