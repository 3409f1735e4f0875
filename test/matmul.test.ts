/**
 * Randomized matmul tests against the float64 reference. Fresh inputs every run;
 * the seed is in the describe title and in every failure message
 * (replay: MHSA_TEST_SEED=<seed> npx jest test/matmul.test.ts).
 */
import { matmul, matmulAsync, prepack, type MatmulOptions, type Tensor } from '../lib';
import {
  SIZES,
  dotProductScale,
  expectBitEqual,
  expectClose,
  expectGuardsIntact,
  expectShape,
  guardedCopy,
  guardedOut,
  pick,
  pickSeed,
  randomFloat32,
  rngFor,
  type Rng,
} from './helpers/random';
import { numel, refMatmul, refMatmulMagnitude } from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;

interface CaseSpec {
  /** Logical shapes of op(a) and op(b): batch..., M, K / batch..., K, N. */
  aBatch?: number[];
  bBatch?: number[];
  M: number;
  K: number;
  N: number;
  transposeA?: boolean;
  transposeB?: boolean;
  alpha?: number;
  beta?: number;
  cShape?: number[];
  /** 'poisoned': a NaN-filled out with guard sentinels around it; 'c': out is the very same view as c. */
  out?: 'poisoned' | 'c';
}

interface Built {
  label: string;
  a: Tensor;
  b: Tensor;
  c?: Tensor;
  cCopy?: Float32Array;
  opts: MatmulOptions;
  outView?: Float32Array;
}

function describeSpec(s: CaseSpec): string {
  const aShape = [...(s.aBatch ?? []), ...(s.transposeA ? [s.K, s.M] : [s.M, s.K])];
  const bShape = [...(s.bBatch ?? []), ...(s.transposeB ? [s.N, s.K] : [s.K, s.N])];
  const parts = [`a[${aShape}]${s.transposeA ? 'ᵀ' : ''} x b[${bShape}]${s.transposeB ? 'ᵀ' : ''}`];
  if (s.alpha !== undefined) parts.push(`alpha=${s.alpha}`);
  if (s.cShape) parts.push(`c[${s.cShape}]`);
  if (s.beta !== undefined) parts.push(`beta=${s.beta}`);
  if (s.out) parts.push(`out=${s.out}`);
  return parts.join(' ');
}

function build(rng: Rng, s: CaseSpec): Built {
  const aShape = [...(s.aBatch ?? []), ...(s.transposeA ? [s.K, s.M] : [s.M, s.K])];
  const bShape = [...(s.bBatch ?? []), ...(s.transposeB ? [s.N, s.K] : [s.K, s.N])];
  const a = { data: guardedCopy(rng, randomFloat32(rng, numel(aShape))), shape: aShape };
  const b = { data: guardedCopy(rng, randomFloat32(rng, numel(bShape))), shape: bShape };
  const opts: MatmulOptions = {};
  if (s.transposeA !== undefined) opts.transposeA = s.transposeA;
  if (s.transposeB !== undefined) opts.transposeB = s.transposeB;
  if (s.alpha !== undefined) opts.alpha = s.alpha;
  if (s.beta !== undefined) opts.beta = s.beta;
  const built: Built = { label: describeSpec(s), a, b, opts };
  if (s.cShape) {
    const cData = randomFloat32(rng, numel(s.cShape));
    built.cCopy = Float32Array.from(cData);
    if (s.out === 'c') {
      const view = guardedOut(rng, cData.length);
      view.set(cData);
      built.c = { data: view, shape: s.cShape };
      built.outView = view;
      opts.out = built.c; // the very same view
    } else {
      built.c = { data: guardedCopy(rng, cData), shape: s.cShape };
    }
    opts.c = built.c;
  }
  if (s.out === 'poisoned') {
    const shape = resultShape(s);
    built.outView = guardedOut(rng, numel(shape));
    opts.out = { data: built.outView, shape };
  }
  return built;
}

function resultShape(s: CaseSpec): number[] {
  const ab = s.aBatch ?? [];
  const bb = s.bBatch ?? [];
  const r = Math.max(ab.length, bb.length);
  const batch: number[] = [];
  for (let i = 0; i < r; i++) {
    const da = i < r - ab.length ? 1 : ab[i - (r - ab.length)];
    const db = i < r - bb.length ? 1 : bb[i - (r - bb.length)];
    batch.push(da === 1 ? db : da);
  }
  return [...batch, s.M, s.N];
}

