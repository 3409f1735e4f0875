/**
 * MultiHeadSelfAttention as a decoder layer: grouped heads, RoPE, RMSNorm or
 * LayerNorm, softcap, windows and sinks, against a float64 transcription of
 * the layer; a prefill then decode steps over a KVCache equal the whole
 * sequence at once; fromTorch reads LLaMA's narrower k_proj/v_proj; bad input
 * leaves the cache as it was.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KVCache, MultiHeadSelfAttention, tensor, type Tensor } from '../lib';
import type { MultiHeadSelfAttentionConfig } from '../lib/block/types';
import { expectBitEqual, expectClose, pickSeed, randomFloat32, rngFor, type Rng } from './helpers/random';
import { ensureCompiled } from './helpers/compiled';
import type { DecoderLayer as Layer } from './helpers/decoder-layer';
import { refAttention } from './helpers/reference';

const SEED = pickSeed();

interface Params {
  wqkv: Float32Array;
  bqkv?: Float32Array;
  wo: Float32Array;
  bo?: Float32Array;
  normWeight?: Float32Array;
  normBias?: Float32Array;
  sinks?: Float32Array;
}

function makeParams(rng: Rng, l: Layer): Params {
  const rows = (l.heads + 2 * l.kvHeads) * l.dimHead, inner = l.heads * l.dimHead;
  const scaled = (n: number, s: number) => randomFloat32(rng, n).map((v) => v * s);
  return {
    wqkv: scaled(rows * l.dim, 1 / Math.sqrt(l.dim)),
    bqkv: l.bias ? scaled(rows, 0.1) : undefined,
    wo: scaled(l.dim * inner, 1 / Math.sqrt(inner)),
    bo: l.bias ? scaled(l.dim, 0.1) : undefined,
    normWeight: l.norm === 'none' ? undefined : randomFloat32(rng, l.dim).map((v) => 1 + 0.5 * v),
    normBias: l.norm === 'layer' ? scaled(l.dim, 0.1) : undefined,
    sinks: l.sinks ? randomFloat32(rng, l.heads).map((v) => 2 * v) : undefined,
  };
}

function config(l: Layer, p: Params): MultiHeadSelfAttentionConfig {
  const T = (d: Float32Array, s: number[]) => tensor(d, s);
  const rows = (l.heads + 2 * l.kvHeads) * l.dimHead;
  return {
    dim: l.dim,
    heads: l.heads,
    kvHeads: l.kvHeads,
    dimHead: l.dimHead,
    weights: {
      qkvWeight: T(p.wqkv, [rows, l.dim]),
      ...(p.bqkv ? { qkvBias: T(p.bqkv, [rows]) } : {}),
      outWeight: T(p.wo, [l.dim, l.heads * l.dimHead]),
      ...(p.bo ? { outBias: T(p.bo, [l.dim]) } : {}),
    },
    ...(l.norm !== 'none' ? { norm: { type: l.norm, weight: T(p.normWeight!, [l.dim]), ...(p.normBias ? { bias: T(p.normBias, [l.dim]) } : {}) } } : {}),
    ...(l.rope ? { rope: l.rope } : {}),
    ...(l.softcap !== undefined ? { softcap: l.softcap } : {}),
    ...(l.window ? { window: l.window } : {}),
    ...(p.sinks ? { sinks: p.sinks } : {}),
  };
}

/** The layer on x [B, N, dim] (causal) in float64. */
function reference(l: Layer, p: Params, x: Float32Array, B: number, N: number): Float64Array {
  const { dim, heads, kvHeads, dimHead } = l;
  const rows = (heads + 2 * kvHeads) * dimHead, inner = heads * dimHead, kvInner = kvHeads * dimHead;
  const y = new Float64Array(B * N * dim);
  for (let t = 0; t < B * N; t++) {
    const row = x.subarray(t * dim, (t + 1) * dim);
    let mean = 0, sq = 0;
    if (l.norm === 'layer') mean = row.reduce((a, v) => a + v, 0) / dim;
    for (const v of row) sq += (v - mean) * (v - mean);
    const eps = l.norm === 'rms' ? 1e-6 : 1e-5;
    const inv = l.norm === 'none' ? 1 : 1 / Math.sqrt(sq / dim + eps);
    for (let i = 0; i < dim; i++) {
      y[t * dim + i] = l.norm === 'none' ? row[i] : (row[i] - mean) * inv * p.normWeight![i] + (p.normBias ? p.normBias[i] : 0);
    }
  }
  const qkv = new Float64Array(B * N * rows);
  for (let t = 0; t < B * N; t++)
    for (let r = 0; r < rows; r++) {
      let s = p.bqkv ? p.bqkv[r] : 0;
      for (let i = 0; i < dim; i++) s += y[t * dim + i] * p.wqkv[r * dim + i];
      qkv[t * rows + r] = s;
    }
  const part = (from: number, width: number) => {
    const o = new Float64Array(B * N * width);
    for (let t = 0; t < B * N; t++) for (let e = 0; e < width; e++) o[t * width + e] = qkv[t * rows + from + e];
    return o;
  };
  const q = part(0, inner), k = part(inner, kvInner), v = part(inner + kvInner, kvInner);
  if (l.rope) {
    const { theta, rotaryDim, interleaved } = l.rope;
    for (const [t4, h] of [[q, heads], [k, kvHeads]] as const)
      for (let b = 0; b < B; b++)
        for (let s = 0; s < N; s++)
          for (let hh = 0; hh < h; hh++) {
            const base = ((b * N + s) * h + hh) * dimHead;
            for (let i = 0; i < rotaryDim / 2; i++) {
              const angle = s * Math.pow(theta, (-2 * i) / rotaryDim);
              const [a, c] = interleaved ? [base + 2 * i, base + 2 * i + 1] : [base + i, base + i + rotaryDim / 2];
              const x1 = t4[a], x2 = t4[c];
              t4[a] = x1 * Math.cos(angle) - x2 * Math.sin(angle);
              t4[c] = x1 * Math.sin(angle) + x2 * Math.cos(angle);
            }
          }
  }
  const o = refAttention(q, [B, N, heads, dimHead], k, [B, N, kvHeads, dimHead], v, [B, N, kvHeads, dimHead], {
    layout: 'bshd',
    causal: true,
    softcap: l.softcap,
    window: l.window,
    sinks: p.sinks,
  }).output.data;
  const out = new Float64Array(B * N * dim);
  for (let t = 0; t < B * N; t++)
    for (let c = 0; c < dim; c++) {
      let s = p.bo ? p.bo[c] : 0;
      for (let e = 0; e < inner; e++) s += o[t * inner + e] * p.wo[c * inner + e];
      out[t * dim + c] = s;
    }
  return out;
}

