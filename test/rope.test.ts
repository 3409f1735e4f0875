/**
 * rope against a float64 transcription of both conventions (rotate-half as in
 * Hugging Face's LLaMA/GPT-NeoX `apply_rotary_pos_emb`, interleaved pairs as
 * in GPT-J), over awkward sizes, partial rotary dims, explicit and per-batch
 * positions, offsets, both layouts and the 3-D packed form, into a poisoned
 * `out` or in place; and bad inputs (sync throws, async rejects, out untouched).
 * Replay a failure with MHSA_TEST_SEED=<seed>.
 */
import { rope, ropeAsync, tensor, type RopeOptions, type Tensor } from '../lib';
import { expectBitEqual, expectClose, pick, pickSeed, poisoned, randInt, randomFloat32, rngFor, type Rng } from './helpers/random';

const SEED = pickSeed();
const TOL = 1e-5;

interface Layout {
  layout: 'bhsd' | 'bshd' | 'packed';
  batch: number;
  seq: number;
  heads: number;
  headDim: number;
}

function shapeOf(l: Layout): number[] {
  if (l.layout === 'bhsd') return [l.batch, l.heads, l.seq, l.headDim];
  if (l.layout === 'bshd') return [l.batch, l.seq, l.heads, l.headDim];
  return [l.batch, l.seq, l.heads * l.headDim];
}

/** Flat index of (b, s, h, d) in l's layout. */
function indexOf(l: Layout, b: number, s: number, h: number, d: number): number {
  if (l.layout === 'bhsd') return ((b * l.heads + h) * l.seq + s) * l.headDim + d;
  return ((b * l.seq + s) * l.heads + h) * l.headDim + d;
}

/** The float64 rotation, written from the papers' definitions rather than from the kernel. */
function refRope(x: Float32Array, l: Layout, positionOf: (b: number, s: number) => number, rotaryDim: number, theta: number, interleaved: boolean): Float64Array {
  const out = Float64Array.from(x);
  const half = rotaryDim / 2;
  for (let b = 0; b < l.batch; b++) {
    for (let s = 0; s < l.seq; s++) {
      const p = positionOf(b, s);
      for (let h = 0; h < l.heads; h++) {
        for (let i = 0; i < half; i++) {
          const angle = p * Math.pow(theta, (-2 * i) / rotaryDim);
          const [d1, d2] = interleaved ? [2 * i, 2 * i + 1] : [i, i + half];
          const x1 = x[indexOf(l, b, s, h, d1)];
          const x2 = x[indexOf(l, b, s, h, d2)];
          out[indexOf(l, b, s, h, d1)] = x1 * Math.cos(angle) - x2 * Math.sin(angle);
          out[indexOf(l, b, s, h, d2)] = x2 * Math.cos(angle) + x1 * Math.sin(angle);
        }
      }
    }
  }
  return out;
}

interface Case {
  label: string;
  l: Layout;
  x: Float32Array;
  opts: RopeOptions;
  ref: Float64Array;
}

function randomCase(rng: Rng): Case {
  const l: Layout = {
    layout: pick(rng, ['bhsd', 'bshd', 'packed'] as const),
    batch: randInt(rng, 1, 3),
    seq: pick(rng, [1, 3, 17, 63, 65]),
    heads: pick(rng, [1, 3, 4]),
    headDim: pick(rng, [2, 6, 64, 66, 128]),
  };
  const rotaryDim = rng() < 0.5 ? l.headDim : 2 * randInt(rng, 1, l.headDim / 2);
  const theta = pick(rng, [10000, 500000, 1e6, 7.5]);
  const interleaved = rng() < 0.5;
  const x = randomFloat32(rng, l.batch * l.seq * l.heads * l.headDim);
  const opts: RopeOptions = { theta, interleaved };
  if (rotaryDim !== l.headDim || rng() < 0.3) opts.rotaryDim = rotaryDim;
  if (l.layout === 'packed') opts.heads = l.heads;
  else if (l.layout === 'bshd' || rng() < 0.5) opts.layout = l.layout;
  let positionOf: (b: number, s: number) => number;
  const mode = pick(rng, ['none', 'offset', 'shared', 'perBatch'] as const);
  if (mode === 'offset') {
    const offset = pick(rng, [1, 4095, 16384, 131071]);
    opts.offset = offset;
    positionOf = (_, s) => offset + s;
  } else if (mode === 'shared') {
    const positions = Int32Array.from({ length: l.seq }, () => randInt(rng, 0, 200000));
    opts.positions = positions;
    positionOf = (_, s) => positions[s];
  } else if (mode === 'perBatch') {
    const positions = Int32Array.from({ length: l.batch * l.seq }, () => randInt(rng, 0, 40000));
    opts.positions = positions;
    positionOf = (b, s) => positions[b * l.seq + s];
  } else {
    positionOf = (_, s) => s;
  }
  const label = `rope ${l.layout} B${l.batch} S${l.seq} H${l.heads} D${l.headDim} r${rotaryDim} theta${theta} ${interleaved ? 'interleaved' : 'rotate-half'} positions:${mode}`;
  return { label, l, x, opts, ref: refRope(x, l, positionOf, rotaryDim, theta, interleaved) };
}

