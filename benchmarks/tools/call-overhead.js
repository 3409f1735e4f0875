#!/usr/bin/env node
'use strict';
/**
 * Per-call cost of a small matmul from JS, split into its parts:
 *   addon      the raw addon call with the arguments lib/ passed it (no checks, no descriptor built)
 *   with out   matmul(a, b, { out }): the API with its checks, no allocation
 *   allocating matmul(a, b): the same plus the result's Float32Array
 * and, for reference, a bare `new Float32Array(n * n)`.
 *
 *   node benchmarks/tools/call-overhead.js [n = 64] [threads = 2]
 *
 * Seven timed rounds of 20,000 calls each after 2,000 warm-up calls; min and
 * median per call. Run it twice, or alternate builds (MHSA_ADDON=path.node),
 * before trusting a difference: this host's speed drifts.
 */
const path = require('node:path');
const root = path.resolve(__dirname, '..', '..');
const m = require(root);
const { native } = require(path.join(root, 'dist', 'lib', 'native.js'));

const n = Number(process.argv[2] ?? 64);
m.setNumThreads(Number(process.argv[3] ?? 2));
const random = (len) => Float32Array.from({ length: len }, (_, i) => Math.sin(i * 12.9898) * 0.5);
const a = m.tensor(random(n * n), [n, n]);
const b = m.tensor(random(n * n), [n, n]);
const out = m.tensor(new Float32Array(n * n), [n, n]);

function bench(label, f, iters = 20000) {
  for (let i = 0; i < 2000; i++) f();
  const perCall = [];
  for (let r = 0; r < 7; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) f();
    perCall.push(Number(process.hrtime.bigint() - t) / iters / 1000);
  }
  perCall.sort((x, y) => x - y);
  console.log(`${label.padEnd(34)} min ${perCall[0].toFixed(2).padStart(7)} us   median ${perCall[3].toFixed(2).padStart(7)} us`);
}

/** The arguments one matmul(a, b, { out }) hands the addon (its descriptor copied: lib/ reuses the buffer). */
function addonArgs() {
  const call = native.matmul;
  let args;
  native.matmul = (...xs) => { args = xs.map((x) => (x instanceof Float64Array ? Float64Array.from(x) : x)); };
  try {
    m.matmul(a, b, { out });
  } finally {
    native.matmul = call;
  }
  return args;
}

const args = addonArgs();
console.log(`matmul ${n}x${n}x${n}, ${m.getNumThreads()} threads, ${m.info().isa}`);
bench('addon', () => native.matmul(...args));
bench('matmul(a, b, { out })', () => m.matmul(a, b, { out }));
bench('matmul(a, b)', () => m.matmul(a, b));
let keep;
bench(`new Float32Array(${n * n})`, () => { keep = new Float32Array(n * n); });
void keep;
