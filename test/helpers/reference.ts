/**
 * Plain float64 references for matmul, softmax and attention, written from the
 * math (loops over logical indices), not from the native code. Slow but obvious.
 */
import { dotProductScale } from './random';

export interface RefTensor {
  data: Float64Array;
  shape: number[];
}

/** Product of dims (1 for a scalar shape). */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major strides of a shape. */
function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/** Numpy broadcast of several shapes (right-aligned, a 1 stretches); throws if they do not broadcast. */
export function broadcastShape(...shapes: (readonly number[])[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const j = rank - s.length + i;
      const d = s[i];
      if (out[j] === 1) out[j] = d;
      else if (d !== 1 && d !== out[j]) throw new Error(`reference: shapes do not broadcast: ${JSON.stringify(shapes)}`);
    }
  }
  return out;
}

/**
 * For each flat index of `target`, the flat index of the element of a tensor of
 * shape `src` (numpy-broadcast to target) that lands there.
 */
export function broadcastIndex(src: readonly number[], target: readonly number[]): Int32Array | number[] {
  const n = numel(target);
  const map = n < 2 ** 31 ? new Int32Array(n) : new Array<number>(n);
  const off = target.length - src.length;
  const ss = strides(src);
  const idx = new Array<number>(target.length).fill(0);
  for (let f = 0; f < n; f++) {
    let s = 0;
    for (let i = 0; i < src.length; i++) if (src[i] !== 1) s += idx[i + off] * ss[i];
    map[f] = s;
    for (let i = target.length - 1; i >= 0; i--) {
      if (++idx[i] < target[i]) break;
      idx[i] = 0;
    }
  }
  return map;
}

export interface RefMatmulOptions {
  transposeA?: boolean;
  transposeB?: boolean;
  alpha?: number;
  beta?: number;
  c?: ArrayLike<number>;
  cShape?: readonly number[];
}

/** |x| elementwise. */
export function absValues(x: ArrayLike<number>): Float64Array {
  return Float64Array.from(x, Math.abs);
}

/**
 * refMatmul on absolute values, |alpha|·|op(a)|·|op(b)| + |beta|·|c|: for each result element the size
 * of the terms it sums (the scale of its rounding error; see dotProductScale in random.ts).
 */
export function refMatmulMagnitude(
  a: ArrayLike<number>,
  aShape: readonly number[],
  b: ArrayLike<number>,
  bShape: readonly number[],
  opts: RefMatmulOptions = {},
): RefTensor {
  const absOpt = (x: number | undefined) => (x === undefined ? undefined : Math.abs(x));
  return refMatmul(absValues(a), aShape, absValues(b), bShape, {
    ...opts,
    alpha: absOpt(opts.alpha),
    beta: absOpt(opts.beta),
    c: opts.c && absValues(opts.c),
  });
}

/** alpha · op(a) · op(b) + beta · c, batch dims broadcast numpy-style, c broadcast to the result. */
export function refMatmul(
  a: ArrayLike<number>,
  aShape: readonly number[],
  b: ArrayLike<number>,
  bShape: readonly number[],
  opts: RefMatmulOptions = {},
): RefTensor {
  const ra = aShape.length;
  const rb = bShape.length;
  const [a0, a1] = [aShape[ra - 2], aShape[ra - 1]];
  const [b0, b1] = [bShape[rb - 2], bShape[rb - 1]];
  const M = opts.transposeA ? a1 : a0;
  const K = opts.transposeA ? a0 : a1;
  const Kb = opts.transposeB ? b1 : b0;
  const N = opts.transposeB ? b0 : b1;
  if (K !== Kb) throw new Error(`refMatmul: K mismatch ${K} vs ${Kb}`);
  const aBatch = aShape.slice(0, -2);
  const bBatch = bShape.slice(0, -2);
  const batch = broadcastShape(aBatch, bBatch);
  const nb = numel(batch);
  const aMap = broadcastIndex(aBatch, batch);
  const bMap = broadcastIndex(bBatch, batch);
  const shape = [...batch, M, N];
  const data = new Float64Array(numel(shape));
  const alpha = opts.alpha ?? 1;
  // element (i, kk) of op(a) in batch matrix p, element (kk, j) of op(b)
  const aAt = (p: number, i: number, kk: number) =>
    a[p * a0 * a1 + (opts.transposeA ? kk * a1 + i : i * a1 + kk)];
  const bAt = (p: number, kk: number, j: number) =>
    b[p * b0 * b1 + (opts.transposeB ? j * b1 + kk : kk * b1 + j)];
  for (let p = 0; p < nb; p++) {
    const pa = aMap[p];
    const pb = bMap[p];
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let kk = 0; kk < K; kk++) s += aAt(pa, i, kk) * bAt(pb, kk, j);
        data[(p * M + i) * N + j] = alpha * s;
      }
    }
  }
  if (opts.c !== undefined) {
    const cShape = opts.cShape ?? shape;
    const beta = opts.beta ?? 1;
    const cMap = broadcastIndex(cShape, shape);
    for (let f = 0; f < data.length; f++) data[f] += beta * opts.c[cMap[f]];
  }
  return { data, shape };
}

