// Corpus for the canonical JSON benchmark: realistic payment-provider
// webhook events (Stripe-like: event envelope, charge / payment_intent /
// invoice / customer objects, metadata, addresses, invoice lines), 1-10 KB
// each, one compact JSON document per line on stdout.
//
// usage: node gen_corpus.mjs [count] [seed]

const count = parseInt(process.argv[2] || '20000', 10);
let seed = parseInt(process.argv[3] || '42', 10) >>> 0;

function rnd() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rnd() * n);
const pick = (a) => a[int(a.length)];
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const id = (prefix, n = 24) => prefix + '_' + Array.from({ length: n }, () => ALNUM[int(62)]).join('');
const NAMES = ['Jenny Rosen', 'Zoë Ångström', 'José Álvarez', 'Małgorzata Wiśniewska', '山田 太郎', 'Søren Kierkegaard', 'Amélie Poulain', 'John O\'Brien'];
const CITIES = [['Berlin', 'DE', '10115'], ['Paris', 'FR', '75001'], ['San Francisco', 'US', '94103'], ['Kraków', 'PL', '30-001'], ['Tōkyō', 'JP', '100-0001'], ['Zürich', 'CH', '8001']];
const CURRENCIES = ['usd', 'eur', 'gbp', 'jpy', 'chf', 'pln'];
const hex = (n) => Array.from({ length: n }, () => '0123456789abcdef'[int(16)]).join('');
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
const created = () => 1700000000 + int(40000000);

function address() {
  const [city, country, zip] = pick(CITIES);
  return { city, country, line1: `${1 + int(200)} ${pick(['Main Street', 'Rue de Rivoli', 'Unter den Linden', 'Market St', 'Floriańska'])}`, line2: rnd() < 0.3 ? `Apt ${int(99)}` : null, postal_code: zip, state: rnd() < 0.5 ? null : pick(['CA', 'NY', 'BY', 'IDF']) };
}

function metadata() {
  const m = {};
  const n = int(8);
  for (let i = 0; i < n; i++) m[pick(['order_id', 'customer_ref', 'campaign', 'workflow', 'n8n_execution', 'sku', 'note', 'tenant', 'source', 'region']) + (i > 4 ? '_' + i : '')] = rnd() < 0.5 ? id('ord', 12) : pick(['spring-sale', 'Bestellung für Jürgen', 'vip', '✓ verified', 'priority']);
  return m;
}

function charge(amount, currency, customer) {
  return {
    id: id('ch'), object: 'charge', amount, amount_captured: amount, amount_refunded: rnd() < 0.1 ? int(amount) : 0,
    application: null, application_fee: null, application_fee_amount: null,
    balance_transaction: id('txn'),
    billing_details: { address: address(), email: `customer${int(100000)}@example.com`, name: pick(NAMES), phone: rnd() < 0.5 ? null : '+49 30 ' + int(9999999) },
    calculated_statement_descriptor: 'IDEM*SHOP', captured: true, created: created(), currency, customer,
    description: rnd() < 0.5 ? null : 'Payment for order ' + id('ord', 10),
    disputed: false, failure_code: null, failure_message: null,
    fraud_details: {}, livemode: false, metadata: metadata(), on_behalf_of: null,
    outcome: { network_status: 'approved_by_network', reason: null, risk_level: pick(['normal', 'elevated']), risk_score: int(100), seller_message: 'Payment complete.', type: 'authorized' },
    paid: true, payment_intent: id('pi'), payment_method: id('pm'),
    payment_method_details: { card: { brand: pick(['visa', 'mastercard', 'amex']), checks: { address_line1_check: null, address_postal_code_check: 'pass', cvc_check: 'pass' }, country: pick(CITIES)[1], exp_month: 1 + int(12), exp_year: 2026 + int(6), fingerprint: id('', 16).slice(1), funding: 'credit', installments: null, last4: String(1000 + int(9000)), network: 'visa', three_d_secure: null, wallet: null }, type: 'card' },
    receipt_email: null, receipt_number: null, receipt_url: 'https://pay.example.com/receipts/' + id('rcpt', 40),
    refunded: false, review: null, shipping: rnd() < 0.4 ? { address: address(), name: pick(NAMES) } : null,
    source_transfer: null, statement_descriptor: null, status: 'succeeded', transfer_group: null,
  };
}

