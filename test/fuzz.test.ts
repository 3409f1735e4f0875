/**
 * Random misuse of every public function, sync and async (fast-check, the
 * file's seed; MHSA_TEST_SEED replays a run). The invariant: a call either
 * returns the float64 reference's result (when its arguments are valid) or
 * throws / rejects a TypeError or RangeError whose message starts with the
 * function's name and names the argument at fault; after an error no buffer
 * the call was given, `out` included, has changed; the process never dies.
 *
 * A targeted case starts from a valid call (random small shapes, zero-size
 * dims included, random options) and applies neutral changes (SharedArrayBuffer
 * storage, views at odd offsets, `dims` for `shape`, frozen objects, unknown
 * options set to undefined) and at most one breaking change (a non-tensor, a
 * bad or huge dim, a wrong length, a detached buffer, a wrong option, an `out`
 * of the wrong shape or sharing memory with an input). Every case runs through
 * the sync and the async form, which must agree. Then: random argument soup
 * for every function, and damaged safetensors files.
 *
 * SharedArrayBuffer-backed Float32Arrays are ordinary inputs and outputs (the
 * detached check in lib/tensor.ts exempts them), so they must compute exactly
 * like ArrayBuffer-backed ones.
 */
import fc from 'fast-check';
import {
  attention,
  attentionAsync,
  getNumThreads,
  info,
  layerNorm,
  layerNormAsync,
  loadSafetensors,
  matmul,
  matmulAsync,
  MultiHeadSelfAttention,
  PackedMatrix,
  prepack,
  setNumThreads,
  softmax,
  softmaxAsync,
  tensor,
  type Tensor,
} from '../lib';
import { refBlock, type RefBlockParams } from './fixtures-scripts/block-reference';
import { dotProductScale, expectClose, makeRng, pickSeed, randomFloat32, type Rng } from './helpers/random';
import {
  numel,
  refAttention,
  refLayerNorm,
  refMatmul,
  refSoftmax,
  singleOutputAttentionScale,
  singleOutputMatmulScale,
} from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;
const runs = (numRuns: number) => ({ numRuns, seed: SEED | 0 });

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyFn = (...args: any[]) => any;
type Obj = Record<string, unknown>;

// ---------------------------------------------------------------- outcomes

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

function callSync(f: () => unknown): Outcome {
  try {
    return { ok: true, value: f() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Calls an async form: it must return a promise (never throw synchronously). */
async function callAsync(f: () => unknown, fn: string): Promise<Outcome> {
  let p: unknown;
  try {
    p = f();
  } catch (error) {
    throw new Error(`[seed ${SEED}] ${fn} threw synchronously instead of rejecting: ${String(error)}`);
  }
  if (!(p instanceof Promise)) throw new Error(`[seed ${SEED}] ${fn} did not return a promise`);
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}

/** JSON for labels, with bigints and symbols spelled out. */
const show = (value: unknown) =>
  JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? String(v) : v));

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether a message names an argument. A long name just has to appear; a short
 * one (a, x, out) the way the library's messages use it: `for a but`, `a.data`,
 * `a.shape[0]`, `a must`, `with a`.
 */
function mentions(message: string, name: string): boolean {
  if (name.length > 4) return message.includes(name);
  const n = escapeRe(name);
  return new RegExp(`(for ${n} but|${n}[.[]|${n} (must|is|has|holds|needs|cannot)|with ${n}\\b|"${n}"|${n}$)`).test(message);
}

/**
 * Throws unless error is a TypeError or RangeError (by name: errors made by
 * the addon come from Node's main context, not jest's) whose message starts
 * with `fn: ` and, when names are given, mentions one of them.
 */
function expectApiError(error: unknown, fn: string, label: string, names: readonly string[] = []): void {
  const e = error as { name?: unknown; message?: unknown };
  const where = `[seed ${SEED} — replay with MHSA_TEST_SEED=${SEED}] ${label}`;
  if (typeof e !== 'object' || e === null || (e.name !== 'TypeError' && e.name !== 'RangeError') || typeof e.message !== 'string') {
    throw new Error(`${where}: expected a TypeError or RangeError from ${fn}, received ${String(error)}`);
  }
  if (!e.message.startsWith(`${fn}: `)) throw new Error(`${where}: the message does not start with "${fn}: ": ${e.message}`);
  if (names.length > 0 && !names.some((n) => mentions(e.message as string, n))) {
    throw new Error(`${where}: the message names none of ${names.join(', ')}: ${e.message}`);
  }
}

// ---------------------------------------------------------------- buffers left untouched

/** Every typed array reachable from the arguments (two levels of objects deep), once each. */
function viewsIn(args: readonly unknown[]): ArrayBufferView[] {
  const found = new Set<ArrayBufferView>();
  const visit = (v: unknown, depth: number): void => {
    if (ArrayBuffer.isView(v)) found.add(v);
    else if (depth < 3 && typeof v === 'object' && v !== null && !(v instanceof Map)) {
      for (const key of Object.keys(v)) visit((v as Obj)[key], depth + 1);
      if (v instanceof PackedMatrix) found.add(v.data);
    }
  };
  args.forEach((a) => visit(a, 0));
  return [...found];
}

interface Snapshot {
  view: ArrayBufferView;
  bytes: Buffer;
}

function snapshot(args: readonly unknown[]): Snapshot[] {
  return viewsIn(args)
    .filter((v) => v.buffer.byteLength >= v.byteOffset + v.byteLength && v.byteLength > 0)
    .map((view) => ({ view, bytes: Buffer.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength)) }));
}

function overlapping(x: ArrayBufferView, y: ArrayBufferView): boolean {
  return x.buffer === y.buffer && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength;
}

/** Throws if a snapshotted view changed (skipping views that overlap `written`). */
function expectUnchanged(snaps: readonly Snapshot[], label: string, written: readonly ArrayBufferView[] = []): void {
  for (const { view, bytes } of snaps) {
    if (written.some((w) => overlapping(w, view))) continue;
    if (view.buffer.byteLength === 0) continue; // detached by the case itself
    const now = Buffer.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    if (!now.equals(bytes)) {
      throw new Error(`[seed ${SEED}] ${label}: a ${view.constructor.name}(${view.byteLength} bytes) argument was written`);
    }
  }
}

// ---------------------------------------------------------------- values that are not what is asked for

/** A Float32Array whose ArrayBuffer has been transferred away. */
function detach(view: ArrayBufferView): void {
  structuredClone(view.buffer, { transfer: [view.buffer as ArrayBuffer] });
}

/** Non-tensors, each made for the tensor t it replaces (so lengths match where that makes the case harder). */
const NOT_TENSORS: Array<(t: Tensor) => unknown> = [
  () => null,
  () => 42,
  () => 'tensor',
  () => true,
  () => 7n,
  () => Symbol('t'),
  () => () => 0,
  () => [],
  () => ({}),
  () => new Map([['data', new Float32Array(1)]]),
  () => new Date(0),
  (t) => t.data,
  (t) => Array.from(t.data),
  (t) => ({ data: Float64Array.from(t.data), shape: t.shape }),
  (t) => ({ data: new Int32Array(t.data.length), shape: t.shape }),
  (t) => ({ data: new Uint8Array(t.data.length), shape: t.shape }),
  (t) => ({ data: Array.from(t.data), shape: t.shape }),
  (t) => ({ data: new DataView(t.data.buffer), shape: t.shape }),
  (t) => ({ data: t.data.buffer, shape: t.shape }),
  (t) => ({ data: t.data, shape: t.shape.join(',') }),
  (t) => ({ data: t.data, shape: Int32Array.from(t.shape) }),
  (t) => ({ data: t.data, shape: { length: t.shape.length } }),
  (t) => ({ data: t.data, shape: null }),
  (t) => ({ data: t.data }),
  (t) => ({ shape: t.shape }),
];

/** Dims that are never valid: not numbers, or not non-negative safe integers. */
const BAD_DIMS: unknown[] = [NaN, Infinity, -Infinity, -1, -(2 ** 31), 1.5, 0.1, 2 ** 53, 1e300, -1e300, '3', null, undefined, 3n, {}, [], true];
/** Dims that are safe integers but far too large for any data the tests make. */
const HUGE_DIMS = [2 ** 31, 2 ** 32, 2 ** 32 - 1, 2 ** 40, 2 ** 53 - 1];
/** Option values of the wrong kind or out of range. */
const BAD_BOOLEANS: unknown[] = ['yes', 1, 0, null, {}, 1n];
const BAD_NUMBERS: unknown[] = [NaN, Infinity, -Infinity, 1e39, -1e39, '1', null, true, 1n, {}];
const BAD_COUNTS: unknown[] = [0, -1, 1.5, NaN, Infinity, 2 ** 53, '2', null, 2n];
const NOT_OPTIONS: unknown[] = [5, 'options', true, [], new Float32Array(2), null, () => ({}), 1n, Symbol('o')];
/** Option names no op knows. */
const UNKNOWN_KEYS = ['axis', 'transposeC', 'dtype', 'Out', 'outt', 'constructor', '__proto__', 'toString'];

// ---------------------------------------------------------------- a case: a valid call and the changes made to it

/** Where a tensor sits among the arguments: args[index], or args[index][key] for an option. */
interface Slot {
  name: string;
  index: number;
  key?: string;
  /** out may be exactly this input's view (matmul's c, softmax's and layerNorm's x). */
  inPlace?: boolean;
}

interface Expected {
  shape: number[];
  output: ArrayLike<number>;
  weights?: { shape: number[]; data: ArrayLike<number> };
  /** For one-element results that random signs can cancel: the size of the summed terms (expectClose's scale). */
  scale?: number;
}