/** Softmax of scale·x along the last axis, in float64. A row that is all −Infinity gives zeros. */
export function refSoftmax(x: ArrayLike<number>, shape: readonly number[], scale = 1): RefTensor {
  const n = shape.length === 0 ? 1 : shape[shape.length - 1];
  const total = numel(shape);
  const data = new Float64Array(total);
  const rows = n === 0 ? 0 : total / n;
  const z = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let j = 0; j < n; j++) {
      z[j] = scale * x[r * n + j];
      if (z[j] > m) m = z[j];
    }
    if (m === -Infinity) continue; // all blocked: zeros
    let sum = 0;
    for (let j = 0; j < n; j++) {
      z[j] = Math.exp(z[j] - m);
      sum += z[j];
    }
    for (let j = 0; j < n; j++) data[r * n + j] = z[j] / sum;
  }
  return { data, shape: [...shape] };
}

export type RefLayout = 'bhsd' | 'bshd' | 'bhds';

export interface RefAttentionOptions {
  /** Layout of 4-D inputs (ignored for 3-D inputs, which are [batch, seq, heads·dim]). Default 'bhsd'. */
  layout?: RefLayout;
  /** Query heads; required for 3-D inputs. */
  heads?: number;
  /** Key/value heads for 3-D inputs; default heads. */
  kvHeads?: number;
  causal?: boolean;
  /** Additive mask, numpy-broadcast to [batch, heads, seqQ, seqKV]. */
  mask?: ArrayLike<number>;
  maskShape?: readonly number[];
  /** batch·seqKV bytes, nonzero = the key is ignored. */
  keyPaddingMask?: ArrayLike<number>;
  /** Default 1/√headDim (1 when headDim is 0). */
  scale?: number;
  /** s ← softcap·tanh(s / softcap) after the scale, before the mask. */
  softcap?: number;
  /** Keys p − left … p + right of the query at key position p = i + seqKV − seqQ; a side left out is unlimited. */
  window?: { left?: number; right?: number };
  /** One logit per query head, in every row's denominator only. */
  sinks?: ArrayLike<number>;
  /** Keys each batch entry has: entry b sees keys [0, keyLengths[b]), its positions counted from that end. */
  keyLengths?: ArrayLike<number>;
}

export interface RefAttentionResult {
  /** In q's layout (3-D for 3-D inputs) with v's head dim. */
  output: RefTensor;
  /** [batch, heads, seqQ, seqKV]. */
  weights: RefTensor;
}

interface Dims {
  batch: number;
  heads: number;
  seq: number;
  dim: number;
}

/** Dims of a 4-D tensor in a layout, and the flat offset of logical element (b, h, s, d). */
function view(layout: RefLayout, shape: readonly number[]): Dims & { at: (b: number, h: number, s: number, d: number) => number } {
  if (layout === 'bhsd') {
    const [B, H, S, D] = shape;
    return { batch: B, heads: H, seq: S, dim: D, at: (b, h, s, d) => ((b * H + h) * S + s) * D + d };
  }
  if (layout === 'bshd') {
    const [B, S, H, D] = shape;
    return { batch: B, heads: H, seq: S, dim: D, at: (b, h, s, d) => ((b * S + s) * H + h) * D + d };
  }
  const [B, H, D, S] = shape;
  return { batch: B, heads: H, seq: S, dim: D, at: (b, h, s, d) => ((b * H + h) * D + d) * S + s };
}

function layoutShape(layout: RefLayout, l: Dims): number[] {
  if (layout === 'bhsd') return [l.batch, l.heads, l.seq, l.dim];
  if (layout === 'bshd') return [l.batch, l.seq, l.heads, l.dim];
  return [l.batch, l.heads, l.dim, l.seq];
}

/**
 * softmax(scale·q·kᵀ + mask, with blocked keys removed) · v per (batch, head),
 * in float64. Blocked: mask −Infinity, keyPaddingMask nonzero, or causal
 * j > i + (seqKV − seqQ). A row with every key blocked gives zeros.
 */
