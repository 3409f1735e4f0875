/**
 * Plain JavaScript, the floor: straightforward loops on Float32Array, one
 * thread, no blocking, no SIMD, no workers (what one writes without a
 * library). GEMM uses the i-k-j loop order so the inner loop walks rows.
 * Problems above {@link JS_MAX_FLOPS} are skipped: they would take seconds per call.
 */
import type { Inputs } from '../data';
import { decoderStep } from '../reference';
import { flops, type AttentionProblem, type Problem } from '../workloads';
import type { Impl, Prepared } from './types';

export const JS_MAX_FLOPS = 1.5e9;

/** C[M,N] = A[M,K]·B[K,N] (or A·Bᵀ with B [N,K] when bT) into c, zeroed first. */
function gemm(a: Float32Array, b: Float32Array, c: Float32Array, M: number, K: number, N: number, bT = false): void {
  c.fill(0, 0, M * N);
  if (bT) {
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += a[i * K + k] * b[j * K + k];
        c[i * N + j] = s;
      }
    }
    return;
  }
  for (let i = 0; i < M; i++) {
    for (let k = 0; k < K; k++) {
      const aik = a[i * K + k];
      const bRow = k * N;
      const cRow = i * N;
      for (let j = 0; j < N; j++) c[cRow + j] += aik * b[bRow + j];
    }
  }
}

function softmaxRows(x: Float32Array, y: Float32Array, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let m = -Infinity;
    for (let j = 0; j < cols; j++) if (x[o + j] > m) m = x[o + j];
    let sum = 0;
    for (let j = 0; j < cols; j++) {
      const e = Math.exp(x[o + j] - m);
      y[o + j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j < cols; j++) y[o + j] *= inv;
  }
}

/**
 * Attention for one (batch, head): q rows at qOff (stride qs), k/v rows at
 * kvOff (stride kvs), output rows at oOff (stride os); `shift` = Nkv − Nq.
 */
function attendHead(
  q: Float32Array, qOff: number, qs: number,
  k: Float32Array, v: Float32Array, kvOff: number, kvs: number,
  o: Float32Array, oOff: number, os: number,
  Nq: number, Nkv: number, d: number, causal: boolean, s: Float32Array,
  window?: number, softcap?: number,
): void {
  const scale = 1 / Math.sqrt(d);
  for (let i = 0; i < Nq; i++) {
    const pos = i + Nkv - Nq;
    const n = causal ? Math.min(Nkv, pos + 1) : Nkv;
    const first = window === undefined ? 0 : Math.max(0, pos - window);
    let m = -Infinity;
    for (let j = first; j < n; j++) {
      let dot = 0;
      for (let t = 0; t < d; t++) dot += q[qOff + i * qs + t] * k[kvOff + j * kvs + t];
      s[j] = dot * scale;
      if (softcap !== undefined) s[j] = softcap * Math.tanh(s[j] / softcap);
      if (s[j] > m) m = s[j];
    }
    let sum = 0;
    for (let j = first; j < n; j++) {
      s[j] = Math.exp(s[j] - m);
      sum += s[j];
    }
    const row = oOff + i * os;
    for (let t = 0; t < d; t++) o[row + t] = 0;
    for (let j = first; j < n; j++) {
      const w = s[j] / sum;
      for (let t = 0; t < d; t++) o[row + t] += w * v[kvOff + j * kvs + t];
    }
  }
}

function attentionBhsd(p: AttentionProblem, q: Float32Array, k: Float32Array, v: Float32Array, o: Float32Array): void {
  const s = new Float32Array(p.Nkv);
  const Hkv = p.Hkv ?? p.H;
  for (let bh = 0; bh < p.B * p.H; bh++) {
    const kvHead = Math.floor(bh / p.H) * Hkv + Math.floor((bh % p.H) / (p.H / Hkv));
    attendHead(q, bh * p.Nq * p.d, p.d, k, v, kvHead * p.Nkv * p.d, p.d, o, bh * p.Nq * p.d, p.d, p.Nq, p.Nkv, p.d, p.causal, s, p.window, p.softcap);
  }
}

