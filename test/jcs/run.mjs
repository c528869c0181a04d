// idem_gate canonical JSON suite: every RFC 8785 vector in the shared
// folder, a differential test against the canonicalize reference (npm
// package by two of the RFC's authors), an independent oracle for the
// numbers => 'safe' policy, and a memory check on a 50 MB document.
//
// Connects with the libpq environment variables (PGHOST, PGPORT, PGUSER,
// PGDATABASE); the database must have idem_gate installed.  IDEM_SHARED is
// the shared folder holding jcs/vectors.  Prints one line per check and ends
// with "N passed, N failed"; exits non-zero on any failure.
//
// Options: JCS_DOCS (default 10000) documents for the differential test,
// JCS_SEED (default 8785), JCS_SKIP_MEMORY=1 to skip the 50 MB check.

import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import pg from 'pg';
import canonicalize from 'canonicalize';
import { generate, rng, randomDouble } from './gen.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const shared = process.env.IDEM_SHARED || path.resolve(here, '../../../shared');
const vectors = path.join(shared, 'jcs', 'vectors');
const NDOCS = parseInt(process.env.JCS_DOCS || '10000', 10);
const SEED = parseInt(process.env.JCS_SEED || '8785', 10);

let passed = 0;
let failed = 0;

function check(name, ok, detail) {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok' : 'not ok'} - ${name}${detail ? ' (' + detail + ')' : ''}`);
}

