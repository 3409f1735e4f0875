'use strict';
/**
 * A seeded mix of small ops of every kind (matmul, softmax, attention with its
 * options, layerNorm, a MultiHeadSelfAttention forward), shared by the
 * concurrency test, its worker_threads and the GC child process.
 *
 * An op is a plain record of numbers, flags and Float32Arrays, so it crosses
 * postMessage, and the same seed always gives the same ops: a worker can send
 * back only its results and the main thread rebuilds the ops to check them.
 * callOp(m, op, mode) runs one op through the package `m` (lib/ under jest,
 * dist/ in a worker or a child process) on fresh copies of its inputs, so an
 * async call's inputs are referenced by nothing but that call.
 */

/** A seeded generator of uniform floats in [0, 1) (an LCG: the mix needs variety, not quality). */
function makeRng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

function randomArray(rng, n, scale = 1) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (rng() * 2 - 1) * scale;
  return a;
}

const intIn = (rng, lo, hi) => lo + Math.floor(rng() * (hi - lo + 1));
const oneOf = (rng, items) => items[Math.floor(rng() * items.length)];
const numel = (shape) => shape.reduce((p, d) => p * d, 1);

/** The block every mix uses: dim 16, 4 heads of 4, pre-LayerNorm, biases, output projection. */
const BLOCK_DIM = 16;
const BLOCK_HEADS = 4;

function blockWeights(seed) {
  const rng = makeRng(seed ^ 0x5bd1e995);
  const d = BLOCK_DIM;
  return {
    qkvWeight: randomArray(rng, 3 * d * d, 0.5),
    qkvBias: randomArray(rng, 3 * d, 0.2),
    outWeight: randomArray(rng, d * d, 0.25),
    outBias: randomArray(rng, d, 0.2),
    normWeight: randomArray(rng, d, 0.5).map((v) => 1 + v),
    normBias: randomArray(rng, d, 0.2),
  };
}

function makeBlock(m, w) {
  const d = BLOCK_DIM;
  return new m.MultiHeadSelfAttention({
    dim: d,
    heads: BLOCK_HEADS,
    weights: {
      qkvWeight: { data: w.qkvWeight, shape: [3 * d, d] },
      qkvBias: { data: w.qkvBias, shape: [3 * d] },
      outWeight: { data: w.outWeight, shape: [d, d] },
      outBias: { data: w.outBias, shape: [d] },
    },
    norm: { weight: { data: w.normWeight, shape: [d] }, bias: { data: w.normBias, shape: [d] } },
  });
}

function matmulOp(rng) {
  const M = intIn(rng, 1, 24);
  const K = intIn(rng, 1, 24);
  const N = intIn(rng, 1, 24);
  const packB = rng() < 0.2;
  const batch = intIn(rng, 2, 3);
  const aBatch = oneOf(rng, [[], [batch]]);
  const bBatch = packB ? [] : oneOf(rng, [[], [batch], [1]]);
  const transposeA = rng() < 0.3;
  const transposeB = !packB && rng() < 0.3;
  const aShape = [...aBatch, ...(transposeA ? [K, M] : [M, K])];
  const bShape = [...bBatch, ...(transposeB ? [N, K] : [K, N])];
  const resultBatch = aBatch.length > 0 ? aBatch : bBatch;
  const op = {
    kind: 'matmul', a: randomArray(rng, numel(aShape)), aShape, b: randomArray(rng, numel(bShape)), bShape,
    transposeA, transposeB, packB, alpha: oneOf(rng, [1, 0.5, -2]), resultShape: [...resultBatch, M, N],
  };
  const c = rng();
  if (c < 0.3) op.cShape = [N];
  else if (c < 0.5) op.cShape = op.resultShape;
  if (op.cShape) {
    op.c = randomArray(rng, numel(op.cShape));
    op.beta = oneOf(rng, [1, 0.25]);
  }
  return op;
}

function softmaxOp(rng) {
  const shape = [intIn(rng, 1, 8), intIn(rng, 1, 80)];
  const x = randomArray(rng, numel(shape), 6);
  for (let i = 0; i < x.length; i++) if (rng() < 0.05) x[i] = -Infinity;
  return { kind: 'softmax', x, shape, scale: oneOf(rng, [undefined, 0.5, 2]), inPlace: rng() < 0.4 };
}

function attentionOp(rng) {
  const layout = oneOf(rng, ['bhsd', 'bshd', 'bhds', '3d']);
  const B = intIn(rng, 1, 2);
  const kvHeads = intIn(rng, 1, 2);
  const heads = kvHeads * intIn(rng, 1, 2);
  const Sq = intIn(rng, 1, 12);
  const Skv = intIn(rng, 1, 12);
  const D = oneOf(rng, [1, 4, 8, 16]);
  const Dv = rng() < 0.3 ? oneOf(rng, [2, 8]) : D;
  const shapeOf = (h, s, d) =>
    layout === 'bhsd' ? [B, h, s, d] : layout === 'bshd' ? [B, s, h, d] : layout === 'bhds' ? [B, h, d, s] : [B, s, h * d];
  const op = {
    kind: 'attention', layout, heads, kvHeads, B, Sq, Skv,
    qShape: shapeOf(heads, Sq, D), kShape: shapeOf(kvHeads, Skv, D), vShape: shapeOf(kvHeads, Skv, Dv),
    causal: rng() < 0.4, returnWeights: rng() < 0.3, scale: rng() < 0.3 ? oneOf(rng, [0.1, 0.7]) : undefined,
  };
  op.q = randomArray(rng, numel(op.qShape), 2);
  op.k = randomArray(rng, numel(op.kShape), 2);
  op.v = randomArray(rng, numel(op.vShape));
  if (rng() < 0.3) {
    op.maskShape = oneOf(rng, [[Sq, Skv], [B, 1, Sq, Skv], [1, heads, 1, Skv]]);
    op.mask = randomArray(rng, numel(op.maskShape), 2).map((v) => (rng() < 0.1 ? -Infinity : v));
  }
  if (rng() < 0.3) op.keyPaddingMask = new Uint8Array(B * Skv).map(() => (rng() < 0.25 ? 1 : 0));
  return op;
}

