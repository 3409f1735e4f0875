/**
 * Reference fixtures computed by PyTorch in float64: every matmul, softmax and
 * attention case is run through the sync and the async API and compared with
 * ||out − expected|| / ||expected|| ≤ 1e-5.
 *
 * The cases are test/fixtures/*.safetensors, in the repository and written by
 * test/fixtures/generate.py (see test/fixtures/README.md). A directory in
 * $MHSA_FIXTURES adds its cases to those: they run under the name
 * `MHSA_FIXTURES/<file>`, so a file named like one of the repository's runs
 * twice, once from each directory. torch_mha and vit_attention cases are run by
 * block.test.ts.
 */
import {
  attention,
  attentionAsync,
  matmul,
  matmulAsync,
  softmax,
  softmaxAsync,
  type AttentionLayout,
  type AttentionOptions,
  type MatmulOptions,
  type SoftmaxOptions,
  type Tensor,
} from '../lib';
import { loadFixtures, type LoadedFixture, type SafetensorsTensor } from './helpers/safetensors';

const TOLERANCE = 1e-5;

/** Ops this file covers, with the least number of fixtures of each that test/fixtures must hold. */
const MIN_COUNT = { matmul: 8, softmax: 2, attention: 15 } as const;
type Op = keyof typeof MIN_COUNT;

/** Fixture ops that belong to a later issue: listed as skipped, not run. */
const LATER_OPS = new Set(['torch_mha', 'vit_attention']);

/**
 * Fixtures that fail because of a bug in lib/ or native/, by fixture name (the file
 * name without .safetensors, `MHSA_FIXTURES/<name>` for an added case; `<name>:packed`
 * for the 3-D packed variant) → description.
 * Each entry is skipped; remove it once fixed.
 */
const KNOWN_BUGS: Record<string, string> = {
  // BUG: (none known)
};

// ---------------------------------------------------------------------------
// Discovery

type Fixture = LoadedFixture;

let dirError: Error | undefined;
let fixtures: Fixture[] = [];
try {
  fixtures = loadFixtures();
} catch (e) {
  dirError = e as Error;
}

const covered = fixtures.filter((f) => f.op in MIN_COUNT);
const later = fixtures.filter((f) => LATER_OPS.has(f.op));
const unknown = fixtures.filter((f) => !(f.op in MIN_COUNT) && !LATER_OPS.has(f.op));

// ---------------------------------------------------------------------------
// Helpers

function f32(t: SafetensorsTensor | undefined, what: string): Tensor {
  if (!t) throw new Error(`missing tensor '${what}'`);
  if (t.dtype !== 'F32') throw new Error(`tensor '${what}' must be F32, found ${t.dtype}`);
  return { data: t.data as Float32Array, shape: t.shape };
}

function poisoned(shape: readonly number[]): Tensor {
  const n = shape.reduce((p, d) => p * d, 1);
  return { data: new Float32Array(n).fill(NaN), shape: [...shape] };
}

/** Relative L2 error accumulated in float64, plus where the worst element is. */
function compare(out: Float32Array, expected: Float32Array) {
  if (out.length !== expected.length) throw new Error(`length ${out.length} != expected ${expected.length}`);
  let diff2 = 0;
  let ref2 = 0;
  let maxAbs = 0;
  let at = -1;
  let nonFinite = 0;
  for (let i = 0; i < out.length; i++) {
    const o = out[i];
    const e = expected[i];
    if (!Number.isFinite(o)) nonFinite++;
    const d = o - e;
    diff2 += d * d;
    ref2 += e * e;
    const a = Math.abs(d);
    if (!(a <= maxAbs)) {
      maxAbs = a;
      at = i;
    }
  }
  return { rel: Math.sqrt(diff2) / Math.sqrt(ref2), refNorm: Math.sqrt(ref2), maxAbs, at, nonFinite };
}

