/**
 * onnx/onnx's Attention conformance cases (onnx/backend/test/case/node/attention.py)
 * for the present outputs, softcap, sliding windows and nonpad_kv_seqlen, run
 * through mhsa's APIs and compared with a float64 transcription of the ONNX
 * reference (onnx/reference/ops/op_attention.py). onnxruntime-node 1.30 has no
 * opset 25, so the window cases can only be checked this way.
 *
 * The cases keep ONNX's shapes and attributes; their inputs are drawn here
 * (the suite's are np.random.rand, uniform in [0, 1)). How each ONNX input
 * maps onto mhsa:
 * - past_key/past_value: a KVCache with the past appended, then the new keys;
 *   present_key/present_value are its keys and values.
 * - causal and windows: ONNX aligns a query's position at an offset (the past's
 *   length, nonpad_kv_seqlen[b] − seqQ, or 0 without a cache); mhsa at
 *   seqKV − seqQ (bottom-right). An ONNX frontier further left is the same as
 *   attending over fewer keys (a view of the first ones); further right, a
 *   window reaching that far right.
 * - nonpad_kv_seqlen: attention's keyLengths (with a past: one call per batch
 *   entry over its valid keys, a view).
 * - a boolean mask: the additive mask 0 / −Infinity; a mask narrower than the
 *   keys is padded with −Infinity, as ONNX pads it.
 */
import { attention, KVCache, tensor, type AttentionOptions, type StridedTensor, type Tensor } from '../lib';
import { expectClose, pickSeed, rngFor, type Rng } from './helpers/random';

const SEED = pickSeed();

interface OnnxCase {
  name: string;
  /** [B, Hq, Sq, D] or 3-D [B, Sq, Hq·D] with qHeads/kvHeads. */
  q: number[];
  k: number[];
  v: number[];
  qHeads?: number;
  kvHeads?: number;
  past?: number;
  /** A float mask's shape (values uniform in [0, 1)), or a boolean mask's values. */
  mask?: number[] | { bool: boolean[]; shape: number[] };
  /** Columns of a float mask set to −Infinity. */
  maskNegInfCols?: number[];
  nonpad?: number[];
  causal?: boolean;
  softcap?: number;
  left?: number;
  right?: number;
  /** Fixed inputs instead of random ones: [q, k, v]. */
  fixed?: [number[], number[], number[]];
  expectY?: number[];
}

const CASES: OnnxCase[] = [
  { name: 'test_attention_4d_with_past_and_present', q: [2, 3, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], past: 12, mask: [4, 18] },
  { name: 'test_attention_4d_gqa_with_past_and_present', q: [2, 9, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], past: 12, mask: [4, 18] },
  { name: 'test_attention_4d_softcap', q: [2, 3, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], softcap: 2 },
  { name: 'test_attention_4d_gqa_softcap', q: [2, 9, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], softcap: 2 },
  { name: 'test_attention_4d_softcap_neginf_mask', q: [1, 1, 4, 8], k: [1, 1, 6, 8], v: [1, 1, 6, 8], softcap: 0.5, mask: [4, 6], maskNegInfCols: [4, 5] },
  { name: 'test_attention_4d_gqa_causal_nonpad_decode', q: [2, 4, 1, 8], k: [2, 2, 8, 8], v: [2, 2, 8, 8], nonpad: [8, 5], causal: true },
  { name: 'test_attention_4d_causal_nonpad_continued_prefill', q: [1, 2, 2, 8], k: [1, 2, 4, 8], v: [1, 2, 4, 8], nonpad: [4], causal: true },
  { name: 'test_attention_4d_causal_nonpad_batch_prefill', q: [3, 2, 2, 8], k: [3, 2, 6, 8], v: [3, 2, 6, 8], nonpad: [4, 5, 6], causal: true },
  { name: 'test_attention_local_window', q: [2, 3, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], causal: true, left: 2 },
  {
    name: 'test_attention_bidirectional_window', q: [1, 1, 5, 1], k: [1, 1, 5, 1], v: [1, 1, 5, 1], left: 1, right: 2,
    fixed: [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 2, 3, 4]], expectY: [1, 1.5, 2.5, 3, 3.5],
  },
  { name: 'test_attention_local_window_default', q: [2, 3, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8] },
  {
    name: 'test_attention_local_window_rank1_boolean_mask', q: [2, 3, 4, 8], k: [2, 3, 6, 8], v: [2, 3, 6, 8], causal: true, left: 2,
    mask: { bool: [true, true, true, true, false, false], shape: [6] },
  },
  { name: 'test_attention_local_window_with_past', q: [2, 3, 4, 8], k: [2, 3, 2, 8], v: [2, 3, 2, 8], past: 8, causal: true, left: 2 },
  { name: 'test_attention_3d_local_window', q: [2, 4, 32], k: [2, 6, 8], v: [2, 6, 6], qHeads: 4, kvHeads: 1, causal: true, left: 2 },
];