describe(`rope against float64 (seed ${SEED})`, () => {
  test.each(Array.from({ length: 60 }, (_, i) => i))('random case %i, into a poisoned out and in place', (i) => {
    const rng = rngFor(SEED, `rope ${i}`);
    const c = randomCase(rng);
    const shape = shapeOf(c.l);
    const x = { data: Float32Array.from(c.x), shape };
    const out = { data: poisoned(c.x.length), shape };
    const r = rope(x, { ...c.opts, out });
    expect(r).toBe(out);
    expectClose(out.data, c.ref, TOL, { seed: SEED, label: c.label, shape });
    expect(x.data).toEqual(c.x);
    const inPlace = { data: Float32Array.from(c.x), shape };
    rope(inPlace, { ...c.opts, out: inPlace });
    expectBitEqual(inPlace.data, out.data, { seed: SEED, label: `${c.label} in place` });
    const fresh = rope(x, c.opts);
    expect(fresh.shape).toEqual(shape);
    expectBitEqual(fresh.data as Float32Array, out.data, { seed: SEED, label: `${c.label} allocated` });
  });

  test('ropeAsync gives the same bits as rope', async () => {
    for (let i = 0; i < 6; i++) {
      const c = randomCase(rngFor(SEED, `rope async ${i}`));
      const shape = shapeOf(c.l);
      const sync = rope({ data: c.x, shape }, c.opts);
      const r = await ropeAsync({ data: c.x, shape }, c.opts);
      expectBitEqual(r.data as Float32Array, sync.data as Float32Array, { seed: SEED, label: `${c.label} async` });
    }
  });

  test('position 0 is the identity, and features past rotaryDim are copied exactly', () => {
    const x = tensor(Float32Array.from({ length: 2 * 10 }, (_, i) => i + 0.25), [1, 2, 1, 10]);
    expect(Array.from(rope(x).data)).toEqual(Array.from(x.data));
    const r = rope(x, { offset: 7, rotaryDim: 4 });
    for (const h of [0, 1]) expect(Array.from(r.data.subarray(h * 10 + 4, h * 10 + 10))).toEqual(Array.from(x.data.subarray(h * 10 + 4, h * 10 + 10)));
  });

  test('the two conventions agree once the features are permuted (GPT-J pairs = rotate-half halves)', () => {
    const rng = rngFor(SEED, 'rope permutation');
    const d = 16, seq = 9;
    const x = randomFloat32(rng, seq * d);
    // interleaved order [a0, b0, a1, b1, ...] <-> rotate-half order [a0, a1, ..., b0, b1, ...]
    const toHalf = (v: Float32Array) => Float32Array.from({ length: v.length }, (_, i) => {
      const s = Math.floor(i / d), j = i % d;
      return v[s * d + (j < d / 2 ? 2 * j : 2 * (j - d / 2) + 1)];
    });
    const inter = rope({ data: x, shape: [1, 1, seq, d] }, { interleaved: true, offset: 3 });
    const half = rope({ data: toHalf(x), shape: [1, 1, seq, d] }, { offset: 3 });
    expectBitEqual(toHalf(inter.data as Float32Array), half.data as Float32Array, { seed: SEED, label: 'permuted' });
  });

  test('zero-size shapes are accepted and write nothing', () => {
    expect(rope(tensor(new Float32Array(0), [2, 0, 3, 8])).shape).toEqual([2, 0, 3, 8]);
    expect(rope(tensor(new Float32Array(0), [1, 0, 8]), { heads: 2 }).shape).toEqual([1, 0, 8]);
  });
});

