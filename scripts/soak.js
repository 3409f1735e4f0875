#!/usr/bin/env node
'use strict';
/**
 * Soak test: many calls of every op, sync and async, on small shapes, watching
 * the process's memory for growth (a leak of native buffers, references or
 * scratch memory shows up here long before it hurts a server).
 *
 *   npm run soak                       (= node --expose-gc scripts/soak.js)
 *   node --expose-gc scripts/soak.js --calls 2000 --json soak.json
 *
 * --calls N   calls of each op in each mode (default 100,000): matmul, softmax,
 *             attention, layerNorm and a MultiHeadSelfAttention forward, each
 *             N times synchronously and N times asynchronously (64 in flight).
 * --json FILE also writes the figures as JSON.
 *
 * Memory is read after a warm-up (a tenth of the calls, at least 1,000, of
 * each op and mode) and a full gc (start), and after the last call and a full
 * gc (end); heapTotal (V8's reserved heap) is reported too, without a limit. The run fails (exit code 1) when any growth exceeds its
 * limit: RSS 32 MiB, heapUsed 16 MiB, external 8 MiB, arrayBuffers 8 MiB; or
 * when a call's result ever differs from the first result of the same op and
 * inputs. It loads the compiled package (dist/, built by npm install).
 */
const fs = require('node:fs');
const path = require('node:path');

const MiB = 1024 * 1024;
const LIMITS = { rss: 32 * MiB, heapUsed: 16 * MiB, external: 8 * MiB, arrayBuffers: 8 * MiB };
const IN_FLIGHT = 64;
/** Warm-up calls of each op and mode: a tenth of the run, at least 1,000, so V8's heap has grown to its working size. */
const warmupCalls = (calls) => Math.max(1000, Math.floor(calls / 10));

function parseArgs(argv) {
  const args = { calls: 100000, json: null };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === '--calls') {
      args.calls = Number(value);
      if (!Number.isSafeInteger(args.calls) || args.calls < 1) throw new Error(`--calls takes a positive integer, received ${value}`);
      i++;
    } else if (flag === '--json') {
      if (!value) throw new Error('--json takes a file name');
      args.json = value;
      i++;
    } else {
      throw new Error(`unknown argument ${flag} (use --calls N, --json FILE)`);
    }
  }
  return args;
}

/** Deterministic inputs in [-1, 1). */
function filled(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s / 4294967296) * 2 - 1;
  }
  return a;
}

/**
 * The ops: each `run(mode, i)` makes one call (call i alternates between a
 * fresh result and a reused `out`, and between option sets) and returns the
 * output's data, or a promise of it.
 */
function makeOps(m) {
  const t = (shape, seed) => m.tensor(filled(shape.reduce((p, d) => p * d, 1), seed), shape);
  const a = t([8, 32], 1);
  const b = t([32, 16], 2);
  const packedB = m.prepack(b);
  const bias = t([16], 3);
  const x = t([8, 64], 4);
  const gamma = t([64], 5);
  const beta = t([64], 6);
  const [q, k, v] = [7, 8, 9].map((seed) => t([1, 2, 16, 16], seed));
  const mask = t([16, 16], 10);
  const padding = new Uint8Array(16).map((_, i) => (i % 5 === 4 ? 1 : 0));
  const dim = 32;
  const block = new m.MultiHeadSelfAttention({
    dim,
    heads: 4,
    weights: { qkvWeight: t([3 * dim, dim], 11), qkvBias: t([3 * dim], 12), outWeight: t([dim, dim], 13), outBias: t([dim], 14) },
    norm: { weight: t([dim], 15), bias: t([dim], 16) },
  });
  const tokens = t([1, 8, dim], 17);

  /** A reusable output per op and mode; async calls in flight at once each get their own. */
  const outs = new Map();
  const outFor = (key, slot, shape) => {
    const id = `${key}/${slot % IN_FLIGHT}`;
    if (!outs.has(id)) outs.set(id, { data: new Float32Array(shape.reduce((p, d) => p * d, 1)), shape });
    return outs.get(id);
  };
  const pick = (r) => (r.output ? r.output.data : r.data);
  const call = (sync, async) => (mode, i) => (mode === 'sync' ? pick(sync(i)) : async(i).then(pick));

  return {
    matmul: call(
      (i) => m.matmul(a, i % 4 < 2 ? b : packedB, { c: bias, out: i % 2 ? outFor('mm-s', 0, [8, 16]) : undefined }),
      (i) => m.matmulAsync(a, i % 4 < 2 ? b : packedB, { c: bias, out: i % 2 ? outFor('mm-a', i, [8, 16]) : undefined }),
    ),
    softmax: call(
      (i) => m.softmax(x, { scale: 0.5, out: i % 2 ? outFor('sm-s', 0, [8, 64]) : undefined }),
      (i) => m.softmaxAsync(x, { scale: 0.5, out: i % 2 ? outFor('sm-a', i, [8, 64]) : undefined }),
    ),
    attention: call(
      (i) => m.attention(q, k, v, { causal: true, mask: i % 4 < 2 ? mask : undefined, keyPaddingMask: padding, out: i % 2 ? outFor('at-s', 0, [1, 2, 16, 16]) : undefined }),
      (i) => m.attentionAsync(q, k, v, { causal: true, mask: i % 4 < 2 ? mask : undefined, keyPaddingMask: padding, out: i % 2 ? outFor('at-a', i, [1, 2, 16, 16]) : undefined }),
    ),
    layerNorm: call(
      (i) => m.layerNorm(x, { weight: gamma, bias: beta, out: i % 2 ? outFor('ln-s', 0, [8, 64]) : undefined }),
      (i) => m.layerNormAsync(x, { weight: gamma, bias: beta, out: i % 2 ? outFor('ln-a', i, [8, 64]) : undefined }),
    ),
    'block forward': call(
      (i) => block.forward(tokens, { causal: true, returnWeights: i % 4 === 3, out: i % 2 ? outFor('bf-s', 0, [1, 8, dim]) : undefined }),
      (i) => block.forwardAsync(tokens, { causal: true, returnWeights: i % 4 === 3, out: i % 2 ? outFor('bf-a', i, [1, 8, dim]) : undefined }),
    ),
  };
}

