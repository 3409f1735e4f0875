/**
 * layerNorm against a float64 reference: awkward row widths, optional weight
 * and bias, a NaN-poisoned guarded `out`, in place, zero-size shapes, and bad
 * inputs (sync throws, async rejects, `out` untouched). The seed is in the
 * describe title (replay: MHSA_TEST_SEED=<seed> npx jest test/layernorm.test.ts).
 */
import { layerNorm, layerNormAsync, rmsNorm, rmsNormAsync, tensor, type LayerNormOptions, type Tensor } from '../lib';
import {
  expectBitEqual,
  expectClose,
  expectGuardsIntact,
  expectShape,
  guardedCopy,
  guardedOut,
  pick,
  pickSeed,
  randInt,
  randomFloat32,
  rngFor,
  type Rng,
} from './helpers/random';
import { numel, refLayerNorm } from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;
const DIMS = [1, 3, 17, 63, 65, 197, 1000] as const;


type OutMode = 'none' | 'poisoned' | 'inplace';

interface Case {
  shape: number[];
  x: Float32Array;
  weight?: Float32Array;
  bias?: Float32Array;
  eps?: number;
}

function randomCase(rng: Rng, shape: number[], affine: { weight: boolean; bias: boolean }, scale = 1, offset = 0): Case {
  const dim = shape[shape.length - 1];
  const x = randomFloat32(rng, numel(shape)).map((v) => v * scale + offset);
  return {
    shape,
    x,
    weight: affine.weight ? randomFloat32(rng, dim).map((v) => v * 2) : undefined,
    bias: affine.bias ? randomFloat32(rng, dim) : undefined,
  };
}

function options(rng: Rng, c: Case): LayerNormOptions {
  const dim = c.shape[c.shape.length - 1];
  const opts: LayerNormOptions = {};
  // weight/bias given as [dim] tensors at a guarded, offset position.
  if (c.weight) opts.weight = { data: guardedCopy(rng, c.weight), shape: [dim] };
  if (c.bias) opts.bias = { data: guardedCopy(rng, c.bias), shape: [dim] };
  if (c.eps !== undefined) opts.eps = c.eps;
  return opts;
}

function check(rng: Rng, label: string, c: Case, mode: OutMode): Tensor {
  const ctx = { seed: SEED, label: `layerNorm ${label} w=${!!c.weight} b=${!!c.bias} eps=${c.eps ?? 'default'} out=${mode}`, shape: c.shape };
  const ref = refLayerNorm(c.x, c.shape, c.weight, c.bias, c.eps ?? 1e-5);
  const opts = options(rng, c);
  let x: Tensor;
  let outView: Float32Array | undefined;
  if (mode === 'inplace') {
    outView = guardedOut(rng, c.x.length);
    outView.set(c.x);
    x = { data: outView, shape: c.shape };
    opts.out = x;
  } else {
    x = { data: guardedCopy(rng, c.x), shape: c.shape };
    if (mode === 'poisoned') {
      outView = guardedOut(rng, c.x.length);
      opts.out = { data: outView, shape: c.shape };
    }
  }
  const r = layerNorm(x, opts);
  expectShape(r.shape, c.shape, ctx);
  expectClose(r.data, ref, TOL, ctx);
  if (opts.out) {
    expect(r).toBe(opts.out);
    expectGuardsIntact(outView!, ctx);
  } else {
    expect(Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength).equals(Buffer.from(c.x.buffer))).toBe(true);
  }
  return r;
}

const AFFINE = [
  { weight: false, bias: false },
  { weight: true, bias: false },
  { weight: false, bias: true },
  { weight: true, bias: true },
];

