/**
 * Float64 references for the benchmark outputs, written from the math, on a
 * sample of output elements (or all of them for --check's small sizes).
 * A run's output is compared with {@link relativeError}: the normwise relative
 * error ‖y − ref‖₂ / ‖ref‖₂ over the sampled elements.
 */
import type { AttentionInputs, BlockInputs, DecoderInputs, GemmInputs, Inputs, SoftmaxInputs } from './data';
import { rng } from './data';
import { decoderRows, type AttentionProblem, type BlockProblem, type DecoderProblem, type GemmProblem, type Problem, type SoftmaxProblem } from './workloads';

/** Sampled elements of the canonical output and their float64 values. */
export interface Reference {
  /** Flat indices into the output. */
  indices: Int32Array;
  values: Float64Array;
  /** True when every output element is checked. */
  full: boolean;
}

/** Above this normwise relative error a result is wrong (fp32 accumulation errors are ~1e-6 here). */
export const TOLERANCE = 1e-3;
/** The same for mhsa's bf16 workloads (*_bf16): bf16 rounding of weights and activations is ~2e-3 relative per product. */
export const BF16_TOLERANCE = 1e-2;
/** int8 weights and activations (docs/design/int8.md): about 1 % on N(0, 1) data, 2e-2 for the block. */
export const INT8_TOLERANCE = 3e-2;