function reference(bt: Built) {
  return refMatmul(bt.a.data, bt.a.shape, bt.b.data, bt.b.shape, {
    transposeA: bt.opts.transposeA,
    transposeB: bt.opts.transposeB,
    alpha: bt.opts.alpha,
    beta: bt.opts.beta,
    c: bt.cCopy,
    cShape: bt.c?.shape,
  });
}

/**
 * For a one-element result (a single dot product, which random signs can cancel to almost nothing):
 * the size of its terms, ‖|alpha|·|A|·|B| + |beta|·|C|‖, as the floor of the error's denominator.
 * Larger results average over many elements and are checked against ‖ref‖ alone.
 */
function cancellationScale(bt: Built, refLength: number): number | undefined {
  if (refLength !== 1) return undefined;
  return dotProductScale(
    refMatmulMagnitude(bt.a.data, bt.a.shape, bt.b.data, bt.b.shape, {
      transposeA: bt.opts.transposeA,
      transposeB: bt.opts.transposeB,
      alpha: bt.opts.alpha,
      beta: bt.opts.beta,
      c: bt.cCopy,
      cShape: bt.c?.shape,
    }).data,
  );
}

/** Runs one case synchronously and checks shape, values, out identity and guards. Returns the result. */
function runCase(s: CaseSpec, rng: Rng): { result: Tensor; built: Built } {
  const bt = build(rng, s);
  const ref = reference(bt);
  const ctx = { seed: SEED, label: `matmul ${bt.label}`, shape: ref.shape, scale: cancellationScale(bt, ref.data.length) };
  const result = matmul(bt.a, bt.b, bt.opts);
  expectShape(result.shape, ref.shape, ctx);
  expectClose(result.data, ref.data, TOL, ctx);
  if (bt.opts.out) {
    expect(result).toBe(bt.opts.out);
    expectGuardsIntact(bt.outView!, ctx);
  }
  return { result, built: bt };
}

/** Draws (M, K, N) from SIZES, redrawing while M·K·N·batch exceeds maxWork. */
function drawMKN(rng: Rng, batch = 1, maxWork = 2e6): { M: number; K: number; N: number } {
  for (;;) {
    const M = pick(rng, SIZES), K = pick(rng, SIZES), N = pick(rng, SIZES);
    if (M * K * N * batch <= maxWork) return { M, K, N };
  }
}

function caseTest(name: string, makeSpecs: (rng: Rng) => CaseSpec[]): void {
  test(name, () => {
    const rng = rngFor(SEED, name);
    const specs = makeSpecs(rng);
    expect(specs.length).toBeGreaterThan(0);
    for (const s of specs) runCase(s, rng);
  });
}

