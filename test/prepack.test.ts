/**
 * prepack(): a weight packed once gives exactly the products of the unpacked
 * matrix (same kernels, same summation order), for plain and transposed
 * packing, 2-D and batched a, with c/alpha/beta and out, sync and async.
 * In a build with a system BLAS the unpacked products go to BLAS (prepacked
 * ones never do), so there the two agree within rounding instead of bit for bit.
 */
import { getNumThreads, info, matmul, matmulAsync, prepack, prepackAsync, PackedMatrix, setNumThreads, type Tensor } from '../lib';
import { expectBitEqual, expectClose, pickSeed, poisoned, randomFloat32, rngFor, type Rng } from './helpers/random';
import { refMatmul, singleOutputMatmulScale } from './helpers/reference';

const SEED = pickSeed();
const sameKernels = info().blas === null;
/** Bit-equal when both products ran on the built-in kernels, else within fp32 rounding. */
function expectSameProduct(got: Float32Array, want: Float32Array, label: string): void {
  if (sameKernels) expectBitEqual(got, want, { seed: SEED, label });
  else expectClose(got, want, 1e-5, { seed: SEED, label });
}
const SIZES = [1, 3, 17, 63, 65, 197];

function t(rng: Rng, shape: number[]): Tensor {
  return { data: randomFloat32(rng, shape.reduce((a, b) => a * b, 1)), shape };
}
const pick = (rng: Rng, xs: number[]) => xs[Math.floor(rng() * xs.length)];

