#!/usr/bin/env node
'use strict';
/**
 * The ViT block with its LayerNorm inside the QKV projection's packing (as
 * forward runs it) against the same block forced onto a separate LayerNorm
 * pass, alternated in bursts in one process (RESULTS.md, entry 65). Prints the
 * median of each, their ratio (< 1: the fused form is faster) and the largest
 * difference between their outputs (0: the same bits).
 *
 *   node benchmarks/layernorm-fusion-ab.js [batch=1] [rounds=40] [burst=5]
 *
 * Needs the compiled package (npm install). The separate pass is selected by
 * clearing the block's private `fusedNorm` before its first call, so its
 * workspace gets room for the normalized input.
 */
const m = require('..');

const [B = 1, rounds = 40, burst = 5] = process.argv.slice(2).map(Number);
const [T, D, H, dh] = [197, 768, 12, 64];
const rnd = (n, s = 0.05) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * s);
const x = { data: rnd(B * T * D, 2), shape: [B, T, D] };
const weights = {
  qkvWeight: { data: rnd(3 * D * D), shape: [3 * D, D] },
  qkvBias: { data: rnd(3 * D), shape: [3 * D] },
  outWeight: { data: rnd(D * D), shape: [D, D] },
  outBias: { data: rnd(D), shape: [D] },
};
const norm = { weight: { data: rnd(D, 0.5).map((v) => 1 + v), shape: [D] }, bias: { data: rnd(D, 0.3), shape: [D] } };
const separate = new m.MultiHeadSelfAttention({ dim: D, heads: H, dimHead: dh, weights, norm });
const fused = new m.MultiHeadSelfAttention({ dim: D, heads: H, dimHead: dh, weights, norm });
separate.fusedNorm = undefined;
const outOf = () => ({ data: new Float32Array(B * T * D), shape: [B, T, D] });
const runs = [
  { block: separate, out: outOf(), times: [] },
  { block: fused, out: outOf(), times: [] },
];
for (let r = 0; r < rounds; r++) {
  for (const run of r % 2 ? runs : [...runs].reverse()) {
    run.block.forward(x, { out: run.out }); // untimed: wakes the pool
    for (let i = 0; i < burst; i++) {
      const t0 = performance.now();
      run.block.forward(x, { out: run.out });
      run.times.push(performance.now() - t0);
    }
  }
}
const median = (v) => v.slice().sort((p, q) => p - q)[v.length >> 1];
const [a, b] = runs.map((run) => median(run.times));
let diff = 0;
for (let i = 0; i < runs[0].out.data.length; i++) diff = Math.max(diff, Math.abs(runs[0].out.data[i] - runs[1].out.data[i]));
console.log(
  `B${B}: separate LayerNorm ${a.toFixed(3)} ms, inside the QKV packing ${b.toFixed(3)} ms, ` +
    `ratio ${(b / a).toFixed(3)}, max |diff| ${diff}`,
);
