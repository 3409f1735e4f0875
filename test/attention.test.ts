/**
 * Randomized attention tests against the float64 reference. Fresh inputs every run;
 * the seed is in the describe title and in every failure message
 * (replay: MHSA_TEST_SEED=<seed> npx jest test/attention.test.ts).
 */
import { attention, attentionAsync, tensor, type AttentionOptions, type Tensor } from '../lib';
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
import { numel, refAttention, type RefAttentionResult } from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;

type Layout = 'bhsd' | 'bshd' | 'bhds' | '3d';
const LAYOUTS: Layout[] = ['bhsd', 'bshd', 'bhds', '3d'];

interface AttnSpec {
  layout: Layout;
  B: number;
  H: number;
  /** kv heads; default H. */
  Hkv?: number;
  Sq: number;
  Skv: number;
  D: number;
  /** v's head dim; default D. */
  Dv?: number;
  causal?: boolean;
  scale?: number;
  /** Additive mask shape (broadcast to [B, H, Sq, Skv]); values in [-2, 2) with some -Infinity. */
  maskShape?: number[];
  /** Probability of a -Infinity mask entry. Default 0.15. */
  maskInfProb?: number;
  /** Rows (of the mask's own second-to-last dim) filled with -Infinity: fully blocked rows. */
  maskBlockedRows?: number[];
  /** The "masked" value used in place of -Infinity above (e.g. torch.finfo(float32).min). */
  maskFill?: number;
  /** Key padding: as a bare Uint8Array or as a {data, shape} tensor. */
  padding?: 'u8' | 'tensor';
  /** Batches whose keys are all padded. */
  paddedBatches?: number[];
  returnWeights?: boolean;
  out?: 'poisoned';
  /**
   * Keys whose rows of k (every batch and kv head) are scaled by 40: their logits stand up to ~100 (base 2) above
   * the others', so a query's largest score comes long after its first keys.
   */
  hotKeys?: number[];
  /** Multiplies v (its magnitude decides whether the fused exp's terms suit it). */
  vScale?: number;
  /**
   * Keys whose rows of k are −Infinity (q is then made positive, so their logits are −Infinity: blocked keys
   * that no mask announces), and batches whose every key is.
   */
  negInfKeys?: number[];
  negInfBatches?: number[];
  softcap?: number;
  window?: { left?: number; right?: number };
  /** One sink logit per query head, drawn in [-1, 3). */
  sinks?: boolean;
  /** keyLengths, one per batch entry; the keys past each entry's length are NaN in k and v (never read). */
  keyLengths?: number[];
  /** For 3-D: pass kvHeads explicitly (default: only when Hkv !== H). For 4-D: also pass heads/kvHeads (redundant). */
  passHeads?: boolean;
}

function shapeOf(layout: Layout, B: number, H: number, S: number, D: number): number[] {
  switch (layout) {
    case 'bhsd':
      return [B, H, S, D];
    case 'bshd':
      return [B, S, H, D];
    case 'bhds':
      return [B, H, D, S];
    case '3d':
      return [B, S, H * D];
  }
}

/** Flat index of element (b, h, i, d) of a [B, H, S, D] tensor in the given layout. */
function elementIndex(
  layout: Layout,
  B: number,
  H: number,
  S: number,
  D: number,
  b: number,
  h: number,
  i: number,
  d: number,
): number {
  switch (layout) {
    case 'bhsd':
      return ((b * H + h) * S + i) * D + d;
    case 'bshd':
    case '3d':
      return ((b * S + i) * H + h) * D + d;
    case 'bhds':
      return ((b * H + h) * D + d) * S + i;
  }
}

/** Flat index of output element (b, h, i, d) in the given layout. */
function outIndex(s: AttnSpec, b: number, h: number, i: number, d: number): number {
  return elementIndex(s.layout, s.B, s.H, s.Sq, s.Dv ?? s.D, b, h, i, d);
}

function label(s: AttnSpec): string {
  const parts = [`${s.layout} B=${s.B} H=${s.H}`];
  if (s.Hkv !== undefined && s.Hkv !== s.H) parts.push(`Hkv=${s.Hkv}`);
  parts.push(`Sq=${s.Sq} Skv=${s.Skv} D=${s.D}`);
  if (s.Dv !== undefined && s.Dv !== s.D) parts.push(`Dv=${s.Dv}`);
  if (s.causal) parts.push('causal');
  if (s.scale !== undefined) parts.push(`scale=${s.scale}`);
  if (s.maskShape) parts.push(`mask[${s.maskShape}]`);
  if (s.maskBlockedRows) parts.push(`blockedRows=${s.maskBlockedRows}`);
  if (s.padding) parts.push(`padding=${s.padding}`);
  if (s.paddedBatches) parts.push(`paddedBatches=${s.paddedBatches}`);
  if (s.hotKeys) parts.push(`hotKeys=${s.hotKeys}`);
  if (s.vScale !== undefined) parts.push(`vScale=${s.vScale}`);
  if (s.negInfKeys) parts.push(`negInfKeys=${s.negInfKeys.length}`);
  if (s.negInfBatches) parts.push(`negInfBatches=${s.negInfBatches}`);
  if (s.softcap !== undefined) parts.push(`softcap=${s.softcap}`);
  if (s.window) parts.push(`window=${JSON.stringify(s.window)}`);
  if (s.sinks) parts.push('sinks');
  if (s.returnWeights) parts.push('returnWeights');
  if (s.out) parts.push(`out=${s.out}`);
  return parts.join(' ');
}

interface BuiltAttn {
  label: string;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  opts: AttentionOptions;
  outView?: Float32Array;
  ref: RefAttentionResult;
}