interface Case {
  args: unknown[];
  /** The tensor arguments (inputs; out is handled apart). */
  slots: Slot[];
  /** The index of the options argument. */
  optionsIndex: number;
  /** The result's shape, and its reference (computed before the call, from the base values). */
  expected: Expected;
  /** Option values that are always an error, with the names the message may use. */
  badOptions: Array<[key: string, value: () => unknown]>;
  /** Other views `out` must not share memory with (the block's weights). */
  extraInputs?: Array<{ name: string; data: Float32Array }>;
  /** The call returns { output, weights }. */
  withWeights?: boolean;
  /** An explicit out, when one was provided. */
  out?: Tensor;
}

type Validity = 'valid' | 'invalid' | 'unknown';

interface Change {
  kind: string;
  target: number;
  pick: number;
}

interface Applied {
  validity: Validity;
  names: string[];
  /** The slot the change replaced (a breaking change), or the input `out` shares memory with. */
  slot?: string;
}

const getSlot = (args: unknown[], s: Slot): unknown => (s.key === undefined ? args[s.index] : (args[s.index] as Obj)[s.key]);
function setSlot(args: unknown[], s: Slot, value: unknown): void {
  if (s.key === undefined) args[s.index] = value;
  else (args[s.index] as Obj)[s.key] = value;
}

/** A tensor slot's current value as a Tensor (slots hold tensors, with `shape` or `dims`, until a breaking change). */
function tensorAt(c: Case, s: Slot): Tensor {
  const v = getSlot(c.args, s) as { data: Float32Array; shape?: number[]; dims?: number[] };
  return { data: v.data, shape: v.shape ?? v.dims! };
}

/** data copied into a SharedArrayBuffer-backed Float32Array. */
function shared(data: Float32Array): Float32Array {
  const out = new Float32Array(new SharedArrayBuffer(Math.max(4, data.byteLength))).subarray(0, data.length);
  out.set(data);
  return out;
}

/** data copied to an odd element offset inside a larger buffer (whose other elements are NaN). */
function offsetCopy(data: Float32Array, rng: Rng): Float32Array {
  const before = 1 + 2 * Math.floor(rng() * 3);
  const buf = new Float32Array(before + data.length + 3).fill(NaN);
  buf.set(data, before);
  return buf.subarray(before, before + data.length);
}

/** A change that keeps the call valid. */
function applyNeutral(c: Case, ch: Change, rng: Rng): void {
  const slot = c.slots[ch.target % c.slots.length];
  const t = tensorAt(c, slot);
  if (ch.kind === 'shared') setSlot(c.args, slot, { data: shared(t.data), shape: t.shape });
  else if (ch.kind === 'offset') setSlot(c.args, slot, { data: offsetCopy(t.data, rng), shape: t.shape });
  else if (ch.kind === 'dims') setSlot(c.args, slot, { data: t.data, dims: t.shape });
  else if (ch.kind === 'frozen') setSlot(c.args, slot, Object.freeze({ data: t.data, shape: Object.freeze([...t.shape]) }));
  else if (ch.kind === 'extra-key') setSlot(c.args, slot, { data: t.data, shape: t.shape, name: 'extra', dtype: 'float32' });
  else if (ch.kind === 'undefined-option') defineOwn(c.args[c.optionsIndex] as object, UNKNOWN_KEYS[ch.pick % UNKNOWN_KEYS.length], undefined);
}

const NEUTRAL_KINDS = ['shared', 'offset', 'dims', 'frozen', 'extra-key', 'undefined-option'];

