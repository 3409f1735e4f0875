/**
 * bf16 keys and values: a KVCache with dtype 'bf16' stores each appended
 * value rounded to nearest even, and attention over bf16 K and V (its views,
 * or Bf16Tensors) gives what it gives over float32 K and V holding the same
 * widened values: the same bits on the decode path, float32 rounding on the
 * tiled one, and float64's result over the rounded values to 1e-5.
 */
import { attention, attentionAsync, KVCache, MultiHeadSelfAttention, tensor, type Bf16StridedTensor, type Bf16Tensor, type Tensor } from '../lib';
import { bf16Bits, fromBf16, rounded, toBf16 } from './helpers/bf16';
import { expectBitEqual, expectClose, pickSeed, poisoned, randomFloat32, rngFor, SIZES, type Rng } from './helpers/random';
import { attentionOutputScale, refAttention } from './helpers/reference';
import { denseCopy } from './helpers/strided';

const SEED = pickSeed();

function randomTensor(rng: Rng, shape: number[]): Tensor {
  return { data: randomFloat32(rng, shape.reduce((a, b) => a * b, 1)), shape };
}

/** The values of a bf16 view as a dense float32 [B, H, L, D] tensor. */
const widenedCopy = (view: Bf16StridedTensor): Tensor => denseCopy(view, fromBf16);

