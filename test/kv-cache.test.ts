/**
 * KVCache: appends land where dense copies say, its views read in place by
 * attention give the bits dense copies give, and a prefill then decode steps
 * over the cache equal causal attention over the whole sequence.
 */
import { attention, attentionAsync, KVCache, matmul, type Tensor } from '../lib';
import { rounded } from './helpers/bf16';
import { expectClose, pickSeed, poisoned, randomFloat32, rngFor, type Rng } from './helpers/random';
import { refAttention } from './helpers/reference';
import { denseCopy } from './helpers/strided';

const SEED = pickSeed();

function randomTensor(rng: Rng, shape: number[]): Tensor {
  return { data: randomFloat32(rng, shape.reduce((a, b) => a * b, 1)), shape };
}

/** Positions [t0, t1) of a bhsd tensor. */
function slicePositions(x: Tensor, t0: number, t1: number): Tensor {
  const [B, H, , D] = x.shape;
  const S = x.shape[2], n = t1 - t0;
  const out = new Float32Array(B * H * n * D);
  for (let bh = 0; bh < B * H; bh++) out.set(x.data.subarray((bh * S + t0) * D, (bh * S + t1) * D), bh * n * D);
  return { data: out, shape: [B, H, n, D] };
}

describe(`KVCache (seed ${SEED})`, () => {
  test('appends in bhsd, bshd and 3-D land at length, and the views equal dense copies', () => {
    const rng = rngFor(SEED, 'appends');
    const B = 2, Hkv = 3, D = 5, Dv = 7, maxLength = 17;
    const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv, maxLength });
    const k = randomTensor(rng, [B, Hkv, 9, D]), v = randomTensor(rng, [B, Hkv, 9, Dv]);
    cache.append(slicePositions(k, 0, 4), slicePositions(v, 0, 4));
    // Positions 4..6 as bshd [B, n, Hkv, D], then 7..8 as 3-D [B, n, Hkv·D].
    const toBshd = (x: Tensor, t0: number, t1: number): Tensor => {
      const [b, h, , d] = x.shape;
      const s = slicePositions(x, t0, t1), n = t1 - t0, out = new Float32Array(s.data.length);
      for (let bi = 0; bi < b; bi++)
        for (let hi = 0; hi < h; hi++)
          for (let t = 0; t < n; t++)
            for (let e = 0; e < d; e++) out[((bi * n + t) * h + hi) * d + e] = s.data[((bi * h + hi) * n + t) * d + e];
      return { data: out, shape: [b, n, h, d] };
    };
    cache.append(toBshd(k, 4, 7), toBshd(v, 4, 7), { layout: 'bshd' });
    const k3 = toBshd(k, 7, 9), v3 = toBshd(v, 7, 9);
    cache.append({ data: k3.data, shape: [B, 2, Hkv * D] }, { data: v3.data, shape: [B, 2, Hkv * Dv] });
    expect(cache.length).toBe(9);
    expect(cache.keys.shape).toEqual([B, Hkv, 9, D]);
    expect(cache.values.shape).toEqual([B, Hkv, 9, Dv]);
    expect(denseCopy(cache.keys).data).toEqual(k.data);
    expect(denseCopy(cache.values).data).toEqual(v.data);
  });

  test('attention over the views gives the bits of dense copies, sync and async, on both paths', async () => {
    const rng = rngFor(SEED, 'views');
    for (const [Sq, L] of [[1, 197], [3, 1000], [65, 300], [1, 1]]) {
      const B = 2, Hkv = 2, H = 8, D = 32;
      const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, maxLength: L + 50 });
      cache.append(randomTensor(rng, [B, Hkv, L, D]), randomTensor(rng, [B, Hkv, L, D]));
      const q = randomTensor(rng, [B, H, Sq, D]);
      const options = { causal: true, softcap: 30, window: { left: 100 } };
      const viaViews = attention(q, cache.keys, cache.values, options);
      const dense = attention(q, denseCopy(cache.keys), denseCopy(cache.values), options);
      expect(viaViews.data).toEqual(dense.data);
      const viaAsync = await attentionAsync(q, cache.keys, cache.values, options);
      expect(viaAsync.data).toEqual(dense.data);
    }
  });

  // In bf16 the cache holds the rounded keys and values: the reference is over those.
  test.each(['float32', 'bf16'] as const)('a prefill, then one-token decode steps over a %s cache, equals causal attention over the whole sequence', (dtype) => {
    const rng = rngFor(SEED, `prefill-decode ${dtype}`);
    const B = 1, H = 4, Hkv = 2, D = 16, N = 40, prefill = 33;
    const q = randomTensor(rng, [B, H, N, D]), k = randomTensor(rng, [B, Hkv, N, D]), v = randomTensor(rng, [B, Hkv, N, D]);
    const stored = (x: Float32Array) => (dtype === 'bf16' ? rounded(x) : x);
    const whole = attention(q, { data: stored(k.data), shape: k.shape }, { data: stored(v.data), shape: v.shape }, { causal: true });
    const ref = refAttention(q.data, q.shape, stored(k.data), k.shape, stored(v.data), v.shape, { causal: true });
    expectClose(whole.data, ref.output.data, 1e-5, { seed: SEED, label: 'whole sequence', shape: q.shape });
    const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, maxLength: N, dtype });
    const got = poisoned(whole.data.length);
    const place = (o: Tensor, t0: number, t1: number) => {
      for (let h = 0; h < H; h++) got.set(o.data.subarray(h * (t1 - t0) * D, (h + 1) * (t1 - t0) * D), (h * N + t0) * D);
    };
    cache.append(slicePositions(k, 0, prefill), slicePositions(v, 0, prefill));
    place(attention(slicePositions(q, 0, prefill), cache.keys, cache.values, { causal: true }), 0, prefill);
    for (let t = prefill; t < N; t++) {
      cache.append(slicePositions(k, t, t + 1), slicePositions(v, t, t + 1));
      place(attention(slicePositions(q, t, t + 1), cache.keys, cache.values, { causal: true }), t, t + 1);
    }
    expectClose(got, ref.output.data, 1e-5, { seed: SEED, label: 'prefill + decode', shape: q.shape });
  });

  test('truncate drops positions and reset empties; appends then continue from there', () => {
    const rng = rngFor(SEED, 'truncate');
    const cache = new KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 8 });
    const a = randomTensor(rng, [1, 1, 6, 4]), b = randomTensor(rng, [1, 1, 2, 4]);
    cache.append(a, a);
    cache.truncate(3);
    expect(cache.length).toBe(3);
    cache.append(b, b);
    expect(Array.from(denseCopy(cache.keys).data)).toEqual([...a.data.subarray(0, 12), ...b.data]);
    cache.reset();
    expect(cache.length).toBe(0);
    expect(cache.keys.shape).toEqual([1, 1, 0, 4]);
    expect(cache.keys.data.length).toBe(0);
  });

  test('bad input throws a named error, writes nothing and leaves the cache as it was', () => {
    const rng = rngFor(SEED, 'bad');
    const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 5 });
    const three = randomTensor(rng, [1, 2, 3, 4]);
    cache.append(three, three);
    const before = denseCopy(cache.keys).data.slice();
    const fail = (fn: () => unknown, name: string, message: RegExp) => {
      expect(fn).toThrow(expect.objectContaining({ name, message: expect.stringMatching(message) }));
      expect(cache.length).toBe(3);
      expect(denseCopy(cache.keys).data).toEqual(before);
    };
    fail(() => cache.append(three, three), 'RangeError', /appending 3 positions to 3 would pass maxLength = 5/);
    fail(() => cache.append(randomTensor(rng, [1, 3, 1, 4]), randomTensor(rng, [1, 3, 1, 4])), 'RangeError', /^KVCache\.append: k must have shape \[batch, kvHeads, n, headDim\] = \[1, 2, n, 4\].*received \[1, 3, 1, 4\]/);
    fail(() => cache.append(randomTensor(rng, [1, 2, 1, 4]), randomTensor(rng, [1, 2, 1, 5])), 'RangeError', /v must have shape .*valueDim/);
    fail(() => cache.append(randomTensor(rng, [1, 2, 1, 4]), randomTensor(rng, [1, 2, 2, 4])), 'RangeError', /v must hold as many positions as k \(1\), received 2/);
    fail(() => cache.append(new Float32Array(8) as never, three), 'TypeError', /k/);
    fail(() => cache.append(three, three, { layout: 'bhds' as never }), 'RangeError', /options\.layout/);
    fail(() => cache.truncate(4), 'RangeError', /n must be an integer in \[0, length = 3\], received 4/);
    fail(() => cache.truncate(1.5), 'RangeError', /received 1\.5/);
    expect(() => new KVCache({ batch: 1, kvHeads: 0, headDim: 4, maxLength: 5 })).toThrow(/options\.kvHeads must be a positive integer, received 0/);
    expect(() => new KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 5, extra: 1 } as never)).toThrow(/extra/);
  });

  test('a ragged batch: each entry takes the last lengths[b] positions at its own length, and attention with keyLengths sees its own keys', async () => {
    const rng = rngFor(SEED, 'ragged');
    const B = 3, Hkv = 2, H = 4, D = 8, Dv = 5, max = 40;
    const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv, maxLength: max });
    // Each entry's own keys and values, appended in three rounds of different ragged counts (left-padded).
    const own = Array.from({ length: B }, () => ({ k: [] as number[][], v: [] as number[][] }));
    const rounds: [number, number[]][] = [[6, [6, 2, 0]], [3, [1, 3, 3]], [1, [1, 1, 1]]];
    for (const [n, lengths] of rounds) {
      const k = randomTensor(rng, [B, Hkv, n, D]), v = randomTensor(rng, [B, Hkv, n, Dv]);
      cache.append(k, v, { lengths: n === 3 ? Int32Array.from(lengths) : lengths });
      for (let b = 0; b < B; b++)
        for (let t = n - lengths[b]; t < n; t++)
          for (let h = 0; h < Hkv; h++) {
            (own[b].k[h] ??= []).push(...k.data.subarray(((b * Hkv + h) * n + t) * D, ((b * Hkv + h) * n + t + 1) * D));
            (own[b].v[h] ??= []).push(...v.data.subarray(((b * Hkv + h) * n + t) * Dv, ((b * Hkv + h) * n + t + 1) * Dv));
          }
    }
    expect(Array.from(cache.lengths)).toEqual([8, 6, 4]);
    expect(cache.length).toBe(8);
    expect(cache.keys.shape).toEqual([B, Hkv, 8, D]);
    const keys = denseCopy(cache.keys), values = denseCopy(cache.values);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < Hkv; h++) {
        const at = (b * Hkv + h) * 8;
        expect(Array.from(keys.data.subarray(at * D, (at + cache.lengths[b]) * D))).toEqual(Array.from(Float32Array.from(own[b].k[h])));
        expect(Array.from(values.data.subarray(at * Dv, (at + cache.lengths[b]) * Dv))).toEqual(Array.from(Float32Array.from(own[b].v[h])));
      }
    // A step of 2 left-padded queries (entry 2 has 1 real one), causal: each entry's rows against its own keys.
    const q = randomTensor(rng, [B, H, 2, D]);
    const options = { causal: true, keyLengths: cache.lengths };
    const out = attention(q, cache.keys, cache.values, options);
    expect(Array.from((await attentionAsync(q, cache.keys, cache.values, options)).data)).toEqual(Array.from(out.data));
    for (let b = 0; b < B; b++) {
      const L = cache.lengths[b];
      const kb = Float32Array.from(own[b].k.flat()), vb = Float32Array.from(own[b].v.flat());
      const qb = q.data.slice(b * H * 2 * D, (b + 1) * H * 2 * D);
      const ref = refAttention(qb, [1, H, 2, D], kb, [1, Hkv, L, D], vb, [1, Hkv, L, Dv], { causal: true });
      expectClose(out.data.subarray(b * H * 2 * Dv, (b + 1) * H * 2 * Dv), ref.output.data, 1e-5, { seed: SEED, label: `entry ${b}`, shape: [1, H, 2, Dv] });
    }
    cache.truncate(5);
    expect(Array.from(cache.lengths)).toEqual([5, 5, 4]);
    cache.reset();
    expect(Array.from(cache.lengths)).toEqual([0, 0, 0]);
  });

  test('a ragged append past maxLength for one entry, or with bad lengths, throws and writes nothing', () => {
    const rng = rngFor(SEED, 'ragged bad');
    const cache = new KVCache({ batch: 2, kvHeads: 1, headDim: 4, maxLength: 5 });
    const four = randomTensor(rng, [2, 1, 4, 4]);
    cache.append(four, four, { lengths: [4, 1] });
    const before = denseCopy(cache.keys).data.slice();
    const fail = (fn: () => unknown, name: string, message: RegExp) => {
      expect(fn).toThrow(expect.objectContaining({ name, message: expect.stringMatching(message) }));
      expect(Array.from(cache.lengths)).toEqual([4, 1]);
      expect(denseCopy(cache.keys).data).toEqual(before);
    };
    const two = randomTensor(rng, [2, 1, 2, 4]);
    fail(() => cache.append(two, two), 'RangeError', /appending 2 positions to batch entry 0's 4 would pass maxLength = 5/);
    fail(() => cache.append(two, two, { lengths: [1, 3] }), 'RangeError', /options\.lengths\[1\] must be an integer in \[0, n \(the positions appended\) = 2\], received 3/);
    fail(() => cache.append(two, two, { lengths: [1] }), 'RangeError', /options\.lengths\.length must be batch = 2, received 1/);
    fail(() => cache.append(two, two, { lengths: 2 as never }), 'TypeError', /options\.lengths/);
    fail(() => cache.append(two, two, { lengths: [0.5, 1] }), 'RangeError', /options\.lengths\[0\] must be an integer/);
    cache.append(two, two, { lengths: [1, 2] });
    expect(Array.from(cache.lengths)).toEqual([5, 3]);
  });

  test('only attention reads the strided views; bad strides are named', () => {
    const rng = rngFor(SEED, 'strided');
    const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 6 });
    const two = randomTensor(rng, [1, 2, 2, 4]);
    cache.append(two, two);
    expect(() => matmul(cache.keys, randomTensor(rng, [4, 4]))).toThrow(/a strided view \(a KVCache's keys or values: only attention reads those\)/);
    const q = randomTensor(rng, [1, 2, 1, 4]);
    const keys = cache.keys;
    expect(() => attention(q, { ...keys, strides: [48, 24, 4] }, cache.values)).toThrow(/k must have 4 dims and 4 strides/);
    expect(() => attention(q, { ...keys, strides: [48, 24, 4, 2] }, cache.values)).toThrow(/k\.strides\[3\] must be 1, received the number 2/);
    expect(() => attention(q, { ...keys, strides: [48, -24, 4, 1] }, cache.values)).toThrow(/k\.strides\[1\] must be a safe integer >= 0/);
    expect(() => attention(q, { ...keys, data: keys.data.subarray(1) }, cache.values)).toThrow(/k\.data\.length must be 32 .*received 31/);
    expect(() => attention({ data: q.data, shape: [1, 1, 8] }, cache.keys, cache.values, { heads: 2 })).toThrow(/q must have 4 dims with a strided k or v/);
    const out = { data: new Float32Array(8), shape: [1, 2, 1, 4] };
    expect(() => attention(q, cache.keys, cache.values, { out: { data: keys.data.subarray(0, 8), shape: [1, 2, 1, 4] } })).toThrow(/must not share memory with k/);
    expect(attention(q, cache.keys, cache.values, { out })).toBe(out);
  });
});