/** Sets an own property even for "__proto__" (an assignment would change the prototype instead). */
function defineOwn(o: object, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A change that makes the call invalid (or, for some huge dims and ranks, perhaps not). */
function applyBreaking(c: Case, ch: Change, rng: Rng): Applied {
  const slot = c.slots[ch.target % c.slots.length];
  return { ...breakSlot(c, ch, rng, slot), slot: ch.kind.includes('option') ? undefined : slot.name };
}

function breakSlot(c: Case, ch: Change, rng: Rng, slot: Slot): Applied {
  const t = tensorAt(c, slot);
  switch (ch.kind) {
    case 'not-a-tensor':
      setSlot(c.args, slot, NOT_TENSORS[ch.pick % NOT_TENSORS.length](t));
      return { validity: 'invalid', names: [slot.name] };
    case 'bad-dim': {
      if (t.shape.length === 0) return { validity: 'valid', names: [] };
      const shape: unknown[] = [...t.shape];
      shape[ch.target % shape.length] = BAD_DIMS[ch.pick % BAD_DIMS.length];
      setSlot(c.args, slot, { data: t.data, shape });
      return { validity: 'invalid', names: [slot.name] };
    }
    case 'huge-dim': {
      if (t.shape.length === 0) return { validity: 'valid', names: [] };
      const shape = [...t.shape];
      shape[ch.target % shape.length] = HUGE_DIMS[ch.pick % HUGE_DIMS.length];
      setSlot(c.args, slot, { data: t.data, shape });
      // With a zero dim left the tensor is still consistent; whether the op accepts it depends on the op.
      return numel(shape) === t.data.length ? { validity: 'unknown', names: [] } : { validity: 'invalid', names: [slot.name] };
    }
    case 'huge-product': {
      const shape = t.shape.length < 2 ? [2 ** 26, 2 ** 26] : t.shape.map((_, i) => HUGE_DIMS[(ch.pick + i) % HUGE_DIMS.length]);
      setSlot(c.args, slot, { data: t.data, shape });
      return { validity: 'invalid', names: [slot.name] };
    }
    case 'rank': {
      const shape = Array.from({ length: ch.pick % 7 }, () => Math.floor(rng() * 4));
      setSlot(c.args, slot, { data: randomFloat32(rng, numel(shape)), shape });
      return { validity: 'unknown', names: [] };
    }
    case 'length': {
      const n = t.data.length + [1, -1, 7][ch.pick % 3];
      setSlot(c.args, slot, { data: new Float32Array(n < 0 ? 1 : n), shape: t.shape });
      return { validity: 'invalid', names: [slot.name] };
    }
    case 'detached': {
      // A SharedArrayBuffer cannot be transferred: give the tensor its own ArrayBuffer first.
      let data = t.data;
      if (data.buffer instanceof SharedArrayBuffer) {
        data = data.slice();
        setSlot(c.args, slot, { data, shape: t.shape });
      }
      const sharing = c.slots.filter((s) => {
        const v = getSlot(c.args, s) as Tensor;
        return v.data?.buffer === data.buffer;
      });
      const names = sharing.map((s) => s.name);
      if (c.out?.data.buffer === data.buffer) names.push('out');
      detach(data);
      return { validity: 'invalid', names };
    }
    case 'not-options':
      c.args[c.optionsIndex] = NOT_OPTIONS[ch.pick % NOT_OPTIONS.length];
      return { validity: 'invalid', names: ['options'] };
    case 'unknown-option': {
      const key = UNKNOWN_KEYS[ch.pick % UNKNOWN_KEYS.length];
      defineOwn(c.args[c.optionsIndex] as object, key, ch.pick % 2 ? 1 : null);
      return { validity: 'invalid', names: [key] };
    }
    case 'bad-option': {
      const [key, value] = c.badOptions[ch.pick % c.badOptions.length];
      (c.args[c.optionsIndex] as Obj)[key] = value();
      return { validity: 'invalid', names: [`options.${key}`] };
    }
  }
  throw new Error(`unknown change ${ch.kind}`);
}

const BREAKING_KINDS = [
  'not-a-tensor', 'bad-dim', 'huge-dim', 'huge-product', 'rank', 'length', 'detached', 'not-options', 'unknown-option', 'bad-option',
];

type OutMode = 'none' | 'poisoned' | 'wrong-shape' | 'same-view' | 'overlap';
const OUT_MODES: OutMode[] = ['none', 'poisoned', 'wrong-shape', 'same-view', 'overlap'];

/**
 * Gives the call an `out`: a NaN-poisoned fresh one, one of the wrong shape,
 * or one sharing memory with an input (exactly its view, or partly).
 */
function applyOut(c: Case, mode: OutMode, target: number, rng: Rng): Applied {
  if (mode === 'none') return { validity: 'valid', names: [] };
  const shape = c.expected.shape;
  const n = numel(shape);
  const options = c.args[c.optionsIndex] as Obj;
  const inputs: Array<{ name: string; data: Float32Array; inPlace: boolean; slot?: Slot }> = [
    ...c.slots.map((s) => ({ name: s.name, data: tensorAt(c, s).data, inPlace: s.inPlace === true, slot: s })),
    ...(c.extraInputs ?? []).map((e) => ({ ...e, inPlace: false })),
  ];
  if (mode === 'poisoned' || (mode !== 'wrong-shape' && inputs.length === 0)) {
    c.out = { data: new Float32Array(n).fill(NaN), shape };
  } else if (mode === 'wrong-shape') {
    c.out = { data: new Float32Array(n).fill(NaN), shape: [...shape, 1] };
    options.out = c.out;
    return { validity: 'invalid', names: ['out'] };
  } else {
    const input = inputs[target % inputs.length];
    const inLen = input.data.length;
    let data: Float32Array;
    if (mode === 'same-view' && inLen === n) {
      data = input.data;
    } else if (n <= inLen) {
      const start = Math.floor(rng() * (inLen - n + 1));
      data = input.data.subarray(start, start + n);
    } else if (input.slot) {
      // out longer than the input: both in one new buffer, out starting inside the input.
      const start = inLen > 0 ? Math.floor(rng() * inLen) : 0;
      const buf = new Float32Array(start + n + 1).fill(NaN);
      buf.set(input.data);
      input.data = buf.subarray(0, inLen);
      setSlot(c.args, input.slot, { data: input.data, shape: tensorAt(c, input.slot).shape });
      data = buf.subarray(start, start + n);
    } else {
      data = new Float32Array(n).fill(NaN);
    }
    c.out = { data, shape };
    options.out = c.out;
    if (!overlapping(data, input.data) || data.byteLength === 0 || input.data.byteLength === 0) return { validity: 'valid', names: [] };
    const same = data.byteOffset === input.data.byteOffset && data.length === input.data.length;
    return same && input.inPlace
      ? { validity: 'valid', names: [], slot: input.name }
      : { validity: 'invalid', names: ['out', input.name], slot: input.name };
  }
  options.out = c.out;
  return { validity: 'valid', names: [] };
}

// ---------------------------------------------------------------- checking one call

function resultParts(value: unknown, c: Case): { output: Tensor; weights?: Tensor } {
  if (c.withWeights) return value as { output: Tensor; weights: Tensor };
  return { output: value as Tensor };
}

function checkValidResult(value: unknown, c: Case, label: string): void {
  const { output, weights } = resultParts(value, c);
  const ctx = { seed: SEED, label, shape: c.expected.shape, scale: c.expected.scale };
  expect([...output.shape]).toEqual(c.expected.shape);
  expect(output.data).toBeInstanceOf(Float32Array);
  if (c.out) expect(output).toBe(c.out);
  expectClose(output.data, c.expected.output, TOL, ctx);
  if (c.expected.weights) {
    expect([...weights!.shape]).toEqual(c.expected.weights.shape);
    expectClose(weights!.data, c.expected.weights.data, TOL, { ...ctx, scale: undefined, label: `${label} (weights)` });
  }
}

/** A successful call whose validity the test could not predict: a well-formed result at least. */
function checkWellFormed(value: unknown, c: Case, label: string): void {
  const { output } = resultParts(value, c);
  if (!(output.data instanceof Float32Array) || output.data.length !== numel(output.shape)) {
    throw new Error(`[seed ${SEED}] ${label}: malformed result ${String(value)}`);
  }
}

interface OpUnderTest<Config> {
  name: string;
  asyncName: string;
  config: fc.Arbitrary<Config>;
  /** Builds a fresh valid call (new buffers every time) from the config and the data generator. */
  build: (config: Config, rng: Rng) => { call: AnyFn; callAsync: AnyFn; c: Case };
}

interface Plan<Config> {
  config: Config;
  neutral: Change[];
  breaking: Change | null;
  out: OutMode;
  outTarget: number;
  dataSeed: number;
}

const changeArb = (kinds: string[]) =>
  fc.record({ kind: fc.constantFrom(...kinds), target: fc.nat({ max: 1000 }), pick: fc.nat({ max: 1000 }) });

function planArb<Config>(config: fc.Arbitrary<Config>): fc.Arbitrary<Plan<Config>> {
  return fc.record({
    config,
    neutral: fc.array(changeArb(NEUTRAL_KINDS), { maxLength: 3 }),
    breaking: fc.option(changeArb(BREAKING_KINDS), { nil: null, freq: 2 }),
    out: fc.constantFrom(...OUT_MODES),
    outTarget: fc.nat({ max: 1000 }),
    dataSeed: fc.integer({ min: 0, max: 0x7fffffff }),
  });
}

/** Invalid if any change is; the message is checked for names only when no change had an unpredictable effect. */
function combine(parts: Applied[]): Applied {
  const unknown = parts.some((p) => p.validity === 'unknown');
  const validity = parts.some((p) => p.validity === 'invalid') ? 'invalid' : unknown ? 'unknown' : 'valid';
  return { validity, names: unknown ? [] : parts.flatMap((p) => (p.validity === 'invalid' ? p.names : [])) };
}

/** Builds the plan's call afresh (every run gets new buffers, so sync and async see the same values). */
function buildPlanned<Config>(op: OpUnderTest<Config>, plan: Plan<Config>) {
  const rng = makeRng(plan.dataSeed);
  const built = op.build(plan.config, rng);
  const c = built.c;
  for (const ch of plan.neutral) applyNeutral(c, ch, rng);
  const outPart = applyOut(c, plan.out, plan.outTarget, rng);
  const parts = [outPart];
  if (plan.breaking) {
    const broken = applyBreaking(c, plan.breaking, rng);
    // The input out was made to share memory with may now be another buffer altogether.
    if (outPart.slot !== undefined && broken.slot === outPart.slot) outPart.validity = 'unknown';
    // An out of the wrong shape is wrong for the call as built; a new rank for an input changes the
    // result's shape, which may then be out's (seed 830042838: x [1] became [1, 1], out [1, 1]).
    if (plan.out === 'wrong-shape' && plan.breaking.kind === 'rank') outPart.validity = 'unknown';
    parts.push(broken);
  }
  return { ...built, applied: combine(parts) };
}

function checkOutcome(outcome: Outcome, c: Case, applied: Applied, snaps: Snapshot[], fn: string, label: string): void {
  if (!outcome.ok) {
    if (applied.validity === 'valid') throw new Error(`[seed ${SEED}] ${label}: a valid call failed: ${String(outcome.error)}`);
    expectApiError(outcome.error, fn, label, applied.validity === 'invalid' ? applied.names : []);
    expectUnchanged(snaps, `${label}: after the error`);
    return;
  }
  if (applied.validity === 'invalid') throw new Error(`[seed ${SEED}] ${label}: an invalid call succeeded`);
  if (applied.validity === 'valid') checkValidResult(outcome.value, c, label);
  else checkWellFormed(outcome.value, c, label);
  expectUnchanged(snaps, `${label}: inputs after success`, c.out ? [c.out.data] : []);
}

/** Runs the plan through the sync and then the async form; both must hold the invariant and agree. */
async function runPlan<Config>(op: OpUnderTest<Config>, plan: Plan<Config>): Promise<void> {
  const label = `${op.name} ${show(plan)}`;
  const s = buildPlanned(op, plan);
  const sSnaps = snapshot(s.c.args);
  const syncOutcome = callSync(() => s.call(...s.c.args));
  checkOutcome(syncOutcome, s.c, s.applied, sSnaps, op.name, label);

  const a = buildPlanned(op, plan);
  const aSnaps = snapshot(a.c.args);
  const asyncOutcome = await callAsync(() => a.callAsync(...a.c.args), op.asyncName);
  checkOutcome(asyncOutcome, a.c, a.applied, aSnaps, op.asyncName, `${label} (async)`);

  if (syncOutcome.ok !== asyncOutcome.ok) throw new Error(`[seed ${SEED}] ${label}: sync ${syncOutcome.ok ? 'succeeded' : 'failed'}, async did not`);
  if (!syncOutcome.ok && !asyncOutcome.ok) {
    expect((asyncOutcome.error as Error).name).toBe((syncOutcome.error as Error).name);
  }
  if (syncOutcome.ok && asyncOutcome.ok) {
    const x = resultParts(syncOutcome.value, s.c).output.data;
    const y = resultParts(asyncOutcome.value, a.c).output.data;
    expect(Buffer.from(y.buffer, y.byteOffset, y.byteLength).equals(Buffer.from(x.buffer, x.byteOffset, x.byteLength))).toBe(true);
  }
}

// ---------------------------------------------------------------- the ops

const dim = (max: number) => fc.integer({ min: 0, max });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const coef = fc.integer({ min: -300, max: 300 }).map((i) => i / 100);
const randomTensor = (rng: Rng, shape: number[], scale = 1): Tensor => ({
  data: randomFloat32(rng, numel(shape)).map((v) => v * scale),
  shape,
});

/** Trailing dims of `shape` (keep of them), each replaced by 1 where `ones` says so: a broadcastable shape. */
function broadcastable(shape: readonly number[], keep: number, ones: number): number[] {
  return shape.slice(Math.max(0, shape.length - keep)).map((d, i) => ((ones >> i) & 1 ? 1 : d));
}

const matmulOp: OpUnderTest<{
  M: number; K: number; N: number; batch: number[]; aKeep: number; bKeep: number; aOnes: number; bOnes: number;
  transposeA: boolean; transposeB: boolean; alpha?: number; c?: { keep: number; ones: number; beta?: number }; packB: boolean;
}> = {
  name: 'matmul',
  asyncName: 'matmulAsync',
  config: fc.record({
    M: dim(6), K: dim(6), N: dim(6),
    batch: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }),
    aKeep: fc.nat(2), bKeep: fc.nat(2), aOnes: fc.nat(3), bOnes: fc.nat(3),
    transposeA: fc.boolean(), transposeB: fc.boolean(), alpha: maybe(coef),
    c: maybe(fc.record({ keep: fc.nat(4), ones: fc.nat(15), beta: maybe(coef) })),
    packB: fc.boolean(),
  }),
  build(p, rng) {
    const aBatch = broadcastable(p.batch, p.aKeep, p.aOnes);
    const bBatch = p.packB ? [] : broadcastable(p.batch, p.bKeep, p.bOnes);
    const transposeB = p.transposeB && !p.packB;
    const aShape = [...aBatch, ...(p.transposeA ? [p.K, p.M] : [p.M, p.K])];
    const bShape = [...bBatch, ...(transposeB ? [p.N, p.K] : [p.K, p.N])];
    const a = randomTensor(rng, aShape);
    const b = randomTensor(rng, bShape);
    const batch = aBatch.length >= bBatch.length ? aBatch.map((d, i) => Math.max(d, bBatch[i - aBatch.length + bBatch.length] ?? 1) * (d === 0 ? 0 : 1)) : [];
    const ref0 = refMatmul(a.data, aShape, b.data, bShape, { transposeA: p.transposeA, transposeB });
    void batch;
    const shape = ref0.shape;
    const options: Obj = { transposeA: p.transposeA, transposeB };
    if (p.alpha !== undefined) options.alpha = p.alpha;
    let c: Tensor | undefined;
    if (p.c) {
      c = randomTensor(rng, broadcastable(shape, p.c.keep, p.c.ones));
      options.c = c;
      if (p.c.beta !== undefined) options.beta = p.c.beta;
    }
    const ref = refMatmul(a.data, aShape, b.data, bShape, {
      transposeA: p.transposeA, transposeB, alpha: p.alpha, c: c?.data, cShape: c?.shape, beta: p.c?.beta,
    });
    const scale = singleOutputMatmulScale(ref.data.length, a.data, aShape, b.data, bShape, {
      transposeA: p.transposeA, transposeB, alpha: p.alpha, c: c?.data, cShape: c?.shape, beta: p.c?.beta,
    });
    const slots: Slot[] = [{ name: 'a', index: 0 }];
    if (!p.packB) slots.push({ name: 'b', index: 1 });
    if (c) slots.push({ name: 'options.c', index: 2, key: 'c', inPlace: true });
    const args: unknown[] = [a, p.packB ? prepack(b) : b, options];
    const extraInputs = p.packB ? [{ name: 'b', data: (args[1] as PackedMatrix<'float32'>).data }] : [];
    const badOptions: Case['badOptions'] = [
      ['transposeA', () => BAD_BOOLEANS[Math.floor(rng() * BAD_BOOLEANS.length)]],
      ['alpha', () => BAD_NUMBERS[Math.floor(rng() * BAD_NUMBERS.length)]],
      ['beta', () => (c ? BAD_NUMBERS[Math.floor(rng() * BAD_NUMBERS.length)] : 0.5)],
      ['c', () => ({ data: new Float32Array(1), shape: [1, 1, 1, 1, 1, 1, 1] })],
    ];
    if (p.packB) badOptions.push(['transposeB', () => true]);
    else badOptions.push(['transposeB', () => BAD_BOOLEANS[Math.floor(rng() * BAD_BOOLEANS.length)]]);
    return {
      call: matmul,
      callAsync: matmulAsync,
      c: { args, slots, optionsIndex: 2, expected: { shape, output: ref.data, scale }, badOptions, extraInputs },
    };
  },
};