function invoice(currency, customer) {
  const lines = [];
  const n = 1 + int(14);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const unit = pick([499, 999, 1999, 4900, 12.5, 0.99, 15000]);
    const qty = 1 + int(5);
    const amount = Math.round(unit * qty);
    total += amount;
    lines.push({ id: id('il'), object: 'line_item', amount, amount_excluding_tax: amount, currency, description: `${qty} × ${pick(['Pro plan', 'Seat', 'API calls (per 1k)', 'Support — premium', 'Stockage 100 Go'])}`, discount_amounts: [], discountable: true, livemode: false, metadata: metadata(), period: { end: created(), start: created() }, price: { id: id('price'), object: 'price', active: true, currency, unit_amount: unit, unit_amount_decimal: String(unit), recurring: { interval: 'month', interval_count: 1, usage_type: 'licensed' }, type: 'recurring', tax_behavior: 'exclusive' }, proration: false, quantity: qty, tax_amounts: [{ amount: Math.round(amount * 0.19), inclusive: false, tax_rate: id('txr') }], type: 'subscription' });
  }
  return { id: id('in'), object: 'invoice', account_country: 'DE', account_name: 'Idem Shop GmbH', amount_due: total, amount_paid: total, amount_remaining: 0, attempt_count: 1, attempted: true, billing_reason: 'subscription_cycle', charge: id('ch'), collection_method: 'charge_automatically', created: created(), currency, customer, customer_address: address(), customer_email: `billing${int(1000)}@example.org`, customer_name: pick(NAMES), lines: { object: 'list', data: lines, has_more: false, total_count: lines.length, url: '/v1/invoices/lines' }, livemode: false, metadata: metadata(), number: 'INV-' + int(100000), paid: true, period_end: created(), period_start: created(), status: 'paid', subtotal: total, tax: Math.round(total * 0.19), total: Math.round(total * 1.19), webhooks_delivered_at: created() };
}

function paymentIntent(amount, currency, customer) {
  return { id: id('pi'), object: 'payment_intent', amount, amount_capturable: 0, amount_received: amount, automatic_payment_methods: { enabled: true }, capture_method: 'automatic', client_secret: id('pi') + '_secret_' + id('', 20).slice(1), confirmation_method: 'automatic', created: created(), currency, customer, description: null, latest_charge: id('ch'), livemode: false, metadata: metadata(), payment_method: id('pm'), payment_method_options: { card: { request_three_d_secure: 'automatic' } }, payment_method_types: ['card', 'sepa_debit'], status: 'succeeded', charges: { object: 'list', data: rnd() < 0.6 ? [charge(amount, currency, customer)] : [], has_more: false } };
}

function event() {
  const currency = pick(CURRENCIES);
  const amount = currency === 'jpy' ? 100 + int(100000) : 50 + int(500000);
  const customer = id('cus', 14);
  const kind = int(10);
  let type, object;
  if (kind < 4) { type = pick(['charge.succeeded', 'charge.captured', 'charge.refunded']); object = charge(amount, currency, customer); }
  else if (kind < 7) { type = pick(['payment_intent.succeeded', 'payment_intent.created']); object = paymentIntent(amount, currency, customer); }
  else if (kind < 9) { type = pick(['invoice.paid', 'invoice.finalized']); object = invoice(currency, customer); }
  else { type = 'customer.updated'; object = { id: customer, object: 'customer', address: address(), balance: 0, created: created(), currency, email: `c${int(1e6)}@example.net`, invoice_prefix: id('', 8).slice(1), livemode: false, metadata: metadata(), name: pick(NAMES), preferred_locales: ['de', 'en'], tax_exempt: 'none' }; }
  return { id: id('evt'), object: 'event', api_version: '2024-06-20', created: created(), data: { object, previous_attributes: rnd() < 0.3 ? { metadata: {} } : undefined }, livemode: false, pending_webhooks: 1 + int(3), request: { id: rnd() < 0.5 ? null : id('req', 14), idempotency_key: rnd() < 0.5 ? null : uuid() }, type };
}

const out = [];
let n = 0;
while (n < count) {
  const s = JSON.stringify(event());
  const bytes = Buffer.byteLength(s);
  if (bytes < 1024 || bytes > 10240) continue;
  out.push(s);
  n++;
  if (out.length >= 1000) { process.stdout.write(out.join('\n') + '\n'); out.length = 0; }
}
if (out.length) process.stdout.write(out.join('\n') + '\n');