/** Distinct integers from [0, n): `count` random ones plus the given corners (deduplicated, sorted). */
function pickIndices(n: number, count: number, corners: number[], random: () => number): number[] {
  const s = new Set<number>();
  for (const c of corners) if (c >= 0 && c < n) s.add(c);
  if (n <= count + corners.length) {
    for (let i = 0; i < n; i++) s.add(i);
  } else {
    while (s.size < count + corners.length && s.size < n) s.add(Math.floor(random() * n));
  }
  return [...s].sort((a, b) => a - b);
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function gemmRef(p: GemmProblem, x: GemmInputs, full: boolean, random: () => number): Reference {
  const { M, K, N } = p;
  const cells = full ? range(M * N) : pickIndices(M * N, 256, [0, N - 1, (M - 1) * N, M * N - 1], random);
  const values = new Float64Array(cells.length);
  cells.forEach((f, t) => {
    const i = Math.floor(f / N);
    const j = f - i * N;
    let s = 0;
    for (let k = 0; k < K; k++) s += x.a[i * K + k] * x.b[k * N + j];
    values[t] = s;
  });
  return { indices: Int32Array.from(cells), values, full };
}

function softmaxRef(p: SoftmaxProblem, x: SoftmaxInputs, full: boolean, random: () => number): Reference {
  const { rows, cols } = p;
  const picked = full ? range(rows) : pickIndices(rows, 8, [0, rows - 1], random);
  const indices = new Int32Array(picked.length * cols);
  const values = new Float64Array(picked.length * cols);
  picked.forEach((r, t) => {
    let m = -Infinity;
    for (let j = 0; j < cols; j++) m = Math.max(m, x.x[r * cols + j]);
    let sum = 0;
    for (let j = 0; j < cols; j++) sum += Math.exp(x.x[r * cols + j] - m);
    for (let j = 0; j < cols; j++) {
      indices[t * cols + j] = r * cols + j;
      values[t * cols + j] = Math.exp(x.x[r * cols + j] - m) / sum;
    }
  });
  return { indices, values, full };
}

/**
 * One query row of attention in float64: q (length d) against keys/values
 * rows 0..last of k, v (row stride d); writes d values into `out` at `at`.
 */
function attendRow(
  q: ArrayLike<number>, qOff: number,
  k: ArrayLike<number>, v: ArrayLike<number>, kvOff: number, kvStride: number,
  first: number, last: number, d: number, scale: number, softcap: number | undefined, out: Float64Array, at: number,
): void {
  const n = Math.max(last - first + 1, 0);
  const s = new Float64Array(n);
  let m = -Infinity;
  for (let j = 0; j < n; j++) {
    let dot = 0;
    for (let t = 0; t < d; t++) dot += q[qOff + t] * k[kvOff + (first + j) * kvStride + t];
    s[j] = dot * scale;
    if (softcap !== undefined) s[j] = softcap * Math.tanh(s[j] / softcap);
    if (s[j] > m) m = s[j];
  }
  let sum = 0;
  for (let j = 0; j < n; j++) {
    s[j] = Math.exp(s[j] - m);
    sum += s[j];
  }
  for (let t = 0; t < d; t++) out[at + t] = 0;
  if (n === 0) return;
  for (let j = 0; j < n; j++) {
    const w = s[j] / sum;
    for (let t = 0; t < d; t++) out[at + t] += w * v[kvOff + (first + j) * kvStride + t];
  }
}

function attentionRef(p: AttentionProblem, x: AttentionInputs, full: boolean, random: () => number): Reference {
  const { B, H, Nq, Nkv, d } = p;
  const rows = B * H * Nq;
  const picked = full ? range(rows) : pickIndices(rows, 24, [0, Nq - 1, rows - 1], random);
  const indices = new Int32Array(picked.length * d);
  const values = new Float64Array(picked.length * d);
  const scale = 1 / Math.sqrt(d);
  picked.forEach((r, t) => {
    const bh = Math.floor(r / Nq);
    const i = r - bh * Nq;
    const Hkv = p.Hkv ?? H;
    const kvHead = Math.floor(bh / H) * Hkv + Math.floor((bh % H) / (H / Hkv));
    // Causal, bottom-right aligned: query i sees keys j ≤ i + (Nkv − Nq); a window, from that position − window.
    const pos = i + Nkv - Nq;
    const last = p.causal ? Math.min(Nkv - 1, pos) : Nkv - 1;
    const first = p.window === undefined ? 0 : Math.max(0, pos - p.window);
    attendRow(x.q, r * d, x.k, x.v, kvHead * Nkv * d, d, first, last, d, scale, p.softcap, values, t * d);
    for (let c = 0; c < d; c++) indices[t * d + c] = r * d + c;
  });
  return { indices, values, full };
}

function blockRef(p: BlockProblem, x: BlockInputs, full: boolean, random: () => number): Reference {
  const { B, N, dim, heads, dimHead } = p;
  const inner = heads * dimHead;
  const batches = full ? range(B) : [B - 1];
  const tokens = full ? range(N) : pickIndices(N, 5, [0, N >> 1, N - 1], random);
  const idx: number[] = [];
  const vals: number[] = [];
  const ln = new Float64Array(N * dim);
  const kk = new Float64Array(N * inner);
  const vv = new Float64Array(N * inner);
  const q = new Float64Array(inner);
  const o = new Float64Array(inner);
  const scale = 1 / Math.sqrt(dimHead);
  // y = W·v for a row-major W [rows, cols] and a vector at v[vOff..]
  const proj = (w: Float32Array, wRow0: number, rows: number, cols: number, v: Float64Array, vOff: number, out: Float64Array, outOff: number) => {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      const base = (wRow0 + r) * cols;
      for (let c = 0; c < cols; c++) s += w[base + c] * v[vOff + c];
      out[outOff + r] = s;
    }
  };
  for (const b of batches) {
    for (let n = 0; n < N; n++) {
      const off = (b * N + n) * dim;
      let mean = 0;
      for (let c = 0; c < dim; c++) mean += x.x[off + c];
      mean /= dim;
      let vr = 0;
      for (let c = 0; c < dim; c++) vr += (x.x[off + c] - mean) ** 2;
      vr /= dim;
      const inv = 1 / Math.sqrt(vr + 1e-5);
      for (let c = 0; c < dim; c++) ln[n * dim + c] = (x.x[off + c] - mean) * inv * x.gamma[c] + x.beta[c];
      proj(x.wqkv, inner, inner, dim, ln, n * dim, kk, n * inner);
      proj(x.wqkv, 2 * inner, inner, dim, ln, n * dim, vv, n * inner);
    }
    for (const n of tokens) {
      proj(x.wqkv, 0, inner, dim, ln, n * dim, q, 0);
      for (let h = 0; h < heads; h++) {
        // Head h is columns h·dimHead.. of the [N, inner] projections (row stride inner).
        attendRow(q, h * dimHead, kk, vv, h * dimHead, inner, 0, N - 1, dimHead, scale, undefined, o, h * dimHead);
      }
      const y = new Float64Array(dim);
      proj(x.wo, 0, dim, inner, o, 0, y, 0);
      for (let c = 0; c < dim; c++) {
        idx.push((b * N + n) * dim + c);
        vals.push(y[c] + x.bo[c]);
      }
    }
  }
  return { indices: Int32Array.from(idx), values: Float64Array.from(vals), full };
}

/** Rotate-half RoPE of one head's vector at v[off..off+d) for position pos, in place. */
function ropeRow(v: Float64Array, off: number, d: number, pos: number, theta: number): void {
  const half = d / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos * Math.pow(theta, (-2 * i) / d);
    const c = Math.cos(angle), s = Math.sin(angle);
    const a = v[off + i], b = v[off + i + half];
    v[off + i] = a * c - b * s;
    v[off + i + half] = b * c + a * s;
  }
}