const softmaxOp: OpUnderTest<{ shape: number[]; scale?: number; infProb: number }> = {
  name: 'softmax',
  asyncName: 'softmaxAsync',
  config: fc.record({
    shape: fc.array(dim(7), { minLength: 1, maxLength: 4 }),
    scale: maybe(fc.integer({ min: 1, max: 400 }).map((i) => i / 100)),
    infProb: fc.constantFrom(0, 0.3, 1),
  }),
  build(p, rng) {
    const x = randomTensor(rng, p.shape, 5);
    for (let i = 0; i < x.data.length; i++) if (rng() < p.infProb) x.data[i] = -Infinity;
    const options: Obj = p.scale === undefined ? {} : { scale: p.scale };
    const ref = refSoftmax(x.data, p.shape, p.scale ?? 1);
    return {
      call: softmax,
      callAsync: softmaxAsync,
      c: {
        args: [x, options],
        slots: [{ name: 'x', index: 0, inPlace: true }],
        optionsIndex: 1,
        expected: { shape: p.shape, output: ref.data },
        badOptions: [['scale', () => BAD_NUMBERS[Math.floor(rng() * BAD_NUMBERS.length)]]],
      },
    };
  },
};

const layerNormOp: OpUnderTest<{ shape: number[]; weight: boolean; bias: boolean; eps?: number }> = {
  name: 'layerNorm',
  asyncName: 'layerNormAsync',
  config: fc.record({
    shape: fc.array(dim(7), { minLength: 1, maxLength: 3 }),
    weight: fc.boolean(),
    bias: fc.boolean(),
    eps: maybe(fc.constantFrom(0.5, 1e-3, 1e-5)),
  }),
  build(p, rng) {
    const features = p.shape[p.shape.length - 1];
    const x = randomTensor(rng, p.shape, 3);
    const weight = p.weight ? randomTensor(rng, [features]) : undefined;
    const bias = p.bias ? randomTensor(rng, [features]) : undefined;
    const options: Obj = {};
    if (weight) options.weight = weight;
    if (bias) options.bias = bias;
    if (p.eps !== undefined) options.eps = p.eps;
    const slots: Slot[] = [{ name: 'x', index: 0, inPlace: true }];
    if (weight) slots.push({ name: 'options.weight', index: 1, key: 'weight' });
    if (bias) slots.push({ name: 'options.bias', index: 1, key: 'bias' });
    return {
      call: layerNorm,
      callAsync: layerNormAsync,
      c: {
        args: [x, options],
        slots,
        optionsIndex: 1,
        expected: { shape: p.shape, output: refLayerNorm(x.data, p.shape, weight?.data, bias?.data, p.eps ?? 1e-5) },
        badOptions: [
          ['eps', () => [-1, -1e-9, ...BAD_NUMBERS][Math.floor(rng() * (BAD_NUMBERS.length + 2))]],
          ['weight', () => ({ data: new Float32Array(features + 1), shape: [features + 1] })],
          ['bias', () => ({ data: new Float32Array(features + 2), shape: [features + 2] })],
        ],
      },
    };
  },
};

type Layout = 'bhsd' | 'bshd' | 'bhds' | '3d';
const attentionOp: OpUnderTest<{
  layout: Layout; B: number; Hkv: number; group: number; Sq: number; Skv: number; D: number; Dv?: number;
  causal: boolean; scale?: number; mask?: 'SqSkv' | 'B1SqSkv' | '1H1Skv' | 'Skv'; padding: 'none' | 'u8' | 'tensor'; returnWeights: boolean;
}> = {
  name: 'attention',
  asyncName: 'attentionAsync',
  config: fc.record({
    layout: fc.constantFrom<Layout>('bhsd', 'bshd', 'bhds', '3d'),
    B: dim(2), Hkv: fc.integer({ min: 1, max: 2 }), group: fc.integer({ min: 1, max: 2 }),
    Sq: dim(5), Skv: dim(5), D: dim(5), Dv: maybe(dim(5)),
    causal: fc.boolean(), scale: maybe(coef),
    mask: maybe(fc.constantFrom('SqSkv' as const, 'B1SqSkv' as const, '1H1Skv' as const, 'Skv' as const)),
    padding: fc.constantFrom('none' as const, 'u8' as const, 'tensor' as const),
    returnWeights: fc.boolean(),
  }),
  build(p, rng) {
    const { B, Sq, Skv, D, Hkv } = p;
    const H = Hkv * p.group;
    const Dv = p.Dv ?? D;
    const shapeOf = (h: number, s: number, d: number) =>
      p.layout === 'bhsd' ? [B, h, s, d] : p.layout === 'bshd' ? [B, s, h, d] : p.layout === 'bhds' ? [B, h, d, s] : [B, s, h * d];
    const q = randomTensor(rng, shapeOf(H, Sq, D), 2);
    const k = randomTensor(rng, shapeOf(Hkv, Skv, D), 2);
    const v = randomTensor(rng, shapeOf(Hkv, Skv, Dv));
    const options: Obj = { causal: p.causal, returnWeights: p.returnWeights };
    if (p.layout === '3d') Object.assign(options, { heads: H, kvHeads: Hkv });
    else options.layout = p.layout;
    if (p.scale !== undefined) options.scale = p.scale;
    let mask: Tensor | undefined;
    if (p.mask) {
      const maskShape = { SqSkv: [Sq, Skv], B1SqSkv: [B, 1, Sq, Skv], '1H1Skv': [1, H, 1, Skv], Skv: [Skv] }[p.mask];
      mask = randomTensor(rng, maskShape, 2);
      for (let i = 0; i < mask.data.length; i++) if (rng() < 0.2) mask.data[i] = -Infinity;
      options.mask = mask;
    }
    let pad: Uint8Array | undefined;
    if (p.padding !== 'none') {
      pad = new Uint8Array(B * Skv).map(() => (rng() < 0.3 ? 1 : 0));
      options.keyPaddingMask = p.padding === 'u8' ? pad : { data: pad, shape: [B, Skv] };
    }
    const ref = refAttention(q.data, q.shape, k.data, k.shape, v.data, v.shape, {
      layout: p.layout === '3d' ? undefined : p.layout,
      heads: H, kvHeads: Hkv, causal: p.causal, mask: mask?.data, maskShape: mask?.shape, keyPaddingMask: pad, scale: p.scale,
    });
    const slots: Slot[] = [{ name: 'q', index: 0 }, { name: 'k', index: 1 }, { name: 'v', index: 2 }];
    if (mask) slots.push({ name: 'options.mask', index: 3, key: 'mask' });
    const pick = (list: unknown[]) => () => list[Math.floor(rng() * list.length)];
    return {
      call: attention,
      callAsync: attentionAsync,
      c: {
        args: [q, k, v, options],
        slots,
        optionsIndex: 3,
        withWeights: p.returnWeights,
        expected: {
          shape: ref.output.shape,
          output: ref.output.data,
          weights: p.returnWeights ? { shape: ref.weights.shape, data: ref.weights.data } : undefined,
          // One output element is Σ p_j v_j, which signed v can cancel: measure against Σ p_j |v_j|.
          scale: singleOutputAttentionScale(ref.output.data.length, q.data, q.shape, k.data, k.shape, v.data, v.shape, {
            layout: p.layout === '3d' ? undefined : p.layout,
            heads: H, kvHeads: Hkv, causal: p.causal, mask: mask?.data, maskShape: mask?.shape, keyPaddingMask: pad, scale: p.scale,
          }),
        },
        badOptions: [
          ['layout', pick(['BHSD', 'bsd', '', 3, null, {}])],
          ['heads', pick(BAD_COUNTS)],
          ['kvHeads', pick(BAD_COUNTS)],
          ['causal', pick(BAD_BOOLEANS)],
          ['returnWeights', pick(BAD_BOOLEANS)],
          ['scale', pick(BAD_NUMBERS)],
          ['mask', () => ({ data: new Float32Array(1), shape: [1, 1, 1, 1, 1] })],
          ['keyPaddingMask', pick([
            new Int8Array(B * Skv), new Uint8ClampedArray(B * Skv), new Float32Array(B * Skv), Array.from({ length: B * Skv }, () => 0),
            new Uint8Array(B * Skv + 1), { data: new Uint8Array(B * Skv), shape: [B, Skv + 1] }, { data: new Int8Array(B * Skv) },
            'mask', 5, null,
          ])],
        ],
      },
    };
  },
};

