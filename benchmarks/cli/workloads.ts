/**
 * The project's standard benchmark workloads (fp32, row-major, batch-first),
 * from the shared workload list: GEMM (g_*), row softmax (s_*), scaled
 * dot-product attention (a_*, including a causal one and a decode step) and
 * the full ViT self-attention block of seed 004 (m_*) and a decoder layer's
 * step against its KV cache.
 *
 * Every workload has its full size (what is timed) and a small size with the
 * same structure (odd, non-round dims) that `--check` verifies element by element.
 */

/** C[M,N] = A[M,K] · B[K,N]. */
export interface GemmProblem {
  kind: 'gemm';
  M: number;
  K: number;
  N: number;
  /** B is a weight packed once (untimed): in float32, bf16 or int8 (mhsa's prepack dtype; peers keep float32). */
  weight?: 'float32' | 'bf16' | 'int8';
}

/** Softmax along the last axis of a [rows, cols] matrix. */
export interface SoftmaxProblem {
  kind: 'softmax';
  rows: number;
  cols: number;
}

/**
 * softmax(Q·Kᵀ/√d)·V per (batch, head); q is [B, H, Nq, d], k and v are
 * [B, Hkv, Nkv, d] ('bhsd'), the output is [B, H, Nq, d].
 */
export interface AttentionProblem {
  kind: 'attention';
  B: number;
  H: number;
  Nq: number;
  Nkv: number;
  d: number;
  causal: boolean;
  /** Key/value heads (grouped-query attention); default H. */
  Hkv?: number;
  /** A sliding window: keys up to this many before a query's position. */
  window?: number;
  /** scores ← softcap·tanh(scores / softcap). */
  softcap?: number;
  /** A decode step against a KV cache: the last Nq keys are the step's own (peers that take a past and a present split k and v there). */
  cache?: boolean;
  /** mhsa's k and v in bf16 or int8 (a KVCache of that dtype; peers keep float32). */
  kv?: 'bf16' | 'int8';
}

/**
 * Seed 004's ViT `Attention` module on x [B, N, dim]:
 * LayerNorm(dim) → x·Wqkvᵀ (no bias, Wqkv [3·inner, dim]) → split into q, k, v and
 * into `heads` heads of `dimHead` → SDPA → merge heads → o·Woᵀ + bo (Wo [dim, inner]).
 * inner = heads·dimHead. The output is [B, N, dim].
 */
export interface BlockProblem {
  kind: 'block';
  B: number;
  N: number;
  dim: number;
  heads: number;
  dimHead: number;
  /** The projections' weights in bf16 or int8 (mhsa's dtype; peers keep float32). */
  dtype?: 'bf16' | 'int8';
}

/**
 * One decode step of a LLaMA-style attention layer on x [B, 1, dim] against a
 * KV cache of `past` positions: RMSNorm(dim) (no bias, eps 1e-5) → x·Wqkvᵀ
 * (Wqkv [(heads + 2·kvHeads)·dimHead, dim]: q rows, then k, then v) → RoPE
 * (rotate-half, all of dimHead, base theta) on q and k at position `past` →
 * k, v appended to the cache → attention over the past + 1 keys (query head h
 * reads kv head ⌊h·kvHeads/heads⌋) → o·Woᵀ (Wo [dim, heads·dimHead], no bias).
 * The cache holds already-rotated keys. The output is [B, 1, dim].
 */
export interface DecoderProblem {
  kind: 'decoder';
  B: number;
  past: number;
  dim: number;
  heads: number;
  kvHeads: number;
  dimHead: number;
  theta: number;
  /** The projections' weights and the KV cache in bf16 or int8 (mhsa's dtype; peers keep float32). */
  dtype?: 'bf16' | 'int8';
}

export type Problem = GemmProblem | SoftmaxProblem | AttentionProblem | BlockProblem | DecoderProblem;
export type ProblemKind = Problem['kind'];

export type Suite = 'quick' | 'full';

/** GFLOP/s for compute-bound work; GB/s (bytes moved) for memory-bound work. */
export type Metric = 'GFLOP/s' | 'GB/s';

export interface Workload {
  name: string;
  description: string;
  problem: Problem;
  /** Same structure, small: what --check runs and verifies in full. */
  small: Problem;
  /** The suites that include this workload (every workload is in 'full'). */
  suites: readonly Suite[];
  metric: Metric;
}