describe(`matmul vs float64 reference (seed ${SEED})`, () => {
  caseTest('2-D, fixed awkward sizes', () => [
    { M: 1, K: 1, N: 1 },
    { M: 3, K: 17, N: 63 },
    { M: 65, K: 63, N: 1 },
    { M: 197, K: 65, N: 17 },
    { M: 17, K: 197, N: 3 },
    { M: 63, K: 65, N: 197 },
    { M: 197, K: 197, N: 65 },
  ]);

  caseTest('2-D, random sizes from {1,3,17,63,65,197}', (rng) => Array.from({ length: 8 }, () => drawMKN(rng)));

  caseTest('2-D, K = 1000 (long accumulation)', (rng) => [
    { M: 17, K: 1000, N: 65 },
    { M: 1, K: 1000, N: 1 },
    { M: pick(rng, SIZES), K: 1000, N: pick(rng, [1, 3, 17, 63]) },
    { M: 63, K: 1000, N: 63, transposeA: true, transposeB: true },
  ]);

  caseTest('batched both operands, same batch', (rng) => [
    { aBatch: [2], bBatch: [2], ...drawMKN(rng, 2) },
    { aBatch: [3, 2], bBatch: [3, 2], ...drawMKN(rng, 6) },
    { aBatch: [5], bBatch: [5], M: 17, K: 63, N: 65 },
  ]);

  caseTest('broadcast batch dims', (rng) => [
    { aBatch: [2, 1], bBatch: [3], ...drawMKN(rng, 6) },
    { aBatch: [2, 1], bBatch: [3], M: 17, K: 65, N: 63 },
    { aBatch: [1], bBatch: [4], ...drawMKN(rng, 4) },
    { aBatch: [2, 1], bBatch: [1, 3], ...drawMKN(rng, 6) },
    { aBatch: [3, 1, 2], bBatch: [4, 1], M: 3, K: 17, N: 5 },
  ]);

  caseTest('2-D b against batched a (projection), and 2-D a against batched b', (rng) => [
    { aBatch: [4], M: 17, K: 63, N: 65 },
    { aBatch: [2, 3], ...drawMKN(rng, 6) },
    { bBatch: [3], ...drawMKN(rng, 3) },
    { aBatch: [3], M: 65, K: 197, N: 17, transposeB: true },
  ]);

  caseTest('transposeA / transposeB / both, 2-D and batched', (rng) => {
    const specs: CaseSpec[] = [];
    for (const [ta, tb] of [[true, false], [false, true], [true, true], [false, false]] as const) {
      specs.push({ ...drawMKN(rng), transposeA: ta, transposeB: tb });
      specs.push({ aBatch: [2, 1], bBatch: [3], ...drawMKN(rng, 6), transposeA: ta, transposeB: tb });
      specs.push({ aBatch: [2], ...drawMKN(rng, 2), transposeA: ta, transposeB: tb });
    }
    return specs;
  });

  caseTest('alpha', (rng) => [
    { ...drawMKN(rng), alpha: -0.37 },
    { ...drawMKN(rng), alpha: 2.5, transposeA: true },
    { aBatch: [2], bBatch: [2], ...drawMKN(rng, 2), alpha: 1e-3 },
    { M: 17, K: 63, N: 65, alpha: 0 },
  ]);

  caseTest('beta with c: full shape, bias [N], [M,1], [1,N], batch-broadcast c', (rng) => {
    const d1 = drawMKN(rng);
    const d2 = drawMKN(rng, 6);
    const d3 = drawMKN(rng);
    const d4 = drawMKN(rng, 2);
    return [
      { ...d1, cShape: [d1.M, d1.N] }, // beta defaults to 1
      { ...d1, cShape: [d1.M, d1.N], beta: 0.5, alpha: -1.5 },
      { ...d3, cShape: [d3.N], beta: 1 }, // bias
      { aBatch: [2, 1], bBatch: [3], ...d2, cShape: [d2.N], beta: -2 }, // bias on a broadcast batch
      { ...d3, cShape: [d3.M, 1], beta: 0.75 },
      { ...d3, cShape: [1, d3.N], beta: 3, transposeB: true },
      { aBatch: [2], ...d4, cShape: [2, 1, d4.N], beta: 1.25, transposeA: true },
      { aBatch: [2, 1], bBatch: [3], ...d2, cShape: [3, d2.M, d2.N], beta: 0.3 },
      { ...d1, cShape: [d1.M, d1.N], beta: 0 },
      { ...d1, cShape: [1], beta: -0.25 },
      { M: 17, K: 1000, N: 65, cShape: [65], beta: 2, alpha: 0.5 },
    ];
  });

  // A bias row with beta 1 is not copied into out first: the GEMM adds it to
  // each tile it writes at depth 0. Every path of the driver, and depths of
  // several blocks (the bias must be added exactly once).
  caseTest('bias [N] with beta 1, on every GEMM path', () => [
    { M: 17, K: 63, N: 65, cShape: [65], out: 'poisoned' }, // unpacked (small)
    { M: 1, K: 1000, N: 197, cShape: [197], out: 'poisoned' }, // one row tile, deep
    { M: 197, K: 1000, N: 65, cShape: [65], out: 'poisoned' }, // packed, three depth blocks, threads
    { M: 1000, K: 17, N: 63, cShape: [63], out: 'poisoned' }, // narrow: rows split over threads
    { M: 65, K: 3, N: 1000, cShape: [1, 1000], transposeB: true, out: 'poisoned' },
    { aBatch: [3], M: 63, K: 197, N: 17, cShape: [17], out: 'poisoned' }, // batch folded into M
    { aBatch: [2], bBatch: [2], M: 65, K: 65, N: 63, cShape: [63], transposeA: true, out: 'poisoned' }, // one product per entry
    { M: 197, K: 768, N: 197, cShape: [197], alpha: -0.5, out: 'poisoned' },
    // Packed, each thread its own rows (gemm.cc, ownRowsPerThread): shares within 3 %,
    // with three depth blocks, and 17 row slivers at a depth of at most 128.
    { M: 1000, K: 65, N: 197, cShape: [197], out: 'poisoned' },
    { M: 1000, K: 1000, N: 65, cShape: [65], transposeA: true, out: 'poisoned' },
    { M: 197, K: 63, N: 1000, cShape: [1000], transposeB: true, alpha: 0.5, out: 'poisoned' },
    // Too large to run unpacked whole, split into regions that each run unpacked (12-row halves; column halves).
    { M: 24, K: 1000, N: 300, cShape: [300], out: 'poisoned' },
    { M: 36, K: 64, N: 2304, cShape: [2304], alpha: -2, out: 'poisoned' },
  ]);

  caseTest('out provided (poisoned with NaN, guarded)', (rng) => {
    const d = drawMKN(rng, 6);
    return [
      { ...drawMKN(rng), out: 'poisoned' },
      { aBatch: [2, 1], bBatch: [3], ...d, out: 'poisoned', transposeB: true },
      { ...d, cShape: [d.N], beta: 0.5, out: 'poisoned', alpha: 2 },
      { M: 1, K: 1, N: 1, out: 'poisoned' },
      { M: 63, K: 1000, N: 17, out: 'poisoned', transposeA: true },
    ];
  });

  caseTest('out === c (same view, accumulate)', (rng) => {
    const d1 = drawMKN(rng);
    const d2 = drawMKN(rng, 2);
    const d3 = drawMKN(rng);
    return [
      { ...d1, cShape: [d1.M, d1.N], out: 'c' }, // C += A·B
      { ...d1, cShape: [d1.M, d1.N], out: 'c', beta: 0.9, alpha: -0.1 },
      { aBatch: [2], bBatch: [2], ...d2, cShape: [2, d2.M, d2.N], out: 'c', beta: 1, transposeA: true },
      { aBatch: [2], ...d2, cShape: [2, d2.M, d2.N], out: 'c', beta: 0 },
      { ...d3, cShape: [d3.M, d3.N], out: 'c', beta: -1, transposeB: true },
      { M: 65, K: 197, N: 63, cShape: [65, 63], out: 'c' },
    ];
  });

  test('accumulating into the same c twice gives C + 2·A·B', () => {
    const rng = rngFor(SEED, 'accumulate twice');
    const { M, K, N } = drawMKN(rng);
    const a = { data: randomFloat32(rng, M * K), shape: [M, K] };
    const b = { data: randomFloat32(rng, K * N), shape: [K, N] };
    const c0 = randomFloat32(rng, M * N);
    const c = { data: Float32Array.from(c0), shape: [M, N] };
    matmul(a, b, { c, out: c });
    matmul(a, b, { c, out: c });
    const ref = refMatmul(a.data, a.shape, b.data, b.shape, { alpha: 2, c: c0, cShape: [M, N] });
    expectClose(c.data, ref.data, TOL, { seed: SEED, label: `accumulate twice M=${M} K=${K} N=${N}` });
  });

  test('TensorLike with dims instead of shape', () => {
    const rng = rngFor(SEED, 'dims');
    const { M, K, N } = drawMKN(rng);
    const a = { data: randomFloat32(rng, M * K), dims: [M, K] };
    const b = { data: randomFloat32(rng, K * N), dims: [K, N] };
    const c = { data: randomFloat32(rng, N), dims: [N] };
    const result = matmul(a, b, { c, beta: 0.5 });
    const ref = refMatmul(a.data, a.dims, b.data, b.dims, { c: c.data, cShape: c.dims, beta: 0.5 });
    const ctx = { seed: SEED, label: `dims M=${M} K=${K} N=${N}` };
    expectShape(result.shape, ref.shape, ctx);
    expectClose(result.data, ref.data, TOL, ctx);
  });
});