interface BlockConfig {
  dim: number; heads: number; dimHead?: number; qkvBias: boolean; outWeight: boolean; outBias: boolean; norm: boolean; normBias: boolean;
  eps?: number; B: number; T: number; twoD: boolean; causal: boolean; mask?: 'TT' | 'B1TT' | '1HTT'; padding: 'none' | 'u8' | 'tensor';
  returnWeights: boolean;
}

const blockConfigArb: fc.Arbitrary<BlockConfig> = fc.record({
  dim: fc.integer({ min: 1, max: 6 }), heads: fc.integer({ min: 1, max: 3 }), dimHead: maybe(fc.integer({ min: 1, max: 3 })),
  qkvBias: fc.boolean(), outWeight: fc.boolean(), outBias: fc.boolean(), norm: fc.boolean(), normBias: fc.boolean(),
  eps: maybe(fc.constantFrom(1e-3, 0.1)), B: dim(2), T: dim(5), twoD: fc.boolean(), causal: fc.boolean(),
  mask: maybe(fc.constantFrom('TT' as const, 'B1TT' as const, '1HTT' as const)),
  padding: fc.constantFrom('none' as const, 'u8' as const, 'tensor' as const), returnWeights: fc.boolean(),
});

/** Block weights for a config (dimHead defaults to 1 when heads does not divide dim; identity needs no out weight). */
function blockParams(p: BlockConfig, rng: Rng): RefBlockParams {
  const dimHead = p.dimHead ?? (p.dim % p.heads === 0 ? p.dim / p.heads : 1);
  const inner = p.heads * dimHead;
  const needsOut = !(p.heads === 1 && dimHead === p.dim);
  const withOut = p.outWeight || needsOut;
  const scaled = (n: number, s: number) => randomFloat32(rng, n).map((v) => v * s);
  return {
    dim: p.dim, heads: p.heads, dimHead, eps: p.eps,
    qkvWeight: scaled(3 * inner * p.dim, 1),
    qkvBias: p.qkvBias ? scaled(3 * inner, 0.3) : undefined,
    outWeight: withOut ? scaled(p.dim * inner, 0.7) : undefined,
    outBias: withOut && p.outBias ? scaled(p.dim, 0.3) : undefined,
    normWeight: p.norm ? scaled(p.dim, 0.5).map((v) => 1 + v) : undefined,
    normBias: p.norm && p.normBias ? scaled(p.dim, 0.3) : undefined,
  };
}

function blockConfigObject(w: RefBlockParams, explicitDimHead: boolean): Obj {
  const inner = w.heads * w.dimHead;
  const config: Obj = {
    dim: w.dim,
    heads: w.heads,
    weights: {
      qkvWeight: { data: w.qkvWeight, shape: [3 * inner, w.dim] },
      ...(w.qkvBias ? { qkvBias: { data: w.qkvBias, shape: [3 * inner] } } : {}),
      ...(w.outWeight ? { outWeight: { data: w.outWeight, shape: [w.dim, inner] } } : {}),
      ...(w.outBias ? { outBias: { data: w.outBias, shape: [w.dim] } } : {}),
    },
  };
  if (explicitDimHead || w.dim % w.heads !== 0) config.dimHead = w.dimHead;
  if (w.eps !== undefined) config.eps = w.eps;
  if (w.normWeight) {
    config.norm = { weight: { data: w.normWeight, shape: [w.dim] }, ...(w.normBias ? { bias: { data: w.normBias, shape: [w.dim] } } : {}) };
  }
  return config;
}

const blockForwardOp: OpUnderTest<BlockConfig> = {
  name: 'MultiHeadSelfAttention.forward',
  asyncName: 'MultiHeadSelfAttention.forwardAsync',
  config: blockConfigArb,
  build(p, rng) {
    const w = blockParams(p, rng);
    const block = new MultiHeadSelfAttention(blockConfigObject(w, p.dimHead !== undefined) as never);
    const batch = p.twoD ? 1 : p.B;
    const shape = p.twoD ? [p.T, p.dim] : [p.B, p.T, p.dim];
    const x = randomTensor(rng, shape, 2);
    const options: Obj = { causal: p.causal, returnWeights: p.returnWeights };
    let mask: Tensor | undefined;
    if (p.mask) {
      mask = randomTensor(rng, { TT: [p.T, p.T], B1TT: [batch, 1, p.T, p.T], '1HTT': [1, p.heads, p.T, p.T] }[p.mask]);
      options.mask = mask;
    }
    let pad: Uint8Array | undefined;
    if (p.padding !== 'none') {
      pad = new Uint8Array(batch * p.T).map(() => (rng() < 0.3 ? 1 : 0));
      options.keyPaddingMask = p.padding === 'u8' ? pad : { data: pad, shape: p.twoD ? [p.T] : [batch, p.T] };
    }
    const ref = refBlock(x.data, batch, p.T, w, { causal: p.causal, mask: mask?.data, maskShape: mask?.shape, keyPaddingMask: pad });
    const slots: Slot[] = [{ name: 'x', index: 0 }];
    if (mask) slots.push({ name: 'options.mask', index: 1, key: 'mask' });
    const weightViews = [w.qkvWeight, w.qkvBias, w.outWeight, w.outBias, w.normWeight, w.normBias].filter((a): a is Float32Array => !!a);
    const pick = (list: unknown[]) => () => list[Math.floor(rng() * list.length)];
    return {
      call: (...args: unknown[]) => block.forward(...(args as [Tensor])),
      callAsync: (...args: unknown[]) => block.forwardAsync(...(args as [Tensor])),
      c: {
        args: [x, options],
        slots,
        optionsIndex: 1,
        withWeights: p.returnWeights,
        extraInputs: weightViews.map((data) => ({ name: 'the weight', data })),
        expected: {
          shape,
          output: ref.output,
          scale: p.dim === 1 ? dotProductScale(ref.outputMagnitude) : undefined,
          weights: p.returnWeights ? { shape: p.twoD ? [p.T, p.T] : [batch, p.T, p.T], data: ref.weights } : undefined,
        },
        badOptions: [
          ['causal', pick(BAD_BOOLEANS)],
          ['returnWeights', pick(BAD_BOOLEANS)],
          ['mask', () => ({ data: new Float32Array(1), shape: [1, 1, 1, 1, 1] })],
          ['keyPaddingMask', pick([new Uint8Array(batch * p.T + 1), new Int8Array(batch * p.T), [0], 'pad', 1, null])],
        ],
      },
    };
  },
};

// ---------------------------------------------------------------- targeted properties

/** A property over random plans for one op: every plan's sync and async calls hold the invariant. */
function fuzzOp<Config>(op: OpUnderTest<Config>, numRuns: number): () => Promise<void> {
  return async () => {
    await fc.assert(
      fc.asyncProperty(planArb(op.config), (plan) => runPlan(op, plan)),
      runs(numRuns),
    );
  };
}

describe(`fuzz: targeted misuse, sync and async (seed ${SEED})`, () => {
  test('matmul / matmulAsync', fuzzOp(matmulOp, 250));
  test('softmax / softmaxAsync', fuzzOp(softmaxOp, 200));
  test('layerNorm / layerNormAsync', fuzzOp(layerNormOp, 200));
  test('attention / attentionAsync', fuzzOp(attentionOp, 250));
  test('MultiHeadSelfAttention forward / forwardAsync', fuzzOp(blockForwardOp, 150));
});

// ---------------------------------------------------------------- tensor(), prepack, the thread count

