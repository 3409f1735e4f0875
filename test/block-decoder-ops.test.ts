/**
 * The decoder form of MultiHeadSelfAttention has the bits of its public ops
 * composed one call each: norm, the QKV projection, q, k and v copied apart,
 * rope on q and k, KVCache.append, attention over the cache's views, the
 * output projection. The block runs them as stages of one native call over
 * its own workspace; this composition is the definition it must keep, for
 * every setting the decoder has (GQA, RMSNorm and LayerNorm, rotary forms,
 * softcap, windows, sinks, masks, key padding, ragged lengths, a bf16 cache,
 * bf16 weights, no cache), sync and async, over prefill and decode steps.
 */
import {
  attention,
  KVCache,
  layerNorm,
  matmul,
  MultiHeadSelfAttention,
  prepack,
  rmsNorm,
  rope,
  tensor,
  type Bf16StridedTensor,
  type Int8StridedTensor,
  type KVCacheDtype,
  type StridedTensor,
  type Tensor,
} from '../lib';
import type { MultiHeadSelfAttentionConfig } from '../lib/block/types';
import type { DecoderLayer as Layer } from './helpers/decoder-layer';
import { expectBitEqual, pickSeed, randomFloat32, rngFor, type Rng } from './helpers/random';

const SEED = pickSeed();

interface Model {
  l: Layer;
  config: MultiHeadSelfAttentionConfig;
  norm?: { weight: Tensor; bias?: Tensor };
  packedQkv: ReturnType<typeof prepack>;
  bqkv?: Tensor;
  packedOut?: ReturnType<typeof prepack>;
  bo?: Tensor;
  sinks?: Float32Array;
}

function makeModel(rng: Rng, l: Layer): Model {
  const rows = (l.heads + 2 * l.kvHeads) * l.dimHead, inner = l.heads * l.dimHead;
  const scaled = (n: number, s: number) => randomFloat32(rng, n).map((v) => v * s);
  const wqkv = tensor(scaled(rows * l.dim, 1 / Math.sqrt(l.dim)), [rows, l.dim]);
  const bqkv = l.bias ? tensor(scaled(rows, 0.1), [rows]) : undefined;
  const wo = l.out !== false ? tensor(scaled(l.dim * inner, 1 / Math.sqrt(inner)), [l.dim, inner]) : undefined;
  const bo = l.out !== false && l.bias ? tensor(scaled(l.dim, 0.1), [l.dim]) : undefined;
  const norm =
    l.norm === 'none'
      ? undefined
      : {
          weight: tensor(randomFloat32(rng, l.dim).map((v) => 1 + 0.5 * v), [l.dim]),
          ...(l.norm === 'layer' ? { bias: tensor(scaled(l.dim, 0.1), [l.dim]) } : {}),
        };
  const sinks = l.sinks ? randomFloat32(rng, l.heads).map((v) => 2 * v) : undefined;
  const config: MultiHeadSelfAttentionConfig = {
    dim: l.dim,
    heads: l.heads,
    kvHeads: l.kvHeads,
    dimHead: l.dimHead,
    weights: { qkvWeight: wqkv, ...(bqkv ? { qkvBias: bqkv } : {}), ...(wo ? { outWeight: wo } : {}), ...(bo ? { outBias: bo } : {}) },
    ...(norm ? { norm: { type: l.norm as 'layer' | 'rms', ...norm } } : {}),
    ...(l.rope ? { rope: l.rope } : {}),
    ...(l.softcap !== undefined ? { softcap: l.softcap } : {}),
    ...(l.window ? { window: l.window } : {}),
    ...(sinks ? { sinks } : {}),
    dtype: l.dtype ?? 'float32',
  };
  return {
    l,
    config,
    norm,
    packedQkv: prepack(wqkv, { transpose: true, dtype: l.dtype ?? 'float32' }),
    bqkv,
    packedOut: wo ? prepack(wo, { transpose: true, dtype: l.dtype ?? 'float32' }) : undefined,
    bo,
    sinks,
  };
}

/** Columns [from, from + width) of x [rows, cols]. */
function columns(x: Float32Array, rows: number, cols: number, from: number, width: number): Float32Array {
  const y = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) y.set(x.subarray(r * cols + from, r * cols + from + width), r * width);
  return y;
}

interface StepOptions {
  cache?: KVCache<KVCacheDtype>;
  lengths?: Int32Array;
  mask?: Tensor;
  keyPaddingMask?: Uint8Array;
}