const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

interface Inputs {
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  pastK?: Float32Array;
  pastV?: Float32Array;
  /** The additive mask, padded to the keys with −Infinity, and its shape. */
  mask?: { data: Float32Array; shape: number[] };
}

/** [B, S, H·D] → [B, H, S, D] (ONNX's reshape and transpose of 3-D inputs). */
function to4d(x: Float32Array, shape: number[], heads: number): { data: Float32Array; shape: number[] } {
  const [B, S, HD] = shape;
  const D = HD / heads;
  const y = new Float32Array(x.length);
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++)
      for (let h = 0; h < heads; h++)
        for (let d = 0; d < D; d++) y[((b * heads + h) * S + s) * D + d] = x[((b * S + s) * heads + h) * D + d];
  return { data: y, shape: [B, heads, S, D] };
}

function drawInputs(rng: Rng, c: OnnxCase): Inputs {
  const uniform = (n: number) => Float32Array.from({ length: n }, () => rng());
  if (c.fixed) return { q: Float32Array.from(c.fixed[0]), k: Float32Array.from(c.fixed[1]), v: Float32Array.from(c.fixed[2]) };
  const x: Inputs = { q: uniform(numel(c.q)), k: uniform(numel(c.k)), v: uniform(numel(c.v)) };
  if (c.past) {
    const [B, Hkv, , D] = c.k;
    x.pastK = uniform(B * Hkv * c.past * D);
    x.pastV = uniform(B * Hkv * c.past * c.v[3]);
  }
  const kvLength = (c.q.length === 3 ? c.k[1] : c.k[2]) + (c.past ?? 0);
  if (c.mask) {
    const raw = Array.isArray(c.mask) ? { data: uniform(numel(c.mask)), shape: c.mask } : {
      data: Float32Array.from(c.mask.bool, (t) => (t ? 0 : -Infinity)),
      shape: c.mask.shape,
    };
    for (const col of c.maskNegInfCols ?? []) for (let i = col; i < raw.data.length; i += raw.shape[raw.shape.length - 1]) raw.data[i] = -Infinity;
    const cols = raw.shape[raw.shape.length - 1];
    const rows = raw.data.length / cols;
    const padded = new Float32Array(rows * kvLength).fill(-Infinity);
    for (let r = 0; r < rows; r++) padded.set(raw.data.subarray(r * cols, (r + 1) * cols), r * kvLength);
    x.mask = { data: padded, shape: [...raw.shape.slice(0, -1), kvLength] };
  }
  return x;
}