describe(`fuzz: tensor, prepack, setNumThreads (seed ${SEED})`, () => {
  const dataKinds = ['float32', 'float64', 'int32', 'uint8', 'numbers', 'strings', 'bigint64', 'bigints', 'symbols', 'dataview', 'object', 'null'] as const;

  test('tensor(data, shape): a Float32Array of the values (the very array for a Float32Array), or a tensor error', () => {
    const arb = fc.record({
      kind: fc.constantFrom(...dataKinds),
      length: fc.nat(12),
      shape: fc.oneof(fc.array(fc.oneof(dim(4), fc.constantFrom(...BAD_DIMS, ...HUGE_DIMS)), { maxLength: 6 }), fc.constantFrom<unknown>(null, 'x', 3, {})),
      dataSeed: fc.nat(),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const values = Array.from({ length: p.length }, () => Math.round((rng() * 2 - 1) * 100) / 4);
        const data: unknown = {
          float32: Float32Array.from(values), float64: Float64Array.from(values), int32: Int32Array.from(values),
          uint8: Uint8Array.from(values), numbers: values, strings: values.map(String), bigint64: new BigInt64Array(p.length),
          bigints: values.map((v) => BigInt(Math.trunc(v))), symbols: values.map(() => Symbol('v')),
          dataview: new DataView(new ArrayBuffer(4 * p.length)), object: { length: p.length }, null: null,
        }[p.kind];
        const label = `tensor ${show(p)}`;
        const outcome = callSync(() => tensor(data as Float32Array, p.shape as number[]));
        if (!outcome.ok) {
          expectApiError(outcome.error, 'tensor', label);
          return;
        }
        const t = outcome.value as Tensor;
        expect(t.data).toBeInstanceOf(Float32Array);
        expect(t.data.length).toBe(numel(t.shape));
        expect(t.shape).toEqual(p.shape);
        expect(t.shape).not.toBe(p.shape);
        if (p.kind === 'float32') expect(t.data).toBe(data);
        else expect(Array.from(t.data)).toEqual(Array.from(data as ArrayLike<number>, (v) => Math.fround(Number(v))));
      }),
      runs(400),
    );
  });

  test('prepack(b, options) then matmul: the reference product, or an error naming prepack', () => {
    const arb = fc.record({
      K: dim(7), N: dim(7), M: dim(4), transpose: fc.boolean(),
      breaking: fc.option(changeArb(['not-a-tensor', 'bad-dim', 'huge-product', 'rank', 'length', 'detached', 'not-options', 'unknown-option', 'bad-option']), { nil: null }),
      dataSeed: fc.nat(),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const b = randomTensor(rng, p.transpose ? [p.N, p.K] : [p.K, p.N]);
        const a = randomTensor(rng, [p.M, p.K]);
        const c: Case = {
          args: [b, { transpose: p.transpose }], slots: [{ name: 'b', index: 0 }], optionsIndex: 1,
          expected: {
            shape: [p.M, p.N],
            output: refMatmul(a.data, a.shape, b.data, b.shape, { transposeB: p.transpose }).data,
            scale: singleOutputMatmulScale(p.M * p.N, a.data, a.shape, b.data, b.shape, { transposeB: p.transpose }),
          },
          badOptions: [['transpose', () => BAD_BOOLEANS[Math.floor(rng() * BAD_BOOLEANS.length)]]],
        };
        const applied = p.breaking ? applyBreaking(c, p.breaking, rng) : { validity: 'valid' as const, names: [] };
        const label = `prepack ${show(p)}`;
        const snaps = snapshot(c.args);
        const outcome = callSync(() => prepack(...(c.args as Parameters<typeof prepack>)));
        if (!outcome.ok) {
          if (applied.validity === 'valid') throw new Error(`[seed ${SEED}] ${label}: a valid call failed: ${String(outcome.error)}`);
          expectApiError(outcome.error, 'prepack', label, applied.validity === 'invalid' ? applied.names : []);
          expectUnchanged(snaps, label);
          return;
        }
        if (applied.validity === 'invalid') throw new Error(`[seed ${SEED}] ${label}: an invalid call succeeded`);
        const packed = outcome.value as PackedMatrix;
        expect(packed).toBeInstanceOf(PackedMatrix);
        if (applied.validity === 'valid') {
          expect(packed.shape).toEqual([p.K, p.N]);
          expectClose(matmul(a, packed).data, c.expected.output, TOL, { seed: SEED, label, scale: c.expected.scale });
        }
        expectUnchanged(snaps, label);
      }),
      runs(250),
    );
  });

  test('setNumThreads: an integer 1..1024 is taken, anything else is an error and changes nothing', () => {
    const before = getNumThreads();
    try {
      fc.assert(
        fc.property(fc.oneof(fc.constantFrom<unknown>(...BAD_NUMBERS, ...BAD_COUNTS, 1025, 2 ** 31, -0.5, undefined), fc.constantFrom(1, 2)), (n) => {
          const current = getNumThreads();
          const outcome = callSync(() => setNumThreads(n as number));
          if (outcome.ok) {
            expect(getNumThreads()).toBe(n);
          } else {
            expectApiError(outcome.error, 'setNumThreads', `setNumThreads(${String(n)})`, ['n']);
            expect(getNumThreads()).toBe(current);
          }
        }),
        runs(100),
      );
    } finally {
      setNumThreads(before);
    }
  });
});

// ---------------------------------------------------------------- building a block

describe(`fuzz: MultiHeadSelfAttention construction (seed ${SEED})`, () => {
  type Scheme = 'torch' | 'vit' | 'hf';
  /** A state dict of one scheme for the block parameters w (which have an output projection). */
  function stateDict(scheme: Scheme, w: RefBlockParams): Record<string, Tensor> {
    const inner = w.heads * w.dimHead;
    const t = (data: Float32Array, shape: number[]): Tensor => ({ data, shape });
    const part = (a: Float32Array, i: number, n: number) => a.slice(i * n, (i + 1) * n);
    const out = { weight: t(w.outWeight!, [w.dim, inner]), bias: w.outBias ? t(w.outBias, [w.dim]) : undefined };
    const sd: Record<string, Tensor | undefined> =
      scheme === 'torch'
        ? { in_proj_weight: t(w.qkvWeight, [3 * inner, w.dim]), in_proj_bias: w.qkvBias && t(w.qkvBias, [3 * inner]), 'out_proj.weight': out.weight, 'out_proj.bias': out.bias }
        : scheme === 'vit'
          ? { 'to_qkv.weight': t(w.qkvWeight, [3 * inner, w.dim]), 'to_qkv.bias': w.qkvBias && t(w.qkvBias, [3 * inner]), 'to_out.0.weight': out.weight, 'to_out.0.bias': out.bias }
          : Object.fromEntries(
              ['query', 'key', 'value'].flatMap((n, i) => [
                [`${n}.weight`, t(part(w.qkvWeight, i, inner * w.dim), [inner, w.dim])],
                [`${n}.bias`, w.qkvBias && t(part(w.qkvBias, i, inner), [inner])],
              ]).concat([['output.dense.weight', out.weight], ['output.dense.bias', out.bias]]),
            );
    return Object.fromEntries(Object.entries(sd).filter(([, v]) => v !== undefined)) as Record<string, Tensor>;
  }

  test('fromTorch(stateDict, options) and new MultiHeadSelfAttention(config): a block that computes the reference, or a named error', () => {
    const arb = fc.record({
      config: blockConfigArb,
      scheme: fc.constantFrom<Scheme>('torch', 'vit', 'hf'),
      asMap: fc.boolean(),
      prefix: fc.constantFrom('', 'layers.3.attn', 'encoder.'),
      change: fc.option(
        fc.record({ kind: fc.constantFrom('drop-key', 'not-a-tensor', 'reshape', 'extra-key', 'bad-heads', 'config-garbage'), target: fc.nat(50), pick: fc.nat(50) }),
        { nil: null },
      ),
      dataSeed: fc.nat(),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const w = blockParams({ ...p.config, outWeight: true, norm: p.scheme === 'vit' && p.config.norm }, rng);
        const fullPrefix = p.prefix === '' || p.prefix.endsWith('.') ? p.prefix : `${p.prefix}.`;
        const sd: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(stateDict(p.scheme, w))) sd[fullPrefix + k] = v;
        if (w.normWeight) sd[`${fullPrefix}norm.weight`] = { data: w.normWeight, shape: [w.dim] };
        if (w.normWeight && w.normBias) sd[`${fullPrefix}norm.bias`] = { data: w.normBias, shape: [w.dim] };
        const options: Obj = { heads: w.heads, prefix: p.prefix };
        if (w.eps !== undefined) options.eps = w.eps;
        const keys = Object.keys(sd);
        const key = keys[(p.change?.target ?? 0) % keys.length];
        let validity: Validity = 'valid';
        let names: string[] = [];
        let useConfig = false;
        const config = blockConfigObject(w, true);
        switch (p.change?.kind) {
          case 'drop-key': {
            delete sd[key];
            const at = key.slice(fullPrefix.length);
            const isOut = /^(out_proj|to_out|output)/.test(at);
            const identity = w.heads === 1 && w.dimHead === w.dim;
            validity = 'invalid';
            names = [`stateDict["${key}"]`, at];
            if (/bias$/.test(at)) {
              // A missing bias counts as zeros.
              validity = 'valid';
              const part = ['query', 'key', 'value'].indexOf(at.split('.')[0]);
              if (at.startsWith('norm')) w.normBias = undefined;
              else if (isOut) w.outBias = undefined;
              else if (part >= 0) w.qkvBias!.fill(0, part * w.heads * w.dimHead, (part + 1) * w.heads * w.dimHead);
              else w.qkvBias = undefined;
            } else if (at === 'norm.weight' && !w.normBias) {
              validity = 'valid'; // the LayerNorm is optional
              w.normWeight = undefined;
            } else if (isOut && identity && p.scheme !== 'torch' && !w.outBias) {
              // Without heads to merge, ViT and Hugging Face blocks may leave out the output projection.
              validity = 'valid';
              w.outWeight = undefined;
            }
            break;
          }
          case 'not-a-tensor':
            sd[key] = NOT_TENSORS[p.change.pick % NOT_TENSORS.length](sd[key] as Tensor);
            validity = 'invalid';
            names = [`stateDict["${key}"]`];
            break;
          case 'reshape': {
            const t = sd[key] as Tensor;
            sd[key] = { data: t.data, shape: [...t.shape, 1] };
            validity = 'invalid';
            names = [`stateDict["${key}"]`];
            break;
          }
          case 'extra-key':
            sd[`${fullPrefix}rotary.inv_freq`] = { data: new Float32Array(3), shape: [3] };
            sd['unrelated.weight'] = 'not even a tensor';
            break;
          case 'bad-heads':
            options.heads = BAD_COUNTS[p.change.pick % BAD_COUNTS.length];
            validity = 'invalid';
            names = ['options.heads'];
            break;
          case 'config-garbage': {
            useConfig = true;
            const spots: Array<[Obj, string, unknown, string]> = [
              [config, 'dim', BAD_COUNTS[p.change.pick % BAD_COUNTS.length], 'config.dim'],
              [config, 'heads', BAD_COUNTS[p.change.pick % BAD_COUNTS.length], 'config.heads'],
              [config, 'eps', [-1, NaN, 'x', 1e39][p.change.pick % 4], 'config.eps'],
              [config, 'weights', NOT_OPTIONS[p.change.pick % NOT_OPTIONS.length], 'config.weights'],
              [config.weights as Obj, 'qkvWeight', NOT_TENSORS[p.change.pick % NOT_TENSORS.length]({ data: w.qkvWeight, shape: [1] }), 'config.weights.qkvWeight'],
              [config.weights as Obj, 'outWeight', { data: new Float32Array(2), shape: [2, 1, 1] }, 'config.weights.outWeight'],
              [config, 'layers', 12, 'layers'],
            ];
            const [obj, k, v, name] = spots[p.change.target % spots.length];
            obj[k] = v;
            validity = 'invalid';
            names = [name];
            break;
          }
        }
        const label = `block construction ${show(p)}`;
        const fn = useConfig ? 'MultiHeadSelfAttention' : 'MultiHeadSelfAttention.fromTorch';
        const dict = p.asMap ? new Map(Object.entries(sd)) : sd;
        const outcome = callSync(() =>
          useConfig ? new MultiHeadSelfAttention(config as never) : MultiHeadSelfAttention.fromTorch(dict as never, options as never),
        );
        if (!outcome.ok) {
          if (validity === 'valid') throw new Error(`[seed ${SEED}] ${label}: a valid construction failed: ${String(outcome.error)}`);
          expectApiError(outcome.error, fn, label, names);
          return;
        }
        if (validity === 'invalid') throw new Error(`[seed ${SEED}] ${label}: an invalid construction succeeded`);
        const block = outcome.value as MultiHeadSelfAttention;
        const x = randomTensor(rng, [2, 3, w.dim]);
        const ref = refBlock(x.data, 2, 3, w);
        // With dim 1 each output is one dot product whose terms may cancel
        // (and after a LayerNorm over one element every row is the same one).
        const scale = w.dim === 1 ? dotProductScale(ref.outputMagnitude) : undefined;
        expectClose(block.forward(x).data, ref.output, TOL, { seed: SEED, label, scale });
      }),
      runs(200),
    );
  });
});

