// The node builders of the inbox and alerts workflows, and the sign-in
// expressions (the actor and the person-bound form tokens).
import { INBOX_PG_CREDENTIAL, INBOX_PROXY_CREDENTIAL, INBOX_PATH, PROXY_SECRET_HEADER, PROXY_USER_HEADER, FORM_TTL_SECONDS, BULK_TTL_SECONDS } from './constants.mjs';

// node ids are stable: each workflow starts its own range (setCounter)
let counter = 0;
export const setCounter = (n) => {
  counter = n;
};
export const uid = (prefix) => {
  counter += 1;
  return `${prefix}-1de0-4a7e-9a7e-${String(counter).padStart(12, '0')}`;
};

// ---- node builders ----
export const pgNode = (name, position, query, params, extra = {}) => ({
  parameters: { operation: 'executeQuery', query, options: { queryReplacement: `={{ ${params} }}` } },
  id: uid('0000pg10'),
  name,
  type: 'n8n-nodes-base.postgres',
  typeVersion: 2.6,
  position,
  credentials: { postgres: { ...INBOX_PG_CREDENTIAL } },
  ...extra,
});
export const code = (name, position, jsCode) => ({
  parameters: { jsCode },
  id: uid('0000cd10'),
  name,
  type: 'n8n-nodes-base.code',
  typeVersion: 2,
  position,
});
export const setNode = (name, position, fields, includeOther = false) => ({
  parameters: {
    assignments: {
      assignments: fields.map(([n, value, type = 'string']) => ({ id: uid('0000as10'), name: n, value, type })),
    },
    ...(includeOther ? { includeOtherFields: true } : {}),
    options: {},
  },
  id: uid('0000se10'),
  name,
  type: 'n8n-nodes-base.set',
  typeVersion: 3.4,
  position,
});
export const ifNode = (name, position, expression) => ({
  parameters: {
    conditions: {
      options: { caseSensitive: true, leftValue: '', typeValidation: 'loose', version: 2 },
      conditions: [{ id: uid('0000if10'), leftValue: `={{ ${expression} }}`, rightValue: '', operator: { type: 'boolean', operation: 'true', singleValue: true } }],
      combinator: 'and',
    },
    looseTypeValidation: true,
    options: {},
  },
  id: uid('0000if11'),
  name,
  type: 'n8n-nodes-base.if',
  typeVersion: 2.2,
  position,
});
export const sticky = (name, position, width, height, content, color = 7) => ({
  parameters: { content, height, width, color },
  id: uid('0000nt10'),
  name,
  type: 'n8n-nodes-base.stickyNote',
  typeVersion: 1,
  position,
});
export const inboxWebhook = (name, method, position, webhookId) => ({
  parameters: {
    httpMethod: method,
    path: INBOX_PATH,
    authentication: 'headerAuth',
    responseMode: 'responseNode',
    options: {},
  },
  id: uid('0000wh10'),
  name,
  type: 'n8n-nodes-base.webhook',
  typeVersion: 2.1,
  position,
  webhookId,
  credentials: { httpHeaderAuth: { ...INBOX_PROXY_CREDENTIAL } },
});
// who is signed in: the name the proxy sends, trusted because the Webhook
// node has checked the proxy's secret header (n8n answered 403 otherwise);
// empty when the proxy named nobody, and then the page shows and does
// nothing.  The form token binds a form to that person and to the time the
// page was shown: a hash of the proxy's secret, the name and that time,
// which another site cannot compute (it does not know the secret), another
// operator cannot use (another name), and which expires after FORM_TTL_SECONDS.
const SECRET = `($json.headers['${PROXY_SECRET_HEADER.toLowerCase()}'] ?? '')`;
const NAME = `String($json.headers['${PROXY_USER_HEADER.toLowerCase()}'] ?? '').trim().slice(0, 200)`;
export const ACTOR = `={{ ${NAME} }}`;
// The token is "<time>.<hash>", the time in seconds since 1970.
const token = (issued) => `('idem_gate inbox form|' + ${SECRET} + '|' + ${NAME} + '|' + ${issued}).hash('sha256')`;
export const CSRF = `={{ (() => { const i = String(Math.floor($now.toMillis() / 1000)); return i + '.' + ${token('i')}; })() }}`;
export const FORM_OK = `={{ (() => { const [i, h] = String($json.body?.csrf ?? '').split('.'); const age = Math.floor($now.toMillis() / 1000) - Number(i); ` +
  `return /^[0-9]{1,12}$/.test(i ?? '') && age >= -60 && age <= ${FORM_TTL_SECONDS} && h === ${token('i')}; })() }}`;

// A bulk decision's confirmation carries a token of its own, bound to the
// person, the time it was shown, and exactly what it decides: the workflow,
// the decision, the reason and the list of keys as the confirm page sent
// them.  A form whose keys, decision or reason were changed, sent by another
// person, or older than BULK_TTL_SECONDS, is refused before anything runs.
const BULK_FIELDS = `String($json.body?.workflow ?? '') + '|' + String($json.body?.decision ?? '') + '|' + String($json.body?.reason ?? '').trim() + '|' + String($json.body?.keys ?? '')`;
const bulkToken = (issued) => `('idem_gate inbox bulk|' + ${SECRET} + '|' + ${NAME} + '|' + ${issued} + '|' + ${BULK_FIELDS}).hash('sha256')`;
export const BULK_NEXT = `={{ (() => { const i = String(Math.floor($now.toMillis() / 1000)); return i + '.' + ${bulkToken('i')}; })() }}`;
export const BULK_OK = `={{ (() => { const [i, h] = String($json.body?.bulk ?? '').split('.'); const age = Math.floor($now.toMillis() / 1000) - Number(i); ` +
  `return /^[0-9]{1,12}$/.test(i ?? '') && age >= -60 && age <= ${BULK_TTL_SECONDS} && h === ${bulkToken('i')}; })() }}`;