/**
 * Batch entry b of a decoder step (see DecoderProblem), in float64 from the
 * math: writes its dim outputs into y at yOff.
 */
export function decoderStep(p: DecoderProblem, x: DecoderInputs, b: number, y: Float64Array | Float32Array, yOff: number): void {
  const { dim, heads, kvHeads, dimHead, past } = p;
  const inner = heads * dimHead;
  const rows = decoderRows(p);
  let ms = 0;
  for (let c = 0; c < dim; c++) ms += x.x[b * dim + c] ** 2;
  const inv = 1 / Math.sqrt(ms / dim + 1e-5);
  const h = new Float64Array(dim);
  for (let c = 0; c < dim; c++) h[c] = x.x[b * dim + c] * inv * x.gamma[c];
  const qkv = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < dim; c++) s += x.wqkv[r * dim + c] * h[c];
    qkv[r] = s;
  }
  for (let hd = 0; hd < heads + kvHeads; hd++) ropeRow(qkv, hd * dimHead, dimHead, past, p.theta);
  const n = past + 1;
  const o = new Float64Array(inner);
  for (let g = 0; g < kvHeads; g++) {
    // This kv head's keys and values: the cache's rows, then the step's own.
    const k = new Float64Array(n * dimHead);
    const v = new Float64Array(n * dimHead);
    const base = (b * kvHeads + g) * past * dimHead;
    k.set(x.pastK.subarray(base, base + past * dimHead));
    v.set(x.pastV.subarray(base, base + past * dimHead));
    k.set(qkv.subarray(inner + g * dimHead, inner + (g + 1) * dimHead), past * dimHead);
    v.set(qkv.subarray(inner + (kvHeads + g) * dimHead, inner + (kvHeads + g + 1) * dimHead), past * dimHead);
    for (let hq = (g * heads) / kvHeads; hq < ((g + 1) * heads) / kvHeads; hq++) {
      attendRow(qkv, hq * dimHead, k, v, 0, dimHead, 0, n - 1, dimHead, 1 / Math.sqrt(dimHead), undefined, o, hq * dimHead);
    }
  }
  for (let r = 0; r < dim; r++) {
    let s = 0;
    for (let c = 0; c < inner; c++) s += x.wo[r * inner + c] * o[c];
    y[yOff + r] = s;
  }
}

/** Every output of a decoder step (one token per batch entry: cheap enough in full at any size). */
function decoderRef(p: DecoderProblem, x: DecoderInputs): Reference {
  const values = new Float64Array(p.B * p.dim);
  for (let b = 0; b < p.B; b++) decoderStep(p, x, b, values, b * p.dim);
  return { indices: Int32Array.from(range(p.B * p.dim)), values, full: true };
}

/** The float64 reference of a problem on a sample (or all) of its output elements. */
export function buildReference(p: Problem, inputs: Inputs, full: boolean, seed = 12345): Reference {
  const random = rng(seed);
  if (p.kind === 'gemm' && inputs.kind === 'gemm') return gemmRef(p, inputs, full, random);
  if (p.kind === 'softmax' && inputs.kind === 'softmax') return softmaxRef(p, inputs, full, random);
  if (p.kind === 'attention' && inputs.kind === 'attention') return attentionRef(p, inputs, full, random);
  if (p.kind === 'block' && inputs.kind === 'block') return blockRef(p, inputs, full, random);
  if (p.kind === 'decoder' && inputs.kind === 'decoder') return decoderRef(p, inputs);
  throw new Error(`reference: inputs of kind ${inputs.kind} do not match a ${p.kind} problem`);
}

/**
 * ‖y − ref‖₂ / ‖ref‖₂ over the sampled elements; NaN when the output has the
 * wrong length or any sampled element is not finite (both count as wrong).
 */
export function relativeError(out: ArrayLike<number>, ref: Reference, expectedLength: number): number {
  if (out.length !== expectedLength) return NaN;
  let num = 0;
  let den = 0;
  for (let t = 0; t < ref.indices.length; t++) {
    const y = out[ref.indices[t]];
    if (!Number.isFinite(y)) return NaN;
    const r = ref.values[t];
    num += (y - r) * (y - r);
    den += r * r;
  }
  if (den === 0) return num === 0 ? 0 : Infinity;
  return Math.sqrt(num / den);
}
