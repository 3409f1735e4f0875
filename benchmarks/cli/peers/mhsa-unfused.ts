/**
 * mhsa's own ops composed the unfused way, to show what fusion buys:
 * scores = matmul(q, k, { transposeB, alpha: 1/√d, c: causal mask }) →
 * softmax(scores) in place → matmul(P, v). The full [B, H, Nq, Nkv] score
 * tensor is materialized (allocated once at prepare, reused by every call).
 * Attention workloads only.
 */
import { matmul, setNumThreads, softmax, type Tensor } from '../../../lib';
import type { Inputs } from '../data';
import { t } from '../mhsa-impl';
import { plainAttentionOnly, type Problem } from '../workloads';
import type { Impl, Prepared } from './types';

/** Score tensors above this many bytes are skipped (N = 4096 with 8 heads needs 512 MiB). */
const MAX_SCORE_BYTES = 2 ** 30;

export const mhsaUnfusedImpl: Impl = {
  name: 'mhsa-unfused',
  label: 'mhsa unfused (matmul + softmax + matmul)',
  maxThreads: 1024,
  timed: {
    attention:
      'matmul(q, k, { transposeB, alpha: 1/√d, c: causal mask, out: scores }) → softmax(scores, { out: scores }) → matmul(scores, v, { out })',
  },
  async load() {
    return null;
  },
  supports(p: Problem) {
    if (p.kind !== 'attention') return 'attention workloads only';
    if (plainAttentionOnly(p)) return plainAttentionOnly(p);
    const bytes = p.B * p.H * p.Nq * p.Nkv * 4;
    return bytes > MAX_SCORE_BYTES ? `the score tensor would take ${(bytes / 2 ** 30).toFixed(1)} GiB` : null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    if (p.kind !== 'attention' || x.kind !== 'attention') throw new Error('mhsa-unfused: attention workloads only');
    setNumThreads(threads);
    const q = t(x.q, [p.B, p.H, p.Nq, p.d]);
    const k = t(x.k, [p.B, p.H, p.Nkv, p.d]);
    const v = t(x.v, [p.B, p.H, p.Nkv, p.d]);
    const scores = t(new Float32Array(p.B * p.H * p.Nq * p.Nkv), [p.B, p.H, p.Nq, p.Nkv]);
    const out = t(new Float32Array(p.B * p.H * p.Nq * p.d), [p.B, p.H, p.Nq, p.d]);
    // Causal, bottom-right aligned as in attention(): query i sees keys j ≤ i + (Nkv − Nq).
    let mask: Tensor | undefined;
    if (p.causal) {
      mask = t(new Float32Array(p.Nq * p.Nkv), [p.Nq, p.Nkv]);
      for (let i = 0; i < p.Nq; i++) {
        for (let j = i + p.Nkv - p.Nq + 1; j < p.Nkv; j++) mask.data[i * p.Nkv + j] = -Infinity;
      }
    }
    const alpha = 1 / Math.sqrt(p.d);
    return {
      beforeRun: () => out.data.fill(NaN),
      dispose: () => {},
      run: () => {
        matmul(q, k, { transposeB: true, alpha, ...(mask ? { c: mask, beta: 1 } : {}), out: scores });
        softmax(scores, { out: scores });
        return matmul(scores, v, { out }).data;
      },
    };
  },
};
