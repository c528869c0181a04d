// The inbox's names and placeholders, shared by its generator modules
// (build-inbox.mjs re-exports them for drills.mjs and build-examples.mjs).

export const INBOX_IDS = { inbox: 'idemGateInbox001', actions: 'idemGateInboxAct', alerts: 'idemGateAlerts01' };
export const INBOX_PG_CREDENTIAL = { id: 'idemGateInboxPg1', name: 'idem_gate inbox Postgres' };
export const INBOX_PROXY_CREDENTIAL = { id: 'idemGateInboxPxy', name: 'idem_gate inbox proxy' };
// the headers the proxy sets: the shared secret, and the signed-in person
export const PROXY_SECRET_HEADER = 'X-Idem-Gate-Proxy';
export const PROXY_USER_HEADER = 'X-Forwarded-User';
// how long a page's forms may be sent (the form token carries its time)
export const FORM_TTL_SECONDS = 12 * 3600;
export const INBOX_PATH = 'idem-gate/inbox';
// placeholders the docs name: n8n's address (the default of a local n8n: it
// works as it is there) and the chat's incoming webhook (a host that does not
// exist: nothing is posted until it is set)
export const N8N_ADDRESS = 'http://localhost:5678';
export const CHAT_URL = 'https://chat.example/hooks/idem-gate';
export const DIGEST_MINUTES = 60;
// the gates the inbox can replay a delivery to, by workflow (scope) name
export const GATE_URLS = { orders: `${N8N_ADDRESS}/webhook/idem-gate/orders` };
// a bulk decision takes at most this many keys per submit, and its
// confirmation (bound to the person, the keys, the decision and the reason)
// is valid this long
export const BULK_MAX_KEYS = 1000;
export const BULK_TTL_SECONDS = 3600;
