#!/usr/bin/env node
'use strict';
/**
 * A/B of two builds of the addon in one process, for changes smaller than this
 * host's drift (two processes run minutes apart differ by up to ±30 %).
 *
 *   node benchmarks/tools/ab-addons.js A.node B.node block [batch=1] [rounds=40] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node attention [heads=12] [tokens=197] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node attention-bshd [heads=12] [tokens=197] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node matmul [M,K,N=197,768,2304] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node softmax [rows,cols=6144,512] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node layernorm [rows,cols=197,768] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node decode [heads,kvHeads,length,d=32,8,16384,128] [rounds=30] [burst=5]
 *   node benchmarks/tools/ab-addons.js A.node B.node decoder [length=4096] [rounds=20] [burst=3]
 *
 * Attention's q, k and v are uniform in [-0.5, 0.5), which at the default scale 1/√64 gives nearly flat
 * softmax rows; AB_SCALE=<scale> sets the scale option (e.g. 8: logits spread like a trained model's,
 * 30: nearly one-hot rows, where the shifts of attention's fused exp rise often); AB_BATCH=<b> the batch;
 * AB_CAUSAL=1 the causal rule; AB_SOFTCAP=<cap> a softcap; AB_KV=bf16 or int8 decode's k and v in a KVCache of that dtype.
 * decoder: LLaMA-3-8B's attention layer (m_decode) taking one token against a KVCache of `length`
 * positions, then truncated back; AB_LAYER=dim,heads,kvHeads,dimHead another layer (256,4,4,64: decode-small.js's); AB_DTYPE=bf16 its weights and cache in bf16 (the block's too). Matmul's B is packed in every call; AB_PREPACK=1 prepacks it once (bf16, int8: in that dtype).
 * Softmax's logits are uniform in [-4, 4); AB_SCALE sets its scale option too.
 *
 * Each build gets its own copy of dist/ (so each loads its own addon, with its
 * own thread pool) in a temporary directory. The two are timed in alternating
 * bursts, the order swapped every round, each burst after one untimed call
 * that wakes its pool. Prints p25/p50 of each and the ratio of the medians
 * (B/A < 1: B is faster), and the largest difference between their outputs
 * (0 when a change should keep every bit). Give the same build twice, copied
 * under two names, to see the noise floor: two paths to one file are one
 * module to dlopen.
 *
 * Calls well under a millisecond can mislead in a whole run: an A/A run (one build
 * under two names) of `matmul 256,64,256` once measured B/A 1.78 and another 1.69, where the
 * next A/A runs measured 1.00 (Zen 4). Each addon has its own thread pool, and in some runs one
 * addon's helper seems to share a core with the main thread throughout. Run short ops twice,
 * in both orders, or time them natively.
 *
 * Build an addon to compare with: check the other commit out in a worktree,
 * `node scripts/build-addon.js` there, copy build/Release/mhsa.node away.
 *
 * Both builds must agree on native/kernels/scratch.h (the ScratchSlot list):
 * the per-thread scratch of an inline function is one symbol that the dynamic
 * loader shares between the two libraries (GNU_UNIQUE), so builds that size it
 * differently corrupt the heap. Both also run the current dist/ (lib/), so a
 * native entry point only one of them has cannot be compared this way.
 * Builds that use that scratch at different sizes (a GEMM change to how a
 * product is split, say) share it too, and the ratio can mislead: 197 x 64 x
 * 768 measured 1.575x the time here for a build that took 0.45x the time in a
 * process of its own (Zen 4). Compare such builds in separate
 * processes, alternated (MHSA_ADDON=<path> selects the build).
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [addonA, addonB, kind = 'block', ...rest] = process.argv.slice(2);
if (!addonA || !addonB || !['block', 'attention', 'attention-bshd', 'matmul', 'softmax', 'layernorm', 'decode', 'decoder'].includes(kind)) {
  console.error('usage: node benchmarks/tools/ab-addons.js A.node B.node block|attention|attention-bshd|matmul|softmax|layernorm|decode|decoder [...]');
  process.exit(2);
}
const root = path.resolve(__dirname, '..', '..');
const nums = (['matmul', 'softmax', 'layernorm', 'decode', 'decoder'].includes(kind) ? rest.slice(1) : rest).map(Number);

/** Loads lib/ from its own copy of dist/ with MHSA_ADDON pointing at `addon`. */
function loadCopy(addon, tag) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mhsa-ab-${tag}-`));
  fs.cpSync(path.join(root, 'dist'), path.join(dir, 'dist'), { recursive: true });
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  process.env.MHSA_ADDON = path.resolve(addon);
  const m = require(path.join(dir, 'dist', 'lib'));
  delete process.env.MHSA_ADDON;
  return { m, dir };
}

const rnd = (n, s = 1) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * s);

/** A workload: prepare(m) returns { run(), out } for one loaded copy. */
function workload() {
  if (kind === 'block') {
    const [batch = 1, rounds = 40, burst = 5] = nums;
    const [T, D, H, dh] = [197, 768, 12, 64];
    const weights = {
      qkvWeight: { data: rnd(3 * D * D, 0.05), shape: [3 * D, D] },
      qkvBias: { data: rnd(3 * D, 0.05), shape: [3 * D] },
      outWeight: { data: rnd(D * D, 0.05), shape: [D, D] },
      outBias: { data: rnd(D, 0.05), shape: [D] },
    };
    const norm = { weight: { data: new Float32Array(D).fill(1), shape: [D] }, bias: { data: new Float32Array(D), shape: [D] } };
    const x = { data: rnd(batch * T * D), shape: [batch, T, D] };
    return {
      label: `block ViT-B/16 batch ${batch}`,
      rounds,
      burst,
      prepare(m) {
        const dtype = process.env.AB_DTYPE ?? 'float32';
        const block = new m.MultiHeadSelfAttention({ dim: D, heads: H, dimHead: dh, weights, norm, dtype });
        const out = { data: new Float32Array(batch * T * D), shape: [batch, T, D] };
        return { out, run: () => block.forward(x, { out }) };
      },
    };
  }
  if (kind === 'matmul') {
    // A row-major product from JS, B unpacked (packed inside every call), or with AB_PREPACK=1
    // prepacked once per build (as the block's weights are); AB_PREPACK=bf16 or int8 prepacked in that dtype.
    const [M, K, N] = (rest[0] ?? '197,768,2304').split(',').map(Number);
    const [rounds = 30, burst = 5] = nums;
    const a = { data: rnd(M * K), shape: [M, K] }, b = { data: rnd(K * N), shape: [K, N] };
    const prepacked = ['1', 'bf16', 'int8'].includes(process.env.AB_PREPACK ?? '');
    const dtype = process.env.AB_PREPACK === '1' ? 'float32' : process.env.AB_PREPACK;
    return {
      label: `matmul ${M}x${K}x${N}${prepacked ? ` prepacked B (${dtype})` : ''}`,
      rounds,
      burst,
      prepare(m) {
        const out = { data: new Float32Array(M * N), shape: [M, N] };
        const bb = prepacked ? m.prepack(b, { dtype }) : b;
        return { out, run: () => m.matmul(a, bb, { out }) };
      },
    };
  }
  if (kind === 'softmax') {
    const [R, C] = (rest[0] ?? '6144,512').split(',').map(Number);
    const [rounds = 30, burst = 5] = nums;
    const x = { data: rnd(R * C, 8), shape: [R, C] };
    return {
      label: `softmax ${R}x${C}${process.env.AB_SCALE ? ` scale ${process.env.AB_SCALE}` : ''}`,
      rounds,
      burst,
      prepare(m) {
        const out = { data: new Float32Array(R * C), shape: [R, C] };
        const opts = { out };
        if (process.env.AB_SCALE) opts.scale = Number(process.env.AB_SCALE);
        return { out, run: () => m.softmax(x, opts) };
      },
    };
  }
  if (kind === 'layernorm') {
    // Rows of x normalized with a weight and a bias, as the block's pre-norm (the block fuses it into its QKV packing).
    const [R, C] = (rest[0] ?? '197,768').split(',').map(Number);
    const [rounds = 30, burst = 5] = nums;
    const x = { data: rnd(R * C, 4), shape: [R, C] };
    const weight = { data: rnd(C, 2), shape: [C] }, bias = { data: rnd(C), shape: [C] };
    return {
      label: `layerNorm ${R}x${C}`,
      rounds,
      burst,
      prepare(m) {
        const out = { data: new Float32Array(R * C), shape: [R, C] };
        return { out, run: () => m.layerNorm(x, { weight, bias, out }) };
      },
    };
  }
  if (kind === 'decoder') {
    const L = Number(rest[0] ?? 4096);
    const [rounds = 20, burst = 3] = nums;
    const [dim, heads, kvHeads, dh] = (process.env.AB_LAYER ?? '4096,32,8,128').split(',').map(Number);
    const rows = (heads + 2 * kvHeads) * dh;
    const dtype = process.env.AB_DTYPE ?? 'float32';
    const weights = {
      qkvWeight: { data: rnd(rows * dim, 0.04), shape: [rows, dim] },
      outWeight: { data: rnd(dim * dim, 0.04), shape: [dim, dim] },
    };
    const past = { data: rnd(kvHeads * L * dh), shape: [1, kvHeads, L, dh] };
    const x = { data: rnd(dim), shape: [1, 1, dim] };
    return {
      label: `decoder L${L} ${dtype}`,
      rounds,
      burst,
      prepare(m) {
        const norm = { type: 'rms', weight: { data: new Float32Array(dim).fill(1), shape: [dim] } };
        const layer = new m.MultiHeadSelfAttention({ dim, heads, kvHeads, dimHead: dh, weights, norm, rope: { theta: 500000 }, dtype });
        const cache = new m.KVCache({ batch: 1, kvHeads, headDim: dh, maxLength: L + 1, dtype });
        cache.append(past, past);
        const out = { data: new Float32Array(dim), shape: [1, 1, dim] };
        return {
          out,
          run: () => {
            layer.forward(x, { cache, causal: true, out });
            cache.truncate(L);
          },
        };
      },
    };
  }
  if (kind === 'decode') {
    // One query per head against a [1, kvHeads, length, d] cache ('bhsd'), as a_gqa_decode.
    const [H, Hkv, L, d] = (rest[0] ?? '32,8,16384,128').split(',').map(Number);
    const [rounds = 30, burst = 5] = nums;
    const q = { data: rnd(H * d), shape: [1, H, 1, d] };
    const k = { data: rnd(Hkv * L * d), shape: [1, Hkv, L, d] }, v = { data: rnd(Hkv * L * d), shape: [1, Hkv, L, d] };
    return {
      label: `decode H${H}/${Hkv} L${L} d${d}`,
      rounds,
      burst,
      prepare(m) {
        const out = { data: new Float32Array(H * d), shape: [1, H, 1, d] };
        const dtype = process.env.AB_KV;
        if (dtype !== 'bf16' && dtype !== 'int8') return { out, run: () => m.attention(q, k, v, { causal: true, out }) };
        const cache = new m.KVCache({ batch: 1, kvHeads: Hkv, headDim: d, maxLength: L, dtype });
        cache.append(k, v);
        return { out, run: () => m.attention(q, cache.keys, cache.values, { causal: true, out }) };
      },
    };
  }
  // 'attention': [batch, heads, seq, dim]; 'attention-bshd': [batch, seq, heads·dim], the layout
  // the block reads (rows of one head 3 KiB apart).
  const [heads = 12, tokens = 197, rounds = 30, burst = 5] = nums;
  const bshd = kind === 'attention-bshd';
  const batch = Number(process.env.AB_BATCH ?? 1);
  const shape = bshd ? [batch, tokens, heads * 64] : [batch, heads, tokens, 64];
  const n = batch * heads * tokens * 64;
  const q = { data: rnd(n), shape }, k = { data: rnd(n), shape }, v = { data: rnd(n), shape };
  return {
    label:
      `attention B${batch} H${heads} N${tokens} d64${bshd ? ' bshd' : ''}` +
      `${process.env.AB_SCALE ? ` scale ${process.env.AB_SCALE}` : ''}${process.env.AB_CAUSAL === '1' ? ' causal' : ''}` +
      `${process.env.AB_SOFTCAP ? ` softcap ${process.env.AB_SOFTCAP}` : ''}`,
    rounds,
    burst,
    prepare(m) {
      const out = { data: new Float32Array(n), shape };
      const opts = bshd ? { heads, out } : { out };
      if (process.env.AB_SCALE) opts.scale = Number(process.env.AB_SCALE);
      if (process.env.AB_CAUSAL === '1') opts.causal = true;
      if (process.env.AB_SOFTCAP) opts.softcap = Number(process.env.AB_SOFTCAP);
      return { out, run: () => m.attention(q, k, v, opts) };
    },
  };
}

const w = workload();
const copies = [loadCopy(addonA, 'a'), loadCopy(addonB, 'b')];
const sides = copies.map(({ m }) => ({ ...w.prepare(m), times: [] }));
for (let round = 0; round < w.rounds; round++) {
  for (const side of round % 2 ? sides : [...sides].reverse()) {
    side.run();
    for (let i = 0; i < w.burst; i++) {
      const t0 = process.hrtime.bigint();
      side.run();
      side.times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
}
const quantile = (a, p) => [...a].sort((x, y) => x - y)[Math.floor(p * (a.length - 1))];
let maxDiff = 0;
for (let i = 0; i < sides[0].out.data.length; i++) maxDiff = Math.max(maxDiff, Math.abs(sides[0].out.data[i] - sides[1].out.data[i]));
const [a, b] = sides.map((s) => ({ p25: quantile(s.times, 0.25), p50: quantile(s.times, 0.5) }));
console.log(
  `${w.label}, ${w.rounds} rounds x ${w.burst}: A p25 ${a.p25.toFixed(3)} p50 ${a.p50.toFixed(3)} ms | ` +
    `B p25 ${b.p25.toFixed(3)} p50 ${b.p50.toFixed(3)} ms | B/A p50 ${(b.p50 / a.p50).toFixed(3)} | max |A-B| ${maxDiff.toExponential(1)}`,
);
for (const { dir } of copies) fs.rmSync(dir, { recursive: true, force: true });