/** One forward of the layer from public ops, one call each (the cache advanced as the block advances it). */
function composed(m: Model, x: Tensor, o: StepOptions): Float32Array {
  const { l } = m;
  const [B, T] = x.shape;
  const rows = B * T, inner = l.heads * l.dimHead, kvInner = l.kvHeads * l.dimHead, width = inner + 2 * kvInner;
  const eps = l.norm === 'rms' ? 1e-6 : 1e-5;
  let y = x;
  if (m.norm) {
    y = l.norm === 'rms' ? rmsNorm(x, { weight: m.norm.weight, eps }) : layerNorm(x, { weight: m.norm.weight, bias: m.norm.bias, eps });
  }
  const qkv = matmul(tensor(y.data, [rows, l.dim]), m.packedQkv, m.bqkv ? { c: m.bqkv } : {}).data;
  const q = tensor(columns(qkv, rows, width, 0, inner), [B, T, l.heads, l.dimHead]);
  const k = tensor(columns(qkv, rows, width, inner, kvInner), [B, T, l.kvHeads, l.dimHead]);
  const v = tensor(columns(qkv, rows, width, inner + kvInner, kvInner), [B, T, l.kvHeads, l.dimHead]);
  const before = o.cache ? o.cache.lengths : new Int32Array(B);
  if (l.rope) {
    const positions = new Int32Array(B * T);
    for (let b = 0; b < B; b++) {
      const skip = T - (o.lengths ? o.lengths[b] : T);
      for (let t = 0; t < T; t++) positions[b * T + t] = Math.max(0, before[b] + t - skip);
    }
    const r = { ...l.rope, layout: 'bshd' as const, positions };
    rope(q, { ...r, out: q });
    rope(k, { ...r, out: k });
  }
  let keys: Parameters<typeof attention>[1] = k, values: Parameters<typeof attention>[2] = v;
  let keyLengths: Int32Array | undefined;
  if (o.cache) {
    o.cache.append(k, v, { layout: 'bshd', ...(o.lengths ? { lengths: o.lengths } : {}) });
    const asBshd = <V extends StridedTensor | Bf16StridedTensor | Int8StridedTensor>(view: V): V => {
      const [b, h, n, d] = view.shape, [sb, sh, sn] = view.strides;
      return { ...view, shape: [b, n, h, d], strides: [sb, sn, sh, 1] };
    };
    keys = asBshd(o.cache.keys);
    values = asBshd(o.cache.values);
    const after = o.cache.lengths;
    if (after.some((n) => n !== after[0])) keyLengths = after;
  }
  const att = attention(q, keys, values, {
    layout: 'bshd',
    causal: true,
    ...(keyLengths ? { keyLengths } : {}),
    ...(l.softcap !== undefined ? { softcap: l.softcap } : {}),
    ...(l.window ? { window: l.window } : {}),
    ...(m.sinks ? { sinks: m.sinks } : {}),
    ...(o.mask ? { mask: o.mask } : {}),
    ...(o.keyPaddingMask ? { keyPaddingMask: o.keyPaddingMask } : {}),
  });
  if (!m.packedOut) return att.data;
  return matmul(tensor(att.data, [rows, inner]), m.packedOut, m.bo ? { c: m.bo } : {}).data;
}

const LLAMA: Layer = {
  dim: 64, heads: 4, kvHeads: 2, dimHead: 16, norm: 'rms', bias: false, out: true,
  rope: { theta: 10000, rotaryDim: 16, interleaved: false }, sinks: false, dtype: 'float32',
};
const LAYERS: [string, Layer][] = [
  ['LLaMA-style: GQA 4/2, RMSNorm, RoPE', LLAMA],
  ['Gemma/gpt-oss-style: MQA 3/1, LayerNorm, interleaved partial RoPE, softcap, window, sinks, biases',
    { dim: 24, heads: 3, kvHeads: 1, dimHead: 8, norm: 'layer', bias: true, out: true, rope: { theta: 500000, rotaryDim: 6, interleaved: true }, softcap: 20, window: { left: 5 }, sinks: true, dtype: 'float32' }],
  ['head dim 128, no norm, GQA 4/2', { dim: 256, heads: 4, kvHeads: 2, dimHead: 128, norm: 'none', bias: true, out: true, rope: { theta: 10000, rotaryDim: 128, interleaved: false }, sinks: false, dtype: 'float32' }],
  ['one head as wide as the block, no output projection', { dim: 32, heads: 1, kvHeads: 1, dimHead: 32, norm: 'rms', bias: false, out: false, rope: { theta: 10000, rotaryDim: 32, interleaved: false }, sinks: false, dtype: 'float32' }],
  ['bf16 weights, LLaMA-style', { ...LLAMA, dtype: 'bf16' }],
  ['odd sizes: dim 17, 3/3 heads of 5, LayerNorm, no RoPE', { dim: 17, heads: 3, kvHeads: 3, dimHead: 5, norm: 'layer', bias: true, out: true, sinks: false, dtype: 'float32' }],
];