describe(`layerNorm vs float64 reference (seed ${SEED})`, () => {
  test('every width in {1, 3, 17, 63, 65, 197, 1000}, with and without weight and bias', () => {
    const rng = rngFor(SEED, 'widths');
    for (const dim of DIMS) {
      for (const affine of AFFINE) {
        const rows = randInt(rng, 1, 9);
        check(rng, `dim ${dim}`, randomCase(rng, [rows, dim], affine, 3), 'none');
      }
    }
  });

  test('random shapes of rank 1 to 4', () => {
    const rng = rngFor(SEED, 'shapes');
    for (let t = 0; t < 20; t++) {
      const rank = randInt(rng, 1, 4);
      let shape: number[];
      do {
        shape = Array.from({ length: rank - 1 }, () => pick(rng, [1, 2, 3, 5, 17])).concat([pick(rng, DIMS)]);
      } while (numel(shape) > 60000);
      check(rng, 'random', randomCase(rng, shape, pick(rng, AFFINE), pick(rng, [0.01, 1, 100])), pick(rng, ['none', 'poisoned', 'inplace'] as OutMode[]));
    }
  });

  test('out provided, poisoned with NaN, inside a guarded buffer', () => {
    const rng = rngFor(SEED, 'poisoned');
    for (const dim of DIMS) check(rng, `dim ${dim}`, randomCase(rng, [randInt(rng, 1, 5), dim], pick(rng, AFFINE)), 'poisoned');
  });

  test('in place (out is x)', () => {
    const rng = rngFor(SEED, 'inplace');
    for (const dim of DIMS) check(rng, `dim ${dim}`, randomCase(rng, [randInt(rng, 1, 5), dim], pick(rng, AFFINE)), 'inplace');
  });

  test('a common offset of 100 does not cancel the variance', () => {
    const rng = rngFor(SEED, 'offset');
    for (const dim of [17, 197, 1000]) check(rng, `offset dim ${dim}`, randomCase(rng, [4, dim], { weight: true, bias: true }, 1, 100), 'none');
  });

  // The mean is subtracted in double: a float mean would shift every output by up to half an ulp of it.
  test('a common offset of 1000 with unit spread stays within 1e-5', () => {
    const rng = rngFor(SEED, 'offset 1000');
    for (const dim of [17, 197, 1000]) check(rng, `offset dim ${dim}`, randomCase(rng, [4, dim], { weight: true, bias: true }, 1, 1000), 'none');
  });

  test('eps: 0, the default, large; constant rows give the bias', () => {
    const rng = rngFor(SEED, 'eps');
    for (const eps of [0, 1e-5, 1e-3, 1, 100]) {
      const c = randomCase(rng, [3, pick(rng, [3, 17, 65])], pick(rng, AFFINE));
      c.eps = eps;
      check(rng, 'eps', c, 'none');
    }
    // A constant row: x − mean = 0, so the output is the bias (0 without one), with eps > 0.
    const dim = 65;
    const bias = randomFloat32(rng, dim);
    const x = new Float32Array(2 * dim).fill(3.5);
    const r = layerNorm(tensor(x, [2, dim]), { weight: tensor(randomFloat32(rng, dim), [dim]), bias: tensor(bias, [dim]) });
    expect(Array.from(r.data.subarray(0, dim))).toEqual(Array.from(bias));
    expect(Array.from(layerNorm(tensor(x, [2, dim])).data)).toEqual(new Array(2 * dim).fill(0));
    // dim = 1: every row is constant.
    expect(Array.from(layerNorm(tensor([5, -2, 7], [3, 1]), { bias: tensor([0.25], [1]) }).data)).toEqual([0.25, 0.25, 0.25]);
  });

  test('the documented example', () => {
    const r = layerNorm(tensor([1, 2, 3, 4], [1, 4]));
    const want = [-1.3416, -0.4472, 0.4472, 1.3416];
    r.data.forEach((v, i) => expect(v).toBeCloseTo(want[i], 3));
  });

  test('zero-size shapes give empty results', () => {
    const rng = rngFor(SEED, 'empty');
    for (const shape of [[0], [0, 5], [5, 0], [2, 0, 3], [3, 4, 0]]) {
      const dim = shape[shape.length - 1];
      for (const mode of ['none', 'poisoned', 'inplace'] as OutMode[]) {
        const r = check(rng, 'empty', { shape, x: new Float32Array(0), weight: new Float32Array(dim), bias: new Float32Array(dim) }, mode);
        expect(r.data.length).toBe(0);
      }
    }
  });

  test('layerNormAsync equals layerNorm bit for bit, several calls concurrently', async () => {
    const rng = rngFor(SEED, 'async');
    const cases = DIMS.map((dim) => randomCase(rng, [randInt(rng, 1, 6), dim], pick(rng, AFFINE), 2));
    const syncs = cases.map((c) => layerNorm({ data: c.x, shape: c.shape }, options(rng, c)));
    const asyncs = await Promise.all(cases.map((c) => layerNormAsync({ data: c.x, shape: c.shape }, options(rng, c))));
    asyncs.forEach((a, i) => {
      expect(a.shape).toEqual(cases[i].shape);
      expectBitEqual(a.data, syncs[i].data, { seed: SEED, label: `async dim ${cases[i].shape[1]}` });
    });
    // In place, async.
    const c = cases[3];
    const buf = { data: c.x.slice(), shape: c.shape };
    const r = await layerNormAsync(buf, { ...options(rng, c), out: buf });
    expect(r).toBe(buf);
    expectBitEqual(buf.data, syncs[3].data, { seed: SEED, label: 'async in place' });
  });
});