/** The ONNX reference in float64 (op_attention.py's _compute_attention, for these attributes). */
function onnxReference(c: OnnxCase, x: Inputs) {
  const q4 = c.q.length === 3 ? to4d(x.q, c.q, c.qHeads!) : { data: x.q, shape: c.q };
  const k4 = c.k.length === 3 ? to4d(x.k, c.k, c.kvHeads!) : { data: x.k, shape: c.k };
  const v4 = c.v.length === 3 ? to4d(x.v, c.v, c.kvHeads!) : { data: x.v, shape: c.v };
  const [B, H, Sq, D] = q4.shape;
  const [, Hkv, Snew] = k4.shape;
  const Dv = v4.shape[3];
  const past = c.past ?? 0;
  const S = past + Snew;
  const present = (pastData: Float32Array | undefined, data: Float32Array, d: number) => {
    const out = new Float64Array(B * Hkv * S * d);
    for (let bh = 0; bh < B * Hkv; bh++) {
      for (let t = 0; t < past * d; t++) out[bh * S * d + t] = pastData![bh * past * d + t];
      for (let t = 0; t < Snew * d; t++) out[(bh * S + past) * d + t] = data[bh * Snew * d + t];
    }
    return out;
  };
  const K = present(x.pastK, k4.data, D), V = present(x.pastV, v4.data, Dv);
  const scale = 1 / Math.sqrt(D);
  const Y = new Float64Array(B * H * Sq * Dv);
  const bias = (b: number, h: number, i: number, j: number): number => {
    let s = 0;
    const offset = c.nonpad && !c.past ? c.nonpad[b] - Sq : past;
    const pos = i + offset;
    if (c.causal && j > pos) s = -Infinity;
    if (c.left !== undefined && pos - j > c.left) s = -Infinity;
    if (c.right !== undefined && j - pos > c.right) s = -Infinity;
    if (x.mask) {
      // Right-aligned numpy broadcasting of the mask to [B, H, Sq, S].
      const ms = x.mask.shape, idx = [b, h, i, j];
      let at = 0;
      for (let a = 0; a < ms.length; a++) at = at * ms[a] + (ms[a] === 1 ? 0 : idx[4 - ms.length + a]);
      s += x.mask.data[at];
    }
    if (c.nonpad && j >= c.nonpad[b]) s = -Infinity;
    return s;
  };
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / Hkv));
      for (let i = 0; i < Sq; i++) {
        const logits = new Float64Array(S);
        let m = -Infinity;
        for (let j = 0; j < S; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q4.data[((b * H + h) * Sq + i) * D + d] * K[((b * Hkv + g) * S + j) * D + d];
          let s = dot * scale;
          if (c.softcap) s = c.softcap * Math.tanh(s / c.softcap);
          logits[j] = s + bias(b, h, i, j);
          m = Math.max(m, logits[j]);
        }
        if (m === -Infinity) continue; // a fully masked row: zeros
        let sum = 0;
        for (let j = 0; j < S; j++) sum += (logits[j] = Math.exp(logits[j] - m));
        for (let e = 0; e < Dv; e++) {
          let o = 0;
          for (let j = 0; j < S; j++) o += (logits[j] / sum) * V[((b * Hkv + g) * S + j) * Dv + e];
          Y[((b * H + h) * Sq + i) * Dv + e] = o;
        }
      }
    }
  return { Y, presentK: K, presentV: V, shape4: [B, H, Sq, Dv] };
}

/** The first `keys` positions of a [B, H, S, D] tensor or view, as a view. */
function firstKeys(t: Tensor | StridedTensor, keys: number): StridedTensor {
  const [B, H, , D] = t.shape;
  const strides = 'strides' in t ? t.strides : [H * t.shape[2] * D, t.shape[2] * D, D, 1];
  const span = keys === 0 ? 0 : (B - 1) * strides[0] + (H - 1) * strides[1] + (keys - 1) * strides[2] + D;
  return { data: t.data.subarray(0, span), shape: [B, H, keys, D], strides };
}

/** Batch entry b of a [B, ...] tensor or view, as a view. */
function batchEntry(t: Tensor | StridedTensor, b: number): StridedTensor {
  const [, H, S, D] = t.shape;
  const strides = 'strides' in t ? t.strides : [H * S * D, S * D, D, 1];
  const span = (H - 1) * strides[1] + (S - 1) * strides[2] + D;
  return { data: t.data.subarray(b * strides[0], b * strides[0] + span), shape: [1, H, S, D], strides };
}