describe('the cancellation floor (expectClose scale)', () => {
  test('still fails a wrong single dot product', () => {
    // a·b = 1·1 − 1·(1 − 2⁻²⁰) cancels to 2⁻²⁰; the floor is ‖|a|·|b|‖ = 2 − 2⁻²⁰.
    const bt: Built = { label: 'cancelling dot', a: { data: new Float32Array([1, 1]), shape: [1, 2] }, b: { data: new Float32Array([1, -(1 - 2 ** -20)]), shape: [2, 1] }, opts: {} };
    const ref = reference(bt).data;
    const scale = cancellationScale(bt, ref.length)!;
    expect(scale).toBeCloseTo(2, 5);
    const ctx = { seed: SEED, label: 'cancelling dot', scale };
    expect(() => expectClose([ref[0] + 1e-6], ref, TOL, ctx)).not.toThrow();
    expect(() => expectClose([ref[0] + 1e-4], ref, TOL, ctx)).toThrow(/relErr/);
    expect(() => expectClose([ref[0] + 1e-6], ref, TOL, { ...ctx, scale: undefined })).toThrow(/relErr/);
  });
});

describe(`matmul zero-size dims (seed ${SEED})`, () => {
  const emptyCases: [string, CaseSpec, number[]][] = [
    ['M = 0', { M: 0, K: 17, N: 3 }, [0, 3]],
    ['N = 0', { M: 5, K: 17, N: 0 }, [5, 0]],
    ['M = N = 0, transposeA', { M: 0, K: 4, N: 0, transposeA: true }, [0, 0]],
    ['batch 0 against 2-D b', { aBatch: [0], M: 3, K: 5, N: 7 }, [0, 3, 7]],
    ['batch [2,0] against [1]', { aBatch: [2, 0], bBatch: [1], M: 3, K: 5, N: 7 }, [2, 0, 3, 7]],
    ['M = 0 with c [N] and out', { M: 0, K: 5, N: 4, cShape: [4], beta: 2, out: 'poisoned' }, [0, 4]],
  ];
  test.each(emptyCases)('%s gives an empty result of the right shape', (name, spec, want) => {
    const rng = rngFor(SEED, name);
    const { result } = runCase(spec, rng);
    expect(result.shape).toEqual(want);
    expect(result.data).toBeInstanceOf(Float32Array);
    expect(result.data.length).toBe(0);
  });

  test.each([
    ['K = 0, no c: zeros', { M: 3, K: 0, N: 5 }],
    ['K = 0, no c, out poisoned: zeros written', { M: 17, K: 0, N: 65, out: 'poisoned' }],
    ['K = 0, alpha 3, out poisoned', { M: 17, K: 0, N: 3, alpha: 3, out: 'poisoned' }],
    ['K = 0, transposeA + transposeB, out poisoned', { M: 4, K: 0, N: 6, transposeA: true, transposeB: true, out: 'poisoned' }],
    ['K = 0, batched [2,1] x [3]', { aBatch: [2, 1], bBatch: [3], M: 3, K: 0, N: 4, out: 'poisoned' }],
    ['K = 0, c [N] beta 2.5: beta·c', { M: 5, K: 0, N: 7, cShape: [7], beta: 2.5, out: 'poisoned' }],
    ['K = 0, full c default beta: c', { M: 5, K: 0, N: 7, cShape: [5, 7], alpha: 4 }],
    ['K = 0, out === c, beta -0.5: c scaled in place', { M: 6, K: 0, N: 9, cShape: [6, 9], beta: -0.5, out: 'c' }],
    ['K = 0, batched c [2,1,N]', { aBatch: [2], M: 3, K: 0, N: 4, cShape: [2, 1, 4], beta: 1.5, out: 'poisoned' }],
  ] as [string, CaseSpec][])('%s', (name, spec) => {
    const rng = rngFor(SEED, name);
    const { result, built } = runCase(spec, rng);
    expect(result.data.length).toBe(spec.M * spec.N * numel(resultShape(spec).slice(0, -2)));
    expect(result.data.length).toBeGreaterThan(0);
    if (!built.c) expect(Array.from(result.data).every((x) => x === 0)).toBe(true);
  });
});

