// Peak RSS growth of attention at B1 H8 N16384 d64 (issue 4's memory target: at most 64 MB over the
// inputs and the output), causal and not. Usage: node benchmarks/tools/attention-memory.js
// Needs the compiled package (npm install). Reads /proc/self/status (Linux) for VmHWM.
'use strict';
const fs = require('node:fs');
const { attention } = require('../..');

function peakRssMB() {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}
function resetPeak() {
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
  try { fs.writeFileSync('/proc/self/clear_refs', '5'); } catch { /* not permitted: peaks accumulate */ }
}

const [B, H, N, d] = [1, 8, 16384, 64];
const n = B * H * N * d;
const q = { data: new Float32Array(n).fill(0.01), shape: [B, H, N, d] };
const k = { data: new Float32Array(n).fill(0.02), shape: [B, H, N, d] };
const v = { data: new Float32Array(n).fill(0.03), shape: [B, H, N, d] };
const out = { data: new Float32Array(n), shape: [B, H, N, d] };
out.data.fill(0); // touch every page so the output is part of the baseline
for (const causal of [false, true]) {
  resetPeak();
  const before = peakRssMB();
  const t0 = process.hrtime.bigint();
  attention(q, k, v, { causal, out });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const growth = peakRssMB() - before;
  console.log(`B${B} H${H} N${N} d${d} causal=${causal}: ${ms.toFixed(0)} ms, peak RSS growth over inputs + output ${growth.toFixed(1)} MB (out[0] = ${out.data[0].toFixed(4)})`);
}
