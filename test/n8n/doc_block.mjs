#!/usr/bin/env node
// Prints a command block of a document, so that the tests run the documented
// commands themselves instead of a copy of them.  A block is marked by an HTML
// comment on the line just before its fence:
//
//   <!-- run: NAME -->
//   ```sh
//   ...
//   ```
//
//   node test/n8n/doc_block.mjs docs/n8n.md NAME   # prints the block's lines
//
// A missing, empty or repeated NAME is an error, so renaming a block in the
// docs fails the test that runs it.
import { readFileSync } from 'node:fs';

export function docBlocks(file) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const blocks = new Map();
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s*<!--\s*run:\s*([\w.-]+)\s*-->\s*$/.exec(lines[i]);
    if (!m) continue;
    const fence = /^(\s*)(```+)/.exec(lines[i + 1] ?? '');
    if (!fence) throw new Error(`${file}:${i + 1}: run:${m[1]} is not followed by a fenced block`);
    const indent = fence[1].length;
    const body = [];
    let j = i + 2;
    for (; j < lines.length && !/^\s*```+\s*$/.test(lines[j]); j++) body.push(lines[j].slice(Math.min(indent, /^\s*/.exec(lines[j])[0].length)));
    if (j === lines.length) throw new Error(`${file}:${i + 2}: the run:${m[1]} block is not closed`);
    if (blocks.has(m[1])) throw new Error(`${file}: run:${m[1]} is marked twice`);
    if (body.join('').trim() === '') throw new Error(`${file}: run:${m[1]} is empty`);
    blocks.set(m[1], body.join('\n') + '\n');
  }
  return blocks;
}

export function docBlock(file, name) {
  const b = docBlocks(file).get(name);
  if (b === undefined) throw new Error(`${file}: no block marked <!-- run: ${name} -->`);
  return b;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file, name] = process.argv.slice(2);
  if (!file || !name) {
    console.error('usage: doc_block.mjs FILE NAME');
    process.exit(2);
  }
  try {
    process.stdout.write(docBlock(file, name));
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
