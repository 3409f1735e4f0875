/**
 * mhsa itself behind the adapter interface. Every call writes into a
 * preallocated `out` (the allocation-free path a hot loop uses); the output
 * is filled with NaN before each timed call, untimed, so a call that wrote
 * nothing can never pass the check with a previous call's numbers.
 */
import * as lib from '../../lib';
import { attention, info, KVCache, layerNorm, matmul, MultiHeadSelfAttention, prepack, setNumThreads, softmax, type KeyValueInput, type Tensor } from '../../lib';
import type { Inputs } from './data';
import type { Impl, Prepared } from './peers/types';
import { decoderRows, outputLength, type AttentionProblem, type DecoderProblem, type Problem } from './workloads';

/** A Tensor over data, no copy (the benchmark adapters' inputs and outputs). */
export function t(data: Float32Array, shape: number[]): Tensor {
  return { data, shape };
}

/** The slice of lib/block/'s MultiHeadSelfAttention used here. */
interface BlockClass {
  new (config: {
    dim: number;
    heads: number;
    dimHead: number;
    weights: { qkvWeight: Tensor; outWeight: Tensor; outBias: Tensor };
    norm: { weight: Tensor; bias: Tensor };
    eps: number;
  }): { forward(x: Tensor, options?: { out?: Tensor }): Tensor };
}

/**
 * The package's block class when this build exports it (looked up at run
 * time, so the benchmarks also run against a build without it).
 */
export function blockClass(): BlockClass | undefined {
  const c = (lib as Record<string, unknown>).MultiHeadSelfAttention;
  return typeof c === 'function' ? (c as BlockClass) : undefined;
}

/** The block problem's MultiHeadSelfAttention, or undefined when this build has none. */
export function newBlock(p: Extract<Problem, { kind: 'block' }>, x: Extract<Inputs, { kind: 'block' }>) {
  const Block = blockClass();
  if (!Block) return undefined;
  const { dim, heads, dimHead } = p;
  const inner = heads * dimHead;
  return new Block({
    dim, heads, dimHead, eps: 1e-5,
    weights: { qkvWeight: t(x.wqkv, [3 * inner, dim]), outWeight: t(x.wo, [dim, inner]), outBias: t(x.bo, [dim]) },
    norm: { weight: t(x.gamma, [dim]), bias: t(x.beta, [dim]) },
    ...(p.dtype ? { dtype: p.dtype } : {}),
  });
}

/**
 * The decoder problem's layer and a cache holding its past: `step()` runs one
 * decode step (which appends a position) and truncates the cache back, so
 * every timed step sees the same `past` positions.
 */
export function newDecoder(p: DecoderProblem, x: Extract<Inputs, { kind: 'decoder' }>) {
  const { B, past, dim, heads, kvHeads, dimHead } = p;
  const layer = new MultiHeadSelfAttention({
    dim, heads, kvHeads, dimHead, eps: 1e-5,
    weights: { qkvWeight: t(x.wqkv, [decoderRows(p), dim]), outWeight: t(x.wo, [dim, heads * dimHead]) },
    norm: { type: 'rms', weight: t(x.gamma, [dim]) },
    rope: { theta: p.theta },
    ...(p.dtype ? { dtype: p.dtype } : {}),
  });
  const cache = new KVCache({ batch: B, kvHeads, headDim: dimHead, maxLength: past + 1, dtype: p.dtype ?? 'float32' });
  cache.append(t(x.pastK, [B, kvHeads, past, dimHead]), t(x.pastV, [B, kvHeads, past, dimHead]));
  const xs = t(x.x, [B, 1, dim]);
  return (out?: Tensor): Float32Array => {
    const y = layer.forward(xs, { cache, causal: true, ...(out ? { out } : {}) }).data;
    cache.truncate(past);
    return y;
  };
}

const DECODER_OPS =
  "new MultiHeadSelfAttention({ dim, heads, kvHeads, dimHead, weights, norm: { type: 'rms' }, rope }).forward(x, { cache, causal }), " +
  'then cache.truncate(past) (lib/block/decoder.ts: RMSNorm → packed QKV matmul → RoPE → KVCache.append → attention over the cache views → output matmul)';

const BLOCK_OPS =
  'layerNorm → three matmul(x, W{q,k,v}, { transposeB }) on row slices of the fused Wqkv (no copy) → ' +
  'attention(q, k, v, { heads }) on the packed [B, N, inner] projections → matmul(o, Wo, { transposeB, c: bias })';

/**
 * The attention problem's k and v as mhsa takes them: float32 tensors, or,
 * for kv 'bf16' or 'int8', the views of a KVCache of that dtype holding them
 * (rounded or quantized once, untimed).
 */
export function keysAndValues(p: AttentionProblem, x: Extract<Inputs, { kind: 'attention' }>): [KeyValueInput, KeyValueInput] {
  const shape = [p.B, p.Hkv ?? p.H, p.Nkv, p.d];
  if (p.kv === undefined) return [t(x.k, shape), t(x.v, shape)];
  const cache = new KVCache({ batch: p.B, kvHeads: shape[1], headDim: p.d, maxLength: p.Nkv, dtype: p.kv });
  cache.append(t(x.k, shape), t(x.v, shape));
  return [cache.keys, cache.values];
}

