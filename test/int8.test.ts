/**
 * int8 weights: prepack(w, { dtype: 'int8' }) and matmul against it. Each
 * product gives the bits of a scalar reference of the scheme written here from
 * its definition (docs/design/int8.md): per-column weight scales, per-row
 * activation scales, integer sums, then alpha, c and the bias in float32. The
 * native tests run the same comparison on every kernel this CPU has; here it
 * covers the options, batches, async and bad input, and the error against
 * float64 that the scheme promises.
 */
import { info, KVCache, loadSafetensors, matmul, matmulAsync, MultiHeadSelfAttention, PackedMatrix, prepack, prepackAsync, tensor, type Bf16Tensor, type Int8Tensor, type Tensor } from '../lib';
import { expectBitEqual, expectClose, pick, pickSeed, poisoned, randomFloat32, rngFor, SIZES, type Rng } from './helpers/random';
import { refMatmul } from './helpers/reference';

const SEED = pickSeed();
const f = Math.fround;

function roundEven(x: number): number {
  const floor = Math.floor(x), frac = x - floor;
  if (frac !== 0.5) return frac < 0.5 ? floor : floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** max|v| / 127 and the values quantized to [-127, 127], as the scheme defines them. */
function quantize(values: number[]): { scale: number; q: number[] } {
  if (values.some((v) => !Number.isFinite(v))) {
    return { scale: NaN, q: values.map((v) => (Number.isFinite(v) ? 0 : -127)) };
  }
  const most = values.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  if (most === 0) return { scale: 0, q: values.map(() => 0) };
  const inverse = f(127 / most);
  return { scale: f(most / 127), q: values.map((v) => Math.max(-127, Math.min(127, roundEven(f(v * inverse))))) };
}

/** The scheme's product of a [M, K] (rows as given) and w [K, N], then alpha, c (beta) and out's start. */
function refInt8(a: number[][], w: number[][], alpha: number, bias?: Float32Array, start?: Float32Array): Float32Array {
  const K = w.length, N = w[0].length;
  const cols = Array.from({ length: N }, (_, j) => quantize(w.map((row) => row[j])));
  const out = new Float32Array(a.length * N);
  a.forEach((rowValues, i) => {
    const row = quantize(rowValues);
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += row.q[k] * cols[j].q[k];
      let r = f(f(alpha) * f(f(sum) * f(row.scale * cols[j].scale)));
      if (start) r = f(r + start[i * N + j]);
      if (bias) r = f(r + bias[j]);
      out[i * N + j] = r;
    }
  });
  return out;
}

const rowsOf = (data: Float32Array, rows: number, cols: number) =>
  Array.from({ length: rows }, (_, i) => Array.from(data.subarray(i * cols, (i + 1) * cols)));

function gaussian(rng: Rng, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  return out;
}

