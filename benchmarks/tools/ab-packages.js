#!/usr/bin/env node
'use strict';
/**
 * A/B of MultiHeadSelfAttention.forward between two whole checkouts of the
 * package (each its own lib/ and addon) in one process, for changes to the JS
 * side or to the binding's entry points, which benchmarks/tools/ab-addons.js cannot
 * compare (it runs one dist/ against two addons).
 *
 *   node benchmarks/tools/ab-packages.js A-dir B-dir [batch,tokens,dim,heads,dimHead=1,197,768,12,64] [rounds=40] [burst=5]
 *
 * Each directory must be built (`npm install`, or `node scripts/build-addon.js`
 * and `npx tsc -p tsconfig.build.json`); a worktree of another commit with
 * node_modules linked from this one will do. AB_ASYNC=1 times forwardAsync
 * instead. The two blocks share their weights (seed-004 layout with LayerNorm,
 * QKV bias and output projection) and run in alternating bursts, the order
 * swapped every round, each burst after one untimed call. Prints p25/p50 of
 * each, the ratio of the medians (B/A < 1: B is faster) and the largest
 * difference between their outputs. Both addons define the same per-thread
 * scratch symbol (see ab-addons.js): compare builds whose native/kernels/scratch.h agree.
 */
const path = require('node:path');

const [dirA, dirB, dims = '1,197,768,12,64', roundsArg = '40', burstArg = '5'] = process.argv.slice(2);
if (!dirA || !dirB) {
  console.error('usage: node benchmarks/tools/ab-packages.js A-dir B-dir [batch,tokens,dim,heads,dimHead] [rounds] [burst]');
  process.exit(2);
}
const A = require(path.resolve(dirA));
const B = require(path.resolve(dirB));
const [batch, tokens, dim, heads, dimHead] = dims.split(',').map(Number);
const inner = heads * dimHead;
const rounds = Number(roundsArg);
const burst = Number(burstArg);
const asyncMode = process.env.AB_ASYNC === '1';

const rnd = (n, s = 0.05) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * s);
const x = { data: rnd(batch * tokens * dim, 1), shape: [batch, tokens, dim] };
const weights = {
  qkvWeight: { data: rnd(3 * inner * dim), shape: [3 * inner, dim] },
  qkvBias: { data: rnd(3 * inner), shape: [3 * inner] },
  outWeight: { data: rnd(dim * inner), shape: [dim, inner] },
  outBias: { data: rnd(dim), shape: [dim] },
};
const norm = { weight: { data: rnd(dim, 1).map((v) => 1 + v), shape: [dim] }, bias: { data: rnd(dim), shape: [dim] } };
const blocks = [A, B].map((m) => new m.MultiHeadSelfAttention({ dim, heads, dimHead, weights, norm }));
const outs = blocks.map(() => ({ data: new Float32Array(batch * tokens * dim), shape: [batch, tokens, dim] }));
const run = (j) => (asyncMode ? blocks[j].forwardAsync(x, { out: outs[j] }) : blocks[j].forward(x, { out: outs[j] }));

(async () => {
  const times = [[], []];
  for (let i = 0; i < 3; i++) for (const j of [0, 1]) await run(j);
  for (let r = 0; r < rounds; r++) {
    for (const j of r % 2 ? [1, 0] : [0, 1]) {
      await run(j);
      for (let k = 0; k < burst; k++) {
        const t0 = process.hrtime.bigint();
        await run(j);
        times[j].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
  }
  const q = (v, f) => v.slice().sort((p, s) => p - s)[Math.floor(v.length * f)];
  let maxDiff = 0;
  for (let i = 0; i < outs[0].data.length; i++) maxDiff = Math.max(maxDiff, Math.abs(outs[0].data[i] - outs[1].data[i]));
  const [a, b] = times;
  console.log(
    `block B${batch} T${tokens} D${dim} H${heads}x${dimHead}${asyncMode ? ' async' : ''}, ${rounds} rounds x ${burst}: ` +
      `A p25 ${q(a, 0.25).toFixed(3)} p50 ${q(a, 0.5).toFixed(3)} | B p25 ${q(b, 0.25).toFixed(3)} p50 ${q(b, 0.5).toFixed(3)} ms | ` +
      `B/A p50 ${(q(b, 0.5) / q(a, 0.5)).toFixed(3)} | max |A-B| ${maxDiff.toExponential(1)}`,
  );
})();
