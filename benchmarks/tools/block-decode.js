#!/usr/bin/env node
'use strict';
/**
 * The block's decode step against the time to stream what it must read:
 * MultiHeadSelfAttention as LLaMA-3-8B's attention layer (dim 4096, 32 heads,
 * 8 kv heads of 128, RMSNorm, RoPE) taking one token against a KVCache of
 * `length` positions. A step reads the projection weights (Wqkv 6144 x 4096,
 * Wo 4096 x 4096) and the cache's keys and values once: 201 MB at length
 * 4096. Each round measures the read bandwidth (the CLI's probe) and then
 * times steps (each followed by a truncate back), and prints the median step
 * over the time those bytes take at that bandwidth. With dtype bf16 the
 * weights and the cache are bf16: 101 MB at length 4096.
 *
 *   node benchmarks/tools/block-decode.js [length = 4096] [rounds = 3] [threads = 2] [dtype = float32 | bf16]
 */
const path = require('node:path');
const root = path.resolve(__dirname, '..', '..');
const m = require(root);
const { native } = require(path.join(root, 'dist', 'lib', 'native.js'));

const length = Number(process.argv[2] ?? 4096);
const rounds = Number(process.argv[3] ?? 3);
const threads = Number(process.argv[4] ?? 2);
const dtype = process.argv[5] ?? 'float32';
m.setNumThreads(threads);
const dim = 4096, heads = 32, kvHeads = 8, dimHead = 128;
const rows = (heads + 2 * kvHeads) * dimHead;
const values = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 0.02);
const block = new m.MultiHeadSelfAttention({
  dim, heads, kvHeads, dimHead,
  weights: { qkvWeight: m.tensor(values(rows * dim, 1), [rows, dim]), outWeight: m.tensor(values(dim * dim, 2), [dim, dim]) },
  norm: { type: 'rms', weight: m.tensor(new Float32Array(dim).fill(1), [dim]) },
  rope: { theta: 500000 },
  dtype,
});
const cache = new m.KVCache({ batch: 1, kvHeads, headDim: dimHead, maxLength: length + 1, dtype });
const kv = m.tensor(values(kvHeads * length * dimHead, 3), [1, kvHeads, length, dimHead]);
cache.append(kv, kv);
const x = m.tensor(values(dim, 4), [1, 1, dim]);
const bytes = (rows * dim + dim * dim + 2 * kvHeads * length * dimHead) * (dtype === 'bf16' ? 2 : 4);

console.log(`${block}, ${dtype} cache ${length} positions, ${threads} threads: ${(bytes / 1e6).toFixed(0)} MB per step`);
for (let round = 0; round < rounds; round++) {
  const gbs = native.calibrate(threads, 1000, 512 * 1024 * 1024).gbs;
  const times = [];
  for (let i = 0; i < 21; i++) {
    const t0 = process.hrtime.bigint();
    block.forward(x, { cache, causal: true });
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    cache.truncate(length);
  }
  times.sort((a, b) => a - b);
  const floor = bytes / (gbs * 1e6);
  console.log(`read bandwidth ${gbs.toFixed(1)} GB/s -> streaming ${floor.toFixed(2)} ms; step median ${times[10].toFixed(2)} ms, min ${times[0].toFixed(2)} ms: ${(times[10] / floor).toFixed(2)}x`);
}