describe(`int8 weights (seed ${SEED}, kernels ${info().int8})`, () => {
  test('products give the scheme bits: awkward sizes, a bias, alpha, transposed packing, poisoned out', () => {
    const rng = rngFor(SEED, 'bits');
    for (let i = 0; i < 14; i++) {
      const [M, K, N] = [pick(rng, SIZES), pick(rng, [...SIZES, 1000]), pick(rng, SIZES)];
      const a = randomFloat32(rng, M * K);
      const w = randomFloat32(rng, K * N); // [K, N]
      const wt = new Float32Array(K * N); // [N, K], a Linear weight
      for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) wt[j * K + k] = w[k * N + j];
      const transpose = i % 2 === 1;
      const packed = transpose ? prepack({ data: wt, shape: [N, K] }, { transpose, dtype: 'int8' }) : prepack({ data: w, shape: [K, N] }, { dtype: 'int8' });
      expect(packed).toBeInstanceOf(PackedMatrix);
      expect([packed.dtype, packed.shape, packed.data instanceof Int8Array]).toEqual(['int8', [K, N], true]);
      const bias = i % 3 === 0 ? randomFloat32(rng, N) : undefined;
      const alpha = i % 4 === 0 ? 0.37 : 1;
      const out = { data: poisoned(M * N), shape: [M, N] };
      matmul({ data: a, shape: [M, K] }, packed, { c: bias && { data: bias, shape: [N] }, alpha, out });
      const label = `[${M},${K}]·[${K},${N}] transpose=${transpose} alpha=${alpha} bias=${!!bias}`;
      expectBitEqual(out.data, refInt8(rowsOf(a, M, K), rowsOf(w, K, N), alpha, bias), { seed: SEED, label });
    }
  });

  test('c with beta, a transposed, batched a (folded into rows, and entry by entry), a row of zeros, a non-finite row', () => {
    const rng = rngFor(SEED, 'options');
    const [B, M, K, N] = [2, 17, 65, 63];
    const w = randomFloat32(rng, K * N);
    const packed = prepack({ data: w, shape: [K, N] }, { dtype: 'int8' });
    const a = randomFloat32(rng, B * M * K);
    a.fill(0, 0, K); // entry 0, row 0
    a[(M + 3) * K + 5] = Infinity; // entry 1, row 3
    const rows = rowsOf(a, B * M, K);
    const c = randomFloat32(rng, B * M * N);
    const want = refInt8(rows, rowsOf(w, K, N), 1, undefined, c.map((v) => f(0.5 * v)));
    const got = matmul({ data: a, shape: [B, M, K] }, packed, { c: { data: c, shape: [B, M, N] }, beta: 0.5 });
    expectBitEqual(got.data, want, { seed: SEED, label: 'c with beta 0.5, batched' });
    expect(Number.isNaN(got.data[(M + 3) * N])).toBe(true);
    // a transposed: [B, K, M] read as [B, M, K], one entry at a time.
    const at = new Float32Array(B * K * M);
    for (let b = 0; b < B; b++) for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) at[b * K * M + k * M + i] = a[b * M * K + i * K + k];
    const out = { data: poisoned(B * M * N), shape: [B, M, N] };
    matmul({ data: at, shape: [B, K, M] }, packed, { transposeA: true, out });
    expectBitEqual(out.data, refInt8(rows, rowsOf(w, K, N), 1), { seed: SEED, label: 'a transposed, batched' });
  });

  test('within the scheme’s error of float64: N(0, 1) operands at K 768 and 3072', () => {
    const rng = rngFor(SEED, 'accuracy');
    for (const K of [768, 3072]) {
      const [M, N] = [33, 96];
      const a: Tensor = { data: gaussian(rng, M * K), shape: [M, K] };
      const w: Tensor = { data: gaussian(rng, N * K), shape: [N, K] };
      const got = matmul(a, prepack(w, { transpose: true, dtype: 'int8' }));
      const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeB: true });
      expectClose(got.data, ref.data, 1.5e-2, { seed: SEED, label: `K ${K}` });
    }
  });

  test('async: prepackAsync packs the same bytes, matmulAsync gives the same bits', async () => {
    const rng = rngFor(SEED, 'async');
    const [M, K, N] = [65, 197, 63];
    const w: Tensor = { data: randomFloat32(rng, N * K), shape: [N, K] };
    const a: Tensor = { data: randomFloat32(rng, M * K), shape: [M, K] };
    const packed = prepack(w, { transpose: true, dtype: 'int8' });
    const later = await prepackAsync(w, { transpose: true, dtype: 'int8' });
    expect(Buffer.from(later.data.buffer, later.data.byteOffset, later.data.byteLength).equals(
      Buffer.from(packed.data.buffer, packed.data.byteOffset, packed.data.byteLength))).toBe(true);
    const sync = matmul(a, packed);
    expectBitEqual((await matmulAsync(a, later)).data, sync.data, { seed: SEED, label: 'matmulAsync' });
  });

  test('bad input: a bf16 b, a depth past int32 sums, a PackedMatrix whose data is not an Int8Array, a wrong length', () => {
    const bf16: Bf16Tensor = { data: new Uint16Array(6), shape: [2, 3], dtype: 'bf16' };
    expect(() => prepack(bf16 as unknown as Tensor, { dtype: 'int8' })).toThrow(new RangeError("prepack: a bf16 b packs only with dtype 'bf16' (load it widened to float32 for a float32 weight)"));
    expect(() => prepack({ data: new Float32Array(65537), shape: [65537, 1] }, { dtype: 'int8' })).toThrow(
      new RangeError('prepack: int8 packs a depth K of at most 65536, received 65537'),
    );
    expect(() => prepack({ data: new Float32Array(6), shape: [2, 3] }, { dtype: 'int4' as 'int8' })).toThrow(RangeError);
    const a: Tensor = { data: new Float32Array(4), shape: [2, 2] };
    const forged = new PackedMatrix(new Float32Array(64) as unknown as Int8Array, 2, 2, 'int8');
    expect(() => matmul(a, forged)).toThrow(TypeError);
    expect(() => matmul(a, forged)).toThrow('matmul: expected an Int8Array for b.data but received Float32Array(64)');
    const short = new PackedMatrix(new Int8Array(10), 2, 2, 'int8');
    const message = `matmul: packed b holds 10 bytes, expected ${prepack(a, { dtype: 'int8' }).data.length} for [2, 2] packed in int8`;
    expect(() => matmul(a, short)).toThrow(expect.objectContaining({ name: 'RangeError', message }));
  });
});