export function refAttention(
  q: ArrayLike<number>,
  qShape: readonly number[],
  k: ArrayLike<number>,
  kShape: readonly number[],
  v: ArrayLike<number>,
  vShape: readonly number[],
  opts: RefAttentionOptions = {},
): RefAttentionResult {
  let layout: RefLayout = opts.layout ?? 'bhsd';
  let qs = [...qShape];
  let ks = [...kShape];
  let vs = [...vShape];
  const threeD = qShape.length === 3;
  if (threeD) {
    const H = opts.heads;
    if (H === undefined) throw new Error('refAttention: heads is required for 3-D inputs');
    const Hkv = opts.kvHeads ?? H;
    layout = 'bshd';
    qs = [qShape[0], qShape[1], H, qShape[2] / H];
    ks = [kShape[0], kShape[1], Hkv, kShape[2] / Hkv];
    vs = [vShape[0], vShape[1], Hkv, vShape[2] / Hkv];
  }
  const Q = view(layout, qs);
  const K = view(layout, ks);
  const V = view(layout, vs);
  const B = Q.batch, H = Q.heads, Sq = Q.seq, D = Q.dim;
  const Hkv = K.heads, Skv = K.seq, Dv = V.dim;
  if (K.batch !== B || V.batch !== B || K.dim !== D || V.heads !== Hkv || V.seq !== Skv) {
    throw new Error('refAttention: inconsistent shapes');
  }
  const group = Hkv === 0 ? 1 : H / Hkv;
  if (!Number.isInteger(group)) throw new Error('refAttention: heads must be a multiple of kvHeads');
  // With headDim 0 every q·k is an empty sum (0); any finite scale then gives logits 0 (1/√0 would make them NaN).
  const scale = opts.scale ?? (D > 0 ? 1 / Math.sqrt(D) : 1);
  const full = [B, H, Sq, Skv];
  const maskMap = opts.mask !== undefined ? broadcastIndex(opts.maskShape ?? full, full) : undefined;

  const outL = { batch: B, heads: H, seq: Sq, dim: Dv };
  const outShape4 = layoutShape(layout, outL);
  const O = view(layout, outShape4);
  const out = new Float64Array(numel(outShape4));
  const weights = new Float64Array(numel(full));
  const logits = new Float64Array(Skv);
  const blocked = new Uint8Array(Skv);

  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const hk = Math.floor(h / group);
      for (let i = 0; i < Sq; i++) {
        const rowBase = ((b * H + h) * Sq + i) * Skv;
        let m = -Infinity;
        const keys = opts.keyLengths ? opts.keyLengths[b] : Skv;
        for (let j = 0; j < Skv; j++) {
          blocked[j] = 0;
          if (j >= keys) {
            blocked[j] = 1;
            continue;
          }
          const pos = i + (keys - Sq);
          if (opts.causal && j > pos) blocked[j] = 1;
          if (opts.window?.left !== undefined && j < pos - opts.window.left) blocked[j] = 1;
          if (opts.window?.right !== undefined && j > pos + opts.window.right) blocked[j] = 1;
          if (opts.keyPaddingMask && opts.keyPaddingMask[b * Skv + j] !== 0) blocked[j] = 1;
          let s = 0;
          for (let d = 0; d < D; d++) s += q[Q.at(b, h, i, d)] * k[K.at(b, hk, j, d)];
          s *= scale;
          if (opts.softcap) s = opts.softcap * Math.tanh(s / opts.softcap);
          if (maskMap) s += opts.mask![maskMap[rowBase + j]];
          if (s === -Infinity) blocked[j] = 1;
          logits[j] = s;
          if (!blocked[j] && s > m) m = s;
        }
        if (m === -Infinity) continue; // every key blocked: zero weights, zero output
        let sum = opts.sinks ? Math.exp(opts.sinks[h] - m) : 0;
        for (let j = 0; j < Skv; j++) {
          const e = blocked[j] ? 0 : Math.exp(logits[j] - m);
          weights[rowBase + j] = e;
          sum += e;
        }
        for (let j = 0; j < Skv; j++) weights[rowBase + j] /= sum;
        for (let d = 0; d < Dv; d++) {
          let acc = 0;
          for (let j = 0; j < keys; j++) acc += weights[rowBase + j] * v[V.at(b, hk, j, d)];
          out[O.at(b, h, i, d)] = acc;
        }
      }
    }
  }
  const outShape = threeD ? [B, Sq, H * Dv] : outShape4;
  return { output: { data: out, shape: outShape }, weights: { data: weights, shape: full } };
}