describe(`bf16 keys and values (seed ${SEED})`, () => {
  test('appends round each value to nearest even in bhsd, bshd and 3-D, and the views are bf16', () => {
    const rng = rngFor(SEED, 'appends');
    const B = 2, Hkv = 3, D = 5, Dv = 7;
    const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv, maxLength: 12, dtype: 'bf16' });
    expect(cache.dtype).toBe('bf16');
    const k1 = randomTensor(rng, [B, Hkv, 4, D]), v1 = randomTensor(rng, [B, Hkv, 4, Dv]);
    k1.data[0] = NaN;
    k1.data[1] = 1 + 2 ** -8; // a tie: to even, 1
    cache.append(k1, v1);
    const k2 = randomTensor(rng, [B, 3, Hkv, D]), v2 = randomTensor(rng, [B, 3, Hkv, Dv]);
    cache.append(k2, v2, { layout: 'bshd' });
    const k3 = randomTensor(rng, [B, 2, Hkv * D]), v3 = randomTensor(rng, [B, 2, Hkv * Dv]);
    cache.append(k3, v3);
    const keys = cache.keys;
    expect(keys.dtype).toBe('bf16');
    expect(keys.data).toBeInstanceOf(Uint16Array);
    expect(keys.shape).toEqual([B, Hkv, 9, D]);
    // Expected bits, position by position, from each append's own layout.
    for (const [view, dim, parts] of [
      [keys, D, [k1, k2, k3]],
      [cache.values, Dv, [v1, v2, v3]],
    ] as const) {
      const want: number[] = [], got: number[] = [];
      for (let b = 0; b < B; b++)
        for (let h = 0; h < Hkv; h++) {
          const at = (i: Tensor, t: number, e: number): number => {
            const n = i.shape.length === 3 ? i.shape[1] : i === parts[0] ? i.shape[2] : i.shape[1];
            if (i === parts[0]) return i.data[((b * Hkv + h) * n + t) * dim + e];
            return i.data[((b * n + t) * Hkv + h) * dim + e];
          };
          for (const [i, n] of [[parts[0], 4], [parts[1], 3], [parts[2], 2]] as const)
            for (let t = 0; t < n; t++) for (let e = 0; e < dim; e++) want.push(toBf16(at(i, t, e)));
          for (let t = 0; t < 9; t++)
            for (let e = 0; e < dim; e++) got.push(view.data[b * view.strides[0] + h * view.strides[1] + t * view.strides[2] + e]);
        }
      expect(got).toEqual(want);
    }
    expect(keys.data[0]).toBe(0x7fc0);
    expect(keys.data[1]).toBe(0x3f80);
  });

  test('attention over bf16 views: the bits of float32 copies on the decode path, their values on the tiled path, sync and async', async () => {
    const rng = rngFor(SEED, 'views');
    for (const [Sq, L, D] of [[1, 197, 64], [3, 1000, 17], [4, 63, 128], [65, 300, 32], [17, 1, 3], [1, 1, 1]]) {
      const B = 2, Hkv = 2, H = 8;
      const cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, maxLength: L + 50, dtype: 'bf16' });
      cache.append(randomTensor(rng, [B, Hkv, L, D]), randomTensor(rng, [B, Hkv, L, D]));
      const q = randomTensor(rng, [B, H, Sq, D]);
      const options = { causal: true, softcap: 30, window: { left: 100 } };
      const out = poisoned(B * H * Sq * D);
      attention(q, cache.keys, cache.values, { ...options, out: { data: out, shape: q.shape } });
      const dense = attention(q, widenedCopy(cache.keys), widenedCopy(cache.values), options);
      const label = `Sq ${Sq} L ${L} D ${D}`;
      if (Sq <= 4) expectBitEqual(out, dense.data, { seed: SEED, label });
      else expectClose(out, dense.data, 1e-6, { seed: SEED, label, shape: q.shape });
      const viaAsync = await attentionAsync(q, cache.keys, cache.values, options);
      expectBitEqual(viaAsync.data, out, { seed: SEED, label: `${label} async` });
    }
  });

  test('awkward sizes against float64 over the rounded values, and within 1e-2 of float32 K and V', () => {
    const rng = rngFor(SEED, 'sizes');
    for (const Sq of [1, 3, 17, 197])
      for (const L of SIZES) {
        const D = [1, 3, 17, 63, 65, 197][(Sq + L) % 6];
        const B = 1, Hkv = 2, H = 4;
        const q = randomTensor(rng, [B, H, Sq, D]), k = randomTensor(rng, [B, Hkv, L, D]), v = randomTensor(rng, [B, Hkv, L, D]);
        const kb: Bf16Tensor = { data: bf16Bits(k.data), shape: k.shape, dtype: 'bf16' };
        const vb: Bf16Tensor = { data: bf16Bits(v.data), shape: v.shape, dtype: 'bf16' };
        const options = { causal: Sq <= L };
        const out = attention(q, kb, vb, options);
        const label = `Sq ${Sq} L ${L} D ${D}`;
        const ref = refAttention(q.data, q.shape, rounded(k.data), k.shape, rounded(v.data), v.shape, options);
        expectClose(out.data, ref.output.data, 1e-5, { seed: SEED, label, shape: q.shape });
        // Against float32 K and V the rounding shows, held to the output's natural size.
        const float32 = refAttention(q.data, q.shape, k.data, k.shape, v.data, v.shape, options);
        const scale = attentionOutputScale(v.data, out.data.length, L);
        expectClose(out.data, float32.output.data, 1e-2, { seed: SEED, label: `${label} vs float32 K, V`, shape: q.shape, scale });
      }
  });

  test('3-D bf16 k and v with heads, ragged key lengths, GQA, sinks and a mask', () => {
    const rng = rngFor(SEED, 'options');
    const B = 3, H = 8, Hkv = 2, Sq = 2, L = 70, D = 16;
    const q = randomTensor(rng, [B, Sq, H * D]), k = randomTensor(rng, [B, L, Hkv * D]), v = randomTensor(rng, [B, L, Hkv * D]);
    const mask = randomTensor(rng, [Sq, L]);
    const sinks = randomFloat32(rng, H);
    const keyLengths = Int32Array.from([70, 0, 33]);
    const options = { heads: H, kvHeads: Hkv, causal: true, mask, sinks, keyLengths };
    const out = attention(q, { data: bf16Bits(k.data), shape: k.shape, dtype: 'bf16' }, { data: bf16Bits(v.data), shape: v.shape, dtype: 'bf16' }, options);
    const ref = refAttention(q.data, q.shape, rounded(k.data), k.shape, rounded(v.data), v.shape, {
      heads: H, kvHeads: Hkv, causal: true, mask: mask.data, maskShape: mask.shape, sinks, keyLengths,
    });
    expectClose(out.data, ref.output.data, 1e-5, { seed: SEED, label: '3-D', shape: q.shape });
  });

  test('a decoder block over a bf16 cache gives what it gives over a float32 cache, to bf16 rounding', () => {
    const rng = rngFor(SEED, 'block');
    const dim = 32, heads = 4, kvHeads = 2, dimHead = 8;
    const w = (shape: number[]) => tensor(randomFloat32(rng, shape.reduce((a, b) => a * b, 1)).map((x) => x * 0.3), shape);
    const block = new MultiHeadSelfAttention({
      dim, heads, kvHeads, dimHead, norm: { type: 'rms', weight: w([dim]) }, rope: {},
      weights: { qkvWeight: w([(heads + 2 * kvHeads) * dimHead, dim]), outWeight: w([dim, heads * dimHead]) },
    });
    const float = new KVCache({ batch: 1, kvHeads, headDim: dimHead, maxLength: 32 });
    const half = new KVCache({ batch: 1, kvHeads, headDim: dimHead, maxLength: 32, dtype: 'bf16' });
    const prompt = randomTensor(rng, [1, 9, dim]);
    expectClose(block.forward(prompt, { cache: half }).data, block.forward(prompt, { cache: float }).data, 1e-2, { seed: SEED, label: 'prefill' });
    for (let t = 0; t < 3; t++) {
      const x = randomTensor(rng, [1, 1, dim]);
      expectClose(block.forward(x, { cache: half }).data, block.forward(x, { cache: float }).data, 1e-2, { seed: SEED, label: `step ${t}` });
    }
    expect(half.length).toBe(12);
  });

  test('mixed dtypes, a bad dtype and bad bf16 views throw named errors and write nothing', () => {
    const rng = rngFor(SEED, 'bad');
    const cache = new KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 8, dtype: 'bf16' });
    const float = new KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 8 });
    const step = randomTensor(rng, [1, 1, 3, 4]);
    cache.append(step, step);
    float.append(step, step);
    const q = randomTensor(rng, [1, 2, 1, 4]);
    const out = poisoned(8);
    const o = { data: out, shape: [1, 2, 1, 4] };
    const fail = (fn: () => unknown, name: string, message: RegExp) => {
      expect(fn).toThrow(expect.objectContaining({ name, message: expect.stringMatching(message) }));
      expect(out.every(Number.isNaN)).toBe(true);
    };
    fail(() => attention(q, cache.keys, float.values, { out: o }), 'TypeError', /attention: expected bf16 values \(a Uint16Array\) like k's for v\.data/);
    fail(() => attention(q, float.keys, cache.values, { out: o }), 'TypeError', /bf16 values .* for k\.data/);
    fail(() => attention(q, { ...cache.keys, data: new Float32Array(12) as never }, cache.values, { out: o }), 'TypeError', /expected a Uint16Array for k\.data/);
    fail(() => attention(q, { ...cache.keys, strides: [12, 12, 4, 2] }, cache.values, { out: o }), 'RangeError', /k\.strides\[3\] must be 1/);
    fail(() => attention(q, { ...cache.keys, data: cache.keys.data.subarray(1) }, cache.values, { out: o }), 'RangeError', /k\.data\.length must be 12/);
    fail(() => attention(q, { data: new Uint16Array(11), shape: [1, 1, 3, 4], dtype: 'bf16' }, cache.values, { out: o }), 'RangeError', /k\.data\.length/);
    expect(() => new KVCache({ batch: 1, kvHeads: 1, headDim: 4, maxLength: 8, dtype: 'float16' as never })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/options\.dtype/) }),
    );
    // k or v sharing the cache's memory is refused before any head is written.
    const storage = cache.keys.data.buffer;
    const inside = { data: new Float32Array(storage, 0, 4), shape: [1, 1, 1, 4] };
    const lengthBefore = cache.length, keysBefore = cache.keys.data.slice();
    expect(() => cache.append(inside, { data: step.data.slice(0, 4), shape: [1, 1, 1, 4] })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/must not share memory with k/) }),
    );
    expect(cache.length).toBe(lengthBefore);
    expect(cache.keys.data).toEqual(keysBefore);
    // An append that does not fit writes nothing.
    const before = cache.keys.data.slice();
    expect(() => cache.append(randomTensor(rng, [1, 1, 6, 4]), randomTensor(rng, [1, 1, 6, 4]))).toThrow(RangeError);
    expect(cache.length).toBe(3);
    expect(cache.keys.data).toEqual(before);
  });
});
