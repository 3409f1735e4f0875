// Why the bf16 block keeps attention in float32 (docs/design/bf16.md, "Attention stays float32"):
// ViT-B/16 batch-8 attention (B8 H12 N197 d64) by the fused float32 kernel against Q·Kᵀ and P·V on
// the bf16 GEMM, with K and V packed in bf16 per head and the scores materialized.
// Usage: node benchmarks/tools/attention-bf16-unfused.js   (needs the compiled package)
'use strict';
const { attention, info, matmul, prepack, softmax, tensor } = require('../..');

const B = 8, H = 12, N = 197, D = 64;
const elements = B * H * N * D;
const random = () => Float32Array.from({ length: elements }, () => Math.random() * 2 - 1);
const q = tensor(random(), [B, H, N, D]);
const k = tensor(random(), [B, H, N, D]);
const v = tensor(random(), [B, H, N, D]);
const out = tensor(new Float32Array(elements), [B, H, N, D]);
const scores = tensor(new Float32Array(N * N), [N, N]);
const head = (t, i) => tensor(t.data.subarray(i * N * D, (i + 1) * N * D), [N, D]);

function fusedFloat32() {
  attention(q, k, v, { out });
}
function unfusedBf16() {
  for (let i = 0; i < B * H; i++) {
    const kPacked = prepack(head(k, i), { transpose: true, dtype: 'bf16' });
    const vPacked = prepack(head(v, i), { dtype: 'bf16' });
    matmul(head(q, i), kPacked, { out: scores });
    softmax(scores, { out: scores, scale: 1 / Math.sqrt(D) });
    matmul(scores, vPacked, { out: head(out, i) });
  }
}
function msPerCall(f, calls) {
  const t0 = process.hrtime.bigint();
  for (let c = 0; c < calls; c++) f();
  return Number(process.hrtime.bigint() - t0) / 1e6 / calls;
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];

fusedFloat32();
unfusedBf16();
const rounds = { fusedFloat32: [], unfusedBf16: [] };
for (let r = 0; r < 9; r++) {
  rounds.fusedFloat32.push(msPerCall(fusedFloat32, 10));
  rounds.unfusedBf16.push(msPerCall(unfusedBf16, 10));
}
console.log(`isa ${info().isa}, bf16 ${info().bf16}, ${info().threads} threads`);
console.log(`fused float32 ${median(rounds.fusedFloat32).toFixed(2)} ms, unfused bf16 ${median(rounds.unfusedBf16).toFixed(2)} ms (medians of 9 alternating rounds of 10 calls)`);
