#!/usr/bin/env node
'use strict';
/**
 * What a result costs when the call allocates it instead of writing into `out`.
 *
 *   node benchmarks/tools/out-vs-allocate.js [rounds = 20]            both forms in alternating bursts
 *   node benchmarks/tools/out-vs-allocate.js [rounds = 20] allocate   only the allocating form
 *   node benchmarks/tools/out-vs-allocate.js [rounds = 20] out        only the `out` form
 *
 * A result of 64 KiB or more comes from the result pool (docs/design/result-pool.md):
 * memory of results already collected, so what the allocating form still pays
 * is the garbage collection that gives blocks back and their rotation through
 * the cache. Alternating bursts in one process show the steady state; a process
 * that only allocates (the second form, against the third run right after it)
 * shows a script's. MHSA_RESULT_POOL_BYTES=0 gives the plain allocation to
 * compare with. Prints the median ms per call of each op.
 */
const path = require('node:path');
const m = require(path.resolve(__dirname, '..', '..'));

const rounds = Number(process.argv[2] || 20);
const only = process.argv[3];
if (!(rounds > 0) || (only !== undefined && only !== 'out' && only !== 'allocate')) {
  console.error('usage: node benchmarks/tools/out-vs-allocate.js [rounds = 20] [out|allocate]');
  process.exit(2);
}
const burst = 5;
const random = (n, s = 1) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * s);
const t = (data, shape) => m.tensor(data, shape);

const ops = [];
function add(name, shape, call) {
  const out = t(new Float32Array(shape.reduce((a, b) => a * b, 1)), shape);
  ops.push({ name, allocate: () => call(undefined), out: () => call(out), times: { allocate: [], out: [] } });
}
for (const n of [197, 512]) {
  const shape = [1, 12, n, 64];
  const [q, k, v] = [0, 1, 2].map(() => t(random(12 * n * 64), shape));
  add(`attention B1 H12 N${n}`, shape, (out) => m.attention(q, k, v, out ? { out } : undefined));
}
{
  const a = t(random(197 * 768), [197, 768]);
  const b = t(random(768 * 2304), [768, 2304]);
  add('matmul 197x768x2304', [197, 2304], (out) => m.matmul(a, b, out ? { out } : undefined));
}
{
  const x = t(random(6144 * 512, 8), [6144, 512]);
  add('softmax 6144x512', [6144, 512], (out) => m.softmax(x, out ? { out } : undefined));
}
{
  const dim = 768;
  const block = new m.MultiHeadSelfAttention({
    dim,
    heads: 12,
    dimHead: 64,
    weights: {
      qkvWeight: t(random(3 * dim * dim, 0.05), [3 * dim, dim]),
      outWeight: t(random(dim * dim, 0.05), [dim, dim]),
      outBias: t(random(dim), [dim]),
    },
    norm: { weight: t(new Float32Array(dim).fill(1), [dim]) },
  });
  const x = t(random(197 * dim), [1, 197, dim]);
  add('block B1 (ViT-B/16)', [1, 197, dim], (out) => block.forward(x, out ? { out } : undefined));
}

const forms = only ? [only] : ['out', 'allocate'];
for (const op of ops) for (let i = 0; i < 20; i++) for (const f of forms) op[f]();
for (let round = 0; round < rounds; round++) {
  for (const op of ops) {
    for (const f of round % 2 ? forms.slice().reverse() : forms) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < burst; i++) op[f]();
      op.times[f].push(Number(process.hrtime.bigint() - t0) / 1e6 / burst);
    }
  }
}
const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];
for (const op of ops) {
  const cells = forms.map((f) => `${f} ${median(op.times[f]).toFixed(3)} ms`);
  const ratio = forms.length === 2 ? `  allocate/out ${(median(op.times.allocate) / median(op.times.out)).toFixed(3)}` : '';
  console.log(`${op.name.padEnd(24)} ${cells.join('  ')}${ratio}`);
}