describe(`the decoder form has the bits of its public ops composed (seed ${SEED})`, () => {
  for (const [name, l] of LAYERS) {
    for (const cacheDtype of ['float32', 'bf16'] as const) {
      test(`${name}, ${cacheDtype} cache: prefill, ragged chunk and decode steps, sync and async`, async () => {
        const rng = rngFor(SEED, `${name} ${cacheDtype}`);
        const m = makeModel(rng, l);
        const block = new MultiHeadSelfAttention(m.config);
        const B = 2, maxLength = 12;
        const make = () => new KVCache({ batch: B, kvHeads: l.kvHeads, headDim: l.dimHead, maxLength, dtype: cacheDtype });
        const [mine, theirs, mineAsync] = [make(), make(), make()];
        const steps: [number, Int32Array | undefined][] = [[3, undefined], [4, Int32Array.from([4, 2])], [1, undefined], [1, undefined], [2, Int32Array.from([0, 2])]];
        for (const [i, [T, lengths]] of steps.entries()) {
          const x = tensor(randomFloat32(rng, B * T * l.dim), [B, T, l.dim]);
          const opts = { causal: true, ...(lengths ? { lengths } : {}) };
          const want = composed(m, x, { cache: theirs, lengths });
          const got = block.forward(x, { ...opts, cache: mine });
          expectBitEqual(got.data, want, { seed: SEED, label: `${name}: step ${i}` });
          const gotAsync = await block.forwardAsync(x, { ...opts, cache: mineAsync });
          expectBitEqual(gotAsync.data, want, { seed: SEED, label: `${name}: async step ${i}` });
          expect(Array.from(mine.lengths)).toEqual(Array.from(theirs.lengths));
          expect(Array.from(mineAsync.lengths)).toEqual(Array.from(theirs.lengths));
        }
        expectBitEqual(new Float32Array(mine.keys.data.buffer), new Float32Array(theirs.keys.data.buffer), { seed: SEED, label: `${name}: the cache's storage` });
      });
    }

    test(`${name}: no cache, with a mask and key padding`, async () => {
      const rng = rngFor(SEED, `${name} no cache`);
      const m = makeModel(rng, l);
      const block = new MultiHeadSelfAttention(m.config);
      const B = 2, T = 7;
      const x = tensor(randomFloat32(rng, B * T * l.dim), [B, T, l.dim]);
      const mask = tensor(randomFloat32(rng, T * T), [1, 1, T, T]);
      const keyPaddingMask = Uint8Array.from({ length: B * T }, (_, i) => (i % 5 === 4 ? 1 : 0));
      for (const o of [{}, { mask }, { keyPaddingMask }, { mask, keyPaddingMask }]) {
        const want = composed(m, x, o);
        expectBitEqual(block.forward(x, { causal: true, ...o }).data, want, { seed: SEED, label: `${name}: ${Object.keys(o)}` });
        expectBitEqual((await block.forwardAsync(x, { causal: true, ...o })).data, want, { seed: SEED, label: `${name}: async ${Object.keys(o)}` });
      }
    });
  }

  test('a mask and key padding over a cache; a block switching between caches and shapes keeps its bits', () => {
    const rng = rngFor(SEED, 'cache switching');
    const m = makeModel(rng, LLAMA);
    const block = new MultiHeadSelfAttention(m.config);
    const make = (batch: number) => new KVCache({ batch, kvHeads: 2, headDim: 16, maxLength: 16 });
    const pairs = [[make(1), make(1)], [make(2), make(2)], [make(1), make(1)]] as const;
    const order = [0, 1, 0, 2, 1, 1, 0, 2, 2, 1];
    for (const [i, which] of order.entries()) {
      const [mine, theirs] = pairs[which];
      const B = mine.batch, T = 1 + (i % 3);
      const keys = theirs.length + T;
      const x = tensor(randomFloat32(rng, B * T * LLAMA.dim), [B, T, LLAMA.dim]);
      const o =
        i % 4 === 1
          ? { mask: tensor(randomFloat32(rng, T * keys), [1, 1, T, keys]) }
          : i % 4 === 3
            ? { keyPaddingMask: Uint8Array.from({ length: B * keys }, (_, j) => (j % keys === 0 ? 1 : 0)) }
            : {};
      const want = composed(m, x, { cache: theirs, ...o });
      expectBitEqual(block.forward(x, { causal: true, cache: mine, ...o }).data, want, { seed: SEED, label: `call ${i}` });
    }
  });
});
