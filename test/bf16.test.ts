/**
 * Products against bf16 weights (prepack's dtype 'bf16'), against float64
 * over the same bf16-rounded operands, on poisoned outputs. Fresh inputs
 * every run (replay: MHSA_TEST_SEED=<seed> npx jest test/bf16.test.ts).
 * The native tests run every path the CPU has (AMX, AVX512_BF16, widening);
 * here the process's own path, and the widening one in a child process.
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { MultiHeadSelfAttention, info, matmul, matmulAsync, prepack, prepackAsync, tensor, type Bf16Tensor } from '../lib';
import { native } from '../lib/native';
import { SIZES, dotProductScale, expectBitEqual, expectClose, pickSeed, poisoned, randomFloat32, rngFor } from './helpers/random';
import { fromBf16, rounded, toBf16 } from './helpers/bf16';
import { refMatmul, refMatmulMagnitude } from './helpers/reference';

const SEED = pickSeed();

describe(`bf16 products (seed ${SEED})`, () => {
  test('info names the bf16 path', () => {
    expect(['amx', 'avx512bf16', 'widen']).toContain(info().bf16);
  });

  test('awkward sizes against float64 over the rounded operands, and near float32', () => {
    const rng = rngFor(SEED, 'sizes');
    for (const M of SIZES)
      for (const K of [1, 17, 65, 768, 1000])
        for (const N of [1, 3, 17, 65]) {
          if (K >= 768 && M > 17 && N > 17) continue;  // the large depths at a few shapes keep this quick
          const a = randomFloat32(rng, M * K);
          const w = randomFloat32(rng, N * K); // a Linear weight [N, K]
          const label = `M${M} K${K} N${N}`;
          const out = poisoned(M * N);
          const y = matmul(tensor(a, [M, K]), prepack(tensor(w, [N, K]), { transpose: true, dtype: 'bf16' }), {
            out: { data: out, shape: [M, N] },
          });
          expect(y.data).toBe(out);
          const ref = refMatmul(rounded(a), [M, K], rounded(w), [N, K], { transposeB: true });
          // One output element of a sum can cancel far below its terms (M1 K1000 N1 came out at
          // 0.0037 from terms summing to ~250 in magnitude): errors are measured against the terms' magnitude.
          const scale = dotProductScale(refMatmulMagnitude(a, [M, K], w, [N, K], { transposeB: true }).data);
          // The bound is 2e-3 at K = 768; the products of two bf16 are
          // exact in float, so only float summation remains.
          expectClose(out, ref.data, 1e-5, { seed: SEED, label, scale });
          // Against the unrounded operands: the bf16 rounding of each term, within 1e-2.
          const full = refMatmul(a, [M, K], w, [N, K], { transposeB: true });
          expectClose(out, full.data, 1e-2, { seed: SEED, label: `${label} against unrounded float64`, scale });
        }
  });

  test('bias, alpha and a batch of inputs; async gives the same bits', async () => {
    const rng = rngFor(SEED, 'options');
    const [B, M, K, N] = [3, 17, 768, 65];
    const a = randomFloat32(rng, B * M * K);
    const w = randomFloat32(rng, K * N);
    const bias = randomFloat32(rng, N);
    const packed = await prepackAsync(tensor(w, [K, N]), { dtype: 'bf16' });
    expect(packed.data).toEqual(prepack(tensor(w, [K, N]), { dtype: 'bf16' }).data);
    const opts = { alpha: 0.5, c: tensor(bias, [N]) };
    const y = matmul(tensor(a, [B, M, K]), packed, opts);
    const ref = refMatmul(rounded(a), [B, M, K], rounded(w), [K, N], { alpha: 0.5, c: bias, cShape: [N] });
    expectClose(y.data, ref.data, 1e-5, { seed: SEED, label: 'batched with bias' });
    const z = await matmulAsync(tensor(a, [B, M, K]), packed, opts);
    expectBitEqual(z.data, y.data, { seed: SEED, label: 'async' });
    // A transposed a: its rows are gathered before rounding.
    const at = randomFloat32(rng, K * M);
    const t = matmul(tensor(at, [K, M]), packed, { transposeA: true });
    expectClose(t.data, refMatmul(rounded(at), [K, M], rounded(w), [K, N], { transposeA: true }).data, 1e-5, {
      seed: SEED,
      label: 'transposeA',
    });
  });

  test('packed panels start on a 64-byte boundary, in either dtype', () => {
    for (const dtype of ['float32', 'bf16'] as const) {
      for (const [k, n] of [[1, 1], [17, 33], [768, 65]]) {
        const packed = prepack(tensor(new Float32Array(k * n), [k, n]), { dtype });
        expect(native.alignedOffset(packed.data)).toBe(0);
      }
    }
    const v = new Float32Array(64);
    const boundary = native.alignedOffset(v);
    expect(native.alignedOffset(v.subarray(boundary + 1))).toBe(15);
    expect(native.alignedOffset(new Uint16Array(v.buffer, 4 * boundary + 2, 8))).toBe(31);
    expect(() => native.alignedOffset(new Uint8Array(4) as never)).toThrow(expect.objectContaining({ name: 'TypeError' }));
  });

  test('a bf16 tensor packs to the bits its float32 form rounds to', () => {
    const rng = rngFor(SEED, 'bf16 source');
    const [K, N] = [65, 33];
    const w = randomFloat32(rng, N * K);
    const halves: Bf16Tensor = { data: Uint16Array.from(w, toBf16), shape: [N, K], dtype: 'bf16' };
    const fromHalves = prepack(halves, { transpose: true });
    expect(fromHalves.dtype).toBe('bf16');
    expect(fromHalves.data).toEqual(prepack(tensor(w, [N, K]), { transpose: true, dtype: 'bf16' }).data);
    // Its size is half of a float32 packing's or less (the depth pads to 32 per block).
    expect(fromHalves.data.byteLength).toBeLessThanOrEqual(prepack(tensor(w, [N, K]), { transpose: true }).data.byteLength);
  });

  test('rounding: ties to even, subnormals kept, NaN and infinities', () => {
    // A 1 x 1 weight against a = 1 shows the stored bf16 value.
    const values = [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -(2 ** -130), 3.4e38, Infinity, -Infinity];
    for (const v of values) {
      const y = matmul(tensor(new Float32Array([1]), [1, 1]), prepack(tensor(new Float32Array([v]), [1, 1]), { dtype: 'bf16' }));
      const want = fromBf16(toBf16(Math.fround(v)));
      // AMX and VDPBF16PS flush subnormal products to zero: -2^-130 may come back as -0.
      if (want !== 0 && Math.abs(want) < 2 ** -126) expect(Math.abs(y.data[0]) === 0 || y.data[0] === want).toBe(true);
      else expect(y.data[0]).toBe(want);
    }
    const nan = matmul(tensor(new Float32Array([1]), [1, 1]), prepack(tensor(new Float32Array([NaN]), [1, 1]), { dtype: 'bf16' }));
    expect(nan.data[0]).toBeNaN();
  });

  test('the widening path (MHSA_BF16=widen) gives float32 kernels the same rounded operands', () => {
    const script = `
      const m = require(${JSON.stringify(path.join(__dirname, '..', 'lib'))});
      const [M, K, N] = [17, 300, 40];
      const a = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i));
      const w = Float32Array.from({ length: K * N }, (_, i) => Math.cos(i * 0.7));
      const y = m.matmul(m.tensor(a, [M, K]), m.prepack(m.tensor(w, [K, N]), { dtype: 'bf16' }));
      process.stdout.write(JSON.stringify({ path: m.info().bf16, y: Array.from(y.data) }));`;
    const run = (env: Record<string, string>) =>
      JSON.parse(
        execFileSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
          env: { ...process.env, ...env },
          encoding: 'utf8',
        }),
      ) as { path: string; y: number[] };
    const widened = run({ MHSA_BF16: 'widen' });
    expect(widened.path).toBe('widen');
    const [M, K, N] = [17, 300, 40];
    const a = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i));
    const w = Float32Array.from({ length: K * N }, (_, i) => Math.cos(i * 0.7));
    const ref = refMatmul(rounded(a), [M, K], rounded(w), [K, N]);
    expectClose(widened.y, ref.data, 1e-5, { seed: SEED, label: 'widen' });
  });
});

describe('bf16 bad inputs', () => {
  const w = tensor(new Float32Array(6), [2, 3]);
  test('prepack', () => {
    expect(() => prepack(w, { dtype: 'fp16' as never })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/options\.dtype must be one of 'float32', 'bf16', 'int8', received 'fp16'/) }),
    );
    expect(() => prepack(w, { dtype: 16 as never })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/options\.dtype/) }));
    const halves: Bf16Tensor = { data: new Uint16Array(6), shape: [2, 3], dtype: 'bf16' };
    expect(() => prepack(halves, { dtype: 'float32' })).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/packs only with dtype 'bf16'/) }));
    expect(() => prepack({ data: new Uint16Array(5), shape: [2, 3], dtype: 'bf16' })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/b\.data\.length must equal .* = 6, received 5/) }),
    );
    expect(() => prepack({ data: new Float32Array(6), shape: [2, 3], dtype: 'bf16' } as never)).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/Uint16Array.*b\.data/) }),
    );
    const detached = new Uint16Array(6);
    structuredClone(detached.buffer, { transfer: [detached.buffer] });
    expect(() => prepack({ data: detached, shape: [2, 3], dtype: 'bf16' })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/detached/) }));
  });

  test('matmul against a bf16 PackedMatrix', () => {
    const packed = prepack(w, { dtype: 'bf16' });
    const a = tensor(new Float32Array(4), [2, 2]);
    expect(() => matmul(a, packed, { transposeB: true })).toThrow(expect.objectContaining({ name: 'RangeError' }));
    expect(() => matmul(tensor(new Float32Array(6), [2, 3]), packed)).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/must equal a\.shape\[1\]/) }));
    const lying = Object.create(Object.getPrototypeOf(packed), {
      data: { value: new Float32Array(packed.data.length) },
      rows: { value: 2 },
      cols: { value: 3 },
      dtype: { value: 'bf16' },
    });
    expect(() => matmul(a, lying)).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/Uint16Array.*b\.data/) }));
  });

  test('native rows: the descriptor and the buffer types must agree; nothing is written', () => {
    const packed = prepack(w, { dtype: 'bf16' });
    const out = poisoned(4);
    const desc = (bBf16: boolean, length = 2) =>
      new Float64Array([2, 2, 2, 2, 2, 3, 0, 2, 2, length, 0, 0, 1, 0, 1, bBf16 ? 1 : 0, 0]);
    expect(() => native.matmul(new Float32Array(4), packed.data, null, out, desc(false))).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/b must be a Float32Array/) }),
    );
    expect(() => native.matmul(new Float32Array(4), new Float32Array(packed.data.length), null, out, desc(true))).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/Uint16Array/) }),
    );
    expect(() => native.matmul(new Float32Array(4), packed.data.subarray(1), null, out, desc(true))).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/bf16 values, expected/) }),
    );
    expect(() => native.matmul(new Float32Array(4), new Uint16Array(8), null, out, desc(true).map((x, i) => (i === 14 ? 0 : x)))).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/bf16 b must be prepacked/) }),
    );
    expect(Array.from(out).every(Number.isNaN)).toBe(true);
  });
});

describe(`MultiHeadSelfAttention in bf16 (seed ${SEED})`, () => {
  // A ViT-style block (LayerNorm fused into the QKV product, biases) and a
  // LLaMA-style decoder layer (RMSNorm, grouped heads, RoPE).
  const layers = [
    { name: 'vit', dim: 96, heads: 4, kvHeads: 4, norm: 'layer' as const, bias: true },
    { name: 'llama', dim: 64, heads: 4, kvHeads: 2, norm: 'rms' as const, bias: false },
  ];
  for (const l of layers) {
    test(`${l.name}: within 5e-3 of the block with the weights rounded, and of float32 within 1e-2; fromTorch of kept bf16 tensors the same bits`, async () => {
      const rng = rngFor(SEED, `block ${l.name}`);
      const dimHead = l.dim / l.heads;
      const rows = (l.heads + 2 * l.kvHeads) * dimHead;
      const inner = l.heads * dimHead;
      const qkv = randomFloat32(rng, rows * l.dim).map((v) => v / Math.sqrt(l.dim));
      const wo = randomFloat32(rng, l.dim * inner).map((v) => v / Math.sqrt(inner));
      const normW = randomFloat32(rng, l.dim).map((v) => 1 + 0.5 * v);
      const bqkv = randomFloat32(rng, rows).map((v) => 0.2 * v);
      const config = (qkvWeight: Float32Array, outWeight: Float32Array) => ({
        dim: l.dim,
        heads: l.heads,
        kvHeads: l.kvHeads,
        norm: { type: l.norm, weight: tensor(normW, [l.dim]) },
        ...(l.norm === 'rms' ? { rope: { theta: 10000 } } : {}),
        weights: {
          qkvWeight: tensor(qkvWeight, [rows, l.dim]),
          outWeight: tensor(outWeight, [l.dim, inner]),
          ...(l.bias ? { qkvBias: tensor(bqkv, [rows]) } : {}),
        },
      });
      const half = new MultiHeadSelfAttention({ ...config(qkv, wo), dtype: 'bf16' });
      const roundedWeights = new MultiHeadSelfAttention(config(rounded(qkv), rounded(wo)));
      const full = new MultiHeadSelfAttention(config(qkv, wo));
      const [B, T] = [2, 17];
      const x = tensor(randomFloat32(rng, B * T * l.dim), [B, T, l.dim]);
      const causal = l.norm === 'rms';
      const y = half.forward(x, { causal });
      // The block also rounds the projections' inputs to bf16: that, and float
      // rounding, is all that separates it from the block with rounded weights.
      expectClose(y.data, roundedWeights.forward(x, { causal }).data, 5e-3, { seed: SEED, label: `${l.name} against rounded weights` });
      expectClose(y.data, full.forward(x, { causal }).data, 1e-2, { seed: SEED, label: `${l.name} against float32` });
      expectBitEqual((await half.forwardAsync(x, { causal })).data, y.data, { seed: SEED, label: `${l.name} async` });

      // The same layer from a state dict of kept bf16 tensors (as loadSafetensors(..., { bf16: 'keep' }) returns).
      const bf = (data: Float32Array, shape: number[]): Bf16Tensor => ({ data: Uint16Array.from(data, toBf16), shape, dtype: 'bf16' });
      const kvRows = l.kvHeads * dimHead;
      const sd: Record<string, Bf16Tensor> = {
        'q_proj.weight': bf(qkv.subarray(0, inner * l.dim), [inner, l.dim]),
        'k_proj.weight': bf(qkv.subarray(inner * l.dim, (inner + kvRows) * l.dim), [kvRows, l.dim]),
        'v_proj.weight': bf(qkv.subarray((inner + kvRows) * l.dim), [kvRows, l.dim]),
        'o_proj.weight': bf(wo, [l.dim, inner]),
      };
      const fromTorch = MultiHeadSelfAttention.fromTorch(sd, { heads: l.heads });
      const noNorm = new MultiHeadSelfAttention({ ...config(qkv, wo), norm: undefined, rope: undefined, weights: { ...config(qkv, wo).weights, qkvBias: undefined }, dtype: 'bf16' });
      expectBitEqual(fromTorch.forward(x).data, noNorm.forward(x).data, { seed: SEED, label: `${l.name} fromTorch` });
    });
  }

  test('fromTorch: kept bf16 projections widened for dtype float32; a kept output projection alone makes it bf16', () => {
    const rng = rngFor(SEED, 'fromTorch dtypes');
    const [dim, heads] = [32, 2];
    const inProj = randomFloat32(rng, 3 * dim * dim).map((v) => v / Math.sqrt(dim));
    const outProj = randomFloat32(rng, dim * dim).map((v) => v / Math.sqrt(dim));
    const bf = (data: Float32Array, shape: number[]): Bf16Tensor => ({ data: Uint16Array.from(data, toBf16), shape, dtype: 'bf16' });
    const x = tensor(randomFloat32(rng, 5 * dim), [5, dim]);
    const kept = { in_proj_weight: bf(inProj, [3 * dim, dim]), 'out_proj.weight': bf(outProj, [dim, dim]) };
    const widened = MultiHeadSelfAttention.fromTorch(kept, { heads, dtype: 'float32' });
    const float32 = MultiHeadSelfAttention.fromTorch(
      { in_proj_weight: tensor(rounded(inProj), [3 * dim, dim]), 'out_proj.weight': tensor(rounded(outProj), [dim, dim]) },
      { heads },
    );
    expectBitEqual(widened.forward(x).data, float32.forward(x).data, { seed: SEED, label: 'widened' });
    const mixed = MultiHeadSelfAttention.fromTorch({ in_proj_weight: tensor(inProj, [3 * dim, dim]), 'out_proj.weight': kept['out_proj.weight'] }, { heads });
    const half = new MultiHeadSelfAttention({
      dim, heads, dtype: 'bf16',
      weights: { qkvWeight: tensor(inProj, [3 * dim, dim]), outWeight: tensor(outProj, [dim, dim]) },
    });
    expectBitEqual(mixed.forward(x).data, half.forward(x).data, { seed: SEED, label: 'mixed' });
    expect(() => MultiHeadSelfAttention.fromTorch(kept, { heads, dtype: 'half' as never })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/options\.dtype must be one of/) }),
    );
  });

  test('bad configs', () => {
    const w = { qkvWeight: tensor(new Float32Array(3 * 16), [12, 4]), outWeight: tensor(new Float32Array(16), [4, 4]) };
    expect(() => new MultiHeadSelfAttention({ dim: 4, heads: 1, weights: w, dtype: 'fp8' as never })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/config\.dtype must be one of/) }),
    );
    const kept: Bf16Tensor = { data: new Uint16Array(48), shape: [12, 4], dtype: 'bf16' };
    expect(() => new MultiHeadSelfAttention({ dim: 4, heads: 1, weights: { ...w, qkvWeight: kept }, dtype: 'float32' })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/qkvWeight is a bf16 tensor/) }),
    );
    expect(() => new MultiHeadSelfAttention({ dim: 4, heads: 1, weights: { ...w, qkvWeight: { ...kept, shape: [4, 12] } } })).toThrow(
      expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/qkvWeight/) }),
    );
  });
});