/** Tokens [t0, t1) of x [B, N, dim]. */
function tokens(x: Float32Array, B: number, N: number, dim: number, t0: number, t1: number): Tensor {
  const out = new Float32Array(B * (t1 - t0) * dim);
  for (let b = 0; b < B; b++) out.set(x.subarray((b * N + t0) * dim, (b * N + t1) * dim), b * (t1 - t0) * dim);
  return tensor(out, [B, t1 - t0, dim]);
}

const LLAMA: Layer = { dim: 64, heads: 4, kvHeads: 2, dimHead: 16, norm: 'rms', bias: false, rope: { theta: 10000, rotaryDim: 16, interleaved: false }, sinks: false };
const GEMMA_LIKE: Layer = {
  dim: 24, heads: 3, kvHeads: 1, dimHead: 8, norm: 'layer', bias: true,
  rope: { theta: 500000, rotaryDim: 6, interleaved: true }, softcap: 20, window: { left: 5 }, sinks: true,
};

describe(`MultiHeadSelfAttention as a decoder layer (seed ${SEED})`, () => {
  for (const [name, l, B, N, prefill] of [
    ['LLaMA-style: GQA 4/2, RMSNorm, RoPE', LLAMA, 2, 37, 33],
    ['Gemma/gpt-oss-style: MQA 3/1, LayerNorm, interleaved partial RoPE, softcap, window 5, sinks, biases', GEMMA_LIKE, 1, 17, 1],
  ] as const) {
    test(`${name}: whole sequence and prefill + decode steps against float64`, async () => {
      const rng = rngFor(SEED, name);
      const p = makeParams(rng, l);
      const block = new MultiHeadSelfAttention(config(l, p));
      const x = randomFloat32(rng, B * N * l.dim);
      const ref = reference(l, p, x, B, N);
      const ctx = (label: string, shape: number[]) => ({ seed: SEED, label: `${name}: ${label}`, shape });
      const whole = block.forward(tensor(x, [B, N, l.dim]), { causal: true });
      expectClose(whole.data, ref, 1e-5, ctx('whole sequence', [B, N, l.dim]));

      const cache = new KVCache({ batch: B, kvHeads: l.kvHeads, headDim: l.dimHead, maxLength: N });
      const got = new Float32Array(B * N * l.dim);
      const place = (y: Tensor, t0: number, t1: number) => {
        for (let b = 0; b < B; b++) got.set(y.data.subarray(b * (t1 - t0) * l.dim, (b + 1) * (t1 - t0) * l.dim), (b * N + t0) * l.dim);
      };
      place(block.forward(tokens(x, B, N, l.dim, 0, prefill), { cache, causal: true }), 0, prefill);
      const asyncCache = new KVCache({ batch: B, kvHeads: l.kvHeads, headDim: l.dimHead, maxLength: N });
      await block.forwardAsync(tokens(x, B, N, l.dim, 0, prefill), { cache: asyncCache, causal: true });
      for (let t = prefill; t < N; t++) {
        const step = block.forward(tokens(x, B, N, l.dim, t, t + 1), { cache, causal: true });
        place(step, t, t + 1);
        const stepAsync = await block.forwardAsync(tokens(x, B, N, l.dim, t, t + 1), { cache: asyncCache, causal: true });
        expectBitEqual(stepAsync.data, step.data, { seed: SEED, label: `${name}: async step ${t}` });
      }
      expect(cache.length).toBe(N);
      expectClose(got, ref, 1e-5, ctx('prefill + decode', [B, N, l.dim]));
    });
  }

  for (const [name, l] of [['LLaMA-style', LLAMA], ['Gemma/gpt-oss-style', GEMMA_LIKE]] as const) {
    test(`${name}: a ragged batch (left-padded chunks with lengths, then decode steps) equals each entry run alone`, async () => {
      const rng = rngFor(SEED, `${name} ragged`);
      const p = makeParams(rng, l);
      const block = new MultiHeadSelfAttention(config(l, p));
      // Two ragged chunks (a prompt, then more of it), then one-token steps for every entry.
      // The first chunk pads every entry alike (2 real tokens of 3), so the cache stays level: positions
      // must still skip the padding.
      const chunks: [number[], number][] = [[[2, 2, 2], 3], [[7, 3, 0], 7], [[2, 4, 1], 4]], steps = 3, B = 3, dim = l.dim;
      const totals = [0, 1, 2].map((b) => chunks.reduce((sum, [counts]) => sum + counts[b], 0) + steps);
      const own = totals.map((n) => randomFloat32(rng, n * dim));
      const got = totals.map((n) => new Float32Array(n * dim));
      const done = [0, 0, 0];
      const maxLength = Math.max(...totals);
      const cache = new KVCache({ batch: B, kvHeads: l.kvHeads, headDim: l.dimHead, maxLength });
      const asyncCache = new KVCache({ batch: B, kvHeads: l.kvHeads, headDim: l.dimHead, maxLength });
      const run = async (counts: number[], ragged: boolean, N = Math.max(...counts)) => {
        const x = new Float32Array(B * N * dim);
        counts.forEach((n, b) => x.set(own[b].subarray(done[b] * dim, (done[b] + n) * dim), (b * N + N - n) * dim));
        const options = ragged ? { causal: true, lengths: Int32Array.from(counts) } : { causal: true };
        const y = block.forward(tensor(x, [B, N, dim]), { cache, ...options });
        const yAsync = await block.forwardAsync(tensor(x, [B, N, dim]), { cache: asyncCache, ...options });
        expectBitEqual(yAsync.data, y.data, { seed: SEED, label: `${name}: ragged async, ${counts}` });
        counts.forEach((n, b) => {
          got[b].set(y.data.subarray((b * N + N - n) * dim, (b + 1) * N * dim), done[b] * dim);
          done[b] += n;
        });
        expect(Array.from(cache.lengths)).toEqual(done);
      };
      for (const [counts, N] of chunks) await run(counts, true, N);
      for (let t = 0; t < steps; t++) await run([1, 1, 1], false);
      totals.forEach((n, b) => {
        expectClose(got[b], reference(l, p, own[b], 1, n), 1e-5, { seed: SEED, label: `${name}: ragged entry ${b}`, shape: [1, n, dim] });
      });
    });
  }

  test("fromTorch reads Hugging Face's narrower k_proj/v_proj (GQA) and gives the constructor's bits", () => {
    const rng = rngFor(SEED, 'fromTorch');
    const l = LLAMA;
    const p = makeParams(rng, { ...l, norm: 'none' });
    const inner = l.heads * l.dimHead, kvInner = l.kvHeads * l.dimHead;
    const T = (d: Float32Array, s: number[]) => tensor(d, s);
    const sd = {
      'self_attn.q_proj.weight': T(p.wqkv.slice(0, inner * l.dim), [inner, l.dim]),
      'self_attn.k_proj.weight': T(p.wqkv.slice(inner * l.dim, (inner + kvInner) * l.dim), [kvInner, l.dim]),
      'self_attn.v_proj.weight': T(p.wqkv.slice((inner + kvInner) * l.dim), [kvInner, l.dim]),
      'self_attn.o_proj.weight': T(p.wo, [l.dim, inner]),
    };
    const fromTorch = MultiHeadSelfAttention.fromTorch(sd, { heads: l.heads, prefix: 'self_attn', rope: l.rope });
    expect(fromTorch.kvHeads).toBe(2);
    expect(String(fromTorch)).toBe('MultiHeadSelfAttention(dim=64, heads=4, kvHeads=2, dimHead=16, out)');
    const direct = new MultiHeadSelfAttention(config({ ...l, norm: 'none' }, p));
    const x = tensor(randomFloat32(rng, 5 * l.dim), [1, 5, l.dim]);
    expectBitEqual(fromTorch.forward(x, { causal: true }).data, direct.forward(x, { causal: true }).data, { seed: SEED, label: 'fromTorch GQA' });
  });

  test('bad input throws a named error and leaves the cache as it was', () => {
    const rng = rngFor(SEED, 'bad');
    const block = new MultiHeadSelfAttention(config(LLAMA, makeParams(rng, LLAMA)));
    const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 16, maxLength: 4 });
    const x3 = tensor(randomFloat32(rng, 3 * 64), [1, 3, 64]);
    block.forward(x3, { cache, causal: true });
    const keys = Array.from(cache.keys.data);
    const fail = (f: () => unknown, re: RegExp) => {
      expect(f).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(re) }));
      expect(cache.length).toBe(3);
      expect(Array.from(cache.keys.data)).toEqual(keys);
    };
    fail(() => block.forward(tensor(randomFloat32(rng, 2 * 64), [1, 2, 64]), { cache }), /^MultiHeadSelfAttention\.forward: options\.cache holds 3 of 4 positions: no room for 2 more/);
    const wrong = new KVCache({ batch: 1, kvHeads: 4, headDim: 16, maxLength: 8 });
    expect(() => block.forward(x3, { cache: wrong })).toThrow(/options\.cache must have batch, kvHeads, headDim, valueDim = 1, 2, 16, 16 .*received 1, 4, 16, 16/);
    fail(() => block.forward(tensor(randomFloat32(rng, 64), [1, 1, 64]), { cache, returnWeights: true } as never), /options\.returnWeights is not available/);
    fail(() => block.forward(tensor(randomFloat32(rng, 63), [1, 1, 63]), { cache }), /x\.shape\[2\] \(dim\) must equal the block's dim = 64, received 63/);
    expect(() => block.forward(x3, { cache: {} as never })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/options\.cache/) }));
    fail(() => block.forward(tensor(randomFloat32(rng, 2 * 64), [1, 2, 64]), { cache, lengths: [3] }), /options\.lengths\[0\] must be an integer in \[0, tokens = 2\], received 3/);
    fail(() => block.forward(tensor(randomFloat32(rng, 2 * 64), [1, 2, 64]), { cache, lengths: [2, 2] }), /options\.lengths\.length must be batch = 1, received 2/);
    fail(() => block.forward(tensor(randomFloat32(rng, 2 * 64), [1, 2, 64]), { lengths: [2] }), /options\.lengths needs options\.cache/);
    expect(() => new MultiHeadSelfAttention({ ...config(LLAMA, makeParams(rng, LLAMA)), kvHeads: 3 })).toThrow(/config\.heads = 4 must be a multiple of config\.kvHeads, received 3/);
    expect(() => new MultiHeadSelfAttention({ ...config(LLAMA, makeParams(rng, LLAMA)), rope: { rotaryDim: 18 } })).toThrow(/config\.rope\.rotaryDim must be even and at most dimHead = 16, received 18/);
    expect(() => new MultiHeadSelfAttention({ ...config(LLAMA, makeParams(rng, LLAMA)), rope: { theta: 0 } })).toThrow(/config\.rope\.theta must be above 0, received 0/);
  });

  test('an idle block keeps no cache alive: a cache dropped after its steps is collected (sync and async)', () => {
    // The compiled package in a child with --expose-gc; it writes its findings to a file (Windows'
    // node.exe under wine cannot write to a pipe).
    ensureCompiled();
    const script = `
      const m = require(process.argv[1]);
      const T = (n, shape) => m.tensor(Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 0.1), shape);
      const block = new m.MultiHeadSelfAttention({ dim: 8, heads: 2, kvHeads: 1, dimHead: 4,
        weights: { qkvWeight: T(128, [16, 8]), outWeight: T(64, [8, 8]) }, norm: { type: 'rms', weight: T(8, [8]) }, rope: {} });
      const collected = async (step) => {
        let cache = new m.KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 8 });
        const ref = new WeakRef(cache);
        await step(cache);
        await step(cache);
        cache = undefined;
        for (let i = 0; i < 10 && ref.deref() !== undefined; i++) { await new Promise((r) => setTimeout(r, 1)); gc(); }
        return ref.deref() === undefined;
      };
      (async () => {
        const sync = await collected((cache) => block.forward(T(8, [1, 1, 8]), { cache, causal: true }));
        const async = await collected((cache) => block.forwardAsync(T(8, [1, 1, 8]), { cache, causal: true }));
        require('node:fs').writeFileSync(process.argv[2], JSON.stringify({ sync, async }));
      })();
    `;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-cache-gc-'));
    const file = path.join(dir, 'result.json');
    try {
      const r = spawnSync(process.execPath, ['--expose-gc', '-e', script, path.resolve(__dirname, '..'), file], { encoding: 'utf8', timeout: 120000 });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ sync: true, async: true });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('forwardAsync with out transferred away before it finishes: the same error in both forms, and the cache as it was', async () => {
    const rng = rngFor(SEED, 'detached out');
    const decoder = new MultiHeadSelfAttention(config(LLAMA, makeParams(rng, LLAMA)));
    const encoder = new MultiHeadSelfAttention(config({ ...LLAMA, kvHeads: 4, norm: 'layer', rope: undefined }, makeParams(rng, { ...LLAMA, kvHeads: 4, norm: 'layer' })));
    const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 16, maxLength: 8 });
    await decoder.forwardAsync(tensor(randomFloat32(rng, 3 * 64), [1, 3, 64]), { cache, causal: true });
    // The positions held, head by head (the storage past them is not the cache's content).
    const held = () => [0, 1].flatMap((h) => Array.from(cache.keys.data.subarray(h * 8 * 16, h * 8 * 16 + cache.length * 16)));
    const keys = held();
    for (const [form, run] of [
      ['decoder', (out: Tensor) => decoder.forwardAsync(tensor(randomFloat32(rng, 64), [1, 1, 64]), { cache, causal: true, out })],
      ['encoder', (out: Tensor) => encoder.forwardAsync(tensor(randomFloat32(rng, 64), [1, 1, 64]), { out })],
    ] as const) {
      // A long call ahead, so that this one is still queued or computing when out goes.
      const ahead = encoder.forwardAsync(tensor(randomFloat32(rng, 64 * 256 * 64), [64, 256, 64]));
      const out = tensor(new Float32Array(64), [1, 1, 64]);
      const call = run(out);
      structuredClone(out.data.buffer, { transfer: [out.data.buffer as ArrayBuffer] });
      await expect(call).rejects.toThrow(/^MultiHeadSelfAttention\.forwardAsync: options\.out was detached before the call finished; its result is not defined$/);
      await ahead;
      expect({ form, length: cache.length }).toEqual({ form, length: 3 });
      expect(held()).toEqual(keys);
    }
  });
});
