// Run inside a consumer project that installed mhsa: an attention call and the
// seed-004 block, each against a float64 reference computed here, sync and
// async; prints one JSON line (which addon loaded, the errors, info()).
//   node consumer-smoke.js
'use strict';

const path = require('node:path');
const mhsa = require('mhsa');

function random(n, seed) {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 2;
  }
  return out;
}

/** o[t, h·d + j] = softmax(q_h k_hᵀ / √d) v_h, tokens-major [tokens, heads·d], in float64. */
function attentionReference(q, k, v, tokens, heads, d) {
  const width = heads * d;
  const o = new Float64Array(tokens * width);
  const p = new Float64Array(tokens);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < tokens; i++) {
      let max = -Infinity;
      for (let j = 0; j < tokens; j++) {
        let s = 0;
        for (let c = 0; c < d; c++) s += q[i * width + h * d + c] * k[j * width + h * d + c];
        p[j] = s / Math.sqrt(d);
        max = Math.max(max, p[j]);
      }
      let sum = 0;
      for (let j = 0; j < tokens; j++) sum += p[j] = Math.exp(p[j] - max);
      for (let j = 0; j < tokens; j++)
        for (let c = 0; c < d; c++) o[i * width + h * d + c] += (p[j] / sum) * v[j * width + h * d + c];
    }
  }
  return o;
}

/** x·wᵀ (+ bias) for PyTorch's Linear layout w [out, in], in float64. */
function linear(x, rows, w, outDim, inDim, bias) {
  const y = new Float64Array(rows * outDim);
  for (let r = 0; r < rows; r++)
    for (let o = 0; o < outDim; o++) {
      let s = bias ? bias[o] : 0;
      for (let c = 0; c < inDim; c++) s += x[r * inDim + c] * w[o * inDim + c];
      y[r * outDim + o] = s;
    }
  return y;
}

/** Seed 004: LayerNorm -> fused QKV -> heads -> attention -> merge -> output linear. */
function blockReference(x, tokens, dim, heads, w) {
  const normed = new Float64Array(tokens * dim);
  for (let t = 0; t < tokens; t++) {
    let mean = 0, variance = 0;
    for (let c = 0; c < dim; c++) mean += x[t * dim + c] / dim;
    for (let c = 0; c < dim; c++) variance += (x[t * dim + c] - mean) ** 2 / dim;
    for (let c = 0; c < dim; c++)
      normed[t * dim + c] = ((x[t * dim + c] - mean) / Math.sqrt(variance + 1e-5)) * w.normWeight[c] + w.normBias[c];
  }
  const qkv = linear(normed, tokens, w.qkvWeight, 3 * dim, dim);
  const part = (i) => {
    const m = new Float64Array(tokens * dim);
    for (let t = 0; t < tokens; t++) for (let c = 0; c < dim; c++) m[t * dim + c] = qkv[t * 3 * dim + i * dim + c];
    return m;
  };
  const merged = attentionReference(part(0), part(1), part(2), tokens, heads, dim / heads);
  return linear(merged, tokens, w.outWeight, dim, dim, w.outBias);
}

function relativeError(out, ref) {
  let num = 0, den = 0;
  for (let i = 0; i < ref.length; i++) {
    num += (out[i] - ref[i]) ** 2;
    den += ref[i] ** 2;
  }
  return Math.sqrt(num / den);
}

async function main() {
  const tokens = 17, heads = 3, d = 21, dim = heads * d;
  const q = random(tokens * dim, 1), k = random(tokens * dim, 2), v = random(tokens * dim, 3);
  const ref = attentionReference(q, k, v, tokens, heads, d);
  const t = (data) => mhsa.tensor(data, [1, tokens, dim]);
  const sync = mhsa.attention(t(q), t(k), t(v), { heads });
  const async_ = await mhsa.attentionAsync(t(q), t(k), t(v), { heads });

  const scale = 1 / Math.sqrt(dim);
  const w = {
    normWeight: random(dim, 4).map((x) => 1 + x / 4), normBias: random(dim, 5),
    qkvWeight: random(3 * dim * dim, 6).map((x) => x * scale), outWeight: random(dim * dim, 7).map((x) => x * scale),
    outBias: random(dim, 8),
  };
  const block = new mhsa.MultiHeadSelfAttention({
    dim, heads,
    norm: { weight: mhsa.tensor(w.normWeight, [dim]), bias: mhsa.tensor(w.normBias, [dim]) },
    weights: {
      qkvWeight: mhsa.tensor(w.qkvWeight, [3 * dim, dim]),
      outWeight: mhsa.tensor(w.outWeight, [dim, dim]), outBias: mhsa.tensor(w.outBias, [dim]),
    },
  });
  const x = random(tokens * dim, 9);
  const blockRef = blockReference(x, tokens, dim, heads, w);
  const y = block.forward(t(x));
  const yAsync = await block.forwardAsync(t(x));

  let platformPackage = null;
  for (const name of ['@mhsa/linux-x64-gnu', '@mhsa/linux-arm64-gnu', '@mhsa/win32-x64']) {
    try {
      platformPackage = path.dirname(require.resolve(`${name}/package.json`, { paths: [path.dirname(require.resolve('mhsa'))] }));
    } catch {}
  }
  const { backend, isa, pinsAsyncBuffers, version } = mhsa.info();
  console.log(JSON.stringify({
    node: process.version, abi: process.versions.modules, arch: process.arch, version, backend, isa, pinsAsyncBuffers, platformPackage,
    attention: [relativeError(sync.data, ref), relativeError(async_.data, ref)],
    block: [relativeError(y.data, blockRef), relativeError(yAsync.data, blockRef)],
  }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
