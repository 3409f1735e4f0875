/**
 * MultiHeadSelfAttention.forward runs its stages as one native.sequence call
 * and keeps the checked arguments of its last call in the workspace, to reuse
 * when the next call has the same shapes and options (only the caller's
 * buffers are swapped in). These tests vary every input of that plan from one
 * call to the next on one block, and compare each result bit for bit with a
 * block that has never run (no plan to reuse); and they check that
 * native.sequence checks every stage before it runs any.
 * Replay a failure with MHSA_TEST_SEED=<seed>.
 */
import { MultiHeadSelfAttention, type MultiHeadSelfAttentionConfig, type MultiHeadSelfAttentionForwardOptions, type Tensor } from '../lib';
import { native } from '../lib/native';
import { expectBitEqual, pickSeed, poisoned, randInt, randomFloat32, rngFor, type Rng } from './helpers/random';

const SEED = pickSeed();

function random(rng: Rng, shape: number[], scale = 0.3): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return { data: randomFloat32(rng, n).map((v) => v * scale), shape };
}

function config(rng: Rng, dim: number, heads: number, dimHead: number, norm: boolean): MultiHeadSelfAttentionConfig {
  const inner = heads * dimHead;
  return {
    dim,
    heads,
    dimHead,
    weights: {
      qkvWeight: random(rng, [3 * inner, dim]),
      qkvBias: random(rng, [3 * inner]),
      outWeight: random(rng, [dim, inner]),
      outBias: random(rng, [dim]),
    },
    norm: norm ? { weight: random(rng, [dim], 1), bias: random(rng, [dim]) } : undefined,
  };
}

interface Call {
  label: string;
  x: Tensor;
  options: MultiHeadSelfAttentionForwardOptions;
}

/** Calls that differ from their neighbours in one input each: shape, causal, mask, padding, out, rank, data. */
function calls(rng: Rng, dim: number, heads: number): Call[] {
  const x = (b: number, t: number) => random(rng, [b, t, dim], 1);
  const same = x(2, 7);
  const list: Call[] = [
    { label: 'B2 T7', x: same, options: {} },
    { label: 'B2 T7 again, same x', x: same, options: {} },
    { label: 'B2 T7, new x', x: x(2, 7), options: {} },
    { label: 'B2 T5 (fewer tokens: the workspace is not regrown)', x: x(2, 5), options: {} },
    { label: 'B2 T5 causal', x: x(2, 5), options: { causal: true } },
    { label: 'B2 T5 not causal', x: x(2, 5), options: { causal: false } },
    { label: 'B2 T5 mask [T, T]', x: x(2, 5), options: { mask: random(rng, [5, 5], 2) } },
    { label: 'B2 T5 another mask [T, T]', x: x(2, 5), options: { mask: random(rng, [5, 5], 2) } },
    { label: 'B2 T5 mask [B, H, T, T]', x: x(2, 5), options: { mask: random(rng, [2, heads, 5, 5], 2) } },
    { label: 'B2 T5 key padding', x: x(2, 5), options: { keyPaddingMask: Uint8Array.from([0, 0, 1, 0, 1, 1, 0, 0, 0, 0]) } },
    { label: 'B2 T5 other key padding', x: x(2, 5), options: { keyPaddingMask: Uint8Array.from([1, 0, 0, 0, 0, 0, 0, 0, 1, 1]) } },
    { label: 'B2 T5 causal and key padding', x: x(2, 5), options: { causal: true, keyPaddingMask: new Uint8Array(10) } },
    { label: 'B2 T5 with out', x: x(2, 5), options: { out: { data: poisoned(2 * 5 * dim), shape: [2, 5, dim] } } },
    { label: 'B2 T5 with another out', x: x(2, 5), options: { out: { data: poisoned(2 * 5 * dim), shape: [2, 5, dim] } } },
    { label: 'T5, 2-D x', x: random(rng, [5, dim], 1), options: {} },
    { label: 'B1 T5', x: x(1, 5), options: {} },
    { label: 'B3 T9 (the workspace grows)', x: x(3, 9), options: {} },
    { label: 'B3 T9 with weights', x: x(3, 9), options: { returnWeights: true } },
    { label: 'B3 T9 after weights', x: x(3, 9), options: {} },
  ];
  // The same calls again in a shuffled order: each plan then meets other predecessors.
  const shuffled = list.slice();
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = randInt(rng, 0, i);
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
  }
  return [...list, ...shuffled.map((c) => ({ ...c, label: `${c.label} (shuffled)`, options: fresh(c.options) }))];
}

/** The options with a new poisoned out of the same shape (an out is written by each call). */
function fresh(options: MultiHeadSelfAttentionForwardOptions): MultiHeadSelfAttentionForwardOptions {
  if (!options.out) return options;
  return { ...options, out: { data: poisoned(options.out.data.length), shape: options.out.shape.slice() } };
}

