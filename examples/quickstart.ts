/**
 * Multi-head self-attention from the seeds' equations, on random data:
 *   Q, K, V = X·Wq, X·Wk, X·Wv;  per head O = softmax(Q·Kᵀ/√d)·V;  Y = O·Wo.
 *
 * Run: npm run example   (or: npx ts-node examples/quickstart.ts)
 */
import { attention, attentionAsync, info, matmul, softmax, tensor, type Tensor } from '../lib';

function random(shape: number[], seed: number): Tensor {
  let s = seed >>> 0;
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = (s / 2 ** 32 - 0.5) * 0.2;
  }
  return tensor(data, shape);
}

async function main(): Promise<void> {
  const batch = 2, tokens = 197, dim = 768, heads = 12;
  const x = random([batch, tokens, dim], 1);
  const wq = random([dim, dim], 2), wk = random([dim, dim], 3), wv = random([dim, dim], 4), wo = random([dim, dim], 5);

  const t0 = process.hrtime.bigint();
  // A 2-D weight against a batched input is a projection: [batch, tokens, dim] · [dim, dim].
  const q = matmul(x, wq), k = matmul(x, wk), v = matmul(x, wv);
  // [batch, tokens, heads·headDim] is split into heads by the `heads` option: no reshape or copy.
  const o = attention(q, k, v, { heads });
  const y = matmul(o, wo);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;

  console.log(info());
  console.log(`x ${JSON.stringify(x.shape)} -> q/k/v ${JSON.stringify(q.shape)} -> heads ${heads} -> y ${JSON.stringify(y.shape)} in ${ms.toFixed(2)} ms`);

  // The same attention, off the event loop, returning the head probabilities too.
  const { output, weights } = await attentionAsync(q, k, v, { heads, causal: true, returnWeights: true });
  const rowSum = weights.data.subarray(0, tokens).reduce((a, b) => a + b, 0);
  console.log(`causal output ${JSON.stringify(output.shape)}, weights ${JSON.stringify(weights.shape)}, first row sums to ${rowSum.toFixed(6)}`);

  // softmax along the last axis, in place.
  const logits = tensor([1, 2, 3, 4], [1, 4]);
  softmax(logits, { out: logits });
  console.log('softmax([1, 2, 3, 4]) =', Array.from(logits.data, (p) => p.toFixed(4)).join(' '));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
