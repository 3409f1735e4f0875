/**
 * Deterministic inputs for each workload: uniform random values from a
 * seeded generator, so every implementation sees the same numbers and a run
 * can be replayed.
 */
import { decoderRows, type AttentionProblem, type BlockProblem, type DecoderProblem, type GemmProblem, type Problem, type SoftmaxProblem } from './workloads';

export interface GemmInputs {
  kind: 'gemm';
  /** [M, K] */
  a: Float32Array;
  /** [K, N] */
  b: Float32Array;
}

export interface SoftmaxInputs {
  kind: 'softmax';
  /** [rows, cols] */
  x: Float32Array;
}

export interface AttentionInputs {
  kind: 'attention';
  /** [B, H, Nq, d] */
  q: Float32Array;
  /** [B, Hkv, Nkv, d] */
  k: Float32Array;
  /** [B, Hkv, Nkv, d] */
  v: Float32Array;
}

export interface BlockInputs {
  kind: 'block';
  /** [B, N, dim] */
  x: Float32Array;
  /** LayerNorm weight and bias, [dim] each. */
  gamma: Float32Array;
  beta: Float32Array;
  /** Fused QKV weight, PyTorch Linear layout [3·inner, dim]: rows 0..inner-1 make q, then k, then v. */
  wqkv: Float32Array;
  /** Output projection weight [dim, inner] and bias [dim]. */
  wo: Float32Array;
  bo: Float32Array;
}

export interface DecoderInputs {
  kind: 'decoder';
  /** [B, 1, dim] */
  x: Float32Array;
  /** RMSNorm weight [dim]. */
  gamma: Float32Array;
  /** Fused QKV weight [(heads + 2·kvHeads)·dimHead, dim]: q rows, then k, then v. */
  wqkv: Float32Array;
  /** Output projection [dim, heads·dimHead]. */
  wo: Float32Array;
  /** The cache's keys (already rotated) and values, [B, kvHeads, past, dimHead] each. */
  pastK: Float32Array;
  pastV: Float32Array;
}

export type Inputs = GemmInputs | SoftmaxInputs | AttentionInputs | BlockInputs | DecoderInputs;

/** Inputs matching a problem's kind. */
export type InputsFor<P extends Problem> = P extends GemmProblem
  ? GemmInputs
  : P extends SoftmaxProblem
    ? SoftmaxInputs
    : P extends AttentionProblem
      ? AttentionInputs
      : P extends BlockProblem
        ? BlockInputs
        : P extends DecoderProblem
          ? DecoderInputs
          : never;

/** mulberry32: a small, fast, seedable generator of uniform [0, 1) numbers. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit FNV-1a hash of a string, to seed each workload differently. */
export function seedOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** n values uniform in [lo, hi). */
export function uniform(n: number, random: () => number, lo = -1, hi = 1): Float32Array {
  const a = new Float32Array(n);
  const w = hi - lo;
  for (let i = 0; i < n; i++) a[i] = lo + w * random();
  return a;
}

/** The inputs of one problem, seeded by `seedText` (the workload name and size). */
export function makeInputs(p: Problem, seedText: string): Inputs {
  const r = rng(seedOf(seedText));
  switch (p.kind) {
    case 'gemm':
      return { kind: 'gemm', a: uniform(p.M * p.K, r), b: uniform(p.K * p.N, r) };
    case 'softmax':
      // Logits in [-4, 4): probabilities spread over two orders of magnitude.
      return { kind: 'softmax', x: uniform(p.rows * p.cols, r, -4, 4) };
    case 'attention':
      return {
        kind: 'attention',
        q: uniform(p.B * p.H * p.Nq * p.d, r),
        k: uniform(p.B * (p.Hkv ?? p.H) * p.Nkv * p.d, r),
        v: uniform(p.B * (p.Hkv ?? p.H) * p.Nkv * p.d, r),
      };
    case 'block': {
      const inner = p.heads * p.dimHead;
      // Weights scaled like PyTorch's Linear init (uniform ±1/√fan_in).
      return {
        kind: 'block',
        x: uniform(p.B * p.N * p.dim, r),
        gamma: uniform(p.dim, r, 0.5, 1.5),
        beta: uniform(p.dim, r, -0.1, 0.1),
        wqkv: uniform(3 * inner * p.dim, r, -1 / Math.sqrt(p.dim), 1 / Math.sqrt(p.dim)),
        wo: uniform(p.dim * inner, r, -1 / Math.sqrt(inner), 1 / Math.sqrt(inner)),
        bo: uniform(p.dim, r, -1 / Math.sqrt(inner), 1 / Math.sqrt(inner)),
      };
    }
    case 'decoder': {
      const inner = p.heads * p.dimHead;
      const cache = p.B * p.kvHeads * p.past * p.dimHead;
      return {
        kind: 'decoder',
        x: uniform(p.B * p.dim, r),
        gamma: uniform(p.dim, r, 0.5, 1.5),
        wqkv: uniform(decoderRows(p) * p.dim, r, -1 / Math.sqrt(p.dim), 1 / Math.sqrt(p.dim)),
        wo: uniform(p.dim * inner, r, -1 / Math.sqrt(inner), 1 / Math.sqrt(inner)),
        // Keys of the size the projections make (|k| ~ 1 per element), so the scores spread.
        pastK: uniform(cache, r, -2, 2),
        pastV: uniform(cache, r),
      };
    }
  }
}