/** The attention options a workload adds to causal: a sliding window, a softcap. */
export function attentionExtras(p: AttentionProblem): { window?: { left: number }; softcap?: number } {
  return {
    ...(p.window !== undefined ? { window: { left: p.window } } : {}),
    ...(p.softcap !== undefined ? { softcap: p.softcap } : {}),
  };
}

export const mhsaImpl: Impl = {
  name: 'mhsa',
  label: 'mhsa',
  maxThreads: 1024,
  timed: {
    gemm: "matmul(a, b, { out }); for g_*w, g_*_bf16 and g_*_int8 b is prepack(b, { dtype: 'float32' | 'bf16' | 'int8' }) (untimed)",
    softmax: 'softmax(x, { out })',
    attention:
      "attention(q, k, v, { causal, window, softcap, out }) on 'bhsd' [B, H, N, d] inputs (k, v [B, Hkv, N, d]; " +
      "for kv 'bf16' or 'int8', a KVCache's views in that dtype)",
    block: BLOCK_OPS,
    decoder: `${DECODER_OPS}, with { out }`,
  },
  async load() {
    const i = info();
    this.label = `mhsa ${i.version} (${i.isa}, bf16 ${i.bf16}, int8 ${i.int8}${i.blas ? `, ${i.blas}` : ''})`;
    (this.timed as Record<string, string>).block = blockClass()
      ? 'new MultiHeadSelfAttention({ dim, heads, dimHead, weights, norm }).forward(x, { out }) (lib/block/multi-head-self-attention.ts: ' +
        'one fused QKV matmul with the LayerNorm applied as a is packed → attention reading q, k, v in place → output matmul + bias, ' +
        'one native call, workspace reused)'
      : BLOCK_OPS;
    return null;
  },
  supports() {
    return null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    setNumThreads(threads);
    const out = new Float32Array(outputLength(p));
    const beforeRun = () => out.fill(NaN);
    const dispose = () => {};
    if (p.kind === 'gemm' && x.kind === 'gemm') {
      const a = t(x.a, [p.M, p.K]);
      const b = t(x.b, [p.K, p.N]);
      const o = t(out, [p.M, p.N]);
      const packed = p.weight ? prepack(b, { dtype: p.weight }) : undefined;
      return { beforeRun, dispose, run: () => matmul(a, packed ?? b, { out: o }).data };
    }
    if (p.kind === 'softmax' && x.kind === 'softmax') {
      const xs = t(x.x, [p.rows, p.cols]);
      const o = t(out, [p.rows, p.cols]);
      return { beforeRun, dispose, run: () => softmax(xs, { out: o }).data };
    }
    if (p.kind === 'attention' && x.kind === 'attention') {
      const q = t(x.q, [p.B, p.H, p.Nq, p.d]);
      const [k, v] = keysAndValues(p, x);
      const o = t(out, [p.B, p.H, p.Nq, p.d]);
      const opts = { causal: p.causal, out: o, ...attentionExtras(p) };
      return { beforeRun, dispose, run: () => attention(q, k, v, opts).data };
    }
    if (p.kind === 'block' && x.kind === 'block') {
      const { B, N, dim, heads } = p;
      const block = newBlock(p, x);
      if (block) {
        const xs = t(x.x, [B, N, dim]);
        const y = t(out, [B, N, dim]);
        return { beforeRun, dispose, run: () => block.forward(xs, { out: y }).data };
      }
      const inner = heads * p.dimHead;
      const xs = t(x.x, [B, N, dim]);
      const ln = t(new Float32Array(B * N * dim), [B, N, dim]);
      // Wqkv [3·inner, dim]: rows [0, inner) project q, then k, then v; each slice is contiguous.
      const w = (i: number) => t(x.wqkv.subarray(i * inner * dim, (i + 1) * inner * dim), [inner, dim]);
      const wq = w(0), wk = w(1), wv = w(2);
      const q = t(new Float32Array(B * N * inner), [B, N, inner]);
      const k = t(new Float32Array(B * N * inner), [B, N, inner]);
      const v = t(new Float32Array(B * N * inner), [B, N, inner]);
      const o = t(new Float32Array(B * N * inner), [B, N, inner]);
      const wo = t(x.wo, [dim, inner]);
      const bo = t(x.bo, [dim]);
      const gamma = t(x.gamma, [dim]);
      const beta = t(x.beta, [dim]);
      const y = t(out, [B, N, dim]);
      return {
        beforeRun,
        dispose,
        run: () => {
          layerNorm(xs, { weight: gamma, bias: beta, eps: 1e-5, out: ln });
          matmul(ln, wq, { transposeB: true, out: q });
          matmul(ln, wk, { transposeB: true, out: k });
          matmul(ln, wv, { transposeB: true, out: v });
          attention(q, k, v, { heads, out: o });
          return matmul(o, wo, { transposeB: true, c: bo, out: y }).data;
        },
      };
    }
    if (p.kind === 'decoder' && x.kind === 'decoder') {
      const step = newDecoder(p, x);
      const y = t(out, [p.B, 1, p.dim]);
      return { beforeRun, dispose, run: () => step(y) };
    }
    throw new Error(`mhsa: inputs of kind ${x.kind} do not match a ${p.kind} problem`);
  },
};