function expectClose(fx: Fixture, label: string, out: Tensor, expected: Tensor): void {
  expect(out.shape).toEqual(expected.shape);
  const r = compare(out.data, expected.data);
  if (!(r.refNorm > 0)) throw new Error(`${fx.name}: expected has zero norm, the relative error is meaningless`);
  if (!(r.rel <= TOLERANCE)) {
    throw new Error(
      `${fx.name} (${label}): ||out - expected|| / ||expected|| = ${r.rel} > ${TOLERANCE}; ` +
        `max |diff| ${r.maxAbs} at flat index ${r.at} (out ${out.data[r.at]}, expected ${expected.data[r.at]}); ` +
        `${r.nonFinite} non-finite outputs; config ${JSON.stringify(fx.config)}`,
    );
  }
}

/** Bitwise equality (NaN-safe), reporting the first differing element. */
function expectIdentical(fx: Fixture, a: Float32Array, b: Float32Array): void {
  expect(a.length).toBe(b.length);
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) {
    if (ua[i] !== ub[i]) {
      throw new Error(`${fx.name}: async result differs from sync at flat index ${i}: ${b[i]} vs sync ${a[i]}`);
    }
  }
}

function snapshot(ts: Tensor[]): Float32Array[] {
  return ts.map((t) => t.data.slice());
}

function expectUnchanged(fx: Fixture, ts: Tensor[], before: Float32Array[]): void {
  ts.forEach((t, i) => {
    const now = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
    const was = new Uint32Array(before[i].buffer);
    for (let j = 0; j < now.length; j++) {
      if (now[j] !== was[j]) throw new Error(`${fx.name}: input ${i} was modified at flat index ${j}`);
    }
  });
}

function checkKeys(fx: Fixture, allowedConfig: string[], allowedTensors: string[]): void {
  const extraConfig = Object.keys(fx.config).filter((k) => !allowedConfig.includes(k));
  const extraTensors = Object.keys(fx.file.tensors).filter((k) => !allowedTensors.includes(k));
  // A field the mapping below does not know would otherwise be silently ignored.
  expect({ extraConfig, extraTensors }).toEqual({ extraConfig: [], extraTensors: [] });
}

