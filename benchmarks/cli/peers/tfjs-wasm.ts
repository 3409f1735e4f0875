/**
 * TensorFlow.js with the WebAssembly backend (XNNPACK, SIMD). In Node the
 * backend runs on one thread: its threaded build starts workers from blob:
 * URLs, which Node's worker_threads refuse, so rows with more than one thread
 * are skipped. Inputs are uploaded once (untimed); a timed call runs the ops
 * and reads the result back with dataSync(), as a caller must to use it.
 *
 * Loaded with require() at run time: when missing, this peer is skipped with a note.
 */
import type { Inputs } from '../data';
import { plainAttentionOnly, type Problem } from '../workloads';
import type { Impl, Prepared } from './types';

/** The slice of the tfjs API used here. */
interface TfTensor {
  readonly shape: number[];
  dataSync(): ArrayLike<number>;
  dispose(): void;
  reshape(shape: number[]): TfTensor;
  transpose(perm?: number[]): TfTensor;
  sub(b: TfTensor): TfTensor;
  add(b: TfTensor | number): TfTensor;
  mul(b: TfTensor | number): TfTensor;
  square(): TfTensor;
  rsqrt(): TfTensor;
  mean(axis: number, keepDims: boolean): TfTensor;
}
interface Tf {
  version: { tfjs: string };
  tensor(data: Float32Array, shape: number[], dtype?: 'float32'): TfTensor;
  matMul(a: TfTensor, b: TfTensor, transposeA?: boolean, transposeB?: boolean): TfTensor;
  softmax(x: TfTensor, dim?: number): TfTensor;
  slice(x: TfTensor, begin: number[], size: number[]): TfTensor;
  stack(xs: TfTensor[]): TfTensor;
  tidy<T extends TfTensor>(fn: () => T): T;
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
  getBackend(): string;
  engine(): { startScope(): void; endScope(): void };
}

const TFJS_INSTALL_HINT = 'install both with `npm i @tensorflow/tfjs @tensorflow/tfjs-backend-wasm`';

let tf: Tf | undefined;

/** Runs fn with console.log/warn/info silenced (tfjs prints hints when it loads in Node). */
async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const saved = [console.log, console.warn, console.info];
  console.log = console.warn = console.info = () => {};
  try {
    return await fn();
  } finally {
    [console.log, console.warn, console.info] = saved;
  }
}