describe('rope: bad inputs throw (rope) or reject (ropeAsync), naming the argument, and write nothing', () => {
  const shape = [1, 2, 3, 8];
  const x = (): Tensor => ({ data: Float32Array.from({ length: 48 }, (_, i) => i / 48), shape });
  const cases: [string, () => [unknown, RopeOptions | undefined], typeof TypeError | typeof RangeError, RegExp][] = [
    ['x not a tensor', () => [new Float32Array(48), {}], TypeError, /x/],
    ['x 2-D', () => [tensor(new Float32Array(8), [1, 8]), {}], RangeError, /x must have 4 dims/],
    ['3-D x without heads', () => [tensor(new Float32Array(48), [1, 3, 16]), {}], RangeError, /options\.heads is required/],
    ['3-D x with heads not dividing', () => [tensor(new Float32Array(48), [1, 3, 16]), { heads: 3 }], RangeError, /multiple of options\.heads = 3/],
    ['3-D x with layout bhsd', () => [tensor(new Float32Array(48), [1, 3, 16]), { heads: 2, layout: 'bhsd' }], RangeError, /options\.layout must be 'bshd'/],
    ['heads disagreeing with a 4-D x', () => [x(), { heads: 3 }], RangeError, /options\.heads must match/],
    ['unknown layout', () => [x(), { layout: 'bhds' as 'bhsd' }], RangeError, /options\.layout/],
    ['odd rotaryDim', () => [x(), { rotaryDim: 3 }], RangeError, /options\.rotaryDim must be even/],
    ['rotaryDim above headDim', () => [x(), { rotaryDim: 10 }], RangeError, /at most headDim = 8, received 10/],
    ['an odd headDim with no rotaryDim', () => [tensor(new Float32Array(30), [1, 2, 3, 5]), {}], RangeError, /headDim must be even to rotate all of it, received 5/],
    ['rotaryDim 0', () => [x(), { rotaryDim: 0 }], RangeError, /options\.rotaryDim must be a positive integer/],
    ['fractional rotaryDim', () => [x(), { rotaryDim: 2.5 }], RangeError, /options\.rotaryDim/],
    ['theta 0', () => [x(), { theta: 0 }], RangeError, /options\.theta must be above 0/],
    ['theta NaN', () => [x(), { theta: NaN }], RangeError, /options\.theta/],
    ['theta a string', () => [x(), { theta: '1e4' as unknown as number }], TypeError, /options\.theta/],
    ['positions a Float32Array', () => [x(), { positions: new Float32Array(3) as unknown as Int32Array }], TypeError, /options\.positions/],
    ['positions of the wrong length', () => [x(), { positions: new Int32Array(4) }], RangeError, /positions\.length must be seq = 3 or batch·seq = 3, received 4/],
    ['a negative position', () => [x(), { positions: Int32Array.from([0, -1, 2]) }], RangeError, /positions\[1\] must be non-negative, received -1/],
    ['positions and offset', () => [x(), { positions: new Int32Array(3), offset: 1 }], RangeError, /cannot both be given/],
    ['a negative offset', () => [x(), { offset: -1 }], RangeError, /options\.offset must be a non-negative integer/],
    ['a fractional offset', () => [x(), { offset: 0.5 }], RangeError, /options\.offset/],
    ['an unknown option', () => [x(), { window: 3 } as RopeOptions], TypeError, /unknown key "window"/],
  ];

  test.each(cases)('%s', async (_, make, type, message) => {
    const [input, opts] = make();
    const out = { data: poisoned(48), shape };
    const withOut = opts === undefined ? { out } : { ...opts, out };
    expect(() => rope(input as Tensor, withOut)).toThrow(expect.objectContaining({ name: type.name, message: expect.stringMatching(message) }));
    expect(out.data.every(Number.isNaN)).toBe(true);
    const [input2, opts2] = make();
    await expect(ropeAsync(input2 as Tensor, { ...opts2, out })).rejects.toThrow(
      expect.objectContaining({ name: type.name, message: expect.stringMatching(/^ropeAsync: /) }),
    );
    expect(out.data.every(Number.isNaN)).toBe(true);
  });

  test('an out that partly overlaps x, or of the wrong shape, is refused', () => {
    const buf = new Float32Array(60);
    const a = { data: buf.subarray(0, 48), shape };
    expect(() => rope(a, { out: { data: buf.subarray(4, 52), shape } })).toThrow(expect.objectContaining({ name: 'RangeError' }));
    expect(() => rope(x(), { out: { data: new Float32Array(48), shape: [1, 3, 2, 8] } })).toThrow(expect.objectContaining({ name: 'RangeError' }));
  });

  test('a detached x or positions is refused', () => {
    const data = new Float32Array(48);
    structuredClone(data.buffer, { transfer: [data.buffer] });
    expect(() => rope({ data, shape })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/detached/) }));
    const positions = new Int32Array(3);
    structuredClone(positions.buffer, { transfer: [positions.buffer] });
    expect(() => rope(x(), { positions })).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/options\.positions .*detached/) }));
  });
});