// ---------------------------------------------------------------- argument soup for every function

/** One random argument: a wrong kind of value, a tensor (valid, huge, detached, shared, forged), or an options object. */
function soupValue(i: number, rng: Rng, depth = 0): unknown {
  const sample = randomTensor(rng, [2, 3]);
  const smallShape = () => Array.from({ length: Math.floor(rng() * 5) }, () => Math.floor(rng() * 4));
  switch (i % 10) {
    case 0:
      return [...BAD_DIMS, ...NOT_OPTIONS, 'tensor', 1, 2, 0.5][Math.floor(rng() * (BAD_DIMS.length + NOT_OPTIONS.length + 4))];
    case 1:
      return NOT_TENSORS[Math.floor(rng() * NOT_TENSORS.length)](sample);
    case 2:
    case 3:
      return randomTensor(rng, smallShape());
    case 4:
      return { data: new Float32Array(0), shape: [0, HUGE_DIMS[Math.floor(rng() * HUGE_DIMS.length)], 1 + Math.floor(rng() * 3)] };
    case 5: {
      const t = randomTensor(rng, smallShape());
      if (rng() < 0.5) return { data: shared(t.data), shape: t.shape };
      detach(t.data);
      return t;
    }
    case 6:
      return rng() < 0.5 ? new Uint8Array(Math.floor(rng() * 8)) : prepack(randomTensor(rng, [1 + Math.floor(rng() * 3), 2]));
    case 7:
      return new PackedMatrix(new Float32Array(Math.floor(rng() * 40)), soupValue(0, rng) as number, [2, 3, 1.5, -1][Math.floor(rng() * 4)]);
    default: {
      if (depth > 1) return {};
      const keys = ['transposeA', 'alpha', 'beta', 'c', 'out', 'scale', 'layout', 'heads', 'kvHeads', 'causal', 'mask',
        'keyPaddingMask', 'returnWeights', 'weight', 'bias', 'eps', 'transpose', 'filter', 'prefix', 'dim', 'weights', 'norm', 'axis'];
      const o: Obj = {};
      for (let k = Math.floor(rng() * 4); k > 0; k--) o[keys[Math.floor(rng() * keys.length)]] = soupValue(Math.floor(rng() * 10), rng, depth + 1);
      return o;
    }
  }
}

describe(`fuzz: random arguments to every function (seed ${SEED})`, () => {
  const block = new MultiHeadSelfAttention({
    dim: 4, heads: 2, weights: { qkvWeight: tensor(new Float32Array(48).fill(0.1), [12, 4]), outWeight: tensor(new Float32Array(16).fill(0.2), [4, 4]) },
  });
  const fns: Array<[name: string, call: AnyFn, isAsync: boolean]> = [
    ['tensor', tensor, false],
    ['matmul', matmul, false],
    ['matmulAsync', matmulAsync, true],
    ['prepack', prepack, false],
    ['softmax', softmax, false],
    ['softmaxAsync', softmaxAsync, true],
    ['attention', attention, false],
    ['attentionAsync', attentionAsync, true],
    ['layerNorm', layerNorm, false],
    ['layerNormAsync', layerNormAsync, true],
    ['loadSafetensors', loadSafetensors, false],
    ['MultiHeadSelfAttention', (...args: unknown[]) => new MultiHeadSelfAttention(...(args as [never])), false],
    ['MultiHeadSelfAttention.fromTorch', MultiHeadSelfAttention.fromTorch, false],
    ['MultiHeadSelfAttention.forward', (...args: unknown[]) => block.forward(...(args as [Tensor])), false],
    ['MultiHeadSelfAttention.forwardAsync', (...args: unknown[]) => block.forwardAsync(...(args as [Tensor])), true],
    ['info', info, false],
    ['getNumThreads', getNumThreads, false],
  ];

  test('each call returns a well-formed value or throws / rejects an error naming the function; nothing it was given changes on error', async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat(fns.length - 1), fc.array(fc.nat(9), { maxLength: 5 }), fc.nat(), async (f, kinds, dataSeed) => {
        const [name, fn, isAsync] = fns[f];
        const rng = makeRng(dataSeed);
        const args = kinds.map((k) => soupValue(k, rng));
        const label = `${name}(${kinds.join(', ')}) with data seed ${dataSeed}`;
        const snaps = snapshot(args);
        const outcome = isAsync ? await callAsync(() => fn(...args), name) : callSync(() => fn(...args));
        if (outcome.ok) {
          const v = outcome.value as { data?: unknown; shape?: number[]; output?: Tensor };
          const t = v && typeof v === 'object' && 'output' in v ? v.output! : v;
          const isTensor = t && typeof t === 'object' && !(t instanceof PackedMatrix) && 'data' in t && Array.isArray(t.shape);
          if (isTensor && t.data instanceof Float32Array) {
            expect(t.data.length).toBe(numel(t.shape as number[]));
          }
          if (name === 'getNumThreads') expect(Number.isInteger(v)).toBe(true);
          return;
        }
        const fsError = name === 'loadSafetensors' && typeof args[0] === 'string' && typeof (outcome.error as { code?: unknown }).code === 'string';
        if (!fsError) expectApiError(outcome.error, name, label);
        expectUnchanged(snaps, label);
      }),
      runs(1500),
    );
  });
});

// ---------------------------------------------------------------- damaged safetensors files

/** A safetensors image: the 8-byte little-endian header length, the header text, the data bytes. */
function safetensorsImage(header: string, data: Uint8Array, headerLength = BigInt(Buffer.byteLength(header))): Uint8Array {
  const text = Buffer.from(header, 'utf8');
  const image = new Uint8Array(8 + text.length + data.length);
  new DataView(image.buffer).setBigUint64(0, headerLength, true);
  image.set(text, 8);
  image.set(data, 8 + text.length);
  return image;
}

interface StEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** A valid small file: F32, F16 and BF16 tensors (one maybe empty), metadata, the header padded to `align`. */
function validFile(rng: Rng, align: number): { header: Record<string, StEntry | Record<string, string>>; data: Uint8Array } {
  const header: Record<string, StEntry | Record<string, string>> = { __metadata__: { format: 'pt', note: 'fuzz' } };
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const [name, dtype, size] of [['w', 'F32', 4], ['h', 'F16', 2], ['b', 'BF16', 2], ['z', 'F32', 4]] as const) {
    const shape = name === 'z' ? [0, 3] : [1 + Math.floor(rng() * 3), 1 + Math.floor(rng() * 3)];
    const bytes = new Uint8Array(numel(shape) * size).map(() => Math.floor(rng() * 256));
    header[name] = { dtype, shape, data_offsets: [at, at + bytes.length] };
    parts.push(bytes);
    at += bytes.length;
  }
  const data = new Uint8Array(at);
  let o = 0;
  for (const p of parts) {
    data.set(p, o);
    o += p.length;
  }
  void align;
  return { header, data };
}

function encode(header: object, data: Uint8Array, align: number): Uint8Array {
  let text = JSON.stringify(header);
  while ((8 + text.length) % align !== 0) text += ' ';
  return safetensorsImage(text, data);
}