function build(rng: Rng, s: AttnSpec): BuiltAttn {
  const Hkv = s.Hkv ?? s.H;
  const Dv = s.Dv ?? s.D;
  const qShape = shapeOf(s.layout, s.B, s.H, s.Sq, s.D);
  const kShape = shapeOf(s.layout, s.B, Hkv, s.Skv, s.D);
  const vShape = shapeOf(s.layout, s.B, Hkv, s.Skv, Dv);
  // Logits of order ~±3 (q, k in [-1,1] scaled up a little): peaked but not one-hot softmax rows.
  const q = { data: guardedCopy(rng, randomFloat32(rng, numel(qShape)).map((x) => x * 2)), shape: qShape };
  const k = { data: guardedCopy(rng, randomFloat32(rng, numel(kShape)).map((x) => x * 2)), shape: kShape };
  const v = { data: guardedCopy(rng, randomFloat32(rng, numel(vShape))), shape: vShape };
  if (s.vScale !== undefined) for (let i = 0; i < v.data.length; i++) v.data[i] *= s.vScale;
  if (s.negInfKeys || s.negInfBatches) {
    for (let i = 0; i < q.data.length; i++) q.data[i] = Math.abs(q.data[i]) + 0.01;
    for (let b = 0; b < s.B; b++)
      for (let j = 0; j < s.Skv; j++) {
        if (!s.negInfBatches?.includes(b) && !s.negInfKeys?.includes(j)) continue;
        for (let h = 0; h < Hkv; h++)
          for (let d = 0; d < s.D; d++) k.data[elementIndex(s.layout, s.B, Hkv, s.Skv, s.D, b, h, j, d)] = -Infinity;
      }
  }
  for (const j of s.hotKeys ?? [])
    for (let b = 0; b < s.B; b++)
      for (let h = 0; h < Hkv; h++)
        for (let d = 0; d < s.D; d++) k.data[elementIndex(s.layout, s.B, Hkv, s.Skv, s.D, b, h, j, d)] *= 40;
  if (s.keyLengths)
    for (let b = 0; b < s.B; b++)
      for (let h = 0; h < Hkv; h++)
        for (let j = s.keyLengths[b]; j < s.Skv; j++) {
          for (let d = 0; d < s.D; d++) k.data[elementIndex(s.layout, s.B, Hkv, s.Skv, s.D, b, h, j, d)] = NaN;
          for (let d = 0; d < Dv; d++) v.data[elementIndex(s.layout, s.B, Hkv, s.Skv, Dv, b, h, j, d)] = NaN;
        }
  const opts: AttentionOptions = {};
  if (s.layout === '3d') {
    opts.heads = s.H;
    if (Hkv !== s.H || s.passHeads) opts.kvHeads = Hkv;
  } else {
    opts.layout = s.layout;
    if (s.passHeads) {
      opts.heads = s.H;
      opts.kvHeads = Hkv;
    }
  }
  if (s.causal !== undefined) opts.causal = s.causal;
  if (s.scale !== undefined) opts.scale = s.scale;
  let mask: Float32Array | undefined;
  if (s.maskShape) {
    const p = s.maskInfProb ?? 0.15;
    const fill = s.maskFill ?? -Infinity;
    mask = randomFloat32(rng, numel(s.maskShape)).map((x) => (rng() < p ? fill : 2 * x));
    if (s.maskBlockedRows) {
      const cols = s.maskShape[s.maskShape.length - 1];
      const rows = s.maskShape.length >= 2 ? s.maskShape[s.maskShape.length - 2] : 1;
      for (let r = 0; r < mask.length / cols; r++) {
        if (s.maskBlockedRows.includes(r % rows)) mask.fill(fill, r * cols, (r + 1) * cols);
      }
    }
    opts.mask = { data: guardedCopy(rng, mask), shape: s.maskShape };
  }
  let pad: Uint8Array | undefined;
  if (s.padding) {
    pad = new Uint8Array(s.B * s.Skv);
    for (let i = 0; i < pad.length; i++) pad[i] = rng() < 0.25 ? 1 + Math.floor(rng() * 255) : 0;
    for (const b of s.paddedBatches ?? []) pad.fill(1, b * s.Skv, (b + 1) * s.Skv);
    opts.keyPaddingMask = s.padding === 'u8' ? pad : { data: pad, shape: [s.B, s.Skv] };
  }
  if (s.returnWeights) opts.returnWeights = true;
  if (s.softcap !== undefined) opts.softcap = s.softcap;
  if (s.window) opts.window = s.window;
  const sinks = s.sinks ? randomFloat32(rng, s.H).map((x) => 2 * x + 1) : undefined;
  if (sinks) opts.sinks = guardedCopy(rng, sinks);
  // As an Int32Array or as plain numbers, both accepted.
  if (s.keyLengths) opts.keyLengths = rng() < 0.5 ? Int32Array.from(s.keyLengths) : [...s.keyLengths];
  const built: BuiltAttn = {
    label: label(s),
    q,
    k,
    v,
    opts,
    ref: refAttention(q.data, qShape, k.data, kShape, v.data, vShape, {
      layout: s.layout === '3d' ? undefined : s.layout,
      heads: s.H,
      kvHeads: Hkv,
      causal: s.causal,
      mask,
      maskShape: s.maskShape,
      keyPaddingMask: pad,
      scale: s.scale,
      softcap: s.softcap,
      window: s.window,
      sinks,
      keyLengths: s.keyLengths,
    }),
  };
  if (s.out === 'poisoned') {
    built.outView = guardedOut(rng, numel(built.ref.output.shape));
    opts.out = { data: built.outView, shape: built.ref.output.shape };
  }
  return built;
}

/** Rows (b, h, i) whose reference weights are all zero (every key blocked). */
function blockedRows(s: AttnSpec, ref: RefAttentionResult): [number, number, number][] {
  const rows: [number, number, number][] = [];
  const w = ref.weights.data;
  for (let b = 0; b < s.B; b++)
    for (let h = 0; h < s.H; h++)
      for (let i = 0; i < s.Sq; i++) {
        const base = ((b * s.H + h) * s.Sq + i) * s.Skv;
        let any = false;
        for (let j = 0; j < s.Skv; j++) if (w[base + j] !== 0) any = true;
        if (!any) rows.push([b, h, i]);
      }
  return rows;
}