describe(`matmulAsync equals matmul bit-for-bit (seed ${SEED})`, () => {
  test('several cases, run concurrently', async () => {
    const rng = rngFor(SEED, 'async');
    const d = drawMKN(rng, 6);
    const specs: CaseSpec[] = [
      { M: 197, K: 65, N: 63 },
      { M: 17, K: 1000, N: 65, transposeB: true },
      { aBatch: [2, 1], bBatch: [3], ...d, cShape: [d.N], beta: 0.5, alpha: -2 },
      { aBatch: [2], ...drawMKN(rng, 2), transposeA: true, out: 'poisoned' },
      { M: 3, K: 0, N: 4 },
    ];
    const cases = specs.map((s) => {
      // Two identical builds: one for sync, one for async (so the out buffers are independent).
      const seedForCase = Math.floor(rng() * 2 ** 32);
      return { s, sync: build(rngFor(seedForCase, 'x'), s), async: build(rngFor(seedForCase, 'x'), s) };
    });
    const asyncResults = await Promise.all(cases.map((c) => matmulAsync(c.async.a, c.async.b, c.async.opts)));
    cases.forEach((c, i) => {
      const ctx = { seed: SEED, label: `matmulAsync ${c.sync.label}` };
      const syncResult = matmul(c.sync.a, c.sync.b, c.sync.opts);
      expect(asyncResults[i].shape).toEqual(syncResult.shape);
      expectBitEqual(asyncResults[i].data, syncResult.data, ctx);
      if (c.async.opts.out) expect(asyncResults[i]).toBe(c.async.opts.out);
      const ref = reference(c.async).data;
      expectClose(asyncResults[i].data, ref, TOL, { ...ctx, scale: cancellationScale(c.async, ref.length) });
    });
  });

  test('out === c accumulate, async', async () => {
    const rng = rngFor(SEED, 'async accumulate');
    const d = drawMKN(rng);
    const s: CaseSpec = { ...d, cShape: [d.M, d.N], out: 'c', beta: 0.5 };
    const caseSeed = Math.floor(rng() * 2 ** 32);
    const bs = build(rngFor(caseSeed, 'x'), s);
    const ba = build(rngFor(caseSeed, 'x'), s);
    const r = await matmulAsync(ba.a, ba.b, ba.opts);
    expect(r).toBe(ba.c);
    const sync = matmul(bs.a, bs.b, bs.opts);
    expectBitEqual(r.data, sync.data, { seed: SEED, label: `matmulAsync ${ba.label}` });
    const ref = reference(ba).data;
    expectClose(r.data, ref, TOL, { seed: SEED, label: `matmulAsync ${ba.label}`, scale: cancellationScale(ba, ref.length) });
  });
});

