// Random JSON documents for idem_gate's differential test of idem_canonical
// and idem_hash against the canonicalize reference implementation.
//
// Each document is generated as a JavaScript value and written as JSON text
// twice, with different member order, whitespace, escape spellings and
// number spellings.  Every spelling parses back to exactly the same value,
// so both texts must give the same canonical form and hash.
//
// Deterministic: the same seed gives the same documents.

// Small fast PRNG (mulberry32): reproducible runs, no dependency.
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r = {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    chance: (p) => next() < p,
  };
  return r;
}

const TWO53 = 2 ** 53;
const MIN_NORMAL = 2 ** -1022;

// Characters that stress escaping and UTF-16 ordering.
const SPECIAL_CHARS = [
  '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\u000b', '\u0001', '\u001f',
  '\u007f', '\u0080', '\u009f', '\u00e9', '\u00f6', '\u20ac', '\u2028', '\u2029',
  '\ufeff', '\ufffd', '\uffff', '\ue000', '\uf8ff', '\ufb33', '\uff61', '\u0301',
  '\u{10000}', '\u{1f600}', '\u{10ffff}', '\u{1d11e}', 'A', 'a', 'z', '1', '9', ' ',
];

function randomChar(r, allowNul) {
  const k = r.int(10);
  if (k < 4) return String.fromCharCode(0x20 + r.int(0x5f)); // printable ASCII
  if (k < 6) return r.pick(SPECIAL_CHARS);
  if (k === 6) {
    let c = r.int(0x20);
    if (c === 0 && !allowNul) c = 1;
    return String.fromCharCode(c);
  }
  if (k === 7) return String.fromCharCode(0xe000 + r.int(0x2000)); // U+E000..U+FFFF
  if (k === 8) return String.fromCodePoint(0x10000 + r.int(0x100000)); // astral
  // any BMP character except surrogates
  let c;
  do c = 0x80 + r.int(0xff80); while (c >= 0xd800 && c <= 0xdfff);
  return String.fromCharCode(c);
}

function randomString(r, maxLen, allowNul) {
  const n = r.int(maxLen + 1);
  let s = '';
  for (let i = 0; i < n; i++) s += randomChar(r, allowNul);
  return s;
}

// Member names: short, often sharing prefixes, so that ordering by UTF-16
// code units (not UTF-8 bytes, not jsonb's length-first order) matters.
const KEY_STEMS = ['', 'a', 'b', 'B', 'id', 'ID', 'é', '€', '😀', '\u{10000}', '\uffff',
  '\ue000', '\ufb33', '10', '9', 'a\u{10000}', 'a\uffff', '\r', '\u0080', '1'];

function randomKey(r, allowNul) {
  if (r.chance(0.5)) return r.pick(KEY_STEMS) + (r.chance(0.5) ? randomString(r, 2, allowNul) : '');
  return randomString(r, 8, allowNul);
}

function bitsToDouble(hi, lo) {
  const b = new DataView(new ArrayBuffer(8));
  b.setUint32(0, hi);
  b.setUint32(4, lo);
  return b.getFloat64(0);
}

// A double from across the whole range, weighted towards the hard cases.
export function randomDouble(r) {
  const k = r.int(12);
  const sign = r.chance(0.3) ? -1 : 1;
  switch (k) {
    case 0: case 1: {
      // random bit pattern, finite
      let x;
      do x = bitsToDouble((r.int(0x10000) << 16 | r.int(0x10000)) >>> 0, (r.int(0x10000) << 16 | r.int(0x10000)) >>> 0);
      while (!Number.isFinite(x));
      return x;
    }
    case 2: return sign * r.int(1000000);
    case 3: return sign * Math.round(r.next() * 1e8) / 100; // money
    case 4: return sign * 2 ** (r.int(2098) - 1074); // powers of two, subnormal to max
    case 5: return sign * Number('1e' + (r.int(617) - 308)) * (1 + (r.int(5) - 2) * Number.EPSILON);
    case 6: return sign * (TWO53 + (r.int(64) - 32) * 2); // around 2^53
    case 7: return sign * r.next() * 2 ** (r.int(200) + 53); // large integers
    case 8: return sign * r.next() * MIN_NORMAL * 2; // subnormals and just above
    case 9: return sign * (r.next() * 1e21); // near the plain/exponent threshold
    case 10: return sign * r.next() * 1e-6 * (r.int(3) + 1);
    default: return sign * r.next() * 10 ** (r.int(40) - 20);
  }
}