/** Checks a result (Tensor, or {output, weights}) against the built case's reference. */
function checkResult(s: AttnSpec, bt: BuiltAttn, result: Tensor | { output: Tensor; weights: Tensor }): Tensor {
  const ctx = { seed: SEED, label: `attention ${bt.label}`, shape: bt.ref.output.shape };
  let output: Tensor;
  if (s.returnWeights) {
    const r = result as { output: Tensor; weights: Tensor };
    output = r.output;
    const wctx = { ...ctx, label: `${ctx.label} (weights)`, shape: bt.ref.weights.shape };
    expectShape(r.weights.shape, bt.ref.weights.shape, wctx);
    expectClose(r.weights.data, bt.ref.weights.data, TOL, wctx);
  } else {
    output = result as Tensor;
    expect((result as { weights?: unknown }).weights).toBeUndefined();
  }
  expectShape(output.shape, bt.ref.output.shape, ctx);
  expectClose(output.data, bt.ref.output.data, TOL, ctx);
  if (bt.opts.out) {
    expect(output).toBe(bt.opts.out);
    expectGuardsIntact(bt.outView!, ctx);
  }
  // Fully blocked rows are exactly zero (not NaN, not garbage), weights included.
  const Dv = s.Dv ?? s.D;
  for (const [b, h, i] of blockedRows(s, bt.ref)) {
    for (let d = 0; d < Dv; d++) {
      const val = output.data[outIndex(s, b, h, i, d)];
      if (val !== 0) {
        throw new Error(`[seed ${SEED}] ${ctx.label}: fully blocked row (b=${b}, h=${h}, i=${i}) has output ${val} at d=${d}, expected 0`);
      }
    }
    if (s.returnWeights) {
      const w = (result as { weights: Tensor }).weights.data;
      const base = ((b * s.H + h) * s.Sq + i) * s.Skv;
      for (let j = 0; j < s.Skv; j++) {
        if (w[base + j] !== 0) {
          throw new Error(`[seed ${SEED}] ${ctx.label}: fully blocked row (b=${b}, h=${h}, i=${i}) has weight ${w[base + j]} at j=${j}`);
        }
      }
    }
  }
  return output;
}

function runCase(s: AttnSpec, rng: Rng): { bt: BuiltAttn; output: Tensor } {
  const bt = build(rng, s);
  const result = attention(bt.q, bt.k, bt.v, bt.opts);
  return { bt, output: checkResult(s, bt, result) };
}

function caseTest(name: string, makeSpecs: (rng: Rng) => AttnSpec[]): void {
  test(name, () => {
    const rng = rngFor(SEED, name);
    const specs = makeSpecs(rng);
    expect(specs.length).toBeGreaterThan(0);
    for (const s of specs) runCase(s, rng);
  });
}

/** A size from SIZES no larger than max. */
function size(rng: Rng, max = 197): number {
  return pick(rng, SIZES.filter((x) => x <= max));
}