/** The scheme's product against a weight already quantized: q [K, N] as integers, one scale per column. */
function refQuantized(a: number[][], q: number[][], scales: Float32Array): Float32Array {
  const N = scales.length, K = q.length;
  const out = new Float32Array(a.length * N);
  a.forEach((rowValues, i) => {
    const row = quantize(rowValues);
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += row.q[k] * q[k][j];
      out[i * N + j] = f(f(sum) * f(row.scale * scales[j]));
    }
  });
  return out;
}

/** A .safetensors image of the given tensors (little-endian data, in order). */
function safetensors(entries: Record<string, { dtype: string; shape: number[]; bytes: Uint8Array }>): Uint8Array {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, e] of Object.entries(entries)) {
    header[name] = { dtype: e.dtype, shape: e.shape, data_offsets: [offset, offset + e.bytes.length] };
    offset += e.bytes.length;
  }
  const json = Buffer.from(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const e of Object.values(entries)) {
    out.set(e.bytes, at);
    at += e.bytes.length;
  }
  return out;
}

describe(`int8 weights quantized elsewhere (seed ${SEED})`, () => {
  test('an Int8Tensor packs as it is with its scales: the scheme bits, plain and transposed (a Linear weight)', async () => {
    const rng = rngFor(SEED, 'quantized');
    for (const [M, K, N] of [[1, 17, 3], [17, 65, 63], [65, 197, 65]]) {
      const q = Int8Array.from({ length: N * K }, () => Math.floor(rng() * 255) - 127); // [N, K]: out features first
      const scales = Float32Array.from({ length: N }, () => 0.001 + 0.01 * rng());
      const a = randomFloat32(rng, M * K);
      const qKN = Array.from({ length: K }, (_, k) => Array.from({ length: N }, (_, j) => q[j * K + k]));
      const want = refQuantized(rowsOf(a, M, K), qKN, scales);
      const weight: Int8Tensor = { data: q, shape: [N, K], dtype: 'int8' };
      const packed = prepack(weight, { transpose: true, scales });
      expect([packed.dtype, packed.shape]).toEqual(['int8', [K, N]]);
      const out = { data: poisoned(M * N), shape: [M, N] };
      matmul({ data: a, shape: [M, K] }, packed, { out });
      expectBitEqual(out.data, want, { seed: SEED, label: `[${M},${K}]·[${K},${N}] quantized` });
      // Not transposed: [K, N] with the same values.
      const plain: Int8Tensor = { data: Int8Array.from(qKN.flat()), shape: [K, N], dtype: 'int8' };
      expectBitEqual(matmul({ data: a, shape: [M, K] }, await prepackAsync(plain, { scales })).data, want, { seed: SEED, label: 'plain, async pack' });
    }
  });

  test('bad input: -128, missing or wrong scales, another dtype; nothing packs', () => {
    const q: Int8Tensor = { data: Int8Array.of(1, 2, -128, 4, 5, 6), shape: [2, 3], dtype: 'int8' };
    const scales = Float32Array.of(0.5, 0.25, 1);
    const range = (message: string | RegExp) => expect.objectContaining({ name: 'RangeError', message: typeof message === 'string' ? message : expect.stringMatching(message) });
    expect(() => prepack(q, { scales })).toThrow(range('packMatrix: b holds -128 at element 2: int8 weights are symmetric, in [-127, 127]'));
    const ok: Int8Tensor = { data: Int8Array.of(1, 2, -127, 4, 5, 6), shape: [2, 3], dtype: 'int8' };
    expect(() => prepack(ok, {} as { scales: Float32Array })).toThrow(range('prepack: options.scales (one per column of op(b), 3) is required with an int8 b, received undefined'));
    expect(() => prepack(ok, { scales: Float32Array.of(1, 2) })).toThrow(range('prepack: options.scales must hold one scale per column of op(b), 3, received 2'));
    expect(() => prepack(ok, { scales: Float32Array.of(1, NaN, 2) })).toThrow(range('packMatrix: scales[1] is not a finite number'));
    expect(() => prepack(ok, { scales, dtype: 'bf16' })).toThrow(range("prepack: an int8 b packs only with dtype 'int8', received 'bf16'"));
    expect(() => prepack({ data: new Float32Array(6), shape: [2, 3] }, { scales })).toThrow(range('prepack: options.scales goes only with an int8 b (an Int8Tensor)'));
    expect(() => prepack({ data: new Int8Array(5), shape: [2, 3], dtype: 'int8' }, { scales })).toThrow(range(/b\.data\.length must equal/));
  });

  test("loadSafetensors(..., { int8: 'keep' }) gives I8 tensors as Int8Array views, which prepack with their scales; by default I8 is refused", () => {
    const rng = rngFor(SEED, 'safetensors');
    const [K, N] = [33, 5];
    const q = Int8Array.from({ length: N * K }, () => Math.floor(rng() * 255) - 127);
    const scales = Float32Array.from({ length: N }, () => 0.02 * rng());
    const file = safetensors({
      'fc.weight': { dtype: 'I8', shape: [N, K], bytes: new Uint8Array(q.buffer) },
      'fc.weight_scale': { dtype: 'F32', shape: [N], bytes: new Uint8Array(scales.buffer) },
    });
    expect(() => loadSafetensors(file)).toThrow(/tensor "fc.weight" has dtype I8; only F32, F16 and BF16 are supported \(I8 with options.int8 'keep'/);
    const { tensors, dtypes } = loadSafetensors(file, { int8: 'keep' });
    expect(dtypes).toEqual({ 'fc.weight': 'I8', 'fc.weight_scale': 'F32' });
    const w = tensors['fc.weight'] as Int8Tensor;
    expect([w.dtype, w.shape, w.data instanceof Int8Array, w.data.buffer === file.buffer]).toEqual(['int8', [N, K], true, true]);
    const a = randomFloat32(rng, 3 * K);
    const packed = prepack(w, { transpose: true, scales: (tensors['fc.weight_scale'] as Tensor).data as Float32Array });
    const qKN = Array.from({ length: K }, (_, k) => Array.from({ length: N }, (_, j) => q[j * K + k]));
    expectBitEqual(matmul({ data: a, shape: [3, K] }, packed).data, refQuantized(rowsOf(a, 3, K), qKN, scales), { seed: SEED, label: 'from safetensors' });
  });
});

/** Cosine similarity of two vectors. */
function cosine(x: Float32Array, y: Float32Array): number {
  let xy = 0, xx = 0, yy = 0;
  for (let i = 0; i < x.length; i++) {
    xy += x[i] * y[i];
    xx += x[i] * x[i];
    yy += y[i] * y[i];
  }
  return xy / Math.sqrt(xx * yy);
}

describe(`MultiHeadSelfAttention with int8 projections (seed ${SEED})`, () => {
  // A ViT-style block (LayerNorm, biases) and a LLaMA-style decoder layer
  // (RMSNorm, grouped heads, RoPE, a cache), against the same block in float32.
  const layers = [
    { name: 'vit', dim: 96, heads: 4, kvHeads: 4, norm: 'layer' as const, bias: true },
    { name: 'llama', dim: 64, heads: 4, kvHeads: 2, norm: 'rms' as const, bias: false },
  ];
  for (const l of layers) {
    test(`${l.name}: cosine ≥ 0.999 and within 3e-2 of float32 (N(0, 1) weights); async the same bits`, async () => {
      const rng = rngFor(SEED, `block ${l.name}`);
      const dimHead = l.dim / l.heads;
      const rows = (l.heads + 2 * l.kvHeads) * dimHead;
      const inner = l.heads * dimHead;
      const config = {
        dim: l.dim,
        heads: l.heads,
        kvHeads: l.kvHeads,
        norm: { type: l.norm, weight: tensor(randomFloat32(rng, l.dim).map((v) => 1 + 0.5 * v), [l.dim]) },
        ...(l.norm === 'rms' ? { rope: { theta: 10000 } } : {}),
        weights: {
          qkvWeight: tensor(gaussian(rng, rows * l.dim).map((v) => v / Math.sqrt(l.dim)), [rows, l.dim]),
          outWeight: tensor(gaussian(rng, l.dim * inner).map((v) => v / Math.sqrt(inner)), [l.dim, inner]),
          ...(l.bias ? { qkvBias: tensor(randomFloat32(rng, rows).map((v) => 0.2 * v), [rows]) } : {}),
        },
      };
      const q8 = new MultiHeadSelfAttention({ ...config, dtype: 'int8' });
      const full = new MultiHeadSelfAttention(config);
      const [B, T] = [2, 17];
      const x = tensor(gaussian(rng, B * T * l.dim), [B, T, l.dim]);
      // Gaussian weights waste part of int8's range on their tails: over 60 seeds these layers
      // measured up to 2.1e-2 (docs/design/int8.md, "Accuracy").
      const check = (got: Float32Array, want: Float32Array, label: string) => {
        expect({ label, cosine: cosine(got, want) >= 0.999 }).toEqual({ label, cosine: true });
        expectClose(got, want, 3e-2, { seed: SEED, label });
      };
      const causal = l.norm === 'rms';
      const y = q8.forward(x, { causal });
      check(y.data, full.forward(x, { causal }).data, `${l.name} against float32`);
      expectBitEqual((await q8.forwardAsync(x, { causal })).data, y.data, { seed: SEED, label: `${l.name} async` });
      if (l.norm !== 'rms') return;
      // Decode: the prompt, then eight single tokens, each against the cache; the outputs
      // together against float32's (one 64-wide token alone is too few values to measure 2e-2 on).
      const caches = [q8, full].map(() => new KVCache({ batch: 1, kvHeads: l.kvHeads, headDim: dimHead, maxLength: 32 }));
      const steps = [tensor(gaussian(rng, 9 * l.dim), [1, 9, l.dim])];
      for (let step = 0; step < 8; step++) steps.push(tensor(gaussian(rng, l.dim), [1, 1, l.dim]));
      const decode = (block: MultiHeadSelfAttention, cache: KVCache) => {
        const outs = steps.map((x) => block.forward(x, { cache, causal: true }).data);
        return Float32Array.from(outs.flatMap((o) => Array.from(o)));
      };
      check(decode(q8, caches[0]), decode(full, caches[1]), 'prompt and decode steps');
    });
  }

  test('ViT-B/16 scale (dim 768, 12 heads, 197 tokens): within 2e-2 of float32 with uniform weights, 3e-2 with Gaussian ones; cosine ≥ 0.999', () => {
    const rng = rngFor(SEED, 'vit-b');
    const [dim, heads, rows] = [768, 12, 3 * 768];
    const uniform = (n: number, scale: number) => randomFloat32(rng, n).map((v) => v * scale);
    for (const [kind, weights, bound] of [
      ['uniform', (n: number) => uniform(n, Math.sqrt(3 / dim)), 2e-2],
      ['Gaussian', (n: number) => gaussian(rng, n).map((v) => v / Math.sqrt(dim)), 3e-2],
    ] as const) {
      const config = {
        dim,
        heads,
        norm: { weight: tensor(randomFloat32(rng, dim).map((v) => 1 + 0.5 * v), [dim]) },
        weights: { qkvWeight: tensor(weights(rows * dim), [rows, dim]), outWeight: tensor(weights(dim * dim), [dim, dim]), qkvBias: tensor(uniform(rows, 0.1), [rows]) },
      };
      const x = tensor(uniform(197 * dim, 1), [1, 197, dim]);
      const got = new MultiHeadSelfAttention({ ...config, dtype: 'int8' }).forward(x).data;
      const want = new MultiHeadSelfAttention(config).forward(x).data;
      expect({ kind, cosine: cosine(got, want) >= 0.999 }).toEqual({ kind, cosine: true });
      expectClose(got, want, bound, { seed: SEED, label: `${kind} weights` });
    }
  });
});