export const jsImpl: Impl = {
  name: 'js',
  label: `plain JS loops (Node ${process.versions.node})`,
  maxThreads: 1,
  timed: {
    gemm: 'i-k-j triple loop into a new Float32Array',
    softmax: 'max, exp, sum, scale per row',
    attention: 'per query row: dot products, softmax, weighted sum of v rows',
    block: 'LayerNorm, fused QKV GEMM (x·Wqkvᵀ), per-head attention on strided views, output GEMM + bias',
    decoder: 'RMSNorm, x·Wqkvᵀ, RoPE, each head against its kv head (cache + the new row), o·Woᵀ, in float64 (the reference code)',
  },
  async load() {
    return null;
  },
  supports(p: Problem) {
    const f = flops(p);
    return f > JS_MAX_FLOPS ? `plain JS skipped above ${JS_MAX_FLOPS / 1e9} GFLOP per call (${(f / 1e9).toFixed(1)})` : null;
  },
  async prepare(p: Problem, x: Inputs): Promise<Prepared> {
    const dispose = () => {};
    if (p.kind === 'gemm' && x.kind === 'gemm') {
      return {
        dispose,
        run: () => {
          const c = new Float32Array(p.M * p.N);
          gemm(x.a, x.b, c, p.M, p.K, p.N);
          return c;
        },
      };
    }
    if (p.kind === 'softmax' && x.kind === 'softmax') {
      return {
        dispose,
        run: () => {
          const y = new Float32Array(p.rows * p.cols);
          softmaxRows(x.x, y, p.rows, p.cols);
          return y;
        },
      };
    }
    if (p.kind === 'attention' && x.kind === 'attention') {
      return {
        dispose,
        run: () => {
          const o = new Float32Array(p.B * p.H * p.Nq * p.d);
          attentionBhsd(p, x.q, x.k, x.v, o);
          return o;
        },
      };
    }
    if (p.kind === 'block' && x.kind === 'block') {
      const { B, N, dim, heads, dimHead } = p;
      const inner = heads * dimHead;
      const T = B * N;
      return {
        dispose,
        run: () => {
          const ln = new Float32Array(T * dim);
          for (let r = 0; r < T; r++) {
            const o = r * dim;
            let mean = 0;
            for (let c = 0; c < dim; c++) mean += x.x[o + c];
            mean /= dim;
            let vr = 0;
            for (let c = 0; c < dim; c++) vr += (x.x[o + c] - mean) ** 2;
            const inv = 1 / Math.sqrt(vr / dim + 1e-5);
            for (let c = 0; c < dim; c++) ln[o + c] = (x.x[o + c] - mean) * inv * x.gamma[c] + x.beta[c];
          }
          const qkv = new Float32Array(T * 3 * inner);
          gemm(ln, x.wqkv, qkv, T, dim, 3 * inner, true);
          // Head h of token n: q at qkv[n·3·inner + h·dimHead], k at + inner, v at + 2·inner.
          const att = new Float32Array(T * inner);
          const s = new Float32Array(N);
          const kView = qkv.subarray(inner);
          const vView = qkv.subarray(2 * inner);
          for (let b = 0; b < B; b++) {
            for (let h = 0; h < heads; h++) {
              const base = b * N * 3 * inner + h * dimHead;
              attendHead(
                qkv, base, 3 * inner, kView, vView, base, 3 * inner,
                att, b * N * inner + h * dimHead, inner, N, N, dimHead, false, s,
              );
            }
          }
          const y = new Float32Array(T * dim);
          gemm(att, x.wo, y, T, inner, dim, true);
          for (let r = 0; r < T; r++) for (let c = 0; c < dim; c++) y[r * dim + c] += x.bo[c];
          return y;
        },
      };
    }
    if (p.kind === 'decoder' && x.kind === 'decoder') {
      return {
        dispose,
        run: () => {
          const y = new Float32Array(p.B * p.dim);
          for (let b = 0; b < p.B; b++) decoderStep(p, x, b, y, b * p.dim);
          return y;
        },
      };
    }
    throw new Error(`js: inputs of kind ${x.kind} do not match a ${p.kind} problem`);
  },
};