describe(`attention vs float64 reference (seed ${SEED})`, () => {
  caseTest('every layout (bhsd, bshd, bhds, 3-D packed), square', (rng) =>
    LAYOUTS.flatMap((layout) => [
      { layout, B: 2, H: 3, Sq: 17, Skv: 17, D: 63 },
      { layout, B: 1, H: 2, Sq: size(rng, 65), Skv: size(rng, 65), D: size(rng) },
      { layout, B: 1, H: 1, Sq: 1, Skv: 1, D: 1 },
    ]),
  );

  caseTest('seqQ != seqKV (cross attention, decode step)', (rng) =>
    LAYOUTS.flatMap((layout) => [
      { layout, B: 2, H: 2, Sq: 3, Skv: 65, D: 17 },
      { layout, B: 1, H: 3, Sq: 65, Skv: 3, D: size(rng, 65) },
      { layout, B: 2, H: 2, Sq: 1, Skv: 197, D: 63 },
    ]),
  );

  caseTest('headDimV != headDim', (rng) =>
    LAYOUTS.flatMap((layout) => [
      { layout, B: 2, H: 2, Sq: 17, Skv: 63, D: 17, Dv: 65 },
      { layout, B: 1, H: 3, Sq: size(rng, 65), Skv: 17, D: 65, Dv: 3 },
      { layout, B: 1, H: 1, Sq: 3, Skv: 5, D: 1, Dv: 197 },
    ]),
  );

  caseTest('grouped-query (GQA) and multi-query (MQA) heads', (rng) =>
    LAYOUTS.flatMap((layout) => [
      { layout, B: 2, H: 6, Hkv: 2, Sq: 17, Skv: 17, D: 17 },
      { layout, B: 1, H: 4, Hkv: 1, Sq: size(rng, 65), Skv: size(rng, 65), D: 63, Dv: 17 },
      { layout, B: 1, H: 6, Hkv: 3, Sq: 3, Skv: 65, D: 65, causal: true, passHeads: true },
    ]),
  );

  caseTest('3-D packed input with heads only, kvHeads omitted / equal / smaller', () => [
    { layout: '3d', B: 2, H: 4, Sq: 17, Skv: 17, D: 16 },
    { layout: '3d', B: 2, H: 4, Hkv: 4, Sq: 17, Skv: 17, D: 16, passHeads: true },
    { layout: '3d', B: 1, H: 8, Hkv: 2, Sq: 63, Skv: 65, D: 8, Dv: 4 },
    { layout: '3d', B: 3, H: 5, Hkv: 1, Sq: 1, Skv: 63, D: 13 },
  ]);

  caseTest('causal: seqQ == seqKV, seqQ < seqKV, seqQ > seqKV (first rows blocked)', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 2, Sq: 17, Skv: 17, D: size(rng, 65), causal: true },
      { layout, B: 1, H: 3, Sq: 3, Skv: 17, D: 17, causal: true, returnWeights: true },
      { layout, B: 1, H: 2, Sq: 1, Skv: 65, D: 17, causal: true },
      { layout, B: 2, H: 2, Sq: 17, Skv: 3, D: 17, causal: true, returnWeights: true, out: 'poisoned' },
      { layout, B: 1, H: 2, Sq: 65, Skv: 63, D: 3, Dv: 17, causal: true },
      { layout, B: 1, H: 1, Sq: 197, Skv: 197, D: 65, causal: true },
      { layout, B: 1, H: 2, Sq: 3, Skv: 3, D: 5, causal: false },
    ]),
  );

  // With unit-stride rows close together, v's head dim in whole 32-column
  // slivers and every key in one 768-key block, the tiled path of the AVX-512
  // table reads K and V where they lie (native/kernels/attention.cc,
  // readsKVInPlace; test/isa-paths.test.ts runs the others); one query tile
  // per task. (A 3-D [B, S, H·D] input with H·D = 3 · 64 spans 197 · 768 bytes
  // per head, well inside the limit; D = 400 takes two depth blocks.)
  caseTest('K and V read in place: whole v slivers, keys in one block', (rng) =>
    (['bhsd', 'bshd', '3d'] as Layout[]).flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 3, Sq: 197, Skv: 197, D: 64, out: 'poisoned' },
      { layout, B: 1, H: 4, Hkv: 2, Sq: size(rng), Skv: 65, D: 17, Dv: 32, causal: true, maskShape: [4, 1, 65] },
      { layout, B: 2, H: 2, Sq: 63, Skv: 768, D: 64, Dv: 96, padding: 'tensor', paddedBatches: [1] },
      { layout, B: 1, H: 2, Sq: 100, Skv: 197, D: 400, Dv: 64, returnWeights: true, out: 'poisoned' },
      { layout, B: 1, H: 6, Hkv: 1, Sq: 17, Skv: 1, D: 3, Dv: 64, causal: true, maskShape: [1, 6, 17, 1] },
    ]),
  );

  // With no mask, padding or causal rule and a head dim within one depth
  // block, the AVX-512 table applies the softmax's exp inside the Q·Kᵀ
  // micro-kernel, against a shift per query taken from its first 12 keys
  // (native/kernels/attention.cc, scoresExp2Block). A later score more than
  // 56 (base 2) above the first tile's max sends its tile through raiseShift,
  // which rescales the block's earlier rows, the running sum and, past the
  // first 768-key block, the accumulator. Large scales and hot keys far from
  // the first tile (in later key blocks too) make that happen; test/isa-paths
  // runs such cases on the tables without the fused kernel too.
  caseTest('exp in the scores kernel: shifts raised after the first tile', () => [
    { layout: 'bhsd', B: 1, H: 3, Sq: 197, Skv: 197, D: 64, scale: 5, out: 'poisoned' },
    { layout: 'bshd', B: 2, H: 2, Sq: 65, Skv: 63, D: 17, scale: 12, returnWeights: true },
    { layout: 'bhds', B: 1, H: 2, Sq: 100, Skv: 197, D: 63, scale: 6, out: 'poisoned' },
    { layout: '3d', B: 1, H: 2, Sq: 197, Skv: 197, D: 64, hotKeys: [13, 150, 196] },
    { layout: 'bhsd', B: 1, H: 2, Sq: 100, Skv: 1700, D: 32, hotKeys: [900, 1650], out: 'poisoned' },
    { layout: 'bshd', B: 1, H: 1, Sq: 17, Skv: 2000, D: 64, hotKeys: [1000, 1999], returnWeights: true },
  ]);

  // Under the causal rule, the keys that every query of a 96-query tile sees (in whole 12-key slivers) take
  // the fused exp; the rest, along the diagonal, take the column passes, scaled to the fused terms' 2^-48.
  // Hot keys on the diagonal raise a shift after a tile's fused keys (whose terms in the same key block are
  // then rescaled); seqQ != seqKV moves the diagonal (bottom-right), and with seqQ > seqKV the first tile
  // sees no key that all its queries see.
  caseTest('exp in the scores kernel under the causal rule: fused below the diagonal', () => [
    { layout: 'bhsd', B: 1, H: 2, Sq: 300, Skv: 300, D: 64, causal: true, hotKeys: [150, 250, 299], out: 'poisoned' },
    { layout: 'bshd', B: 1, H: 2, Sq: 1000, Skv: 1000, D: 64, causal: true, scale: 6 },
    { layout: '3d', B: 2, H: 2, Sq: 197, Skv: 197, D: 64, causal: true, hotKeys: [100, 196], returnWeights: true },
    { layout: 'bhds', B: 1, H: 2, Sq: 100, Skv: 1700, D: 32, causal: true, hotKeys: [700, 1650, 1699], out: 'poisoned' },
    { layout: 'bhsd', B: 1, H: 1, Sq: 300, Skv: 200, D: 64, causal: true, hotKeys: [5, 150], returnWeights: true },
    { layout: 'bshd', B: 1, H: 2, Sq: 197, Skv: 197, D: 17, causal: true, scale: -3 },
  ]);

  // The fused exp's other ways out: logits of −Infinity that no mask announces (the first tile of a
  // query, later tiles, later key blocks, every key of a batch: zero rows), and v so small or so large
  // that the terms' scale (2^-48 to 2^8 where a softmax's is 1) would push P·V's sums out of the float
  // range, which sends those heads to the column passes (kScoresExp2MinV).
  caseTest('exp in the scores kernel: -Infinity logits and extreme v', () => {
    const first = Array.from({ length: 12 }, (_, j) => j);
    return [
      { layout: 'bhsd', B: 2, H: 2, Sq: 197, Skv: 197, D: 64, negInfKeys: [...first, 100, 196], negInfBatches: [1] },
      { layout: 'bshd', B: 1, H: 2, Sq: 65, Skv: 1700, D: 16, negInfKeys: [...first, 800, 801, 1699], returnWeights: true },
      { layout: '3d', B: 1, H: 2, Sq: 33, Skv: 63, D: 1, negInfKeys: first.slice(0, 5) },
      { layout: 'bhsd', B: 1, H: 2, Sq: 100, Skv: 197, D: 64, vScale: 1e-30, out: 'poisoned' },
      { layout: 'bhds', B: 1, H: 2, Sq: 100, Skv: 197, D: 64, vScale: 1e-36 },
      { layout: 'bshd', B: 1, H: 2, Sq: 100, Skv: 197, D: 64, vScale: 1e34, scale: 2, returnWeights: true },
    ];
  });

  // Long key ranges exercise the kernel's internal splits: online-softmax key
  // blocks (768 keys) on the tiled path, and a decode row split across threads
  // (parts of >= 512 keys) merged from partial states.
  caseTest('long key ranges: key blocks, split decode rows', () => [
    { layout: 'bhsd', B: 1, H: 1, Sq: 1, Skv: 3000, D: 64, returnWeights: true },
    { layout: 'bshd', B: 1, H: 1, Sq: 3, Skv: 2500, D: 17, causal: true, padding: 'u8', out: 'poisoned' },
    { layout: 'bhsd', B: 1, H: 1, Sq: 2, Skv: 2000, D: 8, maskShape: [1, 2000] },
    { layout: 'bhsd', B: 1, H: 2, Sq: 100, Skv: 1700, D: 32, causal: true },
    { layout: 'bshd', B: 2, H: 1, Sq: 65, Skv: 1600, D: 16, padding: 'tensor', returnWeights: true },
    { layout: 'bhsd', B: 1, H: 1, Sq: 300, Skv: 4097, D: 8, causal: true, maskShape: [1, 4097] },
    { layout: 'bhds', B: 1, H: 1, Sq: 200, Skv: 4097, D: 4, Dv: 5 },
  ]);

  test('causal with seqQ > seqKV: the first seqQ - seqKV rows are exactly zero', () => {
    const rng = rngFor(SEED, 'causal first rows');
    for (const layout of LAYOUTS) {
      const s: AttnSpec = { layout, B: 2, H: 2, Sq: 17, Skv: 3, D: 17, causal: true, returnWeights: true, out: 'poisoned' };
      const { output } = runCase(s, rng);
      for (let b = 0; b < 2; b++)
        for (let h = 0; h < 2; h++)
          for (let i = 0; i < 14; i++)
            for (let d = 0; d < 17; d++) expect(output.data[outIndex(s, b, h, i, d)]).toBe(0);
      // row 14 sees exactly key 0: its output is v[b, h, 0, :] exactly (weight 1)
      expect(output.data[outIndex(s, 0, 0, 14, 0)]).not.toBe(0);
    }
  });

  caseTest('mask [Sq,Skv], [B,1,Sq,Skv], [1,H,1,Skv], [B,H,Sq,Skv], [Skv] with -Infinity entries', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => {
      const B = 2, H = 3;
      const Sq = size(rng, 65), Skv = size(rng, 65), D = size(rng, 65);
      return [
        { layout, B, H, Sq, Skv, D, maskShape: [Sq, Skv] },
        { layout, B, H, Sq, Skv, D, maskShape: [B, 1, Sq, Skv], returnWeights: true },
        { layout, B, H, Sq, Skv, D, maskShape: [1, H, 1, Skv] },
        { layout, B, H, Sq, Skv, D, maskShape: [B, H, Sq, Skv], maskInfProb: 0.5 },
        { layout, B, H, Sq, Skv, D, maskShape: [Skv], causal: true },
        { layout, B, H: 6, Hkv: 2, Sq: 17, Skv: 63, D: 17, maskShape: [1, 6, 1, 63], returnWeights: true },
        { layout, B, H, Sq: 17, Skv: 17, D: 17, maskShape: [B, 1, 17, 17], causal: true, maskInfProb: 0.3 },
      ];
    }),
  );

  caseTest('keyPaddingMask as Uint8Array and as {data, shape}', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 2, Sq: 17, Skv: 63, D: 17, padding: 'u8' },
      { layout, B: 3, H: 2, Sq: size(rng, 65), Skv: 17, D: 65, padding: 'tensor', returnWeights: true },
      { layout, B: 2, H: 4, Hkv: 2, Sq: 17, Skv: 17, D: 17, padding: 'u8', causal: true, maskShape: [17, 17] },
    ]),
  );

  caseTest('fully blocked rows give zeros, not NaN (mask rows, padded batches, combined)', () =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      // mask rows of -Infinity (broadcast over batch and heads)
      { layout, B: 2, H: 2, Sq: 17, Skv: 17, D: 17, maskShape: [17, 17], maskBlockedRows: [0, 5, 16], returnWeights: true, out: 'poisoned' },
      // a per-batch mask row of -Infinity
      { layout, B: 2, H: 3, Sq: 3, Skv: 65, D: 17, maskShape: [2, 1, 3, 65], maskBlockedRows: [1], returnWeights: true },
      // every key of batch 1 padded
      { layout, B: 2, H: 2, Sq: 17, Skv: 3, D: 17, padding: 'u8', paddedBatches: [1], returnWeights: true, out: 'poisoned' },
      // every key blocked everywhere
      { layout, B: 1, H: 2, Sq: 3, Skv: 17, D: 17, padding: 'tensor', paddedBatches: [0], out: 'poisoned' },
      // causal + padding + mask together
      { layout, B: 2, H: 2, Sq: 17, Skv: 17, D: 17, causal: true, padding: 'u8', maskShape: [1, 2, 17, 17], maskInfProb: 0.4, returnWeights: true },
    ]),
  );

  // PyTorch-converted models often mask with torch.finfo(float32).min, not -Infinity.
  // Such keys get no weight, but a row masked entirely with it is uniform over its
  // keys (as in PyTorch), not zero; the kernel's base-2 logits must not overflow it.
  caseTest('a finite mask value (-FLT_MAX) blocks keys, and rows filled with it are uniform', () =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 2, Sq: 17, Skv: 65, D: 17, maskShape: [17, 65], maskFill: -3.4028234663852886e38, maskInfProb: 0.3, maskBlockedRows: [0, 16], returnWeights: true },
      { layout, B: 1, H: 2, Sq: 65, Skv: 197, D: 63, maskShape: [1, 1, 65, 197], maskFill: -3.4028234663852886e38, maskBlockedRows: [3] },
      // several key blocks (online rescaling), and the decode path (seqQ <= 4)
      { layout, B: 1, H: 2, Sq: 17, Skv: 1000, D: 17, maskShape: [17, 1000], maskFill: -3.4028234663852886e38, maskInfProb: 0.3, maskBlockedRows: [2] },
      { layout, B: 2, H: 2, Sq: 3, Skv: 65, D: 17, maskShape: [3, 65], maskFill: -3.4028234663852886e38, maskBlockedRows: [1], returnWeights: true },
    ]),
  );

  caseTest('custom scale (incl. 0 and negative)', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 1, H: 2, Sq: 17, Skv: 63, D: 17, scale: 0.3 },
      { layout, B: 2, H: 2, Sq: size(rng, 65), Skv: 17, D: 65, scale: -0.5, returnWeights: true },
      { layout, B: 1, H: 2, Sq: 17, Skv: 17, D: 17, scale: 0, returnWeights: true },
      { layout, B: 1, H: 1, Sq: 3, Skv: 65, D: 63, scale: 1, causal: true },
      // no mask and no weights: the fused exp's path, with a shift that is
      // the largest of negative (and zero) multiples of the products
      { layout, B: 1, H: 2, Sq: 100, Skv: 900, D: 64, scale: -0.7 },
      { layout, B: 1, H: 2, Sq: 33, Skv: 65, D: 64, scale: 0 },
    ]),
  );

  caseTest('returnWeights: weights [B,H,Sq,Skv] match', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 3, Sq: 17, Skv: 65, D: 17, returnWeights: true },
      { layout, B: 1, H: 4, Hkv: 2, Sq: size(rng, 65), Skv: size(rng, 65), D: 63, Dv: 3, returnWeights: true, out: 'poisoned' },
    ]),
  );

  caseTest('out provided, poisoned with NaN', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 2, Sq: size(rng, 65), Skv: size(rng, 65), D: size(rng, 65), out: 'poisoned' },
      { layout, B: 1, H: 3, Sq: 1, Skv: 197, D: 17, Dv: 65, out: 'poisoned', causal: true },
    ]),
  );

  caseTest('larger: seq 197 and seqKV 1000', () => [
    { layout: 'bhsd', B: 1, H: 2, Sq: 197, Skv: 197, D: 65 },
    { layout: 'bhds', B: 1, H: 2, Sq: 197, Skv: 197, D: 63, maskShape: [197, 197] },
    { layout: 'bshd', B: 1, H: 2, Sq: 17, Skv: 1000, D: 63, causal: true, returnWeights: true },
    { layout: '3d', B: 1, H: 4, Hkv: 2, Sq: 3, Skv: 1000, D: 16, padding: 'u8' },
  ]);

  caseTest('random configurations', (rng) =>
    Array.from({ length: 12 }, (): AttnSpec => {
      const layout = pick(rng, LAYOUTS);
      const Hkv = pick(rng, [1, 2, 3]);
      const H = Hkv * pick(rng, [1, 2, 3]);
      const B = pick(rng, [1, 2]);
      const Sq = size(rng, 65), Skv = size(rng, 65), D = size(rng, 65);
      const maskShape = pick(rng, [undefined, [Sq, Skv], [B, 1, Sq, Skv], [1, H, 1, Skv], [B, H, Sq, Skv]]);
      return {
        layout, B, H, Hkv, Sq, Skv, D,
        Dv: pick(rng, [D, size(rng, 65)]),
        causal: rng() < 0.5,
        scale: pick(rng, [undefined, 0.25, -1]),
        maskShape,
        padding: pick(rng, [undefined, 'u8', 'tensor'] as const),
        returnWeights: rng() < 0.5,
        out: pick(rng, [undefined, 'poisoned'] as const),
      };
    }),
  );
});

