/**
 * Randomized softmax tests against the float64 reference. Fresh inputs every run;
 * the seed is in the describe title and in every failure message
 * (replay: MHSA_TEST_SEED=<seed> npx jest test/softmax.test.ts).
 */
import { softmax, softmaxAsync, type SoftmaxOptions, type Tensor } from '../lib';
import {
  SIZES,
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
import { numel, refSoftmax } from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;

type OutMode = 'none' | 'poisoned' | 'inplace';

/** Runs softmax on x (copied into a guarded view) and checks it against the reference. */
function check(
  rng: Rng,
  label: string,
  xData: Float32Array,
  shape: number[],
  scale: number | undefined,
  outMode: OutMode = 'none',
): Tensor {
  const ctx = { seed: SEED, label: `softmax ${label} scale=${scale ?? 'default'} out=${outMode}`, shape };
  const ref = refSoftmax(xData, shape, scale ?? 1);
  const opts: SoftmaxOptions = {};
  if (scale !== undefined) opts.scale = scale;
  let x: Tensor;
  let outView: Float32Array | undefined;
  if (outMode === 'inplace') {
    outView = guardedOut(rng, xData.length);
    outView.set(xData);
    x = { data: outView, shape };
    opts.out = x;
  } else {
    x = { data: guardedCopy(rng, xData), shape };
    if (outMode === 'poisoned') {
      outView = guardedOut(rng, xData.length);
      opts.out = { data: outView, shape };
    }
  }
  const result = softmax(x, opts);
  expectShape(result.shape, shape, ctx);
  expectClose(result.data, ref.data, TOL, ctx);
  if (opts.out) {
    expect(result).toBe(opts.out);
    expectGuardsIntact(outView!, ctx);
  } else {
    // the input is left alone
    expect(Array.from(x.data)).toEqual(Array.from(xData));
  }
  return result;
}

function randomShape(rng: Rng, maxElems = 40000): number[] {
  for (;;) {
    const rank = 1 + Math.floor(rng() * 3);
    const shape = Array.from({ length: rank }, () => pick(rng, SIZES));
    if (numel(shape) <= maxElems) return shape;
  }
}

/** Row sums of a result (each should be 1, or 0 for a fully blocked row). */
function rowSums(data: Float32Array, n: number): number[] {
  const sums: number[] = [];
  for (let r = 0; r < data.length / n; r++) {
    let s = 0;
    for (let j = 0; j < n; j++) s += data[r * n + j];
    sums.push(s);
  }
  return sums;
}

describe(`softmax vs float64 reference (seed ${SEED})`, () => {
  test('fixed awkward shapes, default scale', () => {
    const rng = rngFor(SEED, 'fixed');
    for (const shape of [[1], [3], [17], [63], [65], [197], [1, 1], [3, 65], [63, 17], [2, 3, 197], [197, 63], [65, 1]]) {
      check(rng, 'fixed', randomFloat32(rng, numel(shape)), shape, undefined);
    }
  });

  test('random shapes from {1,3,17,63,65,197}, logits in [-8, 8]', () => {
    const rng = rngFor(SEED, 'random shapes');
    for (let t = 0; t < 10; t++) {
      const shape = randomShape(rng);
      const x = randomFloat32(rng, numel(shape)).map((v) => v * 8);
      check(rng, 'random', x, shape, undefined);
    }
  });

  test('1000-wide rows', () => {
    const rng = rngFor(SEED, '1000');
    check(rng, '1000-wide', randomFloat32(rng, 1000).map((v) => v * 10), [1000], undefined);
    check(rng, '1000-wide', randomFloat32(rng, 4000), [4, 1000], 2.5);
    check(rng, '1000-wide', randomFloat32(rng, 3 * 1000), [3, 1, 1000], undefined, 'poisoned');
  });

  test('scale: positive, fractional, zero, negative', () => {
    const rng = rngFor(SEED, 'scale');
    for (const scale of [1, 0.125, 3, 0, -1, -0.37, -7.5, 40]) {
      const shape = randomShape(rng, 20000);
      check(rng, 'scale', randomFloat32(rng, numel(shape)), shape, scale);
    }
  });

  test('outputs of 2^22+ elements (cache-bypassing stores), odd offsets, -Infinity rows, both scale signs', () => {
    const rng = rngFor(SEED, 'streaming');
    const shape = [1024, 4097]; // 4,195,328 elements, just past the streaming threshold
    const x = randomFloat32(rng, numel(shape)).map((v) => v * 6);
    for (const row of [0, 517, 1023]) x.fill(-Infinity, row * 4097, (row + 1) * 4097);
    const r = check(rng, 'streaming', x, shape, undefined, 'poisoned'); // out at a random 0..7 float offset
    expect(rowSums(r.data, 4097).filter((v) => v === 0).length).toBe(3);
    check(rng, 'streaming', x, shape, 0.75, 'inplace');
    check(rng, 'large, negative scale', x.map((v) => (v === -Infinity ? 0 : v)), shape, -1.5, 'poisoned');
  });

  test('scale 0 gives a uniform distribution', () => {
    const rng = rngFor(SEED, 'uniform');
    const n = pick(rng, SIZES);
    const r = check(rng, 'uniform', randomFloat32(rng, 3 * n), [3, n], 0);
    for (const v of r.data) expect(Math.abs(v - 1 / n)).toBeLessThanOrEqual(1e-6 / n + 1e-7);
  });

  test('out provided, poisoned with NaN', () => {
    const rng = rngFor(SEED, 'out');
    for (let t = 0; t < 5; t++) {
      const shape = randomShape(rng);
      check(rng, 'out', randomFloat32(rng, numel(shape)), shape, pick(rng, [undefined, 0.5, -2]), 'poisoned');
    }
  });

  test('out === x (in place)', () => {
    const rng = rngFor(SEED, 'inplace');
    for (let t = 0; t < 5; t++) {
      const shape = randomShape(rng);
      check(rng, 'in place', randomFloat32(rng, numel(shape)), shape, pick(rng, [undefined, 2, -0.5]), 'inplace');
    }
    check(rng, 'in place', randomFloat32(rng, 2000), [2, 1000], undefined, 'inplace');
  });

  test('rows of all -Infinity give zeros; partial -Infinity entries give exact zeros', () => {
    const rng = rngFor(SEED, '-inf');
    for (const mode of ['none', 'poisoned', 'inplace'] as OutMode[]) {
      const n = pick(rng, [1, 3, 17, 63, 65, 197]);
      const rows = 7;
      const x = randomFloat32(rng, rows * n);
      for (let j = 0; j < n; j++) {
        x[1 * n + j] = -Infinity; // row 1 fully blocked
        x[4 * n + j] = -Infinity; // row 4 fully blocked
      }
      for (let j = 0; j < n - 1; j++) if (rng() < 0.4) x[2 * n + j] = -Infinity; // row 2 partly (last entry finite)
      for (let j = 1; j < n; j++) x[6 * n + j] = -Infinity; // row 6: only its first entry finite
      const r = check(rng, `-inf rows n=${n}`, x, [rows, n], pick(rng, [undefined, 0.5, 3]), mode);
      const sums = rowSums(r.data, n);
      for (const row of [1, 4]) {
        for (let j = 0; j < n; j++) expect(r.data[row * n + j]).toBe(0);
        expect(sums[row]).toBe(0);
      }
      for (let j = 0; j < n - 1; j++) if (x[2 * n + j] === -Infinity) expect(r.data[2 * n + j]).toBe(0);
      expect(r.data[6 * n]).toBeCloseTo(1, 6);
      for (const row of [0, 2, 3, 5, 6]) expect(Math.abs(sums[row] - 1)).toBeLessThan(1e-5);
    }
  });

  test('a single all -Infinity 1000-wide row gives zeros', () => {
    const rng = rngFor(SEED, '-inf 1000');
    const r = check(rng, '-inf 1000', new Float32Array(1000).fill(-Infinity), [1, 1000], undefined, 'poisoned');
    expect(r.data.every((v) => v === 0)).toBe(true);
  });

  test('very large logits (±1e30, up to float32 max) do not overflow', () => {
    const rng = rngFor(SEED, 'large');
    for (const magnitude of [1e30, 1e38, 3e38]) {
      const n = pick(rng, SIZES);
      const x = randomFloat32(rng, 4 * n).map((v) => v * magnitude);
      x[0] = magnitude; // a clear maximum in row 0
      const r = check(rng, `large logits ±${magnitude} n=${n}`, x, [4, n], undefined, pick(rng, ['none', 'poisoned', 'inplace'] as OutMode[]));
      for (const s of rowSums(r.data, n)) expect(Math.abs(s - 1)).toBeLessThan(1e-5);
    }
    // Exact expectations: two tied maxima share the mass; others vanish.
    const x = new Float32Array([1e30, 0, -1e30, 1e30, 3e38, 3e38, -3e38, 3e38]);
    const r = check(rng, 'large logits exact', x, [2, 4], undefined);
    expect(Array.from(r.data)).toEqual([0.5, 0, 0, 0.5, 1 / 3, 1 / 3, 0, 1 / 3].map(Math.fround));
    // Large logits with a large scale that stays finite in float32
    const y = randomFloat32(rng, 3 * 65).map((v) => v * 1e20);
    check(rng, 'large logits scaled', y, [3, 65], 1e15);
  });

  test('zero-size shapes give empty results', () => {
    const rng = rngFor(SEED, 'empty');
    for (const shape of [[0], [0, 5], [5, 0], [2, 0, 3], [3, 4, 0]]) {
      for (const mode of ['none', 'poisoned', 'inplace'] as OutMode[]) {
        const r = check(rng, 'empty', new Float32Array(0), shape, undefined, mode);
        expect(r.data.length).toBe(0);
        expect(r.shape).toEqual(shape);
      }
    }
  });

  test('TensorLike with dims', () => {
    const rng = rngFor(SEED, 'dims');
    const shape = randomShape(rng);
    const x = { data: randomFloat32(rng, numel(shape)), dims: shape };
    const r = softmax(x, { scale: 1.5 });
    expectShape(r.shape, shape, { seed: SEED, label: 'dims' });
    expectClose(r.data, refSoftmax(x.data, shape, 1.5).data, TOL, { seed: SEED, label: 'softmax dims', shape });
  });
});

describe(`softmaxAsync equals softmax bit-for-bit (seed ${SEED})`, () => {
  test('several cases, concurrently', async () => {
    const rng = rngFor(SEED, 'async');
    const cases: { x: Float32Array; shape: number[]; scale?: number }[] = [
      { x: randomFloat32(rng, 4000), shape: [4, 1000] },
      { x: randomFloat32(rng, 3 * 197), shape: [3, 197], scale: -2 },
      { x: randomFloat32(rng, 63 * 65), shape: [63, 65], scale: 0.3 },
      { x: new Float32Array(34).fill(-Infinity), shape: [2, 17] },
      { x: new Float32Array(0), shape: [0, 3] },
    ];
    const results = await Promise.all(
      cases.map((c) => softmaxAsync({ data: Float32Array.from(c.x), shape: c.shape }, c.scale === undefined ? undefined : { scale: c.scale })),
    );
    cases.forEach((c, i) => {
      const ctx = { seed: SEED, label: `softmaxAsync [${c.shape}] scale=${c.scale}` };
      const sync = softmax({ data: Float32Array.from(c.x), shape: c.shape }, c.scale === undefined ? undefined : { scale: c.scale });
      expect(results[i].shape).toEqual(c.shape);
      expectBitEqual(results[i].data, sync.data, ctx);
      expectClose(results[i].data, refSoftmax(c.x, c.shape, c.scale ?? 1).data, TOL, ctx);
    });
  });

  test('in place and poisoned out, async', async () => {
    const rng = rngFor(SEED, 'async out');
    const shape = randomShape(rng);
    const x0 = randomFloat32(rng, numel(shape));
    const inPlace = { data: Float32Array.from(x0), shape };
    const r1 = await softmaxAsync(inPlace, { out: inPlace, scale: 1.7 });
    expect(r1).toBe(inPlace);
    const out = { data: new Float32Array(x0.length).fill(NaN), shape };
    const r2 = await softmaxAsync({ data: x0, shape }, { out, scale: 1.7 });
    expect(r2).toBe(out);
    const sync = softmax({ data: x0, shape }, { scale: 1.7 });
    const ctx = { seed: SEED, label: `softmaxAsync out [${shape}]` };
    expectBitEqual(r1.data, sync.data, ctx);
    expectBitEqual(r2.data, sync.data, ctx);
    expectClose(sync.data, refSoftmax(x0, shape, 1.7).data, TOL, ctx);
  });
});