export const tfjsWasmImpl: Impl = {
  name: 'tfjs-wasm',
  label: '@tensorflow/tfjs wasm backend',
  maxThreads: 1,
  timed: {
    gemm: 'tf.matMul(a, b).dataSync()',
    softmax: 'tf.softmax(x).dataSync()',
    attention:
      'per (batch, head) tensors uploaded once; per head 2-D matMul(q·scale, kᵀ) (K·qᵀ for a decode step) ' +
      '(+ causal mask) → softmax → matMul(·, v); stacked, then dataSync()',
    block:
      'LayerNorm from mean/variance → matMul(x, Wqkvᵀ) (kernel pre-transposed) → per (batch, head) slices, SDPA as above → ' +
      'merge heads → matMul(o, Woᵀ) + bias, then dataSync()',
  },
  async load() {
    let err: string | null = null;
    await quietly(async () => {
      try {
        tf = require('@tensorflow/tfjs') as Tf;
      } catch (e) {
        err = `@tensorflow/tfjs is not installed (${firstLine(e)}); ${TFJS_INSTALL_HINT}`;
        return;
      }
      try {
        require('@tensorflow/tfjs-backend-wasm');
      } catch (e) {
        err = `@tensorflow/tfjs-backend-wasm is not installed (${firstLine(e)}); ${TFJS_INSTALL_HINT}`;
        return;
      }
      try {
        const ok = await tf.setBackend('wasm');
        await tf.ready();
        if (!ok || tf.getBackend() !== 'wasm') err = 'the tfjs wasm backend failed to initialize';
      } catch (e) {
        err = `the tfjs wasm backend failed to initialize (${firstLine(e)})`;
      }
    });
    if (err) return err;
    this.label = `@tensorflow/tfjs ${tf!.version.tfjs} wasm backend (1 thread)`;
    return null;
  },
  supports(p: Problem) {
    if (p.kind === 'decoder') return 'the decoder step (RoPE, a KV cache) is not built from tfjs ops here';
    return plainAttentionOnly(p);
  },
  async prepare(p: Problem, x: Inputs): Promise<Prepared> {
    const t = tf!;
    const owned: TfTensor[] = [];
    const up = (data: Float32Array, shape: number[]) => {
      const u = t.tensor(data, shape, 'float32');
      owned.push(u);
      return u;
    };
    let body: () => TfTensor;
    if (p.kind === 'gemm' && x.kind === 'gemm') {
      const a = up(x.a, [p.M, p.K]);
      const b = up(x.b, [p.K, p.N]);
      body = () => t.matMul(a, b);
    } else if (p.kind === 'softmax' && x.kind === 'softmax') {
      const xs = up(x.x, [p.rows, p.cols]);
      body = () => t.softmax(xs);
    } else if (p.kind === 'attention' && x.kind === 'attention') {
      const { B, H, Nq, Nkv, d } = p;
      // One tensor per (batch, head), uploaded once: tf.unstack inside the call costs more than the math.
      const per = (data: Float32Array, n: number) =>
        Array.from({ length: B * H }, (_, i) => up(data.subarray(i * n * d, (i + 1) * n * d), [n, d]));
      const qs = per(x.q, Nq);
      const ks = per(x.k, Nkv);
      const vs = per(x.v, Nkv);
      const mask = p.causal ? up(causalMask(Nq, Nkv), [Nq, Nkv]) : undefined;
      const scale = 1 / Math.sqrt(d);
      body = () => {
        const heads = qs.map((qh, i) => t.tidy(() => sdpa2d(t, qh.mul(scale), ks[i], vs[i], mask)));
        return t.stack(heads).reshape([B, H, Nq, d]);
      };
    } else if (p.kind === 'block' && x.kind === 'block') {
      const { B, N, dim, heads, dimHead } = p;
      const inner = heads * dimHead;
      const xs = up(x.x, [B * N, dim]);
      const gamma = up(x.gamma, [dim]);
      const beta = up(x.beta, [dim]);
      // Dense-layer kernels are stored [in, out] in tfjs: the PyTorch weights transposed once, untimed.
      const wqkv = up(transpose(x.wqkv, 3 * inner, dim), [dim, 3 * inner]);
      const wo = up(transpose(x.wo, dim, inner), [inner, dim]);
      const bo = up(x.bo, [dim]);
      const scale = 1 / Math.sqrt(dimHead);
      body = () => {
        const xc = xs.sub(xs.mean(-1, true));
        const ln = xc.mul(xc.square().mean(-1, true).add(1e-5).rsqrt()).mul(gamma).add(beta);
        const qkv = t.matMul(ln, wqkv); // [B·N, 3·inner]
        const outs: TfTensor[] = [];
        for (let b = 0; b < B; b++) {
          for (let h = 0; h < heads; h++) {
            const part = (i: number) => t.slice(qkv, [b * N, i * inner + h * dimHead], [N, dimHead]);
            outs.push(t.tidy(() => sdpa2d(t, part(0).mul(scale), part(1), part(2), undefined)));
          }
        }
        // [B·heads] of [N, dimHead] → [B, heads, N, dimHead] → [B, N, heads, dimHead] → [B·N, inner]
        const merged = t.stack(outs).reshape([B, heads, N, dimHead]).transpose([0, 2, 1, 3]).reshape([B * N, inner]);
        return t.matMul(merged, wo).add(bo);
      };
    } else {
      throw new Error(`tfjs-wasm: inputs of kind ${x.kind} do not match a ${p.kind} problem`);
    }
    return {
      run: () => {
        const y = t.tidy(body);
        try {
          const d = y.dataSync();
          return d instanceof Float32Array ? d : Float32Array.from(d);
        } finally {
          y.dispose();
        }
      },
      dispose: () => {
        for (const o of owned) o.dispose();
      },
    };
  },
};

/**
 * One head of SDPA with 2-D matMuls (tfjs-wasm runs batched matMuls and
 * transposeB=true far slower than plain 2-D products, so the operand is
 * transposed explicitly): q is already scaled. For few queries (a decode step)
 * the scores are computed as K·qᵀ, transposing the tiny q instead of the cache.
 */
function sdpa2d(t: Tf, q: TfTensor, k: TfTensor, v: TfTensor, mask: TfTensor | undefined): TfTensor {
  const [Nq, d] = q.shape;
  let s = Nq < d ? t.matMul(k, q.transpose()).transpose() : t.matMul(q, k.transpose());
  if (mask) s = s.add(mask);
  return t.matMul(t.softmax(s), v);
}

/** b [rows, cols] → bᵀ [cols, rows]. */
function transpose(b: Float32Array, rows: number, cols: number): Float32Array {
  const r = new Float32Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) r[j * rows + i] = b[i * cols + j];
  return r;
}

/** Additive causal mask: 0 where key j is visible to query i (j ≤ i + Nkv − Nq), −1e30 elsewhere. */
function causalMask(Nq: number, Nkv: number): Float32Array {
  const m = new Float32Array(Nq * Nkv);
  for (let i = 0; i < Nq; i++) for (let j = 0; j < Nkv; j++) if (j > i + Nkv - Nq) m[i * Nkv + j] = -1e30;
  return m;
}

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split('\n')[0];
}