describe(`attention: softcap, sliding window, sinks (seed ${SEED})`, () => {
  caseTest('each alone, on the tiled and the decode path, every layout', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 2, H: 4, Hkv: 2, Sq: size(rng), Skv: size(rng), D: 17, softcap: 2.5 },
      { layout, B: 1, H: 4, Hkv: 1, Sq: 3, Skv: 197, D: 63, softcap: 30 },
      { layout, B: 2, H: 2, Sq: 65, Skv: 65, D: 16, window: { left: pick(rng, [0, 1, 17, 300]) }, causal: true },
      { layout, B: 1, H: 4, Hkv: 2, Sq: 1, Skv: 1000, D: 64, window: { left: 63 }, causal: true },
      { layout, B: 1, H: 2, Sq: 63, Skv: 197, D: 8, window: { left: 5, right: 3 } },
      { layout, B: 1, H: 2, Sq: 17, Skv: 17, D: 8, window: { right: 0 } },
      { layout, B: 2, H: 3, Sq: size(rng, 65), Skv: size(rng), D: 17, sinks: true },
      { layout, B: 1, H: 8, Hkv: 2, Sq: 1, Skv: 197, D: 32, sinks: true },
    ]),
  );

  caseTest('together, with masks, padding, GQA, returned weights and poisoned out', (rng) => [
    { layout: 'bhsd', B: 2, H: 4, Hkv: 2, Sq: 65, Skv: 197, D: 32, softcap: 5, window: { left: 40 }, causal: true, sinks: true, returnWeights: true, out: 'poisoned' },
    { layout: 'bshd', B: 2, H: 4, Sq: 17, Skv: 63, D: 17, softcap: 3, window: { left: 7, right: 7 }, sinks: true, maskShape: [17, 63], padding: 'u8' },
    { layout: '3d', B: 1, H: 6, Hkv: 3, Sq: 4, Skv: 1000, D: 64, softcap: 20, window: { left: 500 }, causal: true, sinks: true, padding: 'tensor', returnWeights: true },
    { layout: 'bhds', B: 1, H: 2, Sq: 33, Skv: 33, D: 9, Dv: 5, window: { left: 2 }, causal: true, sinks: true, maskShape: [1, 2, 33, 33] },
    { layout: 'bhsd', B: 1, H: 2, Sq: 1000, Skv: 1000, D: 64, window: { left: size(rng, 1000) }, causal: true },
    { layout: 'bhsd', B: 1, H: 2, Sq: 197, Skv: 1601, D: 64, softcap: 50, window: { left: 900 }, causal: true, sinks: true, out: 'poisoned' },
    { layout: 'bhsd', B: 1, H: 2, Sq: 3, Skv: 17, D: 8, window: { left: 2000, right: 2000 }, sinks: true },
  ]);

  test('a window that leaves a query no key gives zeros; a huge sink takes all the weight', () => {
    const q = { data: new Float32Array(2 * 4 * 3).fill(0.5), shape: [1, 2, 4, 3] };
    const kv = { data: new Float32Array(2 * 6 * 3).fill(1), shape: [1, 2, 6, 3] };
    // Query 0 sits at key position 0 + 6 - 4 = 2: a window of 0 either side sees key 2 only.
    const narrow = attention(q, kv, kv, { window: { left: 0, right: 0 }, returnWeights: true });
    expect(Array.from(narrow.weights.data.subarray(0, 6))).toEqual([0, 0, 1, 0, 0, 0]);
    const drowned = attention(q, kv, kv, { sinks: new Float32Array([1e30, 0]) });
    expect(Array.from(drowned.data.subarray(0, 12)).every((x) => x === 0)).toBe(true);
    // Head 1's sink is 0: its six equal keys (logit 1.5/√3) keep 6e^s / (6e^s + 1) of the weight, on v = 1.
    const e = 6 * Math.exp(1.5 / Math.sqrt(3));
    expect(drowned.data[12]).toBeCloseTo(e / (e + 1), 6);
  });
});

