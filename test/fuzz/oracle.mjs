// idem_gate's canonical JSON against another RFC 8785 implementation, over
// saved fuzzer inputs: the npm package canonicalize (by two of the RFC's
// authors, the one test/jcs already uses).  Reads, on stdin, the lines
// `jcs_replay --print` writes (policy, input, SQLSTATE or ok, output,
// json|notjson; bytes in base64) and checks each:
//   - a document idem_gate accepts: JSON.parse accepts it too, and
//     canonicalize() gives the same bytes;
//   - a document idem_gate refuses that JSON.parse accepts: the refusal is
//     one the contract names for I-JSON: a duplicate member name (22030), a
//     number no double holds or, under 'safe', one a double changes (22003),
//     a lone surrogate escape (22P02), too deep (54001);
//   - text that is not json by PostgreSQL's parser: JSON.parse refuses it
//     too (valid UTF-8 only: JSON.parse reads strings, not bytes).
// Prints one line per disagreement, then "N agreed, N disagreed", and
// exits non-zero on any disagreement.
import readline from 'node:readline';
// the copy test/jcs installs (its package.json and lock pin the version)
import canonicalize from '../jcs/node_modules/canonicalize/lib/canonicalize.js';

const dec = new TextDecoder('utf-8', { fatal: true });
const b64 = (s) => (s === '-' ? Buffer.alloc(0) : Buffer.from(s, 'base64'));
const counts = { agreed: 0, disagreed: 0 };
const kinds = {};

function disagree(what, input, detail) {
  counts.disagreed++;
  const shown = input.length > 300 ? input.slice(0, 300) + '...' : input;
  console.log(`disagree: ${what}: ${JSON.stringify(shown)}${detail ? ' ' + detail : ''}`);
}

function agree(kind) {
  counts.agreed++;
  kinds[kind] = (kinds[kind] || 0) + 1;
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const [policy, inB64, result, outB64, json] = line.split('\t');
  if (json === undefined) continue;
  let input;
  try {
    input = dec.decode(b64(inB64));
  } catch {
    agree('not UTF-8');		// no JavaScript string to compare with
    continue;
  }
  let parsed;
  let parses = true;
  try {
    parsed = JSON.parse(input);
  } catch {
    parses = false;
  }
  if (result === 'ok') {
    if (!parses) {
      disagree('idem_gate accepted what JSON.parse refuses', input);
      continue;
    }
    let theirs;
    try {
      theirs = canonicalize(parsed);
    } catch (e) {
      disagree('idem_gate accepted what canonicalize refuses', input, String(e));
      continue;
    }
    const ours = dec.decode(b64(outB64));
    if (ours !== theirs) disagree('different canonical forms', input, `ours=${JSON.stringify(ours)} theirs=${JSON.stringify(theirs)}`);
    else agree(`same form (${policy})`);
    continue;
  }
  if (json === 'notjson') {
    if (parses && !input.includes('\u0000')) disagree(`PostgreSQL's json refused (${result}) what JSON.parse accepts`, input);
    else agree('both refuse');
    continue;
  }
  if (!parses) {
    disagree(`JSON.parse refuses json that PostgreSQL accepts (${result})`, input);
    continue;
  }
  switch (result) {
    case '22030':
    case '22003':
    case '54001':
    case '54000':
      agree(`refused ${result}`);
      break;
    case '22P02':
      if (/\\u[dD][89abAB][0-9a-fA-F]{2}|\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(input)) agree('refused 22P02 (surrogate)');
      else disagree('refused 22P02 without a surrogate escape', input);
      break;
    default:
      disagree(`refused with ${result}`, input);
  }
}
for (const [k, n] of Object.entries(kinds).sort()) console.log(`  ${n} ${k}`);
console.log(`${counts.agreed} agreed, ${counts.disagreed} disagreed`);
process.exit(counts.disagreed ? 1 : 0);