/** (x − mean) / √(var + eps) · weight + bias per row of the last axis, in float64 (biased variance). */
export function refLayerNorm(
  x: ArrayLike<number>,
  shape: readonly number[],
  weight: ArrayLike<number> | undefined,
  bias: ArrayLike<number> | undefined,
  eps: number,
): Float64Array {
  const dim = shape[shape.length - 1];
  const out = new Float64Array(numel(shape));
  const rows = dim === 0 ? 0 : out.length / dim;
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[r * dim + i];
    mean /= dim;
    let v = 0;
    for (let i = 0; i < dim; i++) v += (x[r * dim + i] - mean) ** 2;
    v /= dim;
    const inv = 1 / Math.sqrt(v + eps);
    for (let i = 0; i < dim; i++) {
      let y = (x[r * dim + i] - mean) * inv;
      if (weight) y *= weight[i];
      if (bias) y += bias[i];
      out[r * dim + i] = y;
    }
  }
  return out;
}

/**
 * For a product with a single result element, the size of the terms it sums, which the element can
 * cancel far below (expectClose's `scale`); undefined for larger results, whose norm is scale enough.
 */
export function singleOutputMatmulScale(
  outputLength: number,
  a: ArrayLike<number>,
  aShape: readonly number[],
  b: ArrayLike<number>,
  bShape: readonly number[],
  opts: RefMatmulOptions = {},
): number | undefined {
  return outputLength !== 1 ? undefined : dotProductScale(refMatmulMagnitude(a, aShape, b, bShape, opts).data);
}

/**
 * The same for attention: a single output element is Σ p_j v_j, which signed v can cancel, so it is
 * measured against Σ p_j |v_j|.
 */
export function singleOutputAttentionScale(
  outputLength: number,
  q: ArrayLike<number>,
  qShape: readonly number[],
  k: ArrayLike<number>,
  kShape: readonly number[],
  v: ArrayLike<number>,
  vShape: readonly number[],
  opts: RefAttentionOptions = {},
): number | undefined {
  return outputLength !== 1 ? undefined : dotProductScale(refAttention(q, qShape, k, kShape, absValues(v), vShape, opts).output.data);
}

/** The weights of the MHSA block of seed 004, in PyTorch layout, for refBlock. */
export interface RefParams {
  dim: number;
  heads: number;
  dimHead: number;
  qkvW: Float32Array;
  qkvB?: Float32Array;
  outW?: Float32Array;
  outB?: Float32Array;
  normW?: Float32Array;
  normB?: Float32Array;
  eps?: number;
}

/** refBlock's attention options. */
export interface RefBlockOptions {
  causal?: boolean;
  mask?: Float32Array;
  maskShape?: number[];
  keyPaddingMask?: Uint8Array;
}

/** The block in float64 on x [B, T, dim]: output [B, T, dim] and head-averaged weights [B, T, T]. */
export function refBlock(x: Float32Array, B: number, T: number, p: RefParams, o: RefBlockOptions = {}) {
  const inner = p.heads * p.dimHead;
  const y: ArrayLike<number> = p.normW ? refLayerNorm(x, [B * T, p.dim], p.normW, p.normB, p.eps ?? 1e-5) : x;
  const proj = (i: number) =>
    refMatmul(y, [B, T, p.dim], p.qkvW.subarray(i * inner * p.dim, (i + 1) * inner * p.dim), [inner, p.dim], {
      transposeB: true,
      ...(p.qkvB ? { c: p.qkvB.subarray(i * inner, (i + 1) * inner), cShape: [inner] } : {}),
    }).data;
  const a = refAttention(proj(0), [B, T, inner], proj(1), [B, T, inner], proj(2), [B, T, inner], {
    heads: p.heads,
    causal: o.causal,
    mask: o.mask,
    maskShape: o.maskShape,
    keyPaddingMask: o.keyPaddingMask,
  });
  const out = p.outW
    ? refMatmul(a.output.data, [B, T, inner], p.outW, [p.dim, inner], {
        transposeB: true,
        ...(p.outB ? { c: p.outB, cShape: [p.dim] } : {}),
      }).data
    : a.output.data;
  const weights = new Float64Array(B * T * T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < p.heads; h++) {
      for (let i = 0; i < T * T; i++) weights[b * T * T + i] += a.weights.data[(b * p.heads + h) * T * T + i] / p.heads;
    }
  }
  return { out, weights };
}

/**
 * The natural size of attention's output over `keys` keys, a floor for
 * relative comparisons: that of a mean of `keys` values of v, so that an
 * output that cancels to almost nothing is not held to more.
 */
export function attentionOutputScale(v: ArrayLike<number>, outputLength: number, keys: number): number {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i] * v[i];
  return Math.sqrt(sum / v.length) * Math.sqrt(outputLength / keys);
}