function optBool(fx: Fixture, key: string): boolean | undefined {
  const v = fx.config[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new Error(`${fx.name}: config.${key} must be a boolean, found ${JSON.stringify(v)}`);
  return v;
}

function optNum(fx: Fixture, key: string): number | undefined {
  const v = fx.config[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number') throw new Error(`${fx.name}: config.${key} must be a number, found ${JSON.stringify(v)}`);
  return v;
}

function num(fx: Fixture, key: string): number {
  const v = optNum(fx, key);
  if (v === undefined) throw new Error(`${fx.name}: config.${key} is missing`);
  return v;
}

// ---------------------------------------------------------------------------
// Op runners: sync with a NaN-poisoned out, then async with another, compared bitwise.

interface Run {
  inputs: Tensor[];
  expected: Tensor;
  sync: (out: Tensor) => Tensor;
  async: (out: Tensor) => Promise<Tensor>;
  label: string;
}

function matmulRun(fx: Fixture): Run {
  checkKeys(fx, ['transposeA', 'transposeB', 'alpha', 'beta'], ['a', 'b', 'c', 'expected']);
  const t = fx.file.tensors;
  const a = f32(t.a, 'a');
  const b = f32(t.b, 'b');
  const expected = f32(t.expected, 'expected');
  const opts: MatmulOptions = {};
  const transposeA = optBool(fx, 'transposeA');
  const transposeB = optBool(fx, 'transposeB');
  const alpha = optNum(fx, 'alpha');
  const beta = optNum(fx, 'beta');
  if (transposeA !== undefined) opts.transposeA = transposeA;
  if (transposeB !== undefined) opts.transposeB = transposeB;
  if (alpha !== undefined) opts.alpha = alpha;
  if (beta !== undefined) opts.beta = beta;
  const inputs = [a, b];
  if (t.c) {
    opts.c = f32(t.c, 'c');
    inputs.push(opts.c);
  }
  return {
    inputs,
    expected,
    label: 'matmul',
    sync: (out) => matmul(a, b, { ...opts, out }),
    async: (out) => matmulAsync(a, b, { ...opts, out }),
  };
}

function softmaxRun(fx: Fixture): Run {
  checkKeys(fx, ['scale'], ['x', 'expected']);
  const x = f32(fx.file.tensors.x, 'x');
  const expected = f32(fx.file.tensors.expected, 'expected');
  const opts: SoftmaxOptions = {};
  const scale = optNum(fx, 'scale');
  if (scale !== undefined) opts.scale = scale;
  return {
    inputs: [x],
    expected,
    label: 'softmax',
    sync: (out) => softmax(x, { ...opts, out }),
    async: (out) => softmaxAsync(x, { ...opts, out }),
  };
}

const ATTENTION_CONFIG = ['layout', 'causal', 'batch', 'heads', 'kvHeads', 'seqQ', 'seqKV', 'headDim', 'headDimV', 'scale'];

/** The stored 4-D shapes the config implies for q, k, v and expected in its layout. */
function attentionShapes(fx: Fixture, layout: AttentionLayout) {
  const B = num(fx, 'batch');
  const H = num(fx, 'heads');
  const KVH = num(fx, 'kvHeads');
  const SQ = num(fx, 'seqQ');
  const SKV = num(fx, 'seqKV');
  const D = num(fx, 'headDim');
  const DV = num(fx, 'headDimV');
  const shape = (h: number, s: number, d: number): number[] =>
    layout === 'bhsd' ? [B, h, s, d] : layout === 'bshd' ? [B, s, h, d] : [B, h, d, s];
  return { B, H, KVH, SQ, SKV, q: shape(H, SQ, D), k: shape(KVH, SKV, D), v: shape(KVH, SKV, DV), out: shape(H, SQ, DV) };
}

/**
 * @param packed run a 4-D bshd fixture through the 3-D [batch, seq, heads·headDim]
 *   path instead (same bytes, merged last two dims).
 */
function attentionRun(fx: Fixture, packed = false): Run {
  checkKeys(fx, ATTENTION_CONFIG, ['q', 'k', 'v', 'expected', 'mask', 'keyPaddingMask']);
  const t = fx.file.tensors;
  const layout = (fx.config.layout ?? 'bhsd') as AttentionLayout;
  expect(['bhsd', 'bshd', 'bhds']).toContain(layout);
  const s = attentionShapes(fx, layout);
  let q = f32(t.q, 'q');
  let k = f32(t.k, 'k');
  let v = f32(t.v, 'v');
  let expected = f32(t.expected, 'expected');

  const merge = (x: number[]) => [x[0], x[1], x[2] * x[3]];
  if (q.shape.length === 3) {
    // Stored packed: only possible for bshd.
    expect(layout).toBe('bshd');
    expect({ q: q.shape, k: k.shape, v: v.shape, expected: expected.shape }).toEqual({
      q: merge(s.q), k: merge(s.k), v: merge(s.v), expected: merge(s.out),
    });
  } else {
    expect({ q: q.shape, k: k.shape, v: v.shape, expected: expected.shape }).toEqual({
      q: s.q, k: s.k, v: s.v, expected: s.out,
    });
    if (packed) {
      expect(layout).toBe('bshd');
      q = { data: q.data, shape: merge(q.shape as number[]) };
      k = { data: k.data, shape: merge(k.shape as number[]) };
      v = { data: v.data, shape: merge(v.shape as number[]) };
      expected = { data: expected.data, shape: merge(expected.shape as number[]) };
    }
  }

  const opts: AttentionOptions & { returnWeights?: false } = { layout, heads: s.H, kvHeads: s.KVH };
  const causal = optBool(fx, 'causal');
  const scale = optNum(fx, 'scale');
  if (causal !== undefined) opts.causal = causal;
  if (scale !== undefined) opts.scale = scale;
  const inputs = [q, k, v];
  if (t.mask) {
    opts.mask = f32(t.mask, 'mask');
    inputs.push(opts.mask);
  }
  if (t.keyPaddingMask) {
    expect(t.keyPaddingMask.dtype).toBe('U8');
    expect(t.keyPaddingMask.shape).toEqual([s.B, s.SKV]);
    opts.keyPaddingMask = t.keyPaddingMask.data as Uint8Array;
  }
  return {
    inputs,
    expected,
    label: `attention ${q.shape.length === 3 ? '3-D packed ' : ''}${layout}`,
    sync: (out) => attention(q, k, v, { ...opts, out }),
    async: (out) => attentionAsync(q, k, v, { ...opts, out }),
  };
}

async function runFixture(fx: Fixture, run: Run): Promise<void> {
  const before = snapshot(run.inputs);

  const out = poisoned(run.expected.shape);
  const result = run.sync(out);
  expect(result).toBe(out);
  expectClose(fx, run.label, out, run.expected);

  const outAsync = poisoned(run.expected.shape);
  const resultAsync = await run.async(outAsync);
  expect(resultAsync).toBe(outAsync);
  expectIdentical(fx, out.data, outAsync.data);

  expectUnchanged(fx, run.inputs, before);
}

const RUNNERS: Record<Op, (fx: Fixture) => Run> = {
  matmul: (fx) => matmulRun(fx),
  softmax: (fx) => softmaxRun(fx),
  attention: (fx) => attentionRun(fx),
};

// ---------------------------------------------------------------------------
// Tests

describe('reference fixtures', () => {
  test('the fixtures directories exist and every fixture parses', () => {
    if (dirError) throw dirError;
    expect(fixtures.length).toBeGreaterThan(0);
  });

  test(`test/fixtures holds at least ${JSON.stringify(MIN_COUNT)} fixtures, and no fixture has an unknown op`, () => {
    const counts: Record<string, number> = {};
    for (const fx of covered.filter((f) => !f.extra)) counts[fx.op] = (counts[fx.op] ?? 0) + 1;
    for (const [op, min] of Object.entries(MIN_COUNT)) {
      if ((counts[op] ?? 0) < min) throw new Error(`only ${counts[op] ?? 0} ${op} fixtures found, expected at least ${min}`);
    }
    expect(unknown.map((f) => `${f.name}: ${f.op}`)).toEqual([]);
  });

  test('every known-bug entry names an existing covered fixture', () => {
    const names = covered.map((f) => f.name);
    for (const key of Object.keys(KNOWN_BUGS)) expect(names).toContain(key.replace(/:packed$/, ''));
  });

  for (const fx of covered) {
    const bug = KNOWN_BUGS[fx.name];
    const t = bug ? test.skip : test;
    t(`${fx.op}: ${fx.name}${bug ? ` (BUG: ${bug})` : ''}`, () => runFixture(fx, RUNNERS[fx.op as Op](fx)));
  }

  // The 4-D bshd fixtures again, viewed as the packed [batch, seq, heads·headDim] projection output.
  for (const fx of covered.filter((f) => f.op === 'attention' && f.config.layout === 'bshd' && f.file.tensors.q?.shape.length === 4)) {
    const key = `${fx.name}:packed`;
    const bug = KNOWN_BUGS[key];
    const t = bug ? test.skip : test;
    t(`attention: ${fx.name} as 3-D packed [batch, seq, heads*headDim]${bug ? ` (BUG: ${bug})` : ''}`, () =>
      runFixture(fx, attentionRun(fx, true)),
    );
  }

  // torch_mha and vit_attention are covered by a later issue.
  for (const fx of later) {
    test.skip(`${fx.op}: ${fx.name} (later issue)`, () => undefined);
  }
});