describe(`every path of a product gives the same bits (seed ${SEED})`, () => {
  // A row-major a is read in place (against a prepacked b, or when the product
  // is small); transposeA makes the same a a strided view, which is packed.
  // Every path rounds alpha·(a·b), then + beta·c, as separate steps (the
  // kernels are built with -ffp-contract=off), so with alpha and beta that
  // are not powers of two the bits still agree.
  const transposed = (x: Float32Array, rows: number, cols: number): Float32Array => {
    const t = new Float32Array(x.length);
    for (let i = 0; i < rows; ++i) for (let j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
    return t;
  };
  for (const [M, K, N, packed] of [
    [197, 768, 96, true],
    [26, 130, 1000, true],
    [1601, 45, 70, true],
    [63, 64, 65, false],
    [197, 64, 197, false],
  ] as Array<[number, number, number, boolean]>) {
    test(`${M}x${K}x${N}${packed ? ', b prepacked' : ''}: a in place and a packed agree, alpha 0.37, with c`, () => {
      const rng = rngFor(SEED, `paths ${M} ${K} ${N}`);
      const a = randomFloat32(rng, M * K);
      const bData = randomFloat32(rng, K * N);
      const b: Tensor | ReturnType<typeof prepack> = packed ? prepack({ data: bData, shape: [K, N] }) : { data: bData, shape: [K, N] };
      const row = { data: randomFloat32(rng, N), shape: [N] };
      const full = { data: randomFloat32(rng, M * N), shape: [M, N] };
      // A row c with beta 1 is the projections' bias, added as each tile is stored.
      for (const [c, beta] of [[row, 1], [row, 0.61], [full, 0.61]] as Array<[Tensor, number]>) {
        const opts = { alpha: 0.37, beta, c };
        const inPlace = matmul({ data: a, shape: [M, K] }, b, opts);
        const viaPacking = matmul({ data: transposed(a, M, K), shape: [K, M] }, b, { ...opts, transposeA: true });
        expectBitEqual(inPlace.data, viaPacking.data, { seed: SEED, label: `${M}x${K}x${N} c ${c.shape.join('x')} beta ${beta}` });
      }
    });
  }
});