const gemm = (M: number, K: number, N: number, weight?: GemmProblem['weight']): GemmProblem => ({
  kind: 'gemm', M, K, N, ...(weight ? { weight } : {}),
});
const sm = (rows: number, cols: number): SoftmaxProblem => ({ kind: 'softmax', rows, cols });
const attn = (
  B: number, H: number, Nq: number, Nkv: number, d: number, causal = false, extra: Partial<AttentionProblem> = {},
): AttentionProblem => ({ kind: 'attention', B, H, Nq, Nkv, d, causal, ...extra });
const block = (B: number, N: number, dim: number, heads: number, dimHead: number, dtype?: BlockProblem['dtype']): BlockProblem => ({
  kind: 'block', B, N, dim, heads, dimHead, ...(dtype ? { dtype } : {}),
});
const decoder = (B: number, past: number, dim: number, heads: number, kvHeads: number, dimHead: number, dtype?: DecoderProblem['dtype']): DecoderProblem => ({
  kind: 'decoder', B, past, dim, heads, kvHeads, dimHead, theta: 500000, ...(dtype ? { dtype } : {}),
});

const QUICK: readonly Suite[] = ['quick', 'full'];
const FULL: readonly Suite[] = ['full'];

/** The standard workloads, in report order. */
export const WORKLOADS: readonly Workload[] = [
  { name: 'g_sq64', description: 'GEMM 64x64x64', problem: gemm(64, 64, 64), small: gemm(7, 9, 11), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_sq256', description: 'GEMM 256x256x256', problem: gemm(256, 256, 256), small: gemm(33, 31, 35), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'g_sq1024', description: 'GEMM 1024x1024x1024', problem: gemm(1024, 1024, 1024), small: gemm(65, 67, 63), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'g_sq2048', description: 'GEMM 2048x2048x2048', problem: gemm(2048, 2048, 2048), small: gemm(97, 129, 101), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qk512', description: "GEMM M=512 K=64 N=512 (one head's Q·Kᵀ)", problem: gemm(512, 64, 512), small: gemm(37, 16, 41), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'g_av512', description: "GEMM M=512 K=512 N=64 (one head's A·V)", problem: gemm(512, 512, 64), small: gemm(41, 37, 16), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv197', description: 'GEMM M=197 K=768 N=2304 (ViT-B/16 fused QKV projection, 1 image)', problem: gemm(197, 768, 2304), small: gemm(13, 48, 144), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'g_qkv1024', description: 'GEMM M=1024 K=768 N=2304 (BERT-base-ish, 8x128 tokens)', problem: gemm(1024, 768, 2304), small: gemm(64, 48, 144), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv197w', description: 'g_qkv197 against a weight packed once (mhsa: prepack)', problem: gemm(197, 768, 2304, 'float32'), small: gemm(13, 48, 144, 'float32'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv197_bf16', description: "g_qkv197w with mhsa's weight in bf16 (prepack dtype 'bf16'; peers in float32)", problem: gemm(197, 768, 2304, 'bf16'), small: gemm(13, 48, 144, 'bf16'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv1024w', description: 'g_qkv1024 against a weight packed once (mhsa: prepack)', problem: gemm(1024, 768, 2304, 'float32'), small: gemm(64, 48, 144, 'float32'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv1024_bf16', description: "g_qkv1024w with mhsa's weight in bf16 (prepack dtype 'bf16'; peers in float32)", problem: gemm(1024, 768, 2304, 'bf16'), small: gemm(64, 48, 144, 'bf16'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv197_int8', description: "g_qkv197w with mhsa's weight in int8 (prepack dtype 'int8', activations quantized per row in the call; peers in float32)", problem: gemm(197, 768, 2304, 'int8'), small: gemm(13, 48, 144, 'int8'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'g_qkv1024_int8', description: "g_qkv1024w with mhsa's weight in int8 (prepack dtype 'int8'; peers in float32)", problem: gemm(1024, 768, 2304, 'int8'), small: gemm(64, 48, 144, 'int8'), suites: FULL, metric: 'GFLOP/s' },
  { name: 's_512', description: 'row softmax 12*512 x 512', problem: sm(12 * 512, 512), small: sm(24, 37), suites: QUICK, metric: 'GB/s' },
  { name: 's_4096', description: 'row softmax 4096 x 4096', problem: sm(4096, 4096), small: sm(9, 301), suites: FULL, metric: 'GB/s' },
  { name: 'a_vit', description: 'SDPA B=1 H=12 N=197 d=64', problem: attn(1, 12, 197, 197, 64), small: attn(1, 3, 13, 13, 16), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'a_512', description: 'SDPA B=1 H=12 N=512 d=64', problem: attn(1, 12, 512, 512, 64), small: attn(1, 2, 33, 33, 16), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'a_2048', description: 'SDPA B=1 H=12 N=2048 d=64', problem: attn(1, 12, 2048, 2048, 64), small: attn(1, 2, 67, 67, 16), suites: FULL, metric: 'GFLOP/s' },
  { name: 'a_4096', description: 'SDPA B=1 H=8 N=4096 d=64', problem: attn(1, 8, 4096, 4096, 64), small: attn(1, 2, 131, 131, 8), suites: FULL, metric: 'GFLOP/s' },
  { name: 'a_b8', description: 'SDPA B=8 H=12 N=128 d=64', problem: attn(8, 12, 128, 128, 64), small: attn(3, 2, 17, 17, 8), suites: FULL, metric: 'GFLOP/s' },
  { name: 'a_causal', description: 'SDPA B=1 H=12 N=2048 d=64, causal mask', problem: attn(1, 12, 2048, 2048, 64, true), small: attn(1, 2, 45, 45, 16, true), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'a_decode', description: 'SDPA decode step B=1 H=32 Nq=1 Nkv=4096 d=128 (against a KV cache)', problem: attn(1, 32, 1, 4096, 128), small: attn(1, 4, 1, 77, 32), suites: QUICK, metric: 'GB/s' },
  { name: 'a_gqa_decode', description: 'SDPA decode step B=1 H=32 Hkv=8 Nq=1 Nkv=16384 d=128 (LLaMA-3-8B against a KV cache)', problem: attn(1, 32, 1, 16384, 128, true, { Hkv: 8, cache: true }), small: attn(1, 8, 1, 77, 32, true, { Hkv: 2, cache: true }), suites: FULL, metric: 'GB/s' },
  { name: 'a_gqa_decode_bf16', description: "a_gqa_decode with mhsa's keys and values in bf16 (a KVCache with dtype 'bf16'; peers in float32)", problem: attn(1, 32, 1, 16384, 128, true, { Hkv: 8, cache: true, kv: 'bf16' }), small: attn(1, 8, 1, 77, 32, true, { Hkv: 2, cache: true, kv: 'bf16' }), suites: FULL, metric: 'GB/s' },
  { name: 'a_gqa_decode_int8', description: "a_gqa_decode with mhsa's keys and values in int8 (a KVCache with dtype 'int8'; peers in float32)", problem: attn(1, 32, 1, 16384, 128, true, { Hkv: 8, cache: true, kv: 'int8' }), small: attn(1, 8, 1, 77, 32, true, { Hkv: 2, cache: true, kv: 'int8' }), suites: FULL, metric: 'GB/s' },
  { name: 'a_window', description: 'SDPA B=1 H=8 N=8192 d=64, causal, sliding window 512', problem: attn(1, 8, 8192, 8192, 64, true, { window: 512 }), small: attn(1, 2, 67, 67, 16, true, { window: 9 }), suites: FULL, metric: 'GFLOP/s' },
  { name: 'a_softcap', description: 'SDPA B=1 H=12 N=2048 d=64, softcap 50 (as a_2048)', problem: attn(1, 12, 2048, 2048, 64, false, { softcap: 50 }), small: attn(1, 2, 67, 67, 16, false, { softcap: 5 }), suites: FULL, metric: 'GFLOP/s' },
  { name: 'm_vit1', description: 'seed-004 ViT MHSA block dim=768 heads=12 dim_head=64 tokens=197 batch=1', problem: block(1, 197, 768, 12, 64), small: block(1, 11, 24, 3, 8), suites: QUICK, metric: 'GFLOP/s' },
  { name: 'm_decode', description: "LLaMA-3-8B's attention layer, one decode step over a 4096-position KV cache (RMSNorm, RoPE, GQA 32/8 heads of 128)", problem: decoder(1, 4096, 4096, 32, 8, 128), small: decoder(2, 37, 40, 6, 2, 16), suites: FULL, metric: 'GB/s' },
  { name: 'm_decode_bf16', description: "m_decode with mhsa's projection weights and KV cache in bf16 (peers in float32)", problem: decoder(1, 4096, 4096, 32, 8, 128, 'bf16'), small: decoder(2, 37, 40, 6, 2, 16, 'bf16'), suites: FULL, metric: 'GB/s' },
  { name: 'm_decode_int8', description: "m_decode with mhsa's projection weights and KV cache in int8 (peers in float32)", problem: decoder(1, 4096, 4096, 32, 8, 128, 'int8'), small: decoder(2, 37, 40, 6, 2, 16, 'int8'), suites: FULL, metric: 'GB/s' },
  { name: 'm_vit8', description: 'seed-004 ViT MHSA block, batch=8', problem: block(8, 197, 768, 12, 64), small: block(2, 9, 24, 3, 8), suites: FULL, metric: 'GFLOP/s' },
  { name: 'm_vit8_bf16', description: "m_vit8 with mhsa's projection weights in bf16 (dtype 'bf16'; peers in float32)", problem: block(8, 197, 768, 12, 64, 'bf16'), small: block(2, 9, 24, 3, 8, 'bf16'), suites: FULL, metric: 'GFLOP/s' },
  { name: 'm_vit8_int8', description: "m_vit8 with mhsa's projection weights in int8 (dtype 'int8'; peers in float32)", problem: block(8, 197, 768, 12, 64, 'int8'), small: block(2, 9, 24, 3, 8, 'int8'), suites: FULL, metric: 'GFLOP/s' },
];

export function findWorkload(name: string): Workload | undefined {
  return WORKLOADS.find((w) => w.name === name);
}

/** Floating-point operations of one call, as counted in the workload list. */
export function flops(p: Problem): number {
  switch (p.kind) {
    case 'gemm':
      return 2 * p.M * p.N * p.K;
    case 'softmax':
      // Not used for the metric (GB/s); max, exp, sum, divide ≈ 5 per element.
      return 5 * p.rows * p.cols;
    case 'attention':
      return 4 * p.B * p.H * p.d * visiblePairs(p);
    case 'block': {
      const T = p.B * p.N;
      const inner = p.heads * p.dimHead;
      const sdpa = 4 * p.B * p.heads * p.N * p.N * p.dimHead;
      return 2 * T * p.dim * 3 * inner + sdpa + 2 * T * inner * p.dim;
    }
    case 'decoder': {
      const inner = p.heads * p.dimHead;
      return 2 * p.B * (decoderRows(p) * p.dim + p.dim * inner) + 4 * p.B * p.heads * p.dimHead * (p.past + 1);
    }
  }
}

/** Rows of a decoder's fused Wqkv: (heads + 2·kvHeads)·dimHead. */
export function decoderRows(p: DecoderProblem): number {
  return (p.heads + 2 * p.kvHeads) * p.dimHead;
}

/**
 * (query, key) pairs one head computes: all of them, half under the causal
 * rule (as the workload list counts it), or each query's window.
 */
export function visiblePairs(p: AttentionProblem): number {
  if (p.window === undefined) return p.causal ? (p.Nq * p.Nkv) / 2 : p.Nq * p.Nkv;
  let pairs = 0;
  for (let i = 0; i < p.Nq; i++) {
    const pos = i + p.Nkv - p.Nq;
    const hi = p.causal ? Math.min(p.Nkv - 1, pos) : p.Nkv - 1;
    pairs += Math.max(0, hi - Math.max(0, pos - p.window) + 1);
  }
  return pairs;
}

/**
 * The type mhsa holds the problem's weights (or K and V) in: with bf16 its % of
 * peak is of the bf16 peak, with int8 of none measured, and either check is looser.
 */
export function precisionOf(p: Problem): 'fp32' | 'bf16' | 'int8' {
  const t = p.kind === 'gemm' ? p.weight : p.kind === 'attention' ? p.kv : p.kind === 'block' || p.kind === 'decoder' ? p.dtype : undefined;
  return t === 'bf16' || t === 'int8' ? t : 'fp32';
}

/** Bytes a memory-bound call must move at least (inputs read once, output written once). */
/** Bytes of one row of `width` values stored as dtype: int8 rows carry a float scale. */
function rowBytes(dtype: 'bf16' | 'int8' | undefined, width: number): number {
  return dtype === 'int8' ? width + 4 : dtype === 'bf16' ? 2 * width : 4 * width;
}

export function bytes(p: Problem): number {
  switch (p.kind) {
    case 'gemm':
      return 4 * (p.M * p.K + p.K * p.N + p.M * p.N);
    case 'softmax':
      return 4 * 2 * p.rows * p.cols;
    case 'attention':
      // q and the output in float32; k and v in mhsa's format (int8: a float scale per row too).
      return 4 * 2 * p.B * p.H * p.Nq * p.d + 2 * p.B * (p.Hkv ?? p.H) * p.Nkv * rowBytes(p.kv, p.d);
    case 'block': {
      const T = p.B * p.N;
      const inner = p.heads * p.dimHead;
      return 4 * (2 * T * p.dim + 4 * inner * p.dim + 3 * p.dim);
    }
    case 'decoder': {
      // The weights (a float scale per output column in int8) and the cache, read once; x and y.
      const weights = rowBytes(p.dtype, p.dim) * (decoderRows(p) + p.dim);
      return weights + 2 * p.B * p.kvHeads * p.past * rowBytes(p.dtype, p.dimHead) + 4 * (p.dim + 2 * p.B * p.dim);
    }
  }
}

/** A compact shape string for tables: "1024x1024x1024", "1x12x197x197x64 causal", ... */
export function shapeString(p: Problem): string {
  switch (p.kind) {
    case 'gemm':
      return `${p.M}x${p.K}x${p.N}${p.weight ? ` ${p.weight === 'float32' ? '' : `${p.weight} `}packed` : ''}`;
    case 'softmax':
      return `${p.rows}x${p.cols}`;
    case 'attention': {
      const heads = p.Hkv !== undefined && p.Hkv !== p.H ? `H${p.H}/${p.Hkv}` : `H${p.H}`;
      const extras =
        `${p.causal ? ' causal' : ''}${p.window !== undefined ? ` window${p.window}` : ''}` +
        `${p.softcap !== undefined ? ` softcap${p.softcap}` : ''}${p.kv ? ` kv ${p.kv}` : ''}`;
      return `B${p.B} ${heads} ${p.Nq === p.Nkv ? `N${p.Nq}` : `Nq${p.Nq} Nkv${p.Nkv}`} d${p.d}${extras}`;
    }
    case 'block':
      return `B${p.B} N${p.N} dim${p.dim} h${p.heads}x${p.dimHead}${p.dtype ? ` ${p.dtype}` : ''}`;
    case 'decoder':
      return `B${p.B} dim${p.dim} h${p.heads}/${p.kvHeads}x${p.dimHead} cache${p.past}${p.dtype ? ` ${p.dtype}` : ''}`;
  }
}

/** Element count of the output in its canonical layout. */
export function outputLength(p: Problem): number {
  switch (p.kind) {
    case 'gemm':
      return p.M * p.N;
    case 'softmax':
      return p.rows * p.cols;
    case 'attention':
      return p.B * p.H * p.Nq * p.d;
    case 'block':
      return p.B * p.N * p.dim;
    case 'decoder':
      return p.B * p.dim;
  }
}

/** Why a peer that runs plain attention only skips p (GQA, a window or a softcap), or null. */
export function plainAttentionOnly(p: Problem): string | null {
  if (p.kind !== 'attention' || (p.Hkv === undefined && p.window === undefined && p.softcap === undefined)) return null;
  return 'plain attention only (no GQA, window or softcap)';
}

/** Workloads of a suite, in report order. */
export function suiteWorkloads(suite: Suite): Workload[] {
  return WORKLOADS.filter((w) => w.suites.includes(suite));
}

/**
 * Resolves a comma-separated list of names (a `*` matches any run of
 * characters: `g_*`). Throws an Error naming the unknown entries.
 */
export function selectWorkloads(list: string): Workload[] {
  const picked = new Set<string>();
  const unknown: string[] = [];
  for (const raw of list.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    if (name.includes('*')) {
      const re = new RegExp(`^${name.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
      const hits = WORKLOADS.filter((w) => re.test(w.name));
      if (hits.length === 0) unknown.push(name);
      for (const w of hits) picked.add(w.name);
    } else if (findWorkload(name)) {
      picked.add(name);
    } else {
      unknown.push(name);
    }
  }
  if (unknown.length > 0) {
    throw new Error(
      `unknown workload${unknown.length > 1 ? 's' : ''} ${unknown.map((u) => `'${u}'`).join(', ')}; ` +
        `known: ${WORKLOADS.map((w) => w.name).join(', ')}`,
    );
  }
  if (picked.size === 0) throw new Error('--workload lists no workload');
  return WORKLOADS.filter((w) => picked.has(w.name));
}
