#!/usr/bin/env node
'use strict';
/**
 * Does KVCache.append of one token cost the same at every cache length?
 * LLaMA-3-8B's cache shape (8 kv heads, head dim 128, bf16 aside), filled to
 * 1k, 2k, 4k, 8k and 16k positions; at each, one token's k and v appended
 * and the cache truncated back, timed in rounds (min and median per append).
 * An append copies batch · kvHeads rows of headDim floats whatever the length.
 *
 *   node benchmarks/tools/kv-append.js [kvHeads = 8] [headDim = 128]
 */
const path = require('node:path');
const m = require(path.resolve(__dirname, '..', '..'));

const kvHeads = Number(process.argv[2] ?? 8);
const headDim = Number(process.argv[3] ?? 128);
const lengths = [1024, 2048, 4096, 8192, 16384];
const cache = new m.KVCache({ batch: 1, kvHeads, headDim, maxLength: lengths[lengths.length - 1] + 1 });
const block = (n) => m.tensor(Float32Array.from({ length: kvHeads * n * headDim }, (_, i) => Math.sin(i)), [1, kvHeads, n, headDim]);
const token = block(1);

console.log(`KVCache.append of one token, kvHeads ${kvHeads}, headDim ${headDim} (${2 * kvHeads * headDim * 4} bytes)`);
for (const length of lengths) {
  cache.append(block(length - cache.length), block(length - cache.length));
  const perCall = [];
  for (let round = 0; round < 7; round++) {
    const iters = 20000;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) {
      cache.append(token, token);
      cache.truncate(length);
    }
    perCall.push(Number(process.hrtime.bigint() - t0) / iters);
  }
  perCall.sort((a, b) => a - b);
  console.log(`length ${String(length).padStart(5)}: min ${perCall[0].toFixed(0)} ns, median ${perCall[3].toFixed(0)} ns per append + truncate`);
}