// Decimal digits and exponent of a shortest ECMAScript number string:
// value = 0.digits * 10^n.
function decimalParts(s) {
  s = s.replace(/^-/, '');
  let [mant, exp] = s.split('e');
  exp = exp ? parseInt(exp, 10) : 0;
  let [ip, fp = ''] = mant.split('.');
  let digits = ip + fp;
  let n = ip.length + exp;
  const lead = digits.match(/^0*/)[0].length;
  digits = digits.slice(lead);
  n -= lead;
  digits = digits.replace(/0+$/, '');
  return { digits, n };
}

// Spell a number as JSON text.  lossless spellings keep the exact decimal
// value of String(x); the others are other decimals whose nearest double is
// still x (17+ significant digits, exact binary expansions of integers).
export function spellNumber(r, x, losslessOnly) {
  if (Object.is(x, -0)) return r.pick(['0', '-0', '-0.0', '0e5', '-0E-3']);
  const shortest = String(x);
  const neg = x < 0 ? '-' : '';
  const k = r.int(losslessOnly ? 5 : 8);
  if (k === 0) return shortest;
  if (k <= 4) {
    // same digits, another layout
    const { digits, n } = decimalParts(shortest);
    const form = r.int(4);
    const pad = '0'.repeat(r.int(3));
    if (form === 0) {
      // d.ddd e (n-1)
      const e = n - 1;
      const m = digits.length > 1 ? digits[0] + '.' + digits.slice(1) + pad : digits + (pad ? '.' + pad : '');
      return neg + m + r.pick(['e', 'E']) + (e >= 0 ? r.pick(['', '+']) : '-') + Math.abs(e);
    }
    if (form === 1) {
      // integer digits, exponent
      const e = n - digits.length;
      return neg + digits + r.pick(['e', 'E']) + (e >= 0 ? r.pick(['', '+']) : '-') + Math.abs(e);
    }
    if (form === 2 && n >= digits.length && n <= 400) {
      // plain integer
      return neg + digits + '0'.repeat(n - digits.length) + (r.chance(0.3) ? '.0' + pad : '');
    }
    if (form === 3 && n <= 0 && n > -400) {
      return neg + '0.' + '0'.repeat(-n) + digits + pad;
    }
    return shortest + (shortest.includes('e') || shortest.includes('.') ? '' : '.0');
  }
  if (k === 5 || k === 6) {
    const s = x.toPrecision(17 + r.int(5));
    return r.chance(0.5) ? s : s.replace('e', 'E');
  }
  // exact binary value of an integral double, or one more when that rounds back
  if (Number.isInteger(x) && Math.abs(x) >= TWO53) {
    const exact = BigInt(x);
    const alt = exact + (exact > 0n ? 1n : -1n);
    return (Number(alt) === x && r.chance(0.5) ? alt : exact).toString();
  }
  return x.toExponential(16 + r.int(4));
}

// Serialize a string as JSON with randomly chosen escapes.
function spellString(r, s, escapeRate) {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    const hex = (u) => {
      const h = u.toString(16).padStart(4, '0');
      return '\\u' + (r.chance(0.5) ? h : h.toUpperCase());
    };
    const short = { 0x22: '\\"', 0x5c: '\\\\', 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t' }[cp];
    if (cp < 0x20 || cp === 0x22 || cp === 0x5c) {
      out += short && r.chance(0.7) ? short : hex(cp);
    } else if (r.chance(escapeRate)) {
      if (cp === 0x2f && r.chance(0.5)) out += '\\/';
      else if (cp > 0xffff) {
        const v = cp - 0x10000;
        out += hex(0xd800 + (v >> 10)) + hex(0xdc00 + (v & 0x3ff));
      } else out += hex(cp);
    } else out += ch;
  }
  return out + '"';
}

function ws(r, rate) {
  if (!r.chance(rate)) return '';
  let s = '';
  const n = 1 + r.int(3);
  for (let i = 0; i < n; i++) s += r.pick([' ', '\n', '\t', '\r']);
  return s;
}