/** Element value of a returned tensor, recomputed from the file bytes (F16 and BF16 decoded here independently). */
function decodeAt(bytes: Uint8Array, offset: number, dtype: string, i: number): number {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === 'F32') return dv.getFloat32(offset + 4 * i, true);
  const h = dv.getUint16(offset + 2 * i, true);
  if (dtype === 'BF16') return new Float32Array(new Uint32Array([h << 16]).buffer)[0];
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return exp === 0 ? sign * mant * 2 ** -24 : sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** What a successful load must satisfy: every tensor is its header entry's bytes, inside the source. */
function checkLoaded(source: Uint8Array, r: ReturnType<typeof loadSafetensors>, label: string): void {
  const headerLength = Number(new DataView(source.buffer, source.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(Buffer.from(source.subarray(8, 8 + headerLength)).toString('utf8')) as Record<string, StEntry>;
  for (const [name, t] of Object.entries(r.tensors)) {
    const entry = header[name];
    expect(entry).toBeDefined();
    expect(t.shape).toEqual(entry.shape);
    expect(t.data.length).toBe(numel(t.shape));
    if (t.data.buffer === source.buffer) {
      expect(t.data.byteOffset).toBeGreaterThanOrEqual(source.byteOffset + 8 + headerLength);
      expect(t.data.byteOffset + t.data.byteLength).toBeLessThanOrEqual(source.byteOffset + source.byteLength);
    }
    const offset = 8 + headerLength + entry.data_offsets[0];
    for (let i = 0; i < t.data.length; i++) {
      const want = decodeAt(source, offset, entry.dtype, i);
      if (!Object.is(t.data[i], want) && !(Number.isNaN(want) && Number.isNaN(t.data[i]))) {
        throw new Error(`[seed ${SEED}] ${label}: tensor ${name}[${i}] is ${t.data[i]}, the file holds ${want}`);
      }
    }
  }
}

function expectLoadOutcome(source: Uint8Array, label: string): 'ok' | 'error' {
  const outcome = callSync(() => loadSafetensors(source));
  if (!outcome.ok) {
    expectApiError(outcome.error, 'loadSafetensors', label);
    return 'error';
  }
  checkLoaded(source, outcome.value as ReturnType<typeof loadSafetensors>, label);
  return 'ok';
}

describe(`fuzz: loadSafetensors on damaged files (seed ${SEED})`, () => {
  test('every truncation of a small file, and every header length from 0 to past the end', () => {
    const rng = makeRng(SEED);
    const { header, data } = validFile(rng, 8);
    const image = encode(header, data, 8);
    expect(expectLoadOutcome(image, 'the intact file')).toBe('ok');
    for (let n = 0; n < image.length; n++) expectLoadOutcome(image.slice(0, n), `truncated to ${n} bytes`);
    const lengths = [...Array(image.length + 2).keys()].map(BigInt).concat([2n ** 31n, 2n ** 32n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n - 8n]);
    for (const len of lengths) {
      const copy = image.slice();
      new DataView(copy.buffer).setBigUint64(0, len, true);
      expectLoadOutcome(copy, `header length field ${len}`);
    }
  });

  test('random damage: byte flips, junk JSON, bad offsets and shapes, odd alignment, offset views', () => {
    const junkHeaders = ['', ' ', '{', '[]', 'null', '3', '"x"', '{"a":', '{"a":1}', '{"__metadata__":[]}', '{"__metadata__":{"k":1}}',
      '{"a":{"dtype":"F32"}}', '\u00ff\u00fe', '{"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}', `${'['.repeat(5000)}${']'.repeat(5000)}`];
    const arb = fc.record({
      kind: fc.constantFrom('flip', 'junk', 'offsets', 'shape', 'dtype', 'name', 'overlap', 'align', 'leading'),
      count: fc.integer({ min: 1, max: 6 }),
      pick: fc.nat(1000),
      value: fc.oneof(fc.integer({ min: -5, max: 80 }), fc.constantFrom(2 ** 31, 2 ** 32, 2 ** 53, 1e300, -0, 0.5, NaN)),
      dataSeed: fc.nat(),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const align = p.kind === 'align' ? 1 + (p.pick % 7) : 8;
        const { header, data } = validFile(rng, align);
        const names = ['w', 'h', 'b', 'z'];
        const entry = header[names[p.pick % 4]] as StEntry;
        const value = Number.isNaN(p.value) ? null : p.value;
        let image: Uint8Array;
        switch (p.kind) {
          case 'flip':
            image = encode(header, data, align);
            for (let i = 0; i < p.count; i++) image[Math.floor(rng() * image.length)] = Math.floor(rng() * 256);
            break;
          case 'junk':
            image = safetensorsImage(junkHeaders[p.pick % junkHeaders.length], data);
            break;
          case 'offsets':
            entry.data_offsets[p.pick % 2] = value as number;
            image = encode(header, data, align);
            break;
          case 'shape':
            entry.shape[p.pick % 2] = value as number;
            image = encode(header, data, align);
            break;
          case 'dtype':
            entry.dtype = ['F64', 'I8', 'constructor', 'toString', '__proto__', 'f32', ''][p.pick % 7];
            image = encode(header, data, align);
            break;
          case 'name':
            header[['__proto__', 'constructor', 'hasOwnProperty', '', '\u0000'][p.pick % 5]] = entry;
            delete header[names[p.pick % 4]];
            image = encode(header, data, align);
            break;
          case 'overlap': {
            const other = header[names[(p.pick + 1) % 4]] as StEntry;
            other.data_offsets = [entry.data_offsets[0] + (p.count % 3), entry.data_offsets[0] + (p.count % 3) + (other.data_offsets[1] - other.data_offsets[0])];
            image = encode(header, data, align);
            break;
          }
          case 'align':
            image = encode(header, data, align);
            break;
          default: {
            // The image at an odd byte offset inside a larger buffer (a Buffer slice, say).
            const intact = encode(header, data, align);
            const big = new Uint8Array(intact.length + p.count + 5).fill(0xee);
            big.set(intact, p.count);
            image = big.subarray(p.count, p.count + intact.length);
          }
        }
        const source = p.pick % 5 === 0 ? new Uint8Array(new SharedArrayBuffer(image.length)) : image;
        if (source !== image) source.set(image);
        expectLoadOutcome(source, `loadSafetensors ${show(p)}`);
        const asArrayBuffer = callSync(() => loadSafetensors(image.slice().buffer));
        if (!asArrayBuffer.ok) expectApiError(asArrayBuffer.error, 'loadSafetensors', `loadSafetensors(ArrayBuffer) ${show(p)}`);
      }),
      runs(1500),
    );
  });
});

// ---------------------------------------------------------------- regressions: bugs this fuzzing found in lib/

describe('regressions found by fuzzing', () => {
  test('tensor() names itself when data holds BigInts or Symbols (was a bare "Cannot convert a BigInt value")', () => {
    for (const data of [new BigInt64Array(2), [1n, 2n], [Symbol('s'), 1]]) {
      const outcome = callSync(() => tensor(data as never, [2]));
      expect(outcome.ok).toBe(false);
      expectApiError((outcome as { error: unknown }).error, 'tensor', 'tensor(BigInt data)', ['data']);
    }
  });

  test('loadSafetensors keeps a tensor or metadata key named "__proto__" (was lost, replacing the result\'s prototype)', () => {
    const header = JSON.stringify({ __metadata__: { __proto__: 'kept' }, __proto__: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } })
      .replace('"__metadata__":{}', '"__metadata__":{"__proto__":"kept"}')
      .replace(/,?}$/, ',"__proto__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}');
    const r = loadSafetensors(safetensorsImage(header, new Uint8Array(new Float32Array([2.5]).buffer)));
    expect(Object.keys(r.tensors)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(r.tensors)).toBe(Object.getPrototypeOf({}));
    expect(Array.from(Object.getOwnPropertyDescriptor(r.tensors, '__proto__')!.value.data as Float32Array)).toEqual([2.5]);
    expect(Object.getOwnPropertyDescriptor(r.metadata, '__proto__')!.value).toBe('kept');
    expect(Object.getOwnPropertyDescriptor(r.dtypes, '__proto__')!.value).toBe('F32');
  });

  test('loadSafetensors: a dtype named like an Object.prototype member is an unknown dtype (was "needs NaN bytes")', () => {
    const file = safetensorsImage('{"a":{"dtype":"constructor","shape":[1],"data_offsets":[0,4]}}', new Uint8Array(4));
    expect(loadSafetensors(file, { filter: () => false }).tensors).toEqual({});
    const outcome = callSync(() => loadSafetensors(file));
    expect((outcome as { error: Error }).error.name).toBe('TypeError');
    expect((outcome as { error: Error }).error.message).toMatch(/tensor "a" has dtype constructor; only F32, F16 and BF16/);
  });

  test('async ops reject buffers on a resizable ArrayBuffer (shrinking one mid-op crashed the process); sync ops take them', async () => {
    const rab = new (ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer)(24, { maxByteLength: 64 });
    const x = { data: new Float32Array(rab, 0, 6), shape: [2, 3] };
    x.data.set([1, 2, 3, 4, 5, 6]);
    expectClose(softmax(x).data, refSoftmax(x.data, [2, 3]).data, TOL, { seed: SEED, label: 'sync softmax on a resizable buffer' });
    const weights = { data: new Float32Array(rab, 0, 3), shape: [3] };
    const rejections = await Promise.allSettled([
      softmaxAsync(x),
      matmulAsync({ data: new Float32Array(6), shape: [3, 2] }, { data: new Float32Array(4), shape: [2, 2] }, { out: { data: new Float32Array(rab, 0, 6), shape: [3, 2] } }),
      layerNormAsync({ data: new Float32Array(6), shape: [2, 3] }, { weight: weights }),
      attentionAsync({ data: new Float32Array(rab, 0, 4), shape: [1, 1, 1, 4] }, tensor(new Float32Array(4), [1, 1, 1, 4]), tensor(new Float32Array(4), [1, 1, 1, 4])),
    ]);
    for (const [i, r] of rejections.entries()) {
      expect(r.status).toBe('rejected');
      const fn = ['softmaxAsync', 'matmulAsync', 'layerNormAsync', 'attentionAsync'][i];
      expectApiError((r as PromiseRejectedResult).reason, fn, `${fn} on a resizable buffer`);
      const arg = ['x', 'options\\.out', 'options\\.weight', 'q'][i];
      expect(((r as PromiseRejectedResult).reason as Error).message).toMatch(new RegExp(`^${fn}: ${arg} is backed by a resizable ArrayBuffer`));
    }
  });

  test('matmul checks a hand-made PackedMatrix\'s fields (a Symbol for rows threw "Cannot convert a Symbol value")', () => {
    const a = tensor(new Float32Array(6), [2, 3]);
    for (const [data, rows, cols, name] of [
      [new Float32Array(8), Symbol('rows'), 2, 'b.shape'],
      [new Float32Array(8), 3, 1.5, 'b.shape'],
      [null, 3, 2, 'b.data'],
    ] as const) {
      const outcome = callSync(() => matmul(a, new PackedMatrix(data as never, rows as never, cols)));
      expectApiError((outcome as { error: unknown }).error, 'matmul', 'a forged PackedMatrix', [name]);
    }
  });

  test('an async error raised by the addon names the async function under jest and vm contexts too (was "matmul:")', async () => {
    const a = tensor(new Float32Array(4).fill(1), [2, 2]);
    const packed = prepack(a);
    const outcome = await callAsync(() => matmulAsync(a, packed, { out: { data: packed.data.subarray(0, 4), shape: [2, 2] } }), 'matmulAsync');
    expect(outcome.ok).toBe(false);
    expectApiError((outcome as { error: unknown }).error, 'matmulAsync', 'out overlapping a PackedMatrix', ['out', 'b']);
  });
});