describe(`prepack (seed ${SEED})`, () => {
  test('plain and transposed packing give the same products as the unpacked matrix', () => {
    const rng = rngFor(SEED, 'square');
    for (let i = 0; i < 12; i++) {
      const [m, k, n] = [pick(rng, SIZES), pick(rng, [...SIZES, 300, 515, 1000]), pick(rng, SIZES)];
      const transpose = i % 2 === 1;
      const a = t(rng, [m, k]);
      const w = t(rng, transpose ? [n, k] : [k, n]);
      const packed = prepack(w, { transpose });
      expect(packed).toBeInstanceOf(PackedMatrix);
      expect(packed.shape).toEqual([k, n]);
      const out = { data: poisoned(m * n), shape: [m, n] };
      expect(matmul(a, packed, { out })).toBe(out);
      const plain = matmul(a, w, { transposeB: transpose });
      expectSameProduct(out.data, plain.data, `[${m},${k}]·[${k},${n}] transpose=${transpose}`);
      const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeB: transpose });
      // A single output can cancel far below its terms (seeds 180 and 1348 drew 1x197x1 and
      // 1x300x1 at ~1e-5): it is measured against their size instead, as the fuzz test does.
      const scale = singleOutputMatmulScale(m * n, a.data, a.shape, w.data, w.shape, { transposeB: transpose });
      expectClose(out.data, ref.data, 1e-5, { seed: SEED, label: `seed ${SEED} [${m},${k}]·[${k},${n}]`, scale });
    }
  });

  test('products larger than every cache block (M > MC, N > NC, K > KC), packed and not, transposed', () => {
    // kGemmMC = 1152, kGemmNC = 512; depths above kGemmKCSingleMax = 1024 go in
    // kGemmKC = 384 steps (native/kernels/gemm.h)
    const rng = rngFor(SEED, 'large');
    const [m, k, n] = [1201, 1031, 1031];
    const a = t(rng, [k, m]); // read transposed
    const w = t(rng, [n, k]);
    const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeA: true, transposeB: true });
    const plain = matmul(a, w, { transposeA: true, transposeB: true });
    expectClose(plain.data, ref.data, 1e-5, { seed: SEED, label: 'large, unpacked' });
    const packed = matmul(a, prepack(w, { transpose: true }), { transposeA: true });
    expectSameProduct(packed.data, plain.data, 'large, packed');
    const rowMajor = t(rng, [m, k]);
    const ref2 = refMatmul(rowMajor.data, rowMajor.shape, w.data, w.shape, { transposeB: true });
    expectClose(matmul(rowMajor, prepack(w, { transpose: true })).data, ref2.data, 1e-5, { seed: SEED, label: 'large, row-major a' });
  });

  test('one and two rows against a packed weight (a decode step): float64 reference, same bits as inside a taller product', () => {
    // One or two rows take several column slivers at once (KernelTable::fewRowsPacked), a product
    // too small for a fork/join by its flops is split once its weight is large
    // (kGemmParallelMinBBytes): both must keep each row's sums.
    const rng = rngFor(SEED, 'few rows');
    for (const [k, n] of [[17, 1], [63, 65], [256, 197], [256, 1000], [1031, 300]]) {
      const w = t(rng, [n, k]);
      const bias = t(rng, [n]);
      const packed = prepack(w, { transpose: true });
      const tall = t(rng, [13, k]);
      const whole = matmul(tall, packed, { c: bias });
      for (const m of [1, 2]) {
        const a = { data: tall.data.slice((13 - m) * k), shape: [m, k] };
        const out = { data: poisoned(m * n), shape: [m, n] };
        matmul(a, packed, { c: bias, out });
        const label = `[${m},${k}]·[${k},${n}]`;
        if (sameKernels) expectBitEqual(out.data, whole.data.subarray((13 - m) * n), { seed: SEED, label });
        const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeB: true });
        for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) ref.data[i * n + j] += bias.data[j];
        const scale = singleOutputMatmulScale(m * n, a.data, a.shape, w.data, w.shape, { transposeB: true });
        expectClose(out.data, ref.data, 1e-5, { seed: SEED, label, scale });
      }
    }
  });

  test('a short A against a wide packed weight: every fetch-ahead block of columns, with a bias', () => {
    // With the packed A block under kGemmFetchAheadMaxABytes, a prepacked B goes in
    // gemmPrepackedColumnBlock blocks (128 columns at depth 768), each fetching the
    // next (native/kernels/gemm.h): 1000 columns are 7 and a ragged 104 split over the threads.
    const rng = rngFor(SEED, 'fetch-ahead');
    const [m, k, n] = [197, 768, 1000];
    const a = t(rng, [m, k]);
    const w = t(rng, [n, k]);
    const bias = t(rng, [n]);
    const out = { data: poisoned(m * n), shape: [m, n] };
    matmul(a, prepack(w, { transpose: true }), { c: bias, out });
    const plain = matmul(a, w, { transposeB: true, c: bias });
    expectSameProduct(out.data, plain.data, 'fetch-ahead, packed against unpacked');
    const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeB: true });
    for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) ref.data[i * n + j] += bias.data[j];
    expectClose(out.data, ref.data, 1e-5, { seed: SEED, label: 'fetch-ahead' });
  });

  test('a tall A against a packed weight: each thread its own rows, in one or two A blocks', () => {
    // From kGemmOwnRowsMinSlivers (32) row slivers per thread, a product against a
    // prepacked B gives each thread its own rows (native/kernels/gemm.cc,
    // gemmParallel); 2333 rows are 195 slivers of 12, the last of 5 rows, and each
    // thread's share passes kGemmMC = 1152, so it packs two A blocks. One thread
    // computes the same tiles in the same order: the same bits.
    const rng = rngFor(SEED, 'own rows');
    const [m, k, n] = [2333, 197, 65];
    const a = t(rng, [m, k]);
    const w = t(rng, [n, k]);
    const bias = t(rng, [n]);
    const packed = prepack(w, { transpose: true });
    const before = getNumThreads();
    try {
      setNumThreads(2);
      const out = { data: poisoned(m * n), shape: [m, n] };
      matmul(a, packed, { c: bias, alpha: 0.5, out });
      setNumThreads(1);
      const serial = matmul(a, packed, { c: bias, alpha: 0.5 });
      expectBitEqual(out.data, serial.data, { seed: SEED, label: 'own rows, 2 threads against 1' });
      const ref = refMatmul(a.data, a.shape, w.data, w.shape, { transposeB: true, c: bias.data, cShape: bias.shape, alpha: 0.5 });
      expectClose(out.data, ref.data, 1e-5, { seed: SEED, label: 'own rows' });
    } finally {
      setNumThreads(before);
    }
  });

  test('batched a against a packed weight, with bias c, alpha and beta', async () => {
    const rng = rngFor(SEED, 'batched');
    const [B, T, K, N] = [3, 65, 197, 63];
    const x = t(rng, [B, T, K]);
    const w = t(rng, [N, K]);
    const bias = t(rng, [N]);
    const packed = prepack(w, { transpose: true });
    const got = matmul(x, packed, { c: bias, alpha: 0.5, beta: 2 });
    const ref = refMatmul(x.data, x.shape, w.data, w.shape, { transposeB: true, c: bias.data, cShape: bias.shape, alpha: 0.5, beta: 2 });
    expect(got.shape).toEqual([B, T, N]);
    expectClose(got.data, ref.data, 1e-5, { seed: SEED, label: `seed ${SEED} batched` });
    const asyncGot = await matmulAsync(x, packed, { c: bias, alpha: 0.5, beta: 2 });
    expectBitEqual(asyncGot.data, got.data, { seed: SEED, label: 'async' });
  });

  test('the packed copy does not follow later changes to the source', () => {
    const rng = rngFor(SEED, 'copy');
    const a = t(rng, [5, 7]);
    const w = t(rng, [7, 9]);
    const packed = prepack(w);
    const before = matmul(a, packed).data.slice();
    w.data.fill(0);
    expectBitEqual(matmul(a, packed).data, before, { seed: SEED, label: 'after zeroing the source' });
  });

  test('bad arguments', () => {
    const rng = rngFor(SEED, 'bad');
    const w = t(rng, [4, 6]);
    const packed = prepack(w);
    expect(() => prepack(t(rng, [2, 3, 4]))).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/^prepack: b must be 2-D/) }));
    expect(() => prepack(w, { transpose: 1 as never })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/prepack: .*options.transpose/) }));
    expect(() => prepack(new Float32Array(4) as never)).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/^prepack: /) }));
    expect(() => matmul(t(rng, [2, 4]), packed, { transposeB: true })).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/^matmul: options.transposeB/) }));
    expect(() => matmul(t(rng, [2, 5]), packed)).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/^matmul: b.shape\[0\] \(K\) must equal a.shape\[1\] = 5, received 4/) }));
    // A forged PackedMatrix whose data has the wrong size is refused by the native check.
    const forged = Object.create(PackedMatrix.prototype, {
      data: { value: new Float32Array(3) }, rows: { value: 4 }, cols: { value: 6 },
    }) as PackedMatrix;
    const out = { data: new Float32Array(12).fill(7), shape: [2, 6] };
    expect(() => matmul(t(rng, [2, 4]), forged, { out })).toThrow(expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(/^matmul: packed b holds 3 floats/) }));
    expect(Array.from(out.data)).toEqual(new Array(12).fill(7));
  });

  test('prepackAsync packs the same panels off the JS thread and rejects bad arguments', async () => {
    const rng = rngFor(SEED, 'async-pack');
    for (const [k, n, transpose] of [[65, 197, false], [300, 17, true], [1, 1, false]] as const) {
      const w = t(rng, transpose ? [n, k] : [k, n]);
      const pending = prepackAsync(w, { transpose });
      expect(pending).toBeInstanceOf(Promise);
      const packed = await pending;
      expect(packed).toBeInstanceOf(PackedMatrix);
      expect(packed.shape).toEqual([k, n]);
      expectBitEqual(packed.data, prepack(w, { transpose }).data, { seed: SEED, label: `prepackAsync [${k}, ${n}]` });
    }
    const named = (name: string) =>
      expect.objectContaining({ name, message: expect.stringMatching(/^prepackAsync: /) });
    await expect(prepackAsync({ data: new Float32Array(6), shape: [1, 2, 3] })).rejects.toEqual(named('RangeError'));
    await expect(prepackAsync({ data: new Float64Array(6), shape: [2, 3] } as unknown as Tensor)).rejects.toEqual(named('TypeError'));
    await expect(prepackAsync(t(rng, [2, 3]), { transpose: 1 } as unknown as { transpose: boolean })).rejects.toEqual(named('TypeError'));
  });
});
