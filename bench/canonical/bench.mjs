// Node side of the canonical JSON benchmark: canonicalize (the RFC 8785
// reference package) + SHA-256 over the same documents idem_hash gets.
// Documents are parsed once before timing (idem_hash reads already parsed
// jsonb), so this measures canonicalization and hashing only.
//
// usage: node bench.mjs corpus.ndjson [rounds]   prints: bytes seconds

import fs from 'node:fs';
import crypto from 'node:crypto';
import canonicalize from 'canonicalize';

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.length);
const rounds = parseInt(process.argv[3] || '5', 10);
const docs = lines.map((l) => JSON.parse(l));
const bytes = lines.reduce((s, l) => s + Buffer.byteLength(l), 0);

let best = Infinity;
let sink = 0;
for (let r = 0; r < rounds + 1; r++) {
  const t0 = process.hrtime.bigint();
  for (const d of docs) {
    const h = crypto.createHash('sha256').update(canonicalize(d)).digest('hex');
    sink += h.length;
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r > 0 && s < best) best = s; // round 0 warms up the JIT
}
if (sink === 0) throw new Error('nothing hashed');
console.log(`${bytes} ${best}`);
