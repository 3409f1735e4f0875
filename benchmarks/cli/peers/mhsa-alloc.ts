/**
 * mhsa called without `out`: each call allocates its result, as a script that
 * writes `const y = attention(q, k, v)` does. The `mhsa` row passes a
 * preallocated `out`; the difference between the two rows is what a result
 * without `out` costs (from the result pool: the garbage collections that give
 * its blocks back, and their rotation through the cache; docs/api.md, Memory).
 * Peers allocate their outputs too (onnxruntime-node copies each output into a
 * new JS array), so this is the like-for-like row.
 */
import { attention, matmul, prepack, setNumThreads, softmax } from '../../../lib';
import type { Inputs } from '../data';
import { attentionExtras, blockClass, keysAndValues, newBlock, newDecoder, t } from '../mhsa-impl';
import type { Problem } from '../workloads';
import type { Impl, Prepared } from './types';

export const mhsaAllocImpl: Impl = {
  name: 'mhsa-alloc',
  label: 'mhsa, allocating each result',
  maxThreads: 1024,
  timed: {
    gemm: 'matmul(a, b): a new result per call',
    softmax: 'softmax(x): a new result per call',
    attention: "attention(q, k, v, { causal }) on 'bhsd' [B, H, N, d] inputs: a new result per call",
    block: 'new MultiHeadSelfAttention({ dim, heads, dimHead, weights, norm }).forward(x): a new result per call',
    decoder: 'the layer\'s forward(x, { cache, causal }), then cache.truncate(past): a new result per call',
  },
  async load() {
    return null;
  },
  supports(p: Problem) {
    return p.kind === 'block' && !blockClass() ? 'this build has no MultiHeadSelfAttention' : null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    setNumThreads(threads);
    const dispose = () => {};
    if (p.kind === 'gemm' && x.kind === 'gemm') {
      const a = t(x.a, [p.M, p.K]);
      const b = t(x.b, [p.K, p.N]);
      const packed = p.weight ? prepack(b, { dtype: p.weight }) : undefined;
      return { dispose, run: () => matmul(a, packed ?? b).data };
    }
    if (p.kind === 'softmax' && x.kind === 'softmax') {
      const xs = t(x.x, [p.rows, p.cols]);
      return { dispose, run: () => softmax(xs).data };
    }
    if (p.kind === 'attention' && x.kind === 'attention') {
      const q = t(x.q, [p.B, p.H, p.Nq, p.d]);
      const [k, v] = keysAndValues(p, x);
      const opts = { causal: p.causal, ...attentionExtras(p) };
      return { dispose, run: () => attention(q, k, v, opts).data };
    }
    if (p.kind === 'block' && x.kind === 'block') {
      const block = newBlock(p, x);
      const xs = t(x.x, [p.B, p.N, p.dim]);
      if (block) return { dispose, run: () => block.forward(xs).data };
    }
    if (p.kind === 'decoder' && x.kind === 'decoder') {
      const step = newDecoder(p, x);
      return { dispose, run: () => step() };
    }
    throw new Error(`mhsa-alloc: inputs of kind ${x.kind} do not match a ${p.kind} problem`);
  },
};