function layerNormOp(rng) {
  const dim = intIn(rng, 1, 64);
  const shape = [intIn(rng, 1, 8), dim];
  return {
    kind: 'layerNorm', x: randomArray(rng, numel(shape), 3), shape,
    weight: rng() < 0.6 ? randomArray(rng, dim).map((v) => 1 + v) : undefined,
    bias: rng() < 0.6 ? randomArray(rng, dim) : undefined,
    eps: oneOf(rng, [undefined, 1e-3, 0.1]), inPlace: rng() < 0.4,
  };
}

function blockOp(rng) {
  const tokens = intIn(rng, 1, 12);
  const batch = intIn(rng, 1, 2);
  const twoD = rng() < 0.25;
  const shape = twoD ? [tokens, BLOCK_DIM] : [batch, tokens, BLOCK_DIM];
  const rows = twoD ? 1 : batch;
  const op = { kind: 'block', x: randomArray(rng, numel(shape), 2), shape, causal: rng() < 0.4, returnWeights: rng() < 0.3 };
  if (rng() < 0.3) op.keyPaddingMask = new Uint8Array(rows * tokens).map(() => (rng() < 0.25 ? 1 : 0));
  return op;
}

const MAKERS = [matmulOp, softmaxOp, attentionOp, layerNormOp, blockOp];

/** `count` ops cycling through the five kinds, each drawn from the seeded generator. */
function makeOps(seed, count) {
  const rng = makeRng(seed);
  return Array.from({ length: count }, (_, i) => MAKERS[i % MAKERS.length](rng));
}

const copy = (a) => (a === undefined ? undefined : a.slice());
const tensorOf = (data, shape) => (data === undefined ? undefined : { data: data.slice(), shape: [...shape] });

/** { output, weights? } from an op's return value (a tensor, or { output, weights }). */
function normalize(r) {
  return 'output' in r ? { output: r.output.data, weights: r.weights.data } : { output: r.data };
}

/**
 * Calls one op: mode 'sync' or 'async' (then it returns a promise). `block`
 * is the MultiHeadSelfAttention built by makeBlock for the mix's seed.
 */
function callOp(m, block, op, mode) {
  const async = mode === 'async';
  let pending;
  if (op.kind === 'matmul') {
    const b = tensorOf(op.b, op.bShape);
    const options = { transposeA: op.transposeA, transposeB: op.transposeB, alpha: op.alpha };
    if (op.c) {
      options.c = tensorOf(op.c, op.cShape);
      options.beta = op.beta;
    }
    const args = [tensorOf(op.a, op.aShape), op.packB ? m.prepack(b) : b, options];
    pending = async ? m.matmulAsync(...args) : m.matmul(...args);
  } else if (op.kind === 'softmax') {
    const x = tensorOf(op.x, op.shape);
    const options = { scale: op.scale, out: op.inPlace ? x : undefined };
    pending = async ? m.softmaxAsync(x, options) : m.softmax(x, options);
  } else if (op.kind === 'attention') {
    const options = {
      causal: op.causal, returnWeights: op.returnWeights, scale: op.scale,
      mask: tensorOf(op.mask, op.maskShape), keyPaddingMask: copy(op.keyPaddingMask),
    };
    if (op.layout === '3d') Object.assign(options, { heads: op.heads, kvHeads: op.kvHeads });
    else options.layout = op.layout;
    const args = [tensorOf(op.q, op.qShape), tensorOf(op.k, op.kShape), tensorOf(op.v, op.vShape), options];
    pending = async ? m.attentionAsync(...args) : m.attention(...args);
  } else if (op.kind === 'layerNorm') {
    const x = tensorOf(op.x, op.shape);
    const options = {
      weight: tensorOf(op.weight, [op.shape[1]]), bias: tensorOf(op.bias, [op.shape[1]]), eps: op.eps,
      out: op.inPlace ? x : undefined,
    };
    pending = async ? m.layerNormAsync(x, options) : m.layerNorm(x, options);
  } else {
    const options = { causal: op.causal, returnWeights: op.returnWeights, keyPaddingMask: copy(op.keyPaddingMask) };
    const x = tensorOf(op.x, op.shape);
    pending = async ? block.forwardAsync(x, options) : block.forward(x, options);
  }
  return async ? pending.then(normalize) : normalize(pending);
}

function sameBits(x, y) {
  if (x === undefined || y === undefined) return x === y;
  return Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}

/**
 * Runs every op synchronously first, then all of them asynchronously at once,
 * and lists the ops whose async result is not bit-identical to the sync one.
 */
async function runMix(m, seed, count) {
  const ops = makeOps(seed, count);
  const block = makeBlock(m, blockWeights(seed));
  const sync = ops.map((op) => callOp(m, block, op, 'sync'));
  const results = await Promise.all(ops.map((op) => callOp(m, block, op, 'async')));
  const mismatches = [];
  results.forEach((r, i) => {
    if (!sameBits(r.output, sync[i].output) || !sameBits(r.weights, sync[i].weights)) mismatches.push(i);
  });
  return { results, mismatches };
}

module.exports = { BLOCK_DIM, BLOCK_HEADS, makeRng, makeOps, blockWeights, makeBlock, callOp, sameBits, runMix };