describe(`attention: keyLengths, a ragged batch (seed ${SEED})`, () => {
  // Entry 0 has every key, entry 1 none, the rest a random count.
  const lengths = (rng: Rng, B: number, Skv: number) =>
    Array.from({ length: B }, (_, b) => (b === 0 ? Skv : b === 1 ? 0 : Math.floor(rng() * (Skv + 1))));
  caseTest('on the tiled and the decode path, every layout, with causal, windows, sinks and weights', (rng) =>
    LAYOUTS.flatMap((layout): AttnSpec[] => [
      { layout, B: 3, H: 4, Hkv: 2, Sq: 1, Skv: 197, D: 32, causal: true, keyLengths: lengths(rng, 3, 197) },
      { layout, B: 3, H: 2, Sq: 3, Skv: 65, D: 17, window: { left: 9 }, causal: true, sinks: true, keyLengths: lengths(rng, 3, 65) },
      { layout, B: 3, H: 2, Sq: 65, Skv: 197, D: 16, causal: true, returnWeights: true, out: 'poisoned', keyLengths: lengths(rng, 3, 197) },
      { layout, B: 4, H: 4, Hkv: 1, Sq: 17, Skv: 1000, D: 64, softcap: 5, padding: 'u8', maskShape: [17, 1000], keyLengths: lengths(rng, 4, 1000) },
      { layout, B: 3, H: 2, Sq: 4, Skv: 1601, D: 64, Dv: 24, returnWeights: true, keyLengths: lengths(rng, 3, 1601) },
    ]),
  );

  test("a NaN sink gives NaN weights at an entry's keys and 0 past its length, on both paths", () => {
    const rng = rngFor(SEED, 'keyLengths NaN sink');
    for (const Sq of [1, 9]) {
      const q = tensor(randomFloat32(rng, 2 * Sq * 4), [2, 1, Sq, 4]);
      const kv = tensor(randomFloat32(rng, 2 * 5 * 4), [2, 1, 5, 4]);
      const { weights } = attention(q, kv, kv, { keyLengths: [3, 5], sinks: new Float32Array([NaN]), returnWeights: true });
      const entry0 = Array.from(weights.data.subarray(0, 5));
      expect(entry0.slice(0, 3).every((w) => Number.isNaN(w))).toBe(true);
      expect(entry0.slice(3)).toEqual([0, 0]);
    }
  });

  test('one call over a ragged batch equals one call per entry over its own keys, sync and async', async () => {
    const rng = rngFor(SEED, 'keyLengths per entry');
    const B = 3, H = 4, Hkv = 2, Sq = 2, Skv = 70, D = 16;
    const q = tensor(randomFloat32(rng, B * H * Sq * D), [B, H, Sq, D]);
    const k = tensor(randomFloat32(rng, B * Hkv * Skv * D), [B, Hkv, Skv, D]);
    const v = tensor(randomFloat32(rng, B * Hkv * Skv * D), [B, Hkv, Skv, D]);
    const keyLengths = [70, 33, 5];
    const options = { causal: true, window: { left: 20 } };
    const whole = attention(q, k, v, { ...options, keyLengths });
    expect(Array.from((await attentionAsync(q, k, v, { ...options, keyLengths })).data)).toEqual(Array.from(whole.data));
    for (let b = 0; b < B; b++) {
      const L = keyLengths[b];
      const firstKeys = (x: Tensor) => {
        const t = new Float32Array(Hkv * L * D);
        for (let h = 0; h < Hkv; h++) t.set(x.data.subarray(((b * Hkv + h) * Skv) * D, ((b * Hkv + h) * Skv + L) * D), h * L * D);
        return tensor(t, [1, Hkv, L, D]);
      };
      const one = attention(tensor(q.data.slice(b * H * Sq * D, (b + 1) * H * Sq * D), [1, H, Sq, D]), firstKeys(k), firstKeys(v), options);
      expectClose(whole.data.subarray(b * H * Sq * D, (b + 1) * H * Sq * D), one.data, TOL, { seed: SEED, label: `entry ${b}`, shape: [1, H, Sq, D] });
    }
  });
});

