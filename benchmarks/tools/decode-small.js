#!/usr/bin/env node
'use strict';
/**
 * A small decoder layer's decode step against one attention call over the
 * same cache: what a step costs beyond its math. MultiHeadSelfAttention with
 * dim 256, 4 heads of 64, RMSNorm and RoPE takes one token against a KVCache
 * holding `length` positions; the attention call is attention(q, cache.keys,
 * cache.values) with one query. Both are timed in batches of calls, per call,
 * in alternating rounds; the medians and their ratio are printed.
 *
 *   node benchmarks/tools/decode-small.js [length = 64] [threads = 2] [dtype = float32 | bf16]
 */
const path = require('node:path');
const m = require(path.resolve(__dirname, '..', '..'));

const length = Number(process.argv[2] ?? 64);
const threads = Number(process.argv[3] ?? 2);
const dtype = process.argv[4] ?? 'float32';
m.setNumThreads(threads);
const dim = 256, heads = 4, dimHead = 64;
const values = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 0.05);
const block = new m.MultiHeadSelfAttention({
  dim, heads, dimHead,
  weights: { qkvWeight: m.tensor(values(3 * dim * dim, 1), [3 * dim, dim]), outWeight: m.tensor(values(dim * dim, 2), [dim, dim]) },
  norm: { type: 'rms', weight: m.tensor(new Float32Array(dim).fill(1), [dim]) },
  rope: {},
  dtype,
});
const cache = new m.KVCache({ batch: 1, kvHeads: heads, headDim: dimHead, maxLength: length + 1, dtype });
const kv = m.tensor(values(heads * length * dimHead, 3), [1, heads, length, dimHead]);
cache.append(kv, kv);
const x = m.tensor(values(dim, 4), [1, 1, dim]);
const q = m.tensor(values(heads * dimHead, 5), [1, heads, 1, dimHead]);
const out = m.tensor(new Float32Array(dim), [1, 1, dim]);
const attnOut = m.tensor(new Float32Array(heads * dimHead), [1, heads, 1, dimHead]);

const step = () => {
  block.forward(x, { cache, causal: true, out });
  cache.truncate(length);
};
const attend = () => m.attention(q, cache.keys, cache.values, { out: attnOut });

function perCall(fn, iters) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) fn();
  return Number(process.hrtime.bigint() - t0) / 1e3 / iters;
}
for (let i = 0; i < 2000; i++) { step(); attend(); }
const steps = [], calls = [];
for (let round = 0; round < 15; round++) {
  steps.push(perCall(step, 2000));
  calls.push(perCall(attend, 2000));
}
const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
const s = median(steps), a = median(calls);
console.log(`${block}, ${dtype} cache ${length}, ${threads} threads: step ${s.toFixed(1)} µs, one attention call ${a.toFixed(1)} µs: ${(s / a).toFixed(2)}x`);