const sameBits = (x, y) => Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));

/**
 * Makes `calls` calls of one op in one mode; checks every 997th result (and
 * the last) against the first call made with the same options (they repeat
 * every 4 calls). Async calls run IN_FLIGHT at a time.
 */
async function soakOne(run, mode, calls) {
  const firsts = [];
  for (let i = 0; i < 4; i++) firsts.push((await run(mode, i)).slice());
  let mismatches = 0;
  const check = (data, i) => {
    if ((i % 997 === 0 || i === calls - 1) && !sameBits(data, firsts[i % 4])) mismatches++;
  };
  const started = process.hrtime.bigint();
  if (mode === 'sync') {
    for (let i = 0; i < calls; i++) check(run(mode, i), i);
  } else {
    for (let base = 0; base < calls; base += IN_FLIGHT) {
      const n = Math.min(IN_FLIGHT, calls - base);
      const results = await Promise.all(Array.from({ length: n }, (_, j) => run(mode, base + j)));
      results.forEach((data, j) => check(data, base + j));
    }
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { calls, seconds, mismatches };
}

async function settledMemory() {
  for (let i = 0; i < 4; i++) {
    global.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapTotal, heapUsed, external, arrayBuffers };
}

const mib = (bytes) => (bytes / MiB).toFixed(2);

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc (npm run soak does)');
  const m = require(path.resolve(__dirname, '..'));
  const ops = makeOps(m);
  const inf = m.info();
  console.log(`mhsa soak: ${args.calls} calls per op, sync and async (node ${process.version}, isa ${inf.isa}, ${inf.threads} threads)`);

  const warmup = warmupCalls(args.calls);
  for (const run of Object.values(ops)) await soakOne(run, 'sync', warmup).then(() => soakOne(run, 'async', warmup));
  const start = await settledMemory();

  const timings = [];
  console.log('op              mode   calls        seconds   us/call  mismatches');
  for (const [name, run] of Object.entries(ops)) {
    for (const mode of ['sync', 'async']) {
      const r = await soakOne(run, mode, args.calls);
      timings.push({ op: name, mode, ...r });
      // Seconds to four decimals: 2000 calls of a small op take a few milliseconds.
      const perCall = ((r.seconds * 1e6) / r.calls).toFixed(2);
      console.log(`${name.padEnd(15)} ${mode.padEnd(6)} ${String(r.calls).padEnd(11)} ${r.seconds.toFixed(4).padStart(8)}   ${perCall.padStart(7)}  ${r.mismatches}`);
    }
  }
  const end = await settledMemory();

  const memory = {};
  let pass = timings.every((t) => t.mismatches === 0);
  console.log('memory (MiB)    start      end   growth    limit');
  for (const key of Object.keys(start)) {
    const growth = end[key] - start[key];
    const limit = LIMITS[key];
    const ok = limit === undefined || growth <= limit;
    pass = pass && ok;
    memory[key] = { start: start[key], end: end[key], growth, limit: limit ?? null, ok };
    const limitText = limit === undefined ? '       -' : mib(limit).padStart(8);
    console.log(`${key.padEnd(13)} ${mib(start[key]).padStart(8)} ${mib(end[key]).padStart(8)} ${mib(growth).padStart(8)} ${limitText}${ok ? '' : '  EXCEEDED'}`);
  }
  console.log(pass ? 'soak: PASS' : 'soak: FAIL');
  if (args.json) {
    const report = { calls: args.calls, warmup, node: process.version, isa: inf.isa, threads: inf.threads, inFlight: IN_FLIGHT, timings, memory, pass };
    fs.writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`);
  }
  process.exitCode = pass ? 0 : 1;
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exitCode = 1;
});