describe(`attention zero-size dims (seed ${SEED})`, () => {
  test.each(LAYOUTS)('%s: seqQ = 0, headDimV = 0, batch = 0 give empty outputs', (layout) => {
    const rng = rngFor(SEED, `empty ${layout}`);
    for (const s of [
      { layout, B: 1, H: 2, Sq: 0, Skv: 5, D: 3, returnWeights: true },
      { layout, B: 1, H: 2, Sq: 4, Skv: 5, D: 3, Dv: 0, out: 'poisoned' },
      { layout, B: 0, H: 2, Sq: 4, Skv: 5, D: 3, causal: true },
    ] as AttnSpec[]) {
      const { output, bt } = runCase(s, rng);
      expect(output.data.length).toBe(0);
      expect(output.shape).toEqual(bt.ref.output.shape);
    }
  });

  test.each(LAYOUTS)('%s: seqKV = 0 gives zero rows (no keys to attend)', (layout) => {
    const rng = rngFor(SEED, `no keys ${layout}`);
    const s: AttnSpec = { layout, B: 2, H: 2, Sq: 3, Skv: 0, D: 4, Dv: 5, out: 'poisoned' };
    const { output } = runCase(s, rng);
    expect(output.data.length).toBe(2 * 2 * 3 * 5);
    expect(output.data.every((x) => x === 0)).toBe(true);
  });

  test.each(LAYOUTS)('%s: headDim = 0 gives the mean of v', (layout) => {
    const rng = rngFor(SEED, `D=0 ${layout}`);
    runCase({ layout, B: 1, H: 2, Sq: 3, Skv: 5, D: 0, Dv: 4, scale: 1, out: 'poisoned', returnWeights: true }, rng);
    // default scale (1/√0 is not used: every logit is 0 whatever the scale)
    const { bt } = runCase({ layout, B: 2, H: 2, Sq: 3, Skv: 5, D: 0, Dv: 4, out: 'poisoned', returnWeights: true }, rng);
    expect(bt.ref.weights.data.every((w) => Math.abs(w - 0.2) < 1e-12)).toBe(true);
  });
});