// An unexpected exception fails the run but still ends with the count line.
function abort(e) {
  failed++;
  console.log(`not ok - suite aborted: ${e && e.stack ? e.stack : e}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(1);
}
process.on('uncaughtException', abort);
process.on('unhandledRejection', abort);

const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');

function doubleFromHex(hex) {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setBigUint64(0, BigInt('0x' + hex));
  return dv.getFloat64(0);
}

// ---------------------------------------------------------------------------
// Exact decimal arithmetic for the 'safe' policy oracle, written from the
// contract's words, independently of the C code.

// value = (neg ? -1 : 1) * 0.digits * 10^n, no leading/trailing zeros
function parseDecimal(s) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s);
  if (!m) throw new Error('not a JSON number: ' + s);
  let digits = m[2] + (m[3] || '');
  let n = m[2].length + (m[4] ? parseInt(m[4], 10) : 0);
  const lead = digits.match(/^0*/)[0].length;
  digits = digits.slice(lead);
  n -= lead;
  digits = digits.replace(/0+$/, '');
  if (digits === '') return { neg: false, digits: '', n: 0 };
  return { neg: m[1] === '-', digits, n };
}

function absCmp(a, b) {
  if (a.digits === '' || b.digits === '') return (a.digits === '' ? 0 : 1) - (b.digits === '' ? 0 : 1);
  if (a.n !== b.n) return a.n < b.n ? -1 : 1;
  if (a.digits === b.digits) return 0;
  return a.digits < b.digits ? -1 : 1; // lexicographic: no trailing zeros
}

const TWO53 = parseDecimal('9007199254740992');
const TWOM1022 = (() => {
  const d = (5n ** 1022n).toString();
  return { neg: false, digits: d.replace(/0+$/, ''), n: d.length - 1022 };
})();

// Exact decimal expansion of a finite double.
function exactDecimal(x) {
  if (x === 0) return '0';
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, x);
  const bits = dv.getBigUint64(0);
  const neg = bits >> 63n ? '-' : '';
  const be = Number((bits >> 52n) & 0x7ffn);
  let m = bits & ((1n << 52n) - 1n);
  let e;
  if (be === 0) e = -1074;
  else {
    m |= 1n << 52n;
    e = be - 1075;
  }
  if (e >= 0) return neg + (m << BigInt(e)).toString();
  const digits = (m * 5n ** BigInt(-e)).toString().padStart(-e + 1, '0');
  return neg + digits.slice(0, digits.length + e) + '.' + digits.slice(digits.length + e);
}

// What idem_canonical(number, policy) must give for a JSON number text.
function expectedNumber(text, policy) {
  const x = Number(text);
  if (!Number.isFinite(x)) return 'ERROR:22003';
  const out = canonicalize(x);
  if (policy === 'safe') {
    const v = parseDecimal(text);
    const o = parseDecimal(out);
    const same = v.digits === o.digits && v.n === o.n;
    if (!same && (absCmp(v, TWO53) >= 0 || absCmp(v, TWOM1022) < 0)) return 'ERROR:22003';
  }
  return out;
}

// ---------------------------------------------------------------------------

const client = new pg.Client();
await client.connect();
await client.query(`SET client_min_messages = warning`);
// Run the four functions on one text, each error turned into ERROR:<SQLSTATE>.
await client.query(`
CREATE FUNCTION pg_temp.jcs_try(d text, pol text, f text[] DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE r text[] := '{}';
BEGIN
  BEGIN r := r || idem_canonical(d::jsonb, pol); EXCEPTION WHEN OTHERS THEN r := r || ('ERROR:' || SQLSTATE); END;
  BEGIN r := r || idem_canonical(d::json, pol); EXCEPTION WHEN OTHERS THEN r := r || ('ERROR:' || SQLSTATE); END;
  BEGIN r := r || idem_hash(d::jsonb, pol); EXCEPTION WHEN OTHERS THEN r := r || ('ERROR:' || SQLSTATE); END;
  BEGIN r := r || idem_hash(d::json, pol); EXCEPTION WHEN OTHERS THEN r := r || ('ERROR:' || SQLSTATE); END;
  IF f IS NOT NULL THEN
    BEGIN r := r || idem_hash(d::jsonb, f, pol); EXCEPTION WHEN OTHERS THEN r := r || ('ERROR:' || SQLSTATE); END;
  END IF;
  RETURN r;
END $$`);

async function tryMany(texts, policy, fields) {
  const res = await client.query(
    `SELECT i, pg_temp.jcs_try(d, $2,
        CASE WHEN f IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(f::jsonb)) END) AS r
       FROM unnest($1::text[], $3::text[]) WITH ORDINALITY AS t(d, f, i) ORDER BY i`,
    [texts, policy, fields || texts.map(() => null)]);
  return res.rows.map((row) => row.r);
}

// --- cyberphone reference documents and the RFC's sorting example --------

function vectorPairs() {
  const pairs = [];
  for (const f of fs.readdirSync(path.join(vectors, 'input')).sort()) {
    const base = f.replace(/\.json$/, '');
    pairs.push({
      name: 'cyberphone ' + f,
      input: fs.readFileSync(path.join(vectors, 'input', f), 'utf8'),
      output: fs.readFileSync(path.join(vectors, 'output', f)),
      outhex: Buffer.from(fs.readFileSync(path.join(vectors, 'outhex', base + '.txt'), 'utf8').trim().split(/\s+/).join(''), 'hex'),
    });
  }
  const out = fs.readFileSync(path.join(vectors, 'rfc8785', 'sorting.output.json'));
  pairs.push({
    name: 'RFC 8785 3.2.3 sorting example',
    input: fs.readFileSync(path.join(vectors, 'rfc8785', 'sorting.input.json'), 'utf8'),
    output: out,
    outhex: out,
  });
  return pairs;
}

for (const v of vectorPairs()) {
  for (const policy of ['safe', 'rfc']) {
    const [r] = await tryMany([v.input], policy);
    const h = crypto.createHash('sha256').update(v.output).digest('hex');
    const problems = [];
    if (!v.output.equals(v.outhex)) problems.push('output and outhex files differ');
    if (!Buffer.from(r[0], 'utf8').equals(v.output)) problems.push('jsonb canonical ' + JSON.stringify(r[0]));
    if (!Buffer.from(r[1], 'utf8').equals(v.output)) problems.push('json canonical ' + JSON.stringify(r[1]));
    if (r[2] !== h) problems.push('jsonb hash ' + r[2]);
    if (r[3] !== h) problems.push('json hash ' + r[3]);
    check(`${v.name} [${policy}]: exact bytes, outhex, hash, jsonb and json`, problems.length === 0, problems.join('; '));
  }
}

// --- numbers ---------------------------------------------------------------

// Check many numbers at once: one jsonb array per chunk.
async function numberBatch(name, inputs, expected, policy, cast) {
  let bad = 0;
  const samples = [];
  const CHUNK = 10000;
  for (let i = 0; i < inputs.length; i += CHUNK) {
    const ins = inputs.slice(i, i + CHUNK);
    let got;
    try {
      const res = await client.query(`SELECT idem_canonical($1::${cast}, $2) AS c`, ['[' + ins.join(',') + ']', policy]);
      got = res.rows[0].c.slice(1, -1).split(',');
    } catch (e) {
      got = ins.map(() => 'ERROR:' + e.code);
      if (samples.length < 5) samples.push(`chunk at ${i}: ${e.message}`);
    }
    for (let j = 0; j < ins.length; j++) {
      if (got[j] !== expected[i + j]) {
        bad++;
        if (samples.length < 5) samples.push(`${ins[j]} -> ${got[j]}, expected ${expected[i + j]}`);
      }
    }
  }
  check(`${name}: ${inputs.length} numbers`, bad === 0, bad ? `${bad} mismatches: ${samples.join('; ')}` : '');
}

async function numberFile(file, sep, header) {
  const lines = fs.readFileSync(path.join(vectors, 'numbers', file), 'utf8').split('\n').filter((l) => l.length);
  if (header) lines.shift();
  const finite = [];
  const nonfinite = [];
  for (const l of lines) {
    const [hex, exp] = l.split(sep);
    const x = doubleFromHex(hex);
    (Number.isFinite(x) ? finite : nonfinite).push({ hex, exp, x });
  }
  const in17 = finite.map((e) => e.x.toPrecision(17));
  const exp = finite.map((e) => e.exp);
  await numberBatch(`${file} 17 significant digits, jsonb, rfc`, in17, exp, 'rfc', 'jsonb');
  await numberBatch(`${file} 17 significant digits, json, rfc`, in17, exp, 'rfc', 'json');
  await numberBatch(`${file} fixpoint of expected, jsonb, safe`, exp, exp, 'safe', 'jsonb');
  await numberBatch(`${file} fixpoint of expected, json, safe`, exp, exp, 'safe', 'json');
  return nonfinite;
}

// Appendix B: one check per row, NaN and Infinity rows must be errors.
{
  const lines = fs.readFileSync(path.join(vectors, 'numbers', 'rfc8785_appendix_b.csv'), 'utf8').split('\n').filter((l) => l.length);
  lines.shift();
  for (const l of lines) {
    const [hex, exp, comment] = l.split(',');
    const x = doubleFromHex(hex);
    if (Number.isFinite(x)) {
      const [r17] = await tryMany([x.toPrecision(17)], 'rfc');
      const [rexp] = await tryMany([exp], 'safe');
      const ok = r17[0] === exp && r17[1] === exp && rexp[0] === exp.replace(/^-0$/, '0') && rexp[1] === exp.replace(/^-0$/, '0');
      check(`Appendix B ${hex} ${comment}: ${exp}`, ok, ok ? '' : `got ${r17[0]}, ${r17[1]}, fixpoint ${rexp[0]}, ${rexp[1]}`);
    } else {
      // No JSON text denotes NaN or Infinity; the spellings a sender could
      // produce are refused: the bare words by the json parser, and numbers
      // beyond the double range by idem_gate (22003, both policies).
      const words = [String(x)];
      const huge = x > 0 ? '1e400' : x < 0 ? '-1e400' : null;
      const rw = await tryMany(words, 'rfc').catch((e) => [['ERROR:' + e.code, 'ERROR:' + e.code]]);
      let ok = rw[0][0].startsWith('ERROR') && rw[0][1].startsWith('ERROR');
      let detail = `${words[0]}: ${rw[0][0]}`;
      if (huge) {
        for (const policy of ['rfc', 'safe']) {
          const [rh] = await tryMany([huge], policy);
          ok = ok && rh.every((c) => c === 'ERROR:22003');
          detail += `; ${huge} [${policy}]: ${rh.join(' ')}`;
        }
      }
      check(`Appendix B ${hex} ${comment}: error`, ok, detail);
    }
  }
}

for (const [file, sep, header] of [['es6testfile10k.txt', ',', false], ['es6testfile100k.txt', ',', false], ['v8_edge_numbers.csv', ',', true]]) {
  const nonfinite = await numberFile(file, sep, header);
  if (nonfinite.length) check(`${file}: no non-finite rows expected`, false, nonfinite.length + ' rows');
}

// The 'safe' policy against an oracle computed with exact decimals.
{
  const r = rng(SEED + 1);
  const texts = ['9007199254740992', '9007199254740993', '9007199254740994', '-9007199254740993',
    '12345678901234567890', '1e30', '1E30', '1e400', '-1e400', '1e-400', '-1e-400', '5e-324', '3e-324',
    '2e-324', '2.2250738585072014e-308', '2.2250738585072011e-308', '333333333.33333329',
    '0.1000000000000000055511151231257827', '295147905179352825856', '295147905179352830000',
    '999999999999999900000', '1.7976931348623157e308', '1.7976931348623158e308', '1.7976931348623159e308',
    exactDecimal(2 ** -1022), exactDecimal(2 ** -1022 - 2 ** -1074), exactDecimal(2 ** 53 + 2),
    '0.' + '0'.repeat(307) + '22250738585072013', '18446744073709551615', '1541815603606036480'];
  for (let i = 0; i < 3000; i++) {
    const x = randomDouble(r);
    const k = r.int(6);
    if (k === 0) texts.push(exactDecimal(x));
    else if (k === 1) texts.push(x.toPrecision(17 + r.int(4)));
    else if (k === 2) texts.push(String(x));
    else if (k === 3) {
      let d = String(1 + r.int(9));
      const nd = r.int(40);
      for (let j = 0; j < nd; j++) d += String(r.int(10));
      texts.push((r.chance(0.3) ? '-' : '') + d + 'e' + (r.int(700) - 360));
    } else if (k === 4) texts.push(String(BigInt(2 ** 53) + BigInt(r.int(1000) - 500)));
    else texts.push(exactDecimal(x * 2 ** -r.int(60)));
  }
  for (const policy of ['safe', 'rfc']) {
    const got = await tryMany(texts, policy);
    let bad = 0;
    let errors = 0;
    const samples = [];
    texts.forEach((t, i) => {
      const e = expectedNumber(t, policy);
      if (e.startsWith('ERROR')) errors++;
      const rr = got[i];
      if (!(rr[0] === e && rr[1] === e && rr[2] === (e.startsWith('ERROR') ? e : sha256(e)) && rr[3] === rr[2])) {
        bad++;
        if (samples.length < 5) samples.push(`${t.length > 60 ? t.slice(0, 60) + '...' : t}: got ${rr.join(' ')}, expected ${e}`);
      }
    });
    check(`numbers => '${policy}' against an exact-decimal oracle: ${texts.length} numbers, ${errors} expected 22003`, bad === 0, bad ? `${bad} mismatches: ${samples.join('; ')}` : '');
  }
}

// --- differential test against canonicalize --------------------------------

{
  const t0 = Date.now();
  const docs = generate(SEED, NDOCS);
  let genBad = 0;
  for (const d of docs) {
    const exp = canonicalize(d.value);
    d.expected = exp;
    d.hash = sha256(exp);
    if (canonicalize(JSON.parse(d.a)) !== exp || canonicalize(JSON.parse(d.b)) !== exp) genBad++;
  }
  const nul = docs.filter((d) => d.hasNul).length;
  const bytes = docs.reduce((s, d) => s + Buffer.byteLength(d.a), 0);
  check(`generator: ${docs.length} documents (${(bytes / 1e6).toFixed(1)} MB, ${nul} with U+0000), both spellings parse to the same value`, genBad === 0, genBad ? genBad + ' bad' : '');

  for (const policy of ['rfc', 'safe']) {
    const subset = policy === 'rfc' ? docs : docs.filter((d) => d.losslessOnly);
    let bad = 0;
    let same = 0;
    const samples = [];
    const BATCH = 500;
    for (let i = 0; i < subset.length; i += BATCH) {
      const part = subset.slice(i, i + BATCH);
      const ra = await tryMany(part.map((d) => d.a), policy);
      const rb = await tryMany(part.map((d) => d.b), policy);
      part.forEach((d, j) => {
        const want = d.hasNul
          ? ['ERROR:22P05', d.expected, 'ERROR:22P05', d.hash]
          : [d.expected, d.expected, d.hash, d.hash];
        for (const [label, got] of [['a', ra[j]], ['b', rb[j]]]) {
          const ok = want.every((w, k) => w === got[k]);
          if (!ok) {
            bad++;
            if (samples.length < 3) samples.push(`${label}=${JSON.stringify(label === 'a' ? d.a : d.b).slice(0, 300)} got ${JSON.stringify(got).slice(0, 300)} expected ${JSON.stringify(want).slice(0, 300)}`);
          }
        }
        if (ra[j][3] === rb[j][3]) same++;
      });
    }
    check(`differential vs canonicalize [${policy}]: ${subset.length} documents x 2 spellings, idem_canonical and idem_hash, jsonb and json`, bad === 0, bad ? `${bad} mismatches: ${samples.join(' | ')}` : '');
    check(`hash invariant under member order, whitespace and escapes [${policy}]: ${subset.length} document pairs`, same === subset.length, `${same} equal`);
  }

  // identity fields
  const withFields = docs.filter((d) => d.fields && d.fields.length && !d.hasNul);
  let bad = 0;
  const samples = [];
  for (let i = 0; i < withFields.length; i += 500) {
    const part = withFields.slice(i, i + 500);
    const got = await tryMany(part.map((d) => d.b), 'rfc', part.map((d) => JSON.stringify(d.fields.map((f) => f.spec))));
    part.forEach((d, j) => {
      const proj = {};
      for (const f of d.fields) proj[f.spec] = f.value;
      const want = sha256(canonicalize(proj));
      if (got[j][4] !== want) {
        bad++;
        if (samples.length < 3) samples.push(`fields ${JSON.stringify(d.fields.map((f) => f.spec))} of ${d.b.slice(0, 200)}: got ${got[j][4]}`);
      }
    });
  }
  check(`idem_hash(doc, fields) vs canonicalize of the projection: ${withFields.length} documents`, bad === 0, bad ? `${bad} mismatches: ${samples.join(' | ')}` : '');
  console.log(`# differential test took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

await client.end();

// --- memory on a 50 MB document ---------------------------------------------

// Peak resident size of a fresh backend, from log_statement_stats, before
// and after one statement.
async function peakDelta(sql) {
  const c = new pg.Client();
  await c.connect();
  const peaks = [];
  c.on('notice', (n) => {
    const m = /(\d+) kB max resident size/.exec(n.detail || '');
    if (m) peaks.push(parseInt(m[1], 10));
  });
  await c.query('SET client_min_messages = log');
  await c.query('SET log_statement_stats = on');
  await c.query('SELECT 1');
  const r = await c.query(sql);
  await c.query('SELECT 1');
  await c.end();
  if (peaks.length < 2) throw new Error('no resource usage reported');
  return { kb: peaks[peaks.length - 1] - peaks[0], row: r.rows[0] };
}

if (process.env.JCS_SKIP_MEMORY !== '1') {
  const c = new pg.Client();
  await c.connect();
  await c.query(`SET client_min_messages = warning`);
  await c.query(`DROP TABLE IF EXISTS jcs_big`);
  // About 50 MB of JSON text: customer-like objects with nested members,
  // non-ASCII strings and decimals.
  await c.query(`CREATE UNLOGGED TABLE jcs_big AS
    SELECT jsonb_agg(jsonb_build_object(
             'id', 'cus_' || md5(i::text), 'n', i, 'amount', i * 1.25, 'currency', 'eur',
             'name', 'Zoë Ångström ' || i, 'meta', jsonb_build_object('b', i % 7, 'a', true, '€', null),
             'tags', jsonb_build_array('x', i % 3, 1e30))) AS doc
      FROM generate_series(1, 290000) AS i`);
  const size = (await c.query(`SELECT octet_length(doc::text) AS n, octet_length(idem_canonical(doc)) AS canon FROM jcs_big`)).rows[0];
  await c.query(`DROP TABLE IF EXISTS jcs_big_json`);
  await c.query(`CREATE UNLOGGED TABLE jcs_big_json AS SELECT idem_canonical(doc)::json AS doc FROM jcs_big`);
  await c.end();
  const mb = (kb) => (kb / 1024).toFixed(1) + ' MB';
  const docMB = size.canon / 1048576;
  console.log(`# large document: ${(size.n / 1048576).toFixed(1)} MB as jsonb::text, ${(size.canon / 1048576).toFixed(1)} MB canonical`);
  const floor = await peakDelta(`SELECT octet_length(doc::text) FROM jcs_big`);
  console.log(`# reference: doc::text on it raises the backend's peak memory by ${mb(floor.kb)}`);
  for (const [label, sql, limit] of [
    // The peak includes the detoasted document (and its compressed copy);
    // the limits are in units of the canonical size.
    ['idem_hash(jsonb)', `SELECT idem_hash(doc) FROM jcs_big`, 3],
    ['idem_canonical(jsonb)', `SELECT octet_length(idem_canonical(doc)) FROM jcs_big`, 4],
    ['idem_hash(json)', `SELECT idem_hash(doc) FROM jcs_big_json`, 4],
    ['idem_canonical(json)', `SELECT octet_length(idem_canonical(doc)) FROM jcs_big_json`, 5],
  ]) {
    const d = await peakDelta(sql);
    const ratio = d.kb / 1024 / docMB;
    check(`${label} on a document of ${docMB.toFixed(0)} MB canonical: peak memory +${mb(d.kb)} = ${ratio.toFixed(2)}x the document (limit ${limit}x)`, ratio <= limit);
  }
  const c2 = new pg.Client();
  await c2.connect();
  const agree = (await c2.query(`SELECT (SELECT idem_hash(doc) FROM jcs_big) = (SELECT idem_hash(doc) FROM jcs_big_json) AS ok`)).rows[0].ok;
  check('50 MB document: jsonb and json hashes agree', agree);
  await c2.query(`DROP TABLE jcs_big; DROP TABLE jcs_big_json`);
  await c2.end();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