function outputOf(r: Tensor | { output: Tensor; weights: Tensor }): { output: Tensor; weights?: Tensor } {
  return 'output' in r ? r : { output: r };
}

describe.each([
  { dim: 12, heads: 3, dimHead: 4, norm: true },
  { dim: 8, heads: 2, dimHead: 6, norm: false },
  { dim: 6, heads: 1, dimHead: 6, norm: true }, // no output projection: attention writes the caller's out
  { dim: 1032, heads: 2, dimHead: 4, norm: true }, // wider than the fused LayerNorm takes: a LayerNorm stage first
])(`one block, calls that change one input at a time (seed ${SEED})`, ({ dim, heads, dimHead, norm }) => {
  const label = `dim ${dim} heads ${heads} dimHead ${dimHead}${norm ? ' norm' : ''}`;

  test(`forward, ${label}: each result equals a new block's`, () => {
    const rng = rngFor(SEED, `plan ${label}`);
    const cfg = config(rng, dim, heads, dimHead, norm);
    const reused = new MultiHeadSelfAttention(cfg);
    for (const c of calls(rng, dim, heads)) {
      const expected = outputOf(new MultiHeadSelfAttention(cfg).forward(c.x, fresh(c.options)));
      const got = outputOf(reused.forward(c.x, c.options));
      if (c.options.out) expect(got.output.data).toBe(c.options.out.data);
      expectBitEqual(got.output.data, expected.output.data, { seed: SEED, label: `${label}: ${c.label}` });
      if (expected.weights) expectBitEqual(got.weights!.data, expected.weights.data, { seed: SEED, label: `${label}: ${c.label}, weights` });
    }
  });

  test(`forwardAsync mixed with forward, ${label}: each result equals a new block's`, async () => {
    const rng = rngFor(SEED, `plan async ${label}`);
    const cfg = config(rng, dim, heads, dimHead, norm);
    const reused = new MultiHeadSelfAttention(cfg);
    let i = 0;
    for (const c of calls(rng, dim, heads)) {
      const expected = outputOf(new MultiHeadSelfAttention(cfg).forward(c.x, fresh(c.options)));
      const got = outputOf(i++ % 3 === 1 ? reused.forward(c.x, c.options) : await reused.forwardAsync(c.x, c.options));
      expectBitEqual(got.output.data, expected.output.data, { seed: SEED, label: `${label}: ${c.label} (async)` });
      if (expected.weights) expectBitEqual(got.weights!.data, expected.weights.data, { seed: SEED, label: `${label}: ${c.label}, weights (async)` });
    }
  });
});

test(`concurrent forwardAsync calls of different shapes on one block each get their own result (seed ${SEED})`, async () => {
  const rng = rngFor(SEED, 'plan concurrent');
  const cfg = config(rng, 12, 3, 4, true);
  const reused = new MultiHeadSelfAttention(cfg);
  const inputs = [random(rng, [2, 7, 12], 1), random(rng, [1, 4, 12], 1), random(rng, [2, 7, 12], 1), random(rng, [3, 2, 12], 1)];
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(inputs.map((x, j) => reused.forwardAsync(x, { causal: (round + j) % 2 === 1 })));
    results.forEach((r, j) => {
      const expected = new MultiHeadSelfAttention(cfg).forward(inputs[j], { causal: (round + j) % 2 === 1 });
      expectBitEqual(r.data, expected.data, { seed: SEED, label: `round ${round}, input ${j}` });
    });
  }
});

test('a second call of the same shapes reuses the first call\'s stages, holding none of its buffers afterwards', () => {
  const rng = rngFor(SEED, 'plan reuse');
  const block = new MultiHeadSelfAttention(config(rng, 12, 3, 4, true));
  const x1 = random(rng, [2, 5, 12], 1);
  const x2 = random(rng, [2, 5, 12], 1);
  const passed: unknown[][][] = [];
  const original = native.sequence;
  native.sequence = (stages, done) => {
    passed.push(stages);
    return original(stages, done);
  };
  try {
    block.forward(x1); // 0: built
    block.forward(x2); // 1: kept from 0
    block.forward(x1); // 2: the same
    block.forward(x1, { causal: true }); // 3: built (another key)
    block.forward(x2, { causal: true }); // 4: kept from 3
    block.forward(x1); // 5: built (the workspace keeps one plan)
    block.forward(x2); // 6: kept from 5
  } finally {
    native.sequence = original;
  }
  expect(passed).toHaveLength(7);
  expect(passed[1]).not.toBe(passed[0]);
  expect(passed[2]).toBe(passed[1]);
  expect(passed[4]).not.toBe(passed[1]);
  expect(passed[6]).not.toBe(passed[4]);
  expect(passed[6]).not.toBe(passed[1]);
  // Between calls the kept stages hold no caller buffer: x (stage 0's first argument), out (the last stage's fourth).
  for (const stages of [passed[1], passed[4], passed[6]]) {
    expect(stages[0][1]).toBeNull();
    expect(stages[stages.length - 1][4]).toBeNull();
    expect(stages.flat().some((v) => v === x1.data || v === x2.data)).toBe(false);
  }
});