describe(`attentionAsync equals attention bit-for-bit (seed ${SEED})`, () => {
  test('several cases, concurrently', async () => {
    const rng = rngFor(SEED, 'async');
    const specs: AttnSpec[] = [
      { layout: 'bhsd', B: 2, H: 3, Sq: 65, Skv: 63, D: 17, causal: true },
      { layout: 'bshd', B: 1, H: 4, Hkv: 2, Sq: 17, Skv: 197, D: 63, maskShape: [17, 197], returnWeights: true },
      { layout: 'bhds', B: 2, H: 2, Sq: 17, Skv: 17, D: 65, Dv: 3, padding: 'tensor', out: 'poisoned' },
      { layout: '3d', B: 2, H: 6, Hkv: 3, Sq: 3, Skv: 65, D: 8, scale: 0.7, padding: 'u8', paddedBatches: [1], returnWeights: true },
    ];
    const pairs = specs.map((s) => {
      const caseSeed = Math.floor(rng() * 2 ** 32);
      return { s, a: build(rngFor(caseSeed, 'x'), s), b: build(rngFor(caseSeed, 'x'), s) };
    });
    const asyncResults = await Promise.all(pairs.map((p) => attentionAsync(p.a.q, p.a.k, p.a.v, p.a.opts)));
    pairs.forEach((p, i) => {
      const ctx = { seed: SEED, label: `attentionAsync ${p.a.label}` };
      const syncResult = attention(p.b.q, p.b.k, p.b.v, p.b.opts);
      const ar = asyncResults[i] as Tensor | { output: Tensor; weights: Tensor };
      const sr = syncResult as Tensor | { output: Tensor; weights: Tensor };
      const ao = 'output' in ar ? ar.output : ar;
      const so = 'output' in sr ? sr.output : sr;
      expect(ao.shape).toEqual(so.shape);
      expectBitEqual(ao.data, so.data, ctx);
      if ('weights' in ar && 'weights' in sr) expectBitEqual(ar.weights.data, sr.weights.data, { ...ctx, label: `${ctx.label} weights` });
      else expect(p.s.returnWeights).toBeFalsy();
      checkResult(p.s, p.a, ar);
    });
  });
});

describe('attention result types follow returnWeights', () => {
  // ts-jest type-checks this file: with overloads that typed every call
  // without a literal `returnWeights: true` as a Tensor, the assignments
  // below marked @ts-expect-error compiled, and the directives fail the build.
  test('returnWeights from a boolean variable gives the union, sync and async', async () => {
    const q = { data: new Float32Array(12).fill(0.5), shape: [1, 1, 3, 4] };
    const flags: boolean[] = [true, false];
    for (const want of flags) {
      const r = attention(q, q, q, { returnWeights: want });
      // @ts-expect-error: r may be { output, weights }, not a Tensor
      const asTensor: Tensor = r;
      const a = await attentionAsync(q, q, q, { returnWeights: want });
      // @ts-expect-error: a may be { output, weights }, not a Tensor
      const asyncTensor: Tensor = a;
      expect('weights' in asTensor).toBe(want);
      expect('weights' in asyncTensor).toBe(want);
      const output = 'output' in r ? r.output : r;
      expect(output.shape).toEqual([1, 1, 3, 4]);
    }
    // A literal false, or no returnWeights, still types as a Tensor.
    const plain: Tensor = attention(q, q, q, { returnWeights: false });
    const none: Tensor = await attentionAsync(q, q, q);
    expect(plain.shape).toEqual(none.shape);
  });
});

describe(`attention propagates NaN (seed ${SEED})`, () => {
  // A NaN in a query makes every score of its row NaN. The decode path (seqQ <= 4) took the row's
  // max with a kernel that passes over NaN, found -Infinity and gave the row the zeros of a fully
  // masked one: a diverged model looked like a masked row. Every path now gives NaN there (as
  // PyTorch does) and leaves the other rows as they were.
  const cases = [
    { Sq: 1, Skv: 1 },
    { Sq: 3, Skv: 5 },
    { Sq: 4, Skv: 17 },
    { Sq: 1, Skv: 4096 }, // decode with each row's keys split across threads and merged
    { Sq: 17, Skv: 63 },
    { Sq: 197, Skv: 197 },
  ];
  // With padding, the row's weights are NaN but 0 at the padded keys, on both paths (the decode
  // path's row max once returned NaN or -Infinity depending on the row's length, giving either).
  test.each(cases.flatMap((c) => [{ ...c, padded: false }, { ...c, padded: c.Skv > 2 }]))(
    'a NaN in query row 1 of head 0: seqQ $Sq, seqKV $Skv, keys 0 and 2 padded: $padded', ({ Sq, Skv, padded }) => {
    const rng = rngFor(SEED, `nan ${Sq} ${Skv} ${padded}`);
    const [H, D] = [2, 16];
    const q = randomFloat32(rng, H * Sq * D);
    const k = randomFloat32(rng, H * Skv * D);
    const v = randomFloat32(rng, H * Skv * D);
    const nanRow = Math.min(1, Sq - 1);
    q[nanRow * D + 3] = NaN;
    const pad = padded ? Uint8Array.from({ length: Skv }, (_, j) => (j === 0 || j === 2 ? 1 : 0)) : undefined;
    const ref = refAttention(q, [1, H, Sq, D], k, [1, H, Skv, D], v, [1, H, Skv, D], { keyPaddingMask: pad });
    const r = attention({ data: q, shape: [1, H, Sq, D] }, { data: k, shape: [1, H, Skv, D] },
      { data: v, shape: [1, H, Skv, D] }, { returnWeights: true, keyPaddingMask: pad });
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < Sq; i++) {
        const o = r.output.data.subarray((h * Sq + i) * D, (h * Sq + i + 1) * D);
        const w = r.weights.data.subarray((h * Sq + i) * Skv, (h * Sq + i + 1) * Skv);
        const ctx = `seed ${SEED} head ${h} row ${i}`;
        if (h === 0 && i === nanRow) {
          const weightsAsExpected = Array.from(w).every((x, j) => (pad?.[j] ? x === 0 : Number.isNaN(x)));
          expect({ ctx, nanOut: o.every(Number.isNaN), weightsAsExpected }).toEqual({ ctx, nanOut: true, weightsAsExpected: true });
        } else {
          const ro = ref.output.data.subarray((h * Sq + i) * D, (h * Sq + i + 1) * D);
          expectClose(o, ro, TOL, { seed: SEED, label: ctx });
        }
      }
    }
  });
});