/** The case through mhsa's APIs: Y (4-D [B, H, Sq, Dv]) and, with a past, the cache's keys and values. */
function viaMhsa(c: OnnxCase, x: Inputs) {
  const threeD = c.q.length === 3;
  const q = threeD ? to4d(x.q, c.q, c.qHeads!) : { data: x.q, shape: c.q };
  const k = threeD ? to4d(x.k, c.k, c.kvHeads!) : { data: x.k, shape: c.k };
  const v = threeD ? to4d(x.v, c.v, c.kvHeads!) : { data: x.v, shape: c.v };
  const [B, H, Sq, D] = q.shape;
  const [, Hkv, Snew] = k.shape;
  const Dv = v.shape[3];
  let keys: Tensor | StridedTensor = k, values: Tensor | StridedTensor = v;
  let cache: KVCache | undefined;
  if (c.past) {
    cache = new KVCache({ batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv, maxLength: c.past + Snew });
    cache.append(tensor(x.pastK!, [B, Hkv, c.past, D]), tensor(x.pastV!, [B, Hkv, c.past, Dv]));
    cache.append(tensor(k.data, k.shape), tensor(v.data, v.shape));
    keys = cache.keys;
    values = cache.values;
  }
  const Y = new Float32Array(B * H * Sq * Dv);
  // nonpad_kv_seqlen without a past is keyLengths (ONNX aligns each entry's queries to its own valid
  // keys, as keyLengths does): one call. With a past, one call per batch entry over its valid keys.
  const perEntry = c.nonpad !== undefined && c.past !== undefined;
  const entries = perEntry ? c.nonpad!.map((n, b) => ({ b, valid: n })) : [{ b: -1, valid: keys.shape[2] }];
  for (const { b, valid } of entries) {
    let kk = b < 0 ? keys : batchEntry(keys, b);
    let vv = b < 0 ? values : batchEntry(values, b);
    const qq = b < 0 ? q : tensor(q.data.subarray(b * H * Sq * D, (b + 1) * H * Sq * D), [1, H, Sq, D]);
    const offset = c.nonpad && !c.past ? valid - Sq : c.past ?? 0;
    let seqKV = valid;
    const options: AttentionOptions = {};
    if (c.nonpad && !perEntry) options.keyLengths = c.nonpad;
    if (c.softcap !== undefined) options.softcap = c.softcap;
    if (c.causal || c.left !== undefined || c.right !== undefined) {
      let delta = offset - (seqKV - Sq);
      // An ONNX frontier to the left of mhsa's: the keys past the last query's are never seen.
      if (delta < 0 && c.causal) {
        seqKV += delta;
        delta = 0;
      }
      const right = c.causal ? delta : c.right === undefined ? undefined : c.right + delta;
      const left = c.left === undefined ? undefined : c.left - delta;
      if ((left ?? 0) < 0 || (right ?? 0) < 0) throw new Error(`${c.name}: window offset not expressible`);
      if (left !== undefined || right !== undefined) options.window = { ...(left !== undefined ? { left } : {}), ...(right !== undefined ? { right } : {}) };
    }
    kk = firstKeys(kk, seqKV);
    vv = firstKeys(vv, seqKV);
    if (x.mask) {
      // The mask's columns for these keys (and its batch entry, if it has one), dense.
      const ms = x.mask.shape, cols = ms[ms.length - 1], rows = x.mask.data.length / cols;
      const perBatch = ms.length === 4 && ms[0] !== 1 && b >= 0;
      const sliced = new Float32Array(rows * seqKV);
      for (let r = 0; r < rows; r++) sliced.set(x.mask.data.subarray(r * cols, r * cols + seqKV), r * seqKV);
      const shape = [...ms.slice(0, -1), seqKV];
      options.mask = perBatch
        ? tensor(sliced.subarray((b * rows) / ms[0] * seqKV, ((b + 1) * rows) / ms[0] * seqKV), [1, ...shape.slice(1)])
        : tensor(sliced, shape);
    }
    const out = attention(qq, kk, vv, options) as Tensor;
    Y.set(out.data, b < 0 ? 0 : b * H * Sq * Dv);
  }
  return { Y, cache };
}

/** A [B, H, S, D] view (or tensor) as dense data. */
function dense(t: StridedTensor): Float32Array {
  const [B, H, S, D] = t.shape;
  const out = new Float32Array(B * H * S * D);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let s = 0; s < S; s++)
        out.set(t.data.subarray(b * t.strides[0] + h * t.strides[1] + s * t.strides[2], b * t.strides[0] + h * t.strides[1] + s * t.strides[2] + D), ((b * H + h) * S + s) * D);
  return out;
}

describe(`onnx/onnx Attention conformance cases through mhsa (seed ${SEED})`, () => {
  test.each(CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const rng = rngFor(SEED, c.name);
    const x = drawInputs(rng, c);
    const ref = onnxReference(c, x);
    const got = viaMhsa(c, x);
    const ctx = { seed: SEED, label: c.name, shape: ref.shape4 };
    expectClose(got.Y, ref.Y, 1e-5, ctx);
    if (c.expectY) expect(Array.from(got.Y).map((y) => +y.toFixed(6))).toEqual(c.expectY);
    if (c.past) {
      // present = concat(past, new): the same floats.
      expect(Array.from(dense(got.cache!.keys))).toEqual(Array.from(ref.presentK));
      expect(Array.from(dense(got.cache!.values))).toEqual(Array.from(ref.presentV));
    }
  });
});