describe('native.sequence checks every stage before it runs any', () => {
  // A valid stage: out (2 x 2) = a (2 x 3) · b (3 x 2), its descriptor in the
  // order of MHSA_MATMUL_FIELDS (native/ops/descriptor_layouts.h).
  const desc = () => Float64Array.from([2, 2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0]);
  const a = Float32Array.from([1, 2, 3, 4, 5, 6]);
  const b = Float32Array.from([1, 0, 0, 1, 1, 1]);
  const good = (out: Float32Array) => ['matmul', a, b, null, out, desc()];

  test('a valid stage runs (so the descriptor below is right)', () => {
    const out = poisoned(4);
    native.sequence([good(out)]);
    expect(Array.from(out)).toEqual([4, 5, 10, 11]);
  });

  test.each([
    ['an unknown kind', ['nope', a, b, null, poisoned(4), desc()], RangeError, /^sequence: stage 1: kind must be one of matmul layerNormMatmul softmax attention layerNorm packMatrix rope cacheAppend, received 'nope'$/],
    ['a kind that is not a string', [3, a, b, null, poisoned(4), desc()], TypeError, /^sequence: stage 1: its kind \(item 0\) must be a string$/],
    ['a stage that is not an array', 'matmul', TypeError, /^sequence: stage 1 must be an array \[kind, \.\.\.arguments\]$/],
    ['a Float64Array as a', ['matmul', new Float64Array(6), b, null, poisoned(4), desc()], TypeError, /^matmul: a must be a Float32Array$/],
    ['an out too short for its shape', ['matmul', a, b, null, poisoned(3), desc()], RangeError, /^matmul: /],
  ])('%s in the second stage throws, and the first stage writes nothing', (_, bad, type, message) => {
    const first = poisoned(4);
    let thrown: unknown;
    try {
      native.sequence([good(first), bad as unknown[]]);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeDefined();
    expect((thrown as Error).name).toBe(type.name);
    expect((thrown as Error).message).toMatch(message);
    expect(first.every((v) => Number.isNaN(v))).toBe(true);
  });

  test('a getter in a later stage that detaches an earlier stage\'s buffer gives a TypeError, not a read of freed memory', () => {
    const buffer = new ArrayBuffer(4 * 6);
    const detachable = new Float32Array(buffer);
    detachable.set(a);
    const first = poisoned(4);
    const sneaky: unknown[] = ['matmul'];
    Object.defineProperty(sneaky, 1, {
      get() {
        structuredClone(buffer, { transfer: [buffer] });
        return a;
      },
    });
    sneaky.push(b, null, poisoned(4), desc());
    expect(() => native.sequence([['matmul', detachable, b, null, first, desc()], sneaky])).toThrow(
      /^matmul: a is backed by a detached ArrayBuffer$/,
    );
    expect(buffer.byteLength).toBe(0); // the getter ran
    expect(first.every((v) => Number.isNaN(v))).toBe(true);
  });

  test('stages that are not an array, or more than 8 of them, throw', () => {
    expect(() => native.sequence('matmul' as unknown as unknown[][])).toThrow(/^sequence: stages must be an array$/);
    const out = poisoned(4);
    expect(() => native.sequence(Array.from({ length: 9 }, () => good(out)))).toThrow(/^sequence: at most 8 stages, received 9$/);
    expect(out.every((v) => Number.isNaN(v))).toBe(true);
  });

  test('the async form runs every stage once, in order, and the empty list settles', async () => {
    const out1 = poisoned(4);
    const out2 = poisoned(4);
    // Stage 2 reads stage 1's output: out2 = out1 (2 x 2) · I (2 x 2).
    const identity = Float32Array.from([1, 0, 0, 1]);
    const desc2 = Float64Array.from([2, 2, 2, 2, 2, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0]);
    await new Promise<void>((resolve, reject) =>
      native.sequence([good(out1), ['matmul', out1, identity, null, out2, desc2]], (e) => (e ? reject(e) : resolve())),
    );
    expect(Array.from(out2)).toEqual([4, 5, 10, 11]);
    await new Promise<void>((resolve, reject) => native.sequence([], (e) => (e ? reject(e) : resolve())));
  });
});
