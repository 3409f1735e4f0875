// Summarizes an onnxruntime profile (written by the bench with MHSA_BENCH_ORT_PROFILE=prefix):
// per node, the median time of its kernel per run and its share of the run.
// Usage: node benchmarks/tools/ort-profile.js <profile.json>
const fs = require('node:fs');

const file = process.argv[2];
if (!file) {
  console.error('usage: node benchmarks/tools/ort-profile.js <onnxruntime profile .json>');
  process.exit(2);
}
const events = JSON.parse(fs.readFileSync(file, 'utf8'));
const byNode = new Map();
let runs = 0;
for (const e of events) {
  if (e.cat === 'Session' && e.name === 'model_run') runs++;
  if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
  const name = `${e.name.replace(/_kernel_time$/, '')} (${e.args?.op_name ?? '?'})`;
  if (!byNode.has(name)) byNode.set(name, []);
  byNode.get(name).push(e.dur / 1000);
}
const median = (a) => a.slice().sort((p, q) => p - q)[a.length >> 1];
const rows = [...byNode].map(([name, t]) => ({ name, ms: median(t), calls: t.length }));
const total = rows.reduce((s, r) => s + r.ms, 0);
console.log(`${file}: ${runs} runs; per node, the median kernel time of one run`);
for (const r of rows) console.log(`${r.name.padEnd(40)} ${r.ms.toFixed(3).padStart(8)} ms  ${((100 * r.ms) / total).toFixed(0).padStart(3)} %  (${r.calls} calls)`);
console.log(`${'sum'.padEnd(40)} ${total.toFixed(3).padStart(8)} ms`);