// Write a generated value as JSON text.  Numbers are held as {num: x}
// boxes so that every spelling decision is made here.
export function spell(r, v, opts) {
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'string') return spellString(r, v, opts.escapeRate);
  if (v instanceof Num) return spellNumber(r, v.x, opts.losslessOnly);
  if (Array.isArray(v)) {
    return '[' + ws(r, opts.wsRate) + v.map((e) => spell(r, e, opts)).join(ws(r, opts.wsRate) + ',' + ws(r, opts.wsRate)) + ws(r, opts.wsRate) + ']';
  }
  const keys = Object.keys(v);
  // shuffle the member order
  for (let i = keys.length - 1; i > 0; i--) {
    const j = r.int(i + 1);
    [keys[i], keys[j]] = [keys[j], keys[i]];
  }
  return '{' + ws(r, opts.wsRate) + keys.map((k) => spellString(r, k, opts.escapeRate) + ws(r, opts.wsRate) + ':' + ws(r, opts.wsRate) + spell(r, v[k], opts)).join(',' + ws(r, opts.wsRate)) + ws(r, opts.wsRate) + '}';
}

export class Num {
  constructor(x) { this.x = x; }
}

// Plain JavaScript value of a generated tree (what JSON.parse would give).
export function plain(v) {
  if (v instanceof Num) return v.x;
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v)) o[k] = plain(v[k]);
    return o;
  }
  return v;
}

function randomValue(r, depth, opts) {
  const k = r.int(depth > 5 ? 4 : 7);
  if (k === 0) return r.pick([null, true, false]);
  if (k === 1 || k === 2) return randomString(r, 12, opts.allowNul);
  if (k === 3) return new Num(randomDouble(r));
  if (k === 4 || k === 5) {
    const o = Object.create(null);
    const n = r.int(depth === 0 ? 12 : 6);
    for (let i = 0; i < n; i++) o[randomKey(r, opts.allowNul)] = randomValue(r, depth + 1, opts);
    return Object.assign({}, o);
  }
  const n = r.int(6);
  const a = [];
  for (let i = 0; i < n; i++) a.push(randomValue(r, depth + 1, opts));
  return a;
}

// JSON pointer (RFC 6901) of a path.
export function pointer(path) {
  return path.map((p) => '/' + String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('');
}

// Identity fields for idem_hash(doc, fields): top-level names and pointers
// to nested values.
function randomFields(r, tree) {
  const fields = [];
  const keys = Object.keys(tree);
  const n = 1 + r.int(4);
  for (let i = 0; i < n && keys.length > 0; i++) {
    let path = [r.pick(keys)];
    let v = tree[path[0]];
    while (v !== null && typeof v === 'object' && !(v instanceof Num) && r.chance(0.6)) {
      const ks = Array.isArray(v) ? v.map((_, j) => j) : Object.keys(v);
      if (ks.length === 0) break;
      const k = r.pick(ks);
      path.push(k);
      v = v[k];
    }
    const spec = path.length === 1 && !String(path[0]).startsWith('/') && r.chance(0.5) ? String(path[0]) : pointer(path);
    if (!fields.some((f) => f.spec === spec)) fields.push({ spec, value: plain(v) });
  }
  return fields;
}

// n documents.  Each: { a, b (two spellings), value (plain JS value),
// losslessOnly (numbers spelled with their exact shortest value, so the
// 'safe' policy must accept them), hasNul (contains U+0000, which jsonb
// refuses), fields }.
export function generate(seed, n) {
  const r = rng(seed);
  const docs = [];
  for (let i = 0; i < n; i++) {
    const losslessOnly = r.chance(0.5);
    const allowNul = r.chance(0.05);
    const opts = { losslessOnly, allowNul };
    const tree = r.chance(0.9) ? randomValue(r, 0, opts) : (() => {
      const o = {};
      const m = 1 + r.int(10);
      for (let j = 0; j < m; j++) o[randomKey(r, allowNul)] = randomValue(r, 1, opts);
      return o;
    })();
    const a = spell(r, tree, { losslessOnly, escapeRate: 0.05, wsRate: 0.1 });
    const b = spell(r, tree, { losslessOnly, escapeRate: 0.3, wsRate: 0.5 });
    const value = plain(tree);
    const text = JSON.stringify(value);
    const hasNul = text.includes('\\u0000');
    const isObject = tree !== null && typeof tree === 'object' && !Array.isArray(tree) && !(tree instanceof Num);
    docs.push({ a, b, value, losslessOnly, hasNul, fields: isObject ? randomFields(r, tree) : null });
  }
  return docs;
}
