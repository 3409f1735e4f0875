/**
 * The ViT attention block of seed 004 with weights from a .safetensors file:
 * writes a ViT-B/16-sized layer (dim 768, 12 heads × 64, PyTorch names under
 * a model prefix) to a temp dir, loads it with loadSafetensors (F32 tensors
 * are views over the file bytes), builds the block with fromTorch, and runs a
 * batch of 197-token images, sync and async, printing shapes and timing.
 *
 * Run: npm run example:block   (or: npx ts-node examples/block.ts [batch] [iterations])
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { info, loadSafetensors, MultiHeadSelfAttention, tensor } from '../lib';
import { random, saveSafetensors } from './checkpoint';

function ms(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function main(): Promise<void> {
  const batch = Number(process.argv[2] ?? 8);
  const iterations = Number(process.argv[3] ?? 10);
  const dim = 768, heads = 12, dimHead = 64, tokens = 197;
  const inner = heads * dimHead;
  const layer = 'transformer.layers.0.0.'; // where vit-pytorch keeps the first Attention module

  // 1. A checkpoint with the seed-004 names (PyTorch Linear layout [out, in]), plus an unrelated tensor.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-example-'));
  const file = path.join(dir, 'vit_layer0.safetensors');
  const bytes = saveSafetensors(
    file,
    {
      [`${layer}norm.weight`]: tensor(random(dim, 1, 0.1).map((v) => 1 + v), [dim]),
      [`${layer}norm.bias`]: tensor(random(dim, 2, 0.1), [dim]),
      [`${layer}to_qkv.weight`]: tensor(random(3 * inner * dim, 3, 1 / Math.sqrt(dim)), [3 * inner, dim]),
      [`${layer}to_out.0.weight`]: tensor(random(dim * inner, 4, 1 / Math.sqrt(inner)), [dim, inner]),
      [`${layer}to_out.0.bias`]: tensor(random(dim, 5, 0.02), [dim]),
      'transformer.layers.0.1.net.1.weight': tensor(random(16, 6, 1), [4, 4]),
    },
    { format: 'pt', note: 'mhsa example: random ViT-B/16 attention weights' },
  );

  // 2. Load (zero-copy F32 views) and build the block from the layer's keys.
  let t0 = process.hrtime.bigint();
  const { tensors, metadata } = loadSafetensors(file);
  const loadMs = ms(t0);
  const block = MultiHeadSelfAttention.fromTorch(tensors, { heads, prefix: layer });
  console.log(info());
  console.log(`wrote ${(bytes / 2 ** 20).toFixed(1)} MiB to ${file}; loaded ${Object.keys(tensors).length} tensors in ${loadMs.toFixed(1)} ms (${metadata.note})`);
  console.log(`${block}`);

  // 3. A batch of 197-token inputs: forward, with head-averaged weights, and async.
  const x = tensor(random(batch * tokens * dim, 7, 1), [batch, tokens, dim]);
  const out = tensor(new Float32Array(batch * tokens * dim), [batch, tokens, dim]);
  const { output, weights } = block.forward(x, { returnWeights: true });
  console.log(`x ${JSON.stringify(x.shape)} -> output ${JSON.stringify(output.shape)}, weights ${JSON.stringify(weights.shape)} (averaged over ${heads} heads)`);
  const firstRow = weights.data.subarray(0, tokens).reduce((a, b) => a + b, 0);
  console.log(`first weights row sums to ${firstRow.toFixed(6)}; output[0..3] = ${Array.from(output.data.subarray(0, 4), (v) => v.toFixed(5)).join(' ')}`);

  const flops = batch * (2 * tokens * dim * 3 * inner + 4 * heads * tokens * tokens * dimHead + 2 * tokens * inner * dim);
  block.forward(x, { out }); // warm-up: sizes the workspace
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    t0 = process.hrtime.bigint();
    block.forward(x, { out });
    times.push(ms(t0));
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(
    `forward (batch ${batch}, into out): median ${median.toFixed(2)} ms, best ${times[0].toFixed(2)} ms over ${iterations} runs; ` +
      `${(flops / 1e9).toFixed(2)} GFLOP -> ${(flops / median / 1e6).toFixed(1)} GFLOP/s`,
  );

  t0 = process.hrtime.bigint();
  const ys = await Promise.all([block.forwardAsync(x), block.forwardAsync(x, { causal: true })]);
  console.log(`two forwardAsync calls (plain, causal) in ${ms(t0).toFixed(2)} ms: ${ys.map((y) => JSON.stringify(y.shape)).join(', ')}`);
  const same = Buffer.from(ys[0].data.buffer).equals(Buffer.from(out.data.buffer));
  console.log(`forwardAsync equals forward bit for bit: ${same}`);

  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
