/**
 * A LLaMA/Mistral-style attention layer as a decoder runs it: writes a layer
 * with Hugging Face's names (q_proj, k_proj and v_proj narrower than q for
 * grouped-query attention, o_proj, the layer's input RMSNorm) to a temp dir,
 * loads it with loadSafetensors, builds the block with fromTorch plus RoPE
 * and RMSNorm, then runs a prompt's prefill and 32 decode steps over a
 * KVCache, and checks the last step against the whole sequence run at once.
 *
 * Run: npm run example:decoder   (or: npx ts-node examples/decoder.ts [promptTokens])
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KVCache, loadSafetensors, MultiHeadSelfAttention, tensor, type Tensor } from '../lib';
import { random, saveSafetensors } from './checkpoint';

function ms(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function main(): void {
  const promptTokens = Number(process.argv[2] ?? 100);
  const steps = 32;
  // A small LLaMA-3-like layer: 16 query heads share 4 kv heads of 64.
  const dim = 1024, heads = 16, kvHeads = 4, dimHead = 64;
  const inner = heads * dimHead, kvInner = kvHeads * dimHead;
  const layer = 'model.layers.0.';

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-decoder-'));
  const file = path.join(dir, 'layer0.safetensors');
  saveSafetensors(
    file,
    {
      [`${layer}input_layernorm.weight`]: tensor(random(dim, 1, 0.1).map((v) => 1 + v), [dim]),
      [`${layer}self_attn.q_proj.weight`]: tensor(random(inner * dim, 2, 1 / Math.sqrt(dim)), [inner, dim]),
      [`${layer}self_attn.k_proj.weight`]: tensor(random(kvInner * dim, 3, 1 / Math.sqrt(dim)), [kvInner, dim]),
      [`${layer}self_attn.v_proj.weight`]: tensor(random(kvInner * dim, 4, 1 / Math.sqrt(dim)), [kvInner, dim]),
      [`${layer}self_attn.o_proj.weight`]: tensor(random(dim * inner, 5, 1 / Math.sqrt(inner)), [dim, inner]),
    },
    { format: 'pt', note: 'mhsa example: random LLaMA-style attention weights' },
  );

  // fromTorch reads the projections (kvHeads from k_proj's rows); the layer's RMSNorm lives
  // beside self_attn in LLaMA's layout, so it is added through the constructor's config.
  const { tensors } = loadSafetensors(file);
  const fromCheckpoint = MultiHeadSelfAttention.fromTorch(tensors, { heads, prefix: `${layer}self_attn`, rope: { theta: 500000 } });
  const qkv = (name: string) => tensors[`${layer}self_attn.${name}.weight`].data;
  const block = new MultiHeadSelfAttention({
    dim, heads, kvHeads: fromCheckpoint.kvHeads, dimHead,
    weights: {
      qkvWeight: tensor(Float32Array.from([...qkv('q_proj'), ...qkv('k_proj'), ...qkv('v_proj')]), [inner + 2 * kvInner, dim]),
      outWeight: tensors[`${layer}self_attn.o_proj.weight`],
    },
    norm: { type: 'rms', weight: tensors[`${layer}input_layernorm.weight`] },
    rope: { theta: 500000 },
  });
  console.log(`${block}`);

  const total = promptTokens + steps;
  const sequence = random(total * dim, 6, 1);
  const slice = (t0: number, t1: number): Tensor => tensor(sequence.slice(t0 * dim, t1 * dim), [1, t1 - t0, dim]);

  const cache = new KVCache({ batch: 1, kvHeads, headDim: dimHead, maxLength: total });
  let t0 = process.hrtime.bigint();
  block.forward(slice(0, promptTokens), { cache, causal: true });
  console.log(`prefill of ${promptTokens} tokens: ${ms(t0).toFixed(2)} ms; cache holds ${cache.length}`);

  const stepTimes: number[] = [];
  let last: Tensor | undefined;
  for (let t = promptTokens; t < total; t++) {
    t0 = process.hrtime.bigint();
    last = block.forward(slice(t, t + 1), { cache, causal: true });
    stepTimes.push(ms(t0));
  }
  stepTimes.sort((a, b) => a - b);
  console.log(`${steps} decode steps: median ${stepTimes[steps >> 1].toFixed(3)} ms, best ${stepTimes[0].toFixed(3)} ms; cache holds ${cache.length}`);

  // The last token, computed again from the whole sequence at once.
  const whole = block.forward(slice(0, total), { causal: true });
  const again = whole.data.subarray((total - 1) * dim);
  let diff = 0, norm = 0;
  for (let i = 0; i < dim; i++) {
    diff += (again[i] - last!.data[i]) ** 2;
    norm += again[i] ** 2;
  }
  console.log(`last decode step vs the whole sequence: relative difference ${Math.sqrt(diff / norm).toExponential(2)}`);

  fs.rmSync(dir, { recursive: true, force: true });
}

main();
