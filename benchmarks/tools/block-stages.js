// Times each stage of the seed-004 block (ViT-B/16 attention, 197 tokens) next to the whole
// MultiHeadSelfAttention.forward, to show where the block's time goes: each stage's median, GFLOP/s
// and share of the stages' sum, and what forward takes beyond that sum. The stages run round-robin,
// one call each per round, so every median comes from the same minutes of a noisy shared host.
// Usage: node benchmarks/tools/block-stages.js [batch] [seconds]   (needs the compiled package: npm install)
const m = require('../..');

const B = Number(process.argv[2]) || 1;
const seconds = Number(process.argv[3]) || 10;
const [T, D, H, dh] = [197, 768, 12, 64];
const inner = H * dh;
const rnd = (n, s = 0.05) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * s);
const t3 = (w, data) => ({ data: data ?? new Float32Array(B * T * w), shape: [B, T, w] });

const x = t3(D, rnd(B * T * D, 1));
const wqkv = { data: rnd(3 * inner * D), shape: [3 * inner, D] };
const bqkv = { data: rnd(3 * inner), shape: [3 * inner] };
const wo = { data: rnd(D * inner), shape: [D, inner] };
const bo = { data: rnd(D), shape: [D] };
const norm = { weight: { data: new Float32Array(D).fill(1), shape: [D] }, bias: { data: new Float32Array(D), shape: [D] } };
const block = new m.MultiHeadSelfAttention({ dim: D, heads: H, dimHead: dh, weights: { qkvWeight: wqkv, qkvBias: bqkv, outWeight: wo, outBias: bo }, norm });
const packedQkv = m.prepack(wqkv, { transpose: true });
const packedOut = m.prepack(wo, { transpose: true });
const xn = t3(D), qkv = t3(3 * inner), o = t3(inner), out = t3(D);
// Attention on separate contiguous q, k, v (the stage as a user would call it).
const q = t3(inner, rnd(B * T * inner, 1)), k = t3(inner, rnd(B * T * inner, 1)), v = t3(inner, rnd(B * T * inner, 1));

const flops = {
  qkv: 2 * B * T * D * 3 * inner,
  attention: 4 * B * H * T * T * dh,
  out: 2 * B * T * inner * D,
};
flops.forward = flops.qkv + flops.attention + flops.out;
const stages = [
  ['forward', () => block.forward(x, { out })],
  ['layerNorm', () => m.layerNorm(x, { ...norm, out: xn })],
  ['qkv', () => m.matmul(xn, packedQkv, { c: bqkv, out: qkv })],
  ['attention', () => m.attention(q, k, v, { heads: H, out: o })],
  ['out', () => m.matmul(o, packedOut, { c: bo, out })],
];
const times = Object.fromEntries(stages.map(([name]) => [name, []]));
for (let i = 0; i < 3; i++) for (const [, f] of stages) f();
const start = Date.now();
while (Date.now() - start < seconds * 1000) {
  for (const [name, f] of stages) {
    const t0 = process.hrtime.bigint();
    f();
    times[name].push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
}
const median = (a) => a.slice().sort((p, r) => p - r)[a.length >> 1];
const med = Object.fromEntries(stages.map(([name]) => [name, median(times[name])]));
const stageSum = med.layerNorm + med.qkv + med.attention + med.out;
console.log(`B${B}, ${times.forward.length} rounds; ${m.info().isa}, ${m.info().threads} threads`);
for (const [name] of stages) {
  const share = name === 'forward' ? '' : `${((100 * med[name]) / stageSum).toFixed(0).padStart(3)} % of the stages`;
  const rate = flops[name] ? `${(flops[name] / med[name] / 1e6).toFixed(1).padStart(6)} GFLOP/s` : ''.padStart(14);
  console.log(`${name.padEnd(10)} median ${med[name].toFixed(3).padStart(8)} ms  ${rate}  ${share}`);
}
console.log(`sum of stages ${stageSum.toFixed(3)} ms; forward − sum ${(med.forward - stageSum).toFixed(3)} ms`);