describe('layerNorm bad inputs: sync throws, async rejects, out untouched', () => {
  const SENTINEL = -777.25;
  const x = () => tensor(new Float32Array(12).fill(1), [3, 4]);
  const out = () => ({ data: new Float32Array(12).fill(SENTINEL), shape: [3, 4] });
  const w4 = () => tensor(new Float32Array(4).fill(1), [4]);

  type Row = [what: string, args: () => { x: unknown; opts?: unknown; out?: Tensor }, err: typeof TypeError | typeof RangeError, msg: RegExp];
  const rows: Row[] = [
    ['x not a tensor', () => ({ x: new Float32Array(4) }), TypeError, /expected a tensor \{ data: Float32Array, shape: number\[\] \} for x but received Float32Array\(4\)/],
    ['x.data a Float64Array', () => ({ x: { data: new Float64Array(4), shape: [4] } }), TypeError, /expected a Float32Array for x.data but received Float64Array\(4\)/],
    ['x.data a number[]', () => ({ x: { data: [1, 2], shape: [2] } }), TypeError, /expected a Float32Array for x.data/],
    ['x shape/length mismatch', () => ({ x: { data: new Float32Array(5), shape: [2, 2] } }), RangeError, /x.data.length must equal the product of x.shape \[2, 2\] = 4, received 5/],
    ['x shape with a fractional dim', () => ({ x: { data: new Float32Array(4), shape: [2.5, 2] } }), RangeError, /x.shape\[0\] must be a non-negative safe integer, received 2.5/],
    ['x shape with a string dim', () => ({ x: { data: new Float32Array(4), shape: ['4'] } }), TypeError, /expected a number for x.shape\[0\]/],
    ['x scalar (rank 0)', () => ({ x: { data: new Float32Array(1), shape: [] } }), RangeError, /x must have at least 1 dim, received shape \[\]/],
    ['options not an object', () => ({ x: x(), opts: 5 }), TypeError, /expected an object for options but received the number 5/],
    ['unknown option', () => ({ x: x(), opts: { epsilon: 1e-5 } }), TypeError, /unknown key "epsilon" in options/],
    ['weight of the wrong length', () => ({ x: x(), opts: { weight: tensor(new Float32Array(3), [3]) } }), RangeError, /options\.weight\.shape must be \[4\] \(x's last dim, leading 1s allowed\), received \[3\]/],
    // The right element count in the wrong shape was once accepted.
    ['weight of the right length, shape [2, 2]', () => ({ x: x(), opts: { weight: tensor(new Float32Array(4), [2, 2]) } }), RangeError, /options\.weight\.shape must be \[4\] \(x's last dim, leading 1s allowed\), received \[2, 2\]/],
    ['weight a Float64Array', () => ({ x: x(), opts: { weight: { data: new Float64Array(4), shape: [4] } } }), TypeError, /expected a Float32Array for options.weight.data/],
    ['bias not a tensor', () => ({ x: x(), opts: { bias: [0, 0, 0, 0] } }), TypeError, /expected a tensor \{ data: Float32Array, shape: number\[\] \} for options.bias but received an Array\(4\)/],
    ['bias of the wrong length', () => ({ x: x(), opts: { bias: tensor(new Float32Array(8), [8]) } }), RangeError, /options\.bias\.shape must be \[4\] \(x's last dim, leading 1s allowed\), received \[8\]/],
    ['eps a string', () => ({ x: x(), opts: { eps: '1e-5' } }), TypeError, /expected a number for options.eps/],
    ['eps negative', () => ({ x: x(), opts: { eps: -1 } }), RangeError, /options.eps must be a finite float32 number >= 0, received -1/],
    ['eps NaN', () => ({ x: x(), opts: { eps: NaN } }), RangeError, /options.eps must be a finite float32 number >= 0, received NaN/],
    ['eps beyond float32', () => ({ x: x(), opts: { eps: 1e39 } }), RangeError, /options.eps must be a finite float32 number/],
    ['out of the wrong shape', () => ({ x: x(), out: { data: new Float32Array(12).fill(SENTINEL), shape: [4, 3] } }), RangeError, /options\.out\.shape must be \[3, 4\], received \[4, 3\]/],
    ['out a Float64Array', () => ({ x: x(), opts: { out: { data: new Float64Array(12), shape: [3, 4] } } }), TypeError, /expected a Float32Array for options\.out\.data/],
    [
      'out partly overlapping x',
      () => {
        const buf = new Float32Array(16);
        return { x: { data: buf.subarray(0, 12), shape: [3, 4] }, opts: { out: { data: buf.subarray(4, 16), shape: [3, 4] } } };
      },
      RangeError,
      /options.out must be exactly x or share no memory with it/,
    ],
    [
      'out overlapping the weight',
      () => {
        const o = out();
        return { x: x(), out: o, opts: { weight: { data: o.data.subarray(0, 4), shape: [4] } } };
      },
      RangeError,
      /options.out must not share memory with options.weight/,
    ],
    ['x detached', () => {
      const t = x();
      structuredClone(t.data.buffer, { transfer: [t.data.buffer as ArrayBuffer] });
      return { x: t };
    }, TypeError, /x.data is backed by a detached ArrayBuffer/],
  ];

  for (const [what, make, err, msg] of rows) {
    test(`${what}: sync`, () => {
      const a = make();
      const o = a.out ?? out();
      const opts = a.opts === undefined ? { out: o } : typeof a.opts === 'object' && a.opts !== null && !('out' in a.opts) ? { ...(a.opts as object), out: o } : a.opts;
      let thrown: unknown;
      try {
        layerNorm(a.x as Tensor, opts as LayerNormOptions);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(err);
      expect((thrown as Error).message).toMatch(/^layerNorm: /);
      expect((thrown as Error).message).toMatch(msg);
      expect(o.data.every((v) => v === SENTINEL)).toBe(true);
    });

    test(`${what}: async rejects (never throws synchronously)`, async () => {
      const a = make();
      const o = a.out ?? out();
      const opts = a.opts === undefined ? { out: o } : typeof a.opts === 'object' && a.opts !== null && !('out' in a.opts) ? { ...(a.opts as object), out: o } : a.opts;
      let p: Promise<Tensor> | undefined;
      expect(() => {
        p = layerNormAsync(a.x as Tensor, opts as LayerNormOptions);
      }).not.toThrow();
      const e = await p!.then(
        () => undefined,
        (er: unknown) => er,
      );
      expect(e).toBeInstanceOf(err);
      expect((e as Error).message).toMatch(/^layerNormAsync: /);
      expect((e as Error).message).toMatch(msg);
      expect(o.data.every((v) => v === SENTINEL)).toBe(true);
    });
  }

  test('weight and bias given as 2-D [1, dim] tensors are accepted (length = dim)', () => {
    const r = layerNorm(tensor([1, 2, 3, 4], [1, 4]), { weight: tensor([1, 1, 1, 1], [1, 4]), bias: tensor([0, 0, 0, 0], [1, 4]) });
    expect(r.data[3]).toBeCloseTo(1.3416, 3);
  });

  test('w4 helper sanity (x with a [4] weight)', () => {
    expect(layerNorm(x(), { weight: w4() }).data.every((v) => v === 0)).toBe(true);
  });
});

/** x / √(mean(x²) + eps) · weight per row, in float64. */
function refRmsNorm(x: Float32Array, dim: number, weight: Float32Array | undefined, eps: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let r = 0; r < x.length / dim; r++) {
    let sq = 0;
    for (let i = 0; i < dim; i++) sq += x[r * dim + i] * x[r * dim + i];
    const inv = 1 / Math.sqrt(sq / dim + eps);
    for (let i = 0; i < dim; i++) y[r * dim + i] = x[r * dim + i] * inv * (weight ? weight[i] : 1);
  }
  return y;
}

describe(`rmsNorm vs float64 reference (seed ${SEED})`, () => {
  test('every width, with and without weight, poisoned out, in place, async bit for bit', async () => {
    const rng = rngFor(SEED, 'rmsNorm');
    for (const dim of DIMS) {
      const rows = randInt(rng, 1, 5);
      const x = randomFloat32(rng, rows * dim).map((v) => 3 * v + 0.5);
      const weight = pick(rng, [true, false]) ? randomFloat32(rng, dim) : undefined;
      const eps = pick(rng, [undefined, 1e-5, 0.5]);
      const options = { ...(weight ? { weight: tensor(weight, [dim]) } : {}), ...(eps !== undefined ? { eps } : {}) };
      const ctx = { seed: SEED, label: `rmsNorm [${rows}, ${dim}] weight ${!!weight} eps ${eps}`, shape: [rows, dim] };
      const ref = refRmsNorm(x, dim, weight, eps ?? 1e-6);
      const y = rmsNorm(tensor(x, [rows, dim]), options);
      expectShape(y.shape, [rows, dim], ctx);
      expectClose(y.data, ref, TOL, ctx);
      const outView = guardedOut(rng, rows * dim);
      rmsNorm(tensor(x, [rows, dim]), { ...options, out: { data: outView, shape: [rows, dim] } });
      expectBitEqual(outView, y.data, ctx);
      expectGuardsIntact(outView, ctx);
      const inPlace = tensor(x.slice(), [rows, dim]);
      rmsNorm(inPlace, { ...options, out: inPlace });
      expectBitEqual(inPlace.data, y.data, ctx);
      expectBitEqual((await rmsNormAsync(tensor(x, [rows, dim]), options)).data, y.data, ctx);
    }
  });

  test('the documented example; bad input is named', async () => {
    expect(Array.from(rmsNorm(tensor([1, 2, 3, 4], [1, 4])).data).map((v) => +v.toFixed(3))).toEqual([0.365, 0.73, 1.095, 1.461]);
    const x = tensor(new Float32Array(8), [2, 4]);
    expect(() => rmsNorm(x, { bias: tensor(new Float32Array(4), [4]) } as never)).toThrow(/^rmsNorm: unknown key "bias" in options/);
    expect(() => rmsNorm(x, { weight: tensor(new Float32Array(3), [3]) })).toThrow(/^rmsNorm: options\.weight\.shape must be \[4\]/);
    expect(() => rmsNorm(x, { eps: -1 })).toThrow(/^rmsNorm: options\.eps must be a finite float32 number >= 0, received -1/);
    await expect(rmsNormAsync(x, { eps: NaN })).rejects.toThrow(/^rmsNormAsync: options\.eps/);
  });
});
