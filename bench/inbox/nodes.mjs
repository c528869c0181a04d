// Where the inbox page's time goes, node by node: bench/inbox/run.sh with
// BENCH_NODES=1.  The page's workflow keeps no execution data (its
// settings: the Webhook node's output holds the operator's headers and the
// claims' payloads), so the bench imports a copy that keeps it, on its
// throwaway n8n only, and this reads back what n8n recorded of each run:
// every node's execution time, their sum, and the run's whole time.
//
//   node bench/inbox/nodes.mjs copy INBOX_JSON OUT_JSON
//       the page's workflow, keeping its successful and failed runs
//   node bench/inbox/nodes.mjs report ROWS_JSON FLATTED_DIR SKIP
//       ROWS_JSON: the executions, oldest first, as [{data, startedAt,
//       stoppedAt}] (execution_data joined to execution_entity); the first
//       SKIP are warm-up; FLATTED_DIR: n8n's own copy of the flatted
//       module, the format n8n stores execution data in (n8n's SQLite
//       database, on 2.8 and 2.41 alike)
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const [cmd, ...args] = process.argv.slice(2);
const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};

if (cmd === 'copy') {
  const [src, dst] = args;
  const w = JSON.parse(readFileSync(src, 'utf8'));
  w.settings = { ...w.settings, saveDataSuccessExecution: 'all', saveDataErrorExecution: 'all' };
  writeFileSync(dst, JSON.stringify(w));
} else if (cmd === 'report') {
  const [rowsFile, flattedDir, skip] = args;
  const { parse } = createRequire(import.meta.url)(flattedDir);
  const rows = JSON.parse(readFileSync(rowsFile, 'utf8') || '[]').slice(Number(skip));
  if (!rows.length) throw new Error('n8n recorded no run of the page');
  const byNode = new Map();
  const sums = [];
  const whole = [];
  let failed = 0;
  for (const r of rows) {
    const data = parse(r.data);
    if (data.resultData.error) failed += 1;
    let sum = 0;
    for (const [name, runs] of Object.entries(data.resultData.runData)) {
      for (const run of runs) {
        if (!byNode.has(name)) byNode.set(name, []);
        byNode.get(name).push(run.executionTime);
        sum += run.executionTime;
      }
    }
    sums.push(sum);
    whole.push(new Date(r.stoppedAt) - new Date(r.startedAt));
  }
  for (const [name, times] of byNode) console.log(`  ${name.padEnd(24)} ${median(times)} ms`);
  console.log(`  ${'all nodes'.padEnd(24)} ${median(sums)} ms; the run, start to end: ${median(whole)} ms (medians of ${rows.length} runs${failed ? `, ${failed} failed` : ''})`);
  if (failed) process.exitCode = 1;
} else {
  console.error('usage: nodes.mjs copy INBOX_JSON OUT_JSON | report ROWS_JSON FLATTED_DIR SKIP');
  process.exitCode = 2;
}
