/**
 * MultiHeadSelfAttention: every torch_mha and vit_attention reference fixture
 * (PyTorch's nn.MultiheadAttention and the seed-004 ViT block, float64) within
 * 1e-5 relative, outputs and head-averaged weights; fromTorch with every
 * naming scheme and with prefixes; a float64 reference of the whole block for
 * causal, mask, key padding, 2-D input and the identity rule; workspace reuse
 * and concurrency; and the error contract of the constructor, fromTorch and
 * forward/forwardAsync. Replay a failure with MHSA_TEST_SEED=<seed>.
 */
import {
  layerNorm,
  loadSafetensors,
  matmul,
  MultiHeadSelfAttention,
  prepack,
  tensor,
  type MultiHeadSelfAttentionConfig,
  type MultiHeadSelfAttentionForwardOptions,
  type StateDict,
  type Tensor,
} from '../lib';
import { layerNormMatmul, layerNormMatmulAsync } from '../lib/matmul';
import { expectBitEqual, expectClose, pickSeed, randInt, randomFloat32, rngFor, type Rng } from './helpers/random';
import { numel, refBlock, type RefParams } from './helpers/reference';
import { loadFixtures, type SafetensorsTensor } from './helpers/safetensors';

const SEED = pickSeed();
const TOL = 1e-5;

// ---------------------------------------------------------------------------
// Fixtures

interface BlockFixture {
  name: string;
  op: 'torch_mha' | 'vit_attention';
  config: Record<string, number>;
  tensors: Record<string, SafetensorsTensor>;
}

let fixtureError: Error | undefined;
let fixtures: BlockFixture[] = [];
try {
  fixtures = loadFixtures()
    .filter((f) => f.op === 'torch_mha' || f.op === 'vit_attention')
    .map((f) => ({
      name: f.name,
      op: f.op as BlockFixture['op'],
      config: f.config as Record<string, number>,
      tensors: f.file.tensors,
    }));
} catch (e) {
  fixtureError = e as Error;
}
const torchFixtures = fixtures.filter((f) => f.op === 'torch_mha');
const vitFixtures = fixtures.filter((f) => f.op === 'vit_attention');

function f32(fx: BlockFixture, name: string): Tensor {
  const t = fx.tensors[name];
  if (!t) throw new Error(`${fx.name}: missing tensor '${name}'`);
  if (t.dtype !== 'F32') throw new Error(`${fx.name}: tensor '${name}' must be F32`);
  return { data: t.data as Float32Array, shape: t.shape };
}

function heads(fx: BlockFixture): number {
  return fx.op === 'torch_mha' ? fx.config.numHeads : fx.config.heads;
}

function keyPadding(fx: BlockFixture): Uint8Array | undefined {
  return fx.tensors.keyPaddingMask?.data as Uint8Array | undefined;
}

/** The fixture's parameters under its own (PyTorch) names. */
function stateDict(fx: BlockFixture): Record<string, Tensor> {
  const names =
    fx.op === 'torch_mha'
      ? ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']
      : ['norm.weight', 'norm.bias', 'to_qkv.weight', 'to_out.0.weight', 'to_out.0.bias'];
  const sd: Record<string, Tensor> = {};
  for (const n of names) if (fx.tensors[n]) sd[n] = f32(fx, n);
  return sd;
}

/** Rows [i·n, (i+1)·n) of a [rows, cols] (or [rows]) tensor, copied. */
function rowsOf(t: Tensor, i: number, n: number): Tensor {
  const cols = t.shape.length === 2 ? t.shape[1] : 1;
  return { data: t.data.slice(i * n * cols, (i + 1) * n * cols), shape: t.shape.length === 2 ? [n, cols] : [n] };
}

/** torch_mha weights under Hugging Face names: q/k/v split out of in_proj_weight. */
function hfStateDict(fx: BlockFixture, qkv: [string, string, string], out: string, prefix = ''): Record<string, Tensor> {
  const w = f32(fx, 'in_proj_weight');
  const b = f32(fx, 'in_proj_bias');
  const inner = w.shape[0] / 3;
  const sd: Record<string, Tensor> = {};
  qkv.forEach((n, i) => {
    sd[`${prefix}${n}.weight`] = rowsOf(w, i, inner);
    sd[`${prefix}${n}.bias`] = rowsOf(b, i, inner);
  });
  sd[`${prefix}${out}.weight`] = f32(fx, 'out_proj.weight');
  sd[`${prefix}${out}.bias`] = f32(fx, 'out_proj.bias');
  return sd;
}

function poisoned(shape: readonly number[]): Tensor {
  return { data: new Float32Array(numel(shape)).fill(NaN), shape: [...shape] };
}

function snapshot(t: Tensor): Float32Array {
  return t.data.slice();
}

/** Output (and head-averaged weights when the fixture has them) within TOL of the fixture. */
function expectFixture(fx: BlockFixture, label: string, block: MultiHeadSelfAttention, opts: MultiHeadSelfAttentionForwardOptions = {}): Tensor {
  const x = f32(fx, 'x');
  const expected = f32(fx, 'expected');
  const before = snapshot(x);
  const ctx = { seed: SEED, label: `${fx.name} ${label}`, shape: expected.shape };
  const out = poisoned(expected.shape);
  const kpm = keyPadding(fx);
  const withWeights = fx.tensors.expected_weights !== undefined;
  const r = block.forward(x, { ...opts, keyPaddingMask: kpm, out, returnWeights: withWeights });
  const output = withWeights ? (r as { output: Tensor }).output : (r as Tensor);
  expect(output).toBe(out);
  expect(output.shape).toEqual(expected.shape);
  expectClose(output.data, expected.data, TOL, ctx);
  if (withWeights) {
    const ew = f32(fx, 'expected_weights');
    const w = (r as { weights: Tensor }).weights;
    expect(w.shape).toEqual(ew.shape);
    expectClose(w.data, ew.data, TOL, { ...ctx, label: `${ctx.label} weights` });
  }
  expect(Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength).equals(Buffer.from(before.buffer))).toBe(true);
  return output;
}

// ---------------------------------------------------------------------------
// Float64 reference of the whole block

function randomParams(rng: Rng, dim: number, heads: number, dimHead: number, parts: { qkvBias?: boolean; out?: boolean; outBias?: boolean; norm?: boolean; normBias?: boolean }): RefParams {
  const inner = heads * dimHead;
  const s = 1 / Math.sqrt(dim);
  return {
    dim,
    heads,
    dimHead,
    qkvW: randomFloat32(rng, 3 * inner * dim).map((v) => v * s * 2),
    qkvB: parts.qkvBias ? randomFloat32(rng, 3 * inner).map((v) => v * 0.2) : undefined,
    outW: parts.out ? randomFloat32(rng, dim * inner).map((v) => v / Math.sqrt(inner)) : undefined,
    outB: parts.out && parts.outBias ? randomFloat32(rng, dim).map((v) => v * 0.2) : undefined,
    normW: parts.norm ? randomFloat32(rng, dim).map((v) => 1 + v * 0.5) : undefined,
    normB: parts.norm && parts.normBias ? randomFloat32(rng, dim).map((v) => v * 0.2) : undefined,
  };
}

function blockFrom(p: RefParams): MultiHeadSelfAttention {
  const inner = p.heads * p.dimHead;
  const config: MultiHeadSelfAttentionConfig = {
    dim: p.dim,
    heads: p.heads,
    dimHead: p.dimHead,
    weights: {
      qkvWeight: tensor(p.qkvW, [3 * inner, p.dim]),
      qkvBias: p.qkvB ? tensor(p.qkvB, [3 * inner]) : undefined,
      outWeight: p.outW ? tensor(p.outW, [p.dim, inner]) : undefined,
      outBias: p.outB ? tensor(p.outB, [p.dim]) : undefined,
    },
  };
  if (p.normW) config.norm = { weight: tensor(p.normW, [p.dim]), bias: p.normB ? tensor(p.normB, [p.dim]) : undefined };
  if (p.eps !== undefined) config.eps = p.eps;
  return new MultiHeadSelfAttention(config);
}

// ---------------------------------------------------------------------------

describe(`MultiHeadSelfAttention: reference fixtures (seed ${SEED})`, () => {
  test('the fixtures are present: at least one torch_mha and one vit_attention', () => {
    if (fixtureError) throw fixtureError;
    expect(torchFixtures.length).toBeGreaterThanOrEqual(1);
    expect(vitFixtures.length).toBeGreaterThanOrEqual(1);
  });

  for (const fx of fixtures) {
    describe(`${fx.op}: ${fx.name}`, () => {
      test('fromTorch with its own names: output and weights within 1e-5; forwardAsync bit-identical', async () => {
        const sd = { ...stateDict(fx), x: f32(fx, 'x'), expected: f32(fx, 'expected') }; // unknown keys are ignored
        const block = MultiHeadSelfAttention.fromTorch(sd, { heads: heads(fx) });
        if (fx.op === 'vit_attention') {
          expect({ dim: block.dim, heads: block.heads, dimHead: block.dimHead }).toEqual(fx.config);
          expect(block.hasNorm).toBe(true);
          expect(block.projectOut).toBe(!(fx.config.heads === 1 && fx.config.dimHead === fx.config.dim));
        } else {
          expect(block.dim).toBe(fx.config.embedDim);
          expect(block.projectOut).toBe(true);
          expect(block.hasNorm).toBe(false);
        }
        const sync = expectFixture(fx, 'fromTorch', block);
        const x = f32(fx, 'x');
        const kpm = keyPadding(fx);
        const a = await block.forwardAsync(x, { keyPaddingMask: kpm });
        expectBitEqual(a.data, sync.data, { seed: SEED, label: `${fx.name} forwardAsync` });
        if (fx.tensors.expected_weights) {
          const s = block.forward(x, { keyPaddingMask: kpm, returnWeights: true });
          const aw = await block.forwardAsync(x, { keyPaddingMask: kpm, returnWeights: true });
          expectBitEqual(aw.output.data, s.output.data, { seed: SEED, label: `${fx.name} forwardAsync output` });
          expectBitEqual(aw.weights.data, s.weights.data, { seed: SEED, label: `${fx.name} forwardAsync weights` });
        }
        // Without out: a fresh result of x's shape, identical.
        const fresh = block.forward(x, { keyPaddingMask: kpm });
        expect(fresh.shape).toEqual(x.shape);
        expectBitEqual(fresh.data, sync.data, { seed: SEED, label: `${fx.name} without out` });
      });

      test('the constructor with the weights in PyTorch layout', () => {
        const c = fx.config;
        const block =
          fx.op === 'torch_mha'
            ? new MultiHeadSelfAttention({
                dim: c.embedDim,
                heads: c.numHeads,
                weights: {
                  qkvWeight: f32(fx, 'in_proj_weight'),
                  qkvBias: f32(fx, 'in_proj_bias'),
                  outWeight: f32(fx, 'out_proj.weight'),
                  outBias: f32(fx, 'out_proj.bias'),
                },
              })
            : new MultiHeadSelfAttention({
                dim: c.dim,
                heads: c.heads,
                dimHead: c.dimHead,
                weights: {
                  qkvWeight: f32(fx, 'to_qkv.weight'),
                  outWeight: fx.tensors['to_out.0.weight'] ? f32(fx, 'to_out.0.weight') : undefined,
                  outBias: fx.tensors['to_out.0.bias'] ? f32(fx, 'to_out.0.bias') : undefined,
                },
                norm: { weight: f32(fx, 'norm.weight'), bias: f32(fx, 'norm.bias') },
                eps: 1e-5,
              });
        expectFixture(fx, 'constructor', block);
      });

      test('2-D input: each batch entry as [tokens, dim]', () => {
        const block = MultiHeadSelfAttention.fromTorch(stateDict(fx), { heads: heads(fx) });
        const x = f32(fx, 'x');
        const expected = f32(fx, 'expected');
        const [B, T, D] = x.shape;
        const kpm = keyPadding(fx);
        for (let b = 0; b < B; b++) {
          const xb = { data: x.data.subarray(b * T * D, (b + 1) * T * D), shape: [T, D] };
          const r = block.forward(xb, { keyPaddingMask: kpm?.subarray(b * T, (b + 1) * T), returnWeights: true });
          expect(r.output.shape).toEqual([T, D]);
          expect(r.weights.shape).toEqual([T, T]);
          expectClose(r.output.data, expected.data.subarray(b * T * D, (b + 1) * T * D), TOL, { seed: SEED, label: `${fx.name} 2-D batch ${b}` });
          if (fx.tensors.expected_weights) {
            const ew = f32(fx, 'expected_weights');
            expectClose(r.weights.data, ew.data.subarray(b * T * T, (b + 1) * T * T), TOL, { seed: SEED, label: `${fx.name} 2-D weights ${b}` });
          }
        }
      });

      test('through a .safetensors image: loadSafetensors (zero-copy F32) → fromTorch under a prefix', () => {
        const sd = stateDict(fx);
        const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
        const parts: Uint8Array[] = [];
        let at = 0;
        for (const [n, t] of Object.entries(sd)) {
          header[`model.blocks.3.attn.${n}`] = { dtype: 'F32', shape: t.shape, data_offsets: [at, at + t.data.byteLength] };
          parts.push(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
          at += t.data.byteLength;
        }
        let json = JSON.stringify(header);
        while ((8 + json.length) % 8) json += ' ';
        const file = Buffer.alloc(8 + json.length + at);
        file.writeBigUInt64LE(BigInt(json.length), 0);
        file.write(json, 8, 'latin1');
        let off = 8 + json.length;
        for (const p of parts) {
          file.set(p, off);
          off += p.length;
        }
        const loaded = loadSafetensors(file);
        for (const t of Object.values(loaded.tensors)) expect(t.data.buffer).toBe(file.buffer);
        const block = MultiHeadSelfAttention.fromTorch(loaded.tensors, { heads: heads(fx), prefix: 'model.blocks.3.attn' });
        expectFixture(fx, 'safetensors', block);
      });
    });
  }

  for (const fx of torchFixtures) {
    describe(`${fx.name}: Hugging Face and split torch names`, () => {
      const cases: Array<[string, () => StateDict, string?]> = [
        ['query/key/value + output.dense', () => hfStateDict(fx, ['query', 'key', 'value'], 'output.dense')],
        ['self.query/self.key/self.value + output.dense (BERT), prefixed', () => hfStateDict(fx, ['self.query', 'self.key', 'self.value'], 'output.dense', 'bert.encoder.layer.0.attention.'), 'bert.encoder.layer.0.attention'],
        ['attention.query/... + output.dense (HF ViT), prefixed', () => hfStateDict(fx, ['attention.query', 'attention.key', 'attention.value'], 'output.dense', 'vit.encoder.layer.2.attention.'), 'vit.encoder.layer.2.attention.'],
        ['q_proj/k_proj/v_proj + o_proj', () => hfStateDict(fx, ['q_proj', 'k_proj', 'v_proj'], 'o_proj')],
        ['q_proj/k_proj/v_proj + out_proj', () => hfStateDict(fx, ['q_proj', 'k_proj', 'v_proj'], 'out_proj', 'layers.1.self_attn.'), 'layers.1.self_attn'],
        [
          'torch q_proj_weight/k_proj_weight/v_proj_weight + in_proj_bias',
          () => {
            const w = f32(fx, 'in_proj_weight');
            const inner = w.shape[0] / 3;
            return {
              q_proj_weight: rowsOf(w, 0, inner),
              k_proj_weight: rowsOf(w, 1, inner),
              v_proj_weight: rowsOf(w, 2, inner),
              in_proj_bias: f32(fx, 'in_proj_bias'),
              'out_proj.weight': f32(fx, 'out_proj.weight'),
              'out_proj.bias': f32(fx, 'out_proj.bias'),
            };
          },
        ],
      ];
      for (const [what, make, prefix] of cases) {
        test(what, () => {
          const block = MultiHeadSelfAttention.fromTorch(make(), { heads: heads(fx), prefix });
          expectFixture(fx, what, block);
        });
      }

      test('a missing k bias (Whisper-style) counts as zeros', () => {
        const sd = hfStateDict(fx, ['q_proj', 'k_proj', 'v_proj'], 'out_proj');
        const zeroK = { ...sd, 'k_proj.bias': { data: new Float32Array(sd['k_proj.bias'].data.length), shape: sd['k_proj.bias'].shape } };
        const without: Record<string, Tensor> = { ...sd };
        delete without['k_proj.bias'];
        const x = f32(fx, 'x');
        const a = MultiHeadSelfAttention.fromTorch(zeroK, { heads: heads(fx) }).forward(x);
        const b = MultiHeadSelfAttention.fromTorch(without, { heads: heads(fx) }).forward(x);
        expectBitEqual(b.data, a.data, { seed: SEED, label: 'missing k bias' });
      });
    });
  }

  test('prefix selects one layer of a whole model; unknown keys are ignored', () => {
    const fx = torchFixtures[0];
    const rng = rngFor(SEED, 'prefix');
    const model: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(stateDict(fx))) {
      model[`encoder.layers.0.self_attn.${n}`] = t;
      model[`encoder.layers.1.self_attn.${n}`] = { data: randomFloat32(rng, t.data.length), shape: t.shape };
    }
    model['encoder.layers.0.linear1.weight'] = tensor(randomFloat32(rng, 12), [3, 4]);
    model['encoder.layers.0.self_attn.extra_buffer'] = tensor([1], [1]);
    model['embed.weight'] = tensor(randomFloat32(rng, 8), [2, 4]);
    for (const prefix of ['encoder.layers.0.self_attn', 'encoder.layers.0.self_attn.']) {
      expectFixture(fx, `prefix ${prefix}`, MultiHeadSelfAttention.fromTorch(model, { heads: heads(fx), prefix }));
    }
    // Another layer gives another (finite) result.
    const other = MultiHeadSelfAttention.fromTorch(model, { heads: heads(fx), prefix: 'encoder.layers.1.self_attn' }).forward(f32(fx, 'x'));
    expect(other.data.every(Number.isFinite)).toBe(true);
    expect(Buffer.from(other.data.buffer).equals(Buffer.from(f32(fx, 'expected').data.buffer))).toBe(false);
    // Without a prefix nothing matches, and the error suggests the prefixes found.
    expect(() => MultiHeadSelfAttention.fromTorch(model, { heads: heads(fx) })).toThrow(
      /no attention weights under prefix "": .*keys found under "encoder\.layers\.0\.self_attn\.", "encoder\.layers\.1\.self_attn\." \(pass one as options\.prefix\)/,
    );
  });

  test('a Map state dict works like an object', () => {
    const fx = vitFixtures[0];
    expectFixture(fx, 'Map', MultiHeadSelfAttention.fromTorch(new Map(Object.entries(stateDict(fx))), { heads: heads(fx) }));
  });

  test('the projection weights are packed at construction: later changes to them do not reach the block', () => {
    const fx = vitFixtures[0];
    const sd = stateDict(fx);
    const block = MultiHeadSelfAttention.fromTorch(sd, { heads: heads(fx) });
    const x = f32(fx, 'x');
    const before = block.forward(x);
    const w = sd['to_qkv.weight'].data;
    const saved = w.slice();
    w.fill(0);
    try {
      expectBitEqual(block.forward(x).data, before.data, { seed: SEED, label: 'source weight zeroed after construction' });
      // A block built from the zeroed weight does see it: q = k = v = 0, so the output is the output bias.
      const zeroed = MultiHeadSelfAttention.fromTorch(sd, { heads: heads(fx) }).forward(x);
      const bias = fx.tensors['to_out.0.bias'] ? f32(fx, 'to_out.0.bias').data : new Float32Array(block.dim);
      for (let i = 0; i < zeroed.data.length; i++) expect(zeroed.data[i]).toBe(bias[i % block.dim]);
    } finally {
      w.set(saved);
    }
  });
});

describe(`MultiHeadSelfAttention vs a float64 reference of the block (seed ${SEED})`, () => {
  const variants: Array<[string, number, number, number, Parameters<typeof randomParams>[4]]> = [
    ['ViT-like: norm, no qkv bias, out with bias', 48, 4, 12, { norm: true, normBias: true, out: true, outBias: true }],
    ['torch-like: qkv bias, out with bias, no norm', 32, 2, 16, { qkvBias: true, out: true, outBias: true }],
    ['inner ≠ dim (heads·dimHead = 3·24 = 72, dim 40), norm without bias, out without bias', 40, 3, 24, { norm: true, out: true }],
    ['identity rule: heads 1, dimHead = dim, no out', 24, 1, 24, { norm: true, normBias: true, qkvBias: true }],
    ['heads 1, dimHead = dim but out given: projected', 24, 1, 24, { out: true, outBias: true }],
    ['odd sizes: dim 17, 5 heads of 3', 17, 5, 3, { qkvBias: true, norm: true, normBias: true, out: true, outBias: true }],
    // The QKV projection applies the LayerNorm itself up to dim 1024; beyond, a separate pass.
    ['norm at the widest the projection applies itself: dim 1024', 1024, 4, 8, { norm: true, normBias: true, out: true, outBias: true }],
    ['norm wider than the projection applies itself: dim 1030, a LayerNorm pass', 1030, 2, 8, { norm: true, qkvBias: true, out: true }],
  ];

  for (const [what, dim, H, dh, parts] of variants) {
    test(what, async () => {
      const rng = rngFor(SEED, what);
      const p = randomParams(rng, dim, H, dh, parts);
      const block = blockFrom(p);
      expect(block.innerDim).toBe(H * dh);
      expect(block.projectOut).toBe(!!parts.out);
      const B = randInt(rng, 1, 3);
      const T = randInt(rng, 1, 13);
      const x = randomFloat32(rng, B * T * dim);
      const label = `${what} B=${B} T=${T}`;
      const causal = rng() < 0.5;
      const mask = randomFloat32(rng, T * T).map((v) => (v > 0.7 ? -Infinity : v));
      const kpm = Uint8Array.from({ length: B * T }, () => (rng() < 0.25 ? 1 : 0));
      for (const [name, o] of [
        ['plain', {}],
        ['causal', { causal: true }],
        ['mask [T, T]', { mask: tensor(mask, [T, T]) }],
        ['keyPaddingMask', { keyPaddingMask: { data: kpm, shape: [B, T] } }],
        ['all', { causal, mask: tensor(mask, [1, 1, T, T]), keyPaddingMask: kpm }],
      ] as Array<[string, MultiHeadSelfAttentionForwardOptions]>) {
        const ref = refBlock(x, B, T, p, {
          causal: o.causal,
          mask: o.mask ? mask : undefined,
          maskShape: o.mask ? [...(o.mask as Tensor).shape] : undefined,
          keyPaddingMask: o.keyPaddingMask ? kpm : undefined,
        });
        const r = block.forward(tensor(x, [B, T, dim]), { ...o, returnWeights: true });
        expect(r.output.shape).toEqual([B, T, dim]);
        expect(r.weights.shape).toEqual([B, T, T]);
        expectClose(r.output.data, ref.out, TOL, { seed: SEED, label: `${label} ${name}` });
        expectClose(r.weights.data, ref.weights, TOL, { seed: SEED, label: `${label} ${name} weights` });
        const a = await block.forwardAsync(tensor(x, [B, T, dim]), { ...o, returnWeights: true });
        expectBitEqual(a.output.data, r.output.data, { seed: SEED, label: `${label} ${name} async` });
        expectBitEqual(a.weights.data, r.weights.data, { seed: SEED, label: `${label} ${name} async weights` });
      }
      // 2-D input equals the batch-1 3-D result.
      const x0 = x.subarray(0, T * dim);
      const r2 = block.forward(tensor(x0, [T, dim]), { causal: true, returnWeights: true });
      const r3 = block.forward(tensor(x0, [1, T, dim]), { causal: true, returnWeights: true });
      expect(r2.output.shape).toEqual([T, dim]);
      expect(r2.weights.shape).toEqual([T, T]);
      expectBitEqual(r2.output.data, r3.output.data, { seed: SEED, label: `${label} 2-D` });
      expectBitEqual(r2.weights.data, r3.weights.data, { seed: SEED, label: `${label} 2-D weights` });
    });
  }

  test('eps is honored (large eps)', () => {
    const rng = rngFor(SEED, 'eps');
    const p = { ...randomParams(rng, 16, 2, 8, { norm: true, normBias: true, out: true }), eps: 0.5 };
    const x = randomFloat32(rng, 2 * 5 * 16);
    const r = blockFrom(p).forward(tensor(x, [2, 5, 16]));
    expectClose(r.data, refBlock(x, 2, 5, p).out, TOL, { seed: SEED, label: 'eps 0.5' });
    expect(blockFrom(p).eps).toBe(0.5);
  });
});

describe(`layerNormMatmul, the block's LayerNorm inside its QKV projection (seed ${SEED})`, () => {
  // Rows are normalized four at a time as A is packed (native/kernels/gemm.cc,
  // packANormalized): 26 and 197 rows leave partial groups and slivers.
  // An alpha that is not a power of two: the unfused matmul reads its A in
  // place, the fused one packs it, and both must round alpha · sum and then
  // the bias as separate steps.
  for (const [M, K, N, parts] of [
    [26, 48, 40, { weight: true, bias: true, alpha: 0.37 }],
    [197, 768, 96, { weight: true }],
    [197, 768, 96, { weight: true, alpha: -1.3 }],
    [5, 1024, 33, { bias: true }],
    [13, 3, 64, {}],
  ] as Array<[number, number, number, { weight?: boolean; bias?: boolean; alpha?: number }]>) {
    test(`M ${M}, K ${K}, N ${N}${parts.weight ? ', weight' : ''}${parts.bias ? ', bias' : ''}${parts.alpha ? `, alpha ${parts.alpha}` : ''}: the bits of layerNorm then matmul`, async () => {
      const rng = rngFor(SEED, `layerNormMatmul ${M} ${K} ${N}`);
      const x = tensor(randomFloat32(rng, M * K).map((v) => 3 * v + 1), [M, K]);
      const w = prepack(tensor(randomFloat32(rng, N * K), [N, K]), { transpose: true });
      const c = tensor(randomFloat32(rng, N), [N]);
      const weight = parts.weight ? tensor(randomFloat32(rng, K).map((v) => 1 + v), [K]) : undefined;
      const bias = parts.bias ? tensor(randomFloat32(rng, K), [K]) : undefined;
      const eps = 1e-5;
      const alpha = parts.alpha ?? 1;
      const expected = matmul(layerNorm(x, { weight, bias, eps }), w, { c, alpha });
      const poisoned = () => tensor(new Float32Array(M * N).fill(NaN), [M, N]);
      const got = layerNormMatmul(x, w, { weight, bias, eps }, { c, alpha, out: poisoned() });
      expectBitEqual(got.data, expected.data, { seed: SEED, label: `layerNormMatmul ${M}x${K}x${N}` });
      const gotAsync = await layerNormMatmulAsync(x, w, { weight, bias, eps }, { c, alpha, out: poisoned() });
      expectBitEqual(gotAsync.data, expected.data, { seed: SEED, label: `layerNormMatmulAsync ${M}x${K}x${N}` });
    });
  }

  test('the native side rejects what it cannot fuse, and writes nothing', () => {
    const x = tensor(new Float32Array(4 * 8).fill(1), [4, 8]);
    const w = prepack(tensor(new Float32Array(8 * 3).fill(1), [8, 3]));
    const out = tensor(new Float32Array(12).fill(7), [4, 3]);
    const wide = tensor(new Float32Array(2 * 1025), [2, 1025]);
    const cases: Array<[string, () => unknown, RegExp]> = [
      ['weight of the wrong length', () => layerNormMatmul(x, w, { weight: tensor(new Float32Array(7), [7]), eps: 1e-5 }, { out }), /weight\.length must be K = 8, received 7/],
      ['bias of the wrong length', () => layerNormMatmul(x, w, { bias: tensor(new Float32Array(9), [9]), eps: 1e-5 }, { out }), /bias\.length must be K = 8, received 9/],
      ['negative eps', () => layerNormMatmul(x, w, { eps: -1 }, { out }), /eps must be a finite non-negative number/],
      ['K above 1024', () => layerNormMatmul(wide, prepack(tensor(new Float32Array(1025 * 2), [1025, 2])), { eps: 1e-5 }, {}), /K must be at most 1024, received 1025/],
      ['transposeA', () => layerNormMatmul(tensor(new Float32Array(8 * 4), [8, 4]), w, { eps: 1e-5 }, { transposeA: true, out }), /a must be row-major/],
    ];
    for (const [what, call, message] of cases) {
      let error: unknown;
      try {
        call();
      } catch (e) {
        error = e;
      }
      expect([what, (error as Error).name]).toEqual([what, 'RangeError']); // raised by the addon, in its own realm
      expect([what, (error as Error).message]).toEqual([what, expect.stringMatching(message)]);
      expect([what, Array.from(out.data).every((v) => v === 7)]).toEqual([what, true]);
    }
  });
});

describe(`MultiHeadSelfAttention workspace and concurrency (seed ${SEED})`, () => {
  const rng = rngFor(SEED, 'workspace');
  const p = randomParams(rng, 32, 4, 8, { norm: true, normBias: true, qkvBias: true, out: true, outBias: true });

  test('shapes growing and shrinking across calls stay correct; the workspace is reused', () => {
    const block = blockFrom(p);
    const pool = (block as unknown as { pool: Array<{ buffer: Float32Array }> }).pool;
    for (const [B, T] of [[2, 7], [1, 3], [3, 11], [1, 1], [2, 7], [3, 11], [2, 2]]) {
      const x = randomFloat32(rng, B * T * 32);
      const r = block.forward(tensor(x, [B, T, 32]));
      expectClose(r.data, refBlock(x, B, T, p).out, TOL, { seed: SEED, label: `B=${B} T=${T}` });
    }
    expect(pool.length).toBe(1);
    const buf = pool[0].buffer;
    const x = randomFloat32(rng, 2 * 9 * 32);
    const out = { data: new Float32Array(2 * 9 * 32), shape: [2, 9, 32] };
    block.forward(tensor(x, [2, 9, 32]), { out });
    block.forward(tensor(x, [2, 9, 32]), { out, causal: true });
    expect(pool.length).toBe(1);
    expect(pool[0].buffer).toBe(buf); // no new scratch: a call allocates only its output (nothing with out)
  });

  test('concurrent forwardAsync calls on one block, and a sync call while they run, are all correct', async () => {
    const block = blockFrom(p);
    const inputs = [[2, 9], [1, 17], [3, 5], [2, 9], [1, 30]].map(([B, T]) => ({ B, T, x: randomFloat32(rng, B * T * 32) }));
    const want = inputs.map(({ B, T, x }) => blockFrom(p).forward(tensor(x, [B, T, 32]), { causal: true }));
    const pending = inputs.map(({ B, T, x }) => block.forwardAsync(tensor(x, [B, T, 32]), { causal: true }));
    const { B, T, x } = inputs[1];
    const syncDuring = block.forward(tensor(x, [B, T, 32]), { causal: true });
    expectBitEqual(syncDuring.data, want[1].data, { seed: SEED, label: 'sync during async' });
    const got = await Promise.all(pending);
    got.forEach((g, i) => expectBitEqual(g.data, want[i].data, { seed: SEED, label: `concurrent ${i}` }));
  });

  test('zero-size batch and tokens give empty results', async () => {
    const block = blockFrom(p);
    for (const shape of [[0, 5, 32], [2, 0, 32], [0, 32]]) {
      const r = block.forward({ data: new Float32Array(0), shape }, { returnWeights: true });
      expect(r.output.shape).toEqual(shape);
      expect(r.output.data.length).toBe(0);
      expect(r.weights.data.length).toBe(0);
      const a = await block.forwardAsync({ data: new Float32Array(0), shape });
      expect(a.shape).toEqual(shape);
    }
  });

  test('returnWeights with one head is that head\'s probabilities', () => {
    const q = randomParams(rng, 8, 1, 8, {});
    const x = randomFloat32(rng, 2 * 4 * 8);
    const r = blockFrom(q).forward(tensor(x, [2, 4, 8]), { returnWeights: true });
    expect(r.weights.shape).toEqual([2, 4, 4]);
    expectClose(r.weights.data, refBlock(x, 2, 4, q).weights, TOL, { seed: SEED, label: 'one head weights' });
    expect(String(blockFrom(q))).toBe('MultiHeadSelfAttention(dim=8, heads=1, dimHead=8)');
  });
});

// ---------------------------------------------------------------------------
// Errors

type ErrType = typeof TypeError | typeof RangeError;

function expectThrow(fn: () => unknown, type: ErrType, prefix: string, msg: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(type);
  expect((err as Error).message.startsWith(`${prefix}: `)).toBe(true);
  expect((err as Error).message).toMatch(msg);
}

describe('MultiHeadSelfAttention constructor errors', () => {
  const dim = 8;
  const w = (n: number, shape: number[]) => tensor(new Float32Array(n), shape);
  const good = (): MultiHeadSelfAttentionConfig => ({
    dim,
    heads: 2,
    weights: { qkvWeight: w(3 * dim * dim, [3 * dim, dim]), outWeight: w(dim * dim, [dim, dim]) },
  });
  const rows: Array<[string, () => unknown, ErrType, RegExp]> = [
    ['config missing', () => undefined, TypeError, /expected an object for config but received undefined/],
    ['unknown config key', () => ({ ...good(), dims: 8 }), TypeError, /unknown key "dims" in config; expected one of dim, heads, dimHead, weights, norm, eps/],
    ['dim a string', () => ({ ...good(), dim: '8' }), TypeError, /expected a number for config.dim but received the string "8"/],
    ['dim 0', () => ({ ...good(), dim: 0 }), RangeError, /config.dim must be a positive integer, received 0/],
    ['heads fractional', () => ({ ...good(), heads: 1.5 }), RangeError, /config.heads must be a positive integer, received 1.5/],
    ['heads not dividing dim without dimHead', () => ({ ...good(), heads: 3 }), RangeError, /config.dimHead is required when config.heads = 3 does not divide config.dim = 8/],
    ['dimHead NaN', () => ({ ...good(), dimHead: NaN }), RangeError, /config.dimHead must be a positive integer, received NaN/],
    ['eps negative', () => ({ ...good(), eps: -1 }), RangeError, /config.eps must be a finite float32 number >= 0, received -1/],
    ['eps a string', () => ({ ...good(), eps: '1e-5' }), TypeError, /expected a number for config.eps/],
    ['weights missing', () => ({ dim, heads: 2 }), TypeError, /expected an object for config.weights but received undefined/],
    ['weights a Map', () => ({ ...good(), weights: new Map(Object.entries(good().weights)) }), TypeError, /expected an object for config.weights but received a Map/],
    ['unknown weights key', () => ({ ...good(), weights: { ...good().weights, qkv: 1 } }), TypeError, /unknown key "qkv" in config.weights/],
    ['qkvWeight missing', () => ({ ...good(), weights: { outWeight: w(64, [8, 8]) } }), RangeError, /config.weights.qkvWeight \(\[3·inner, dim\]\) is required/],
    ['qkvWeight a Float64Array', () => ({ ...good(), weights: { ...good().weights, qkvWeight: { data: new Float64Array(192), shape: [24, 8] } } }), TypeError, /expected a Float32Array for config.weights.qkvWeight.data/],
    ['qkvWeight transposed', () => ({ ...good(), weights: { ...good().weights, qkvWeight: w(192, [8, 24]) } }), RangeError, /config.weights.qkvWeight must have shape \[3·heads·dimHead, dim\] = \[24, 8\], received \[8, 24\]/],
    ['qkvBias wrong length', () => ({ ...good(), weights: { ...good().weights, qkvBias: w(8, [8]) } }), RangeError, /config.weights.qkvBias must have shape \[3·heads·dimHead\] = \[24\], received \[8\]/],
    ['outWeight missing with 2 heads', () => ({ ...good(), weights: { qkvWeight: w(192, [24, 8]) } }), RangeError, /config.weights.outWeight \(\[dim, heads·dimHead\] = \[8, 8\]\) is required unless heads = 1 and dimHead = dim/],
    ['outWeight wrong shape (inner ≠ dim)', () => ({ ...good(), dimHead: 8, weights: { qkvWeight: w(384, [48, 8]), outWeight: w(64, [8, 8]) } }), RangeError, /config.weights.outWeight must have shape \[dim, heads·dimHead\] = \[8, 16\], received \[8, 8\]/],
    ['outBias without outWeight', () => ({ dim, heads: 1, weights: { qkvWeight: w(192, [24, 8]), outBias: w(8, [8]) } }), RangeError, /config.weights.outBias needs config.weights.outWeight/],
    ['outBias wrong shape', () => ({ ...good(), weights: { ...good().weights, outBias: w(8, [1, 8]) } }), RangeError, /config.weights.outBias must have shape \[dim\] = \[8\], received \[1, 8\]/],
    ['norm without weight', () => ({ ...good(), norm: { bias: w(8, [8]) } }), RangeError, /config.norm.weight \(\[dim\]\) is required with config.norm/],
    ['norm weight wrong length', () => ({ ...good(), norm: { weight: w(7, [7]) } }), RangeError, /config.norm.weight must have shape \[dim\] = \[8\], received \[7\]/],
    ['norm bias not a tensor', () => ({ ...good(), norm: { weight: w(8, [8]), bias: [0] } }), TypeError, /expected a tensor .* for config.norm.bias but received an Array\(1\)/],
    ['unknown norm key', () => ({ ...good(), norm: { weight: w(8, [8]), gamma: 1 } }), TypeError, /unknown key "gamma" in config.norm/],
  ];
  for (const [what, make, type, msg] of rows) {
    test(what, () => expectThrow(() => new MultiHeadSelfAttention(make() as MultiHeadSelfAttentionConfig), type, 'MultiHeadSelfAttention', msg));
  }
  test('a good config builds; dimHead defaults to dim / heads', () => {
    const b = new MultiHeadSelfAttention(good());
    expect([b.dimHead, b.innerDim, b.projectOut, b.hasNorm, b.eps]).toEqual([4, 8, true, false, 1e-5]);
  });
});

describe('MultiHeadSelfAttention.fromTorch errors name the key', () => {
  const fx = () => torchFixtures[0];
  const vit = () => vitFixtures.find((f) => f.config.heads > 1)!;
  const without = (sd: Record<string, Tensor>, ...names: string[]) => {
    const c = { ...sd };
    for (const n of names) delete c[n];
    return c;
  };
  const F = 'MultiHeadSelfAttention.fromTorch';
  const rows: Array<[string, () => [unknown, unknown], ErrType, RegExp]> = [
    ['stateDict not an object', () => [null, { heads: 4 }], TypeError, /expected an object or a Map of tensors for stateDict but received null/],
    ['stateDict a Set', () => [new Set(['in_proj_weight']), { heads: 4 }], TypeError, /expected an object or a Map of tensors for stateDict but received a Set/],
    ['options a Map', () => [stateDict(vit()), new Map([['heads', 4]])], TypeError, /expected an object for options but received a Map/],
    ['options missing', () => [stateDict(fx()), undefined], RangeError, /options.heads is required/],
    ['heads missing', () => [stateDict(fx()), {}], TypeError, /expected a number for options.heads but received undefined/],
    ['heads 0', () => [stateDict(fx()), { heads: 0 }], RangeError, /options.heads must be a positive integer, received 0/],
    ['unknown option', () => [stateDict(fx()), { heads: 4, numHeads: 4 }], TypeError, /unknown key "numHeads" in options/],
    ['prefix not a string', () => [stateDict(fx()), { heads: 4, prefix: 3 }], TypeError, /expected a string for options.prefix but received the number 3/],
    ['nothing under the prefix', () => [stateDict(fx()), { heads: 4, prefix: 'nope' }], RangeError, /no attention weights under prefix "nope\.": expected in_proj_weight/],
    ['a value that is not a tensor', () => [{ ...stateDict(fx()), in_proj_weight: [1, 2, 3] }, { heads: 4 }], TypeError, /for stateDict\["in_proj_weight"\] but received an Array\(3\)/],
    ['missing out_proj.weight', () => [without(stateDict(fx()), 'out_proj.weight', 'out_proj.bias'), { heads: 4 }], RangeError, /stateDict\["out_proj.weight"\] \(the output projection \[dim, inner\] = \[\d+, \d+\]\) is missing/],
    ['out_proj.bias without out_proj.weight', () => [without(stateDict(fx()), 'out_proj.weight'), { heads: 4 }], RangeError, /stateDict\["out_proj.bias"\] is present but stateDict\["out_proj.weight"\] is missing/],
    ['in_proj_bias mis-shaped', () => [{ ...stateDict(fx()), in_proj_bias: tensor(new Float32Array(5), [5]) }, { heads: 4 }], RangeError, /stateDict\["in_proj_bias"\] must have shape \[3·embed_dim\] = \[\d+\], received \[5\]/],
    ['in_proj_weight rows not a multiple of 3', () => [{ ...stateDict(fx()), in_proj_weight: tensor(new Float32Array(20), [10, 2]) }, { heads: 4 }], RangeError, /stateDict\["in_proj_weight"\].shape\[0\] must be a multiple of 3 \(q, k, v\), received 10/],
    ['in_proj_weight 1-D', () => [{ ...stateDict(fx()), in_proj_weight: tensor(new Float32Array(6), [6]) }, { heads: 4 }], RangeError, /stateDict\["in_proj_weight"\] must be a 2-D \[out, in\] weight, received shape \[6\]/],
    ['out_proj.weight mis-shaped', () => {
      const sd = stateDict(fx());
      const d = sd['out_proj.weight'].shape[0];
      return [{ ...sd, 'out_proj.weight': tensor(new Float32Array(d * (d + 1)), [d + 1, d]) }, { heads: 4 }];
    }, RangeError, /stateDict\["out_proj.weight"\] must have shape \[dim, inner\] = \[\d+, \d+\], received \[\d+, \d+\]/],
    ['heads not dividing the width', () => [stateDict(fx()), { heads: 5 }], RangeError, /options.heads = 5 must divide the projection width \d+ \(stateDict\["in_proj_weight"\].shape\[0\] \/ 3\)/],
    ['add_bias_kv', () => [{ ...stateDict(fx()), bias_k: tensor(new Float32Array(4), [1, 1, 4]) }, { heads: 4 }], RangeError, /stateDict\["bias_k"\] is present: add_bias_kv is not supported/],
    ['two schemes at once', () => [{ ...stateDict(fx()), 'to_qkv.weight': f32(fx(), 'in_proj_weight') }, { heads: 4 }], RangeError, /ambiguous state dict: found in_proj_weight and to_qkv.weight/],
    ['two HF triples at once', () => [{ ...hfStateDict(fx(), ['query', 'key', 'value'], 'o_proj'), ...hfStateDict(fx(), ['q_proj', 'k_proj', 'v_proj'], 'o_proj') }, { heads: 4 }], RangeError, /ambiguous state dict: found query.weight, q_proj.weight/],
    ['two output projections', () => [{ ...hfStateDict(fx(), ['query', 'key', 'value'], 'o_proj'), 'out_proj.weight': f32(fx(), 'out_proj.weight') }, { heads: 4 }], RangeError, /ambiguous output projection: found stateDict\["out_proj.weight"\] and stateDict\["o_proj.weight"\]/],
    ['HF key.weight missing', () => [without(hfStateDict(fx(), ['query', 'key', 'value'], 'output.dense'), 'key.weight'), { heads: 4 }], RangeError, /stateDict\["key.weight"\] \(a \[inner, dim\] projection weight\) is missing/],
    ['HF value.weight mis-shaped', () => [{ ...hfStateDict(fx(), ['query', 'key', 'value'], 'output.dense'), 'value.weight': tensor(new Float32Array(6), [2, 3]) }, { heads: 4 }], RangeError, /stateDict\["value.weight"\] must have shape stateDict\["key.weight"\]'s shape = \[\d+, \d+\], received \[2, 3\]/],
    ['HF key.weight of another input width', () => [{ ...hfStateDict(fx(), ['query', 'key', 'value'], 'output.dense'), 'key.weight': tensor(new Float32Array(64 * 3), [64, 3]) }, { heads: 4 }], RangeError, /stateDict\["key.weight"\] must have shape \[kvHeads·dimHead, dim\] = \[64, \d+\], received \[64, 3\]/],
    ['HF key.bias mis-shaped', () => [{ ...hfStateDict(fx(), ['query', 'key', 'value'], 'output.dense'), 'key.bias': tensor(new Float32Array(3), [3]) }, { heads: 4 }], RangeError, /stateDict\["key.bias"\] must have shape \[kvHeads·dimHead\] = \[\d+\], received \[3\]/],
    ['HF output missing', () => [without(hfStateDict(fx(), ['q_proj', 'k_proj', 'v_proj'], 'o_proj'), 'o_proj.weight', 'o_proj.bias'), { heads: 4 }], RangeError, /stateDict\["out_proj.weight"\] or stateDict\["o_proj.weight"\] or stateDict\["output.dense.weight"\] \(the output projection/],
    ['ViT to_out missing with several heads', () => [without(stateDict(vit()), 'to_out.0.weight', 'to_out.0.bias'), { heads: vit().config.heads }], RangeError, /stateDict\["to_out.0.weight"\] \(the output projection \[dim, inner\] = \[\d+, \d+\]\) is missing/],
    ['ViT norm.bias without norm.weight', () => [without(stateDict(vit()), 'norm.weight'), { heads: vit().config.heads }], RangeError, /stateDict\["norm.bias"\] is present but stateDict\["norm.weight"\] is missing/],
    ['ViT norm.weight mis-shaped', () => [{ ...stateDict(vit()), 'norm.weight': tensor(new Float32Array(3), [3]) }, { heads: vit().config.heads }], RangeError, /stateDict\["norm.weight"\] must have shape \[dim\] = \[\d+\], received \[3\]/],
    ['ViT to_qkv.bias mis-shaped', () => [{ ...stateDict(vit()), 'to_qkv.bias': tensor(new Float32Array(3), [3]) }, { heads: vit().config.heads }], RangeError, /stateDict\["to_qkv.bias"\] must have shape \[3·inner\]/],
    ['eps invalid', () => [stateDict(vit()), { heads: vit().config.heads, eps: -0.5 }], RangeError, /options.eps must be a finite float32 number >= 0, received -0.5/],
    ['prefixed key named in full', () => [{ 'a.b.in_proj_weight': f32(fx(), 'in_proj_weight'), 'a.b.in_proj_bias': tensor(new Float32Array(2), [2]) }, { heads: 4, prefix: 'a.b' }], RangeError, /stateDict\["a.b.in_proj_bias"\] must have shape/],
  ];
  for (const [what, make, type, msg] of rows) {
    test(what, () => {
      const [sd, opts] = make();
      expectThrow(() => MultiHeadSelfAttention.fromTorch(sd as StateDict, opts as never), type, F, msg);
    });
  }
  test('ViT identity case (heads 1, dimHead = dim) needs no to_out', () => {
    const fx1 = vitFixtures.find((f) => f.config.heads === 1 && f.config.dimHead === f.config.dim);
    if (!fx1) return;
    const b = MultiHeadSelfAttention.fromTorch(stateDict(fx1), { heads: 1 });
    expect(b.projectOut).toBe(false);
  });
});

describe('MultiHeadSelfAttention.forward errors: sync throws, async rejects, out untouched', () => {
  const SENTINEL = -4321.5;
  const dim = 8;
  const weights = {
    qkvWeight: tensor(new Float32Array(3 * dim * dim).fill(0.1), [3 * dim, dim]),
    outWeight: tensor(new Float32Array(dim * dim).fill(0.1), [dim, dim]),
  };
  const block = new MultiHeadSelfAttention({ dim, heads: 2, weights, norm: { weight: tensor(new Float32Array(dim).fill(1), [dim]) } });
  const x = () => tensor(new Float32Array(2 * 3 * dim).fill(1), [2, 3, dim]);
  const freshOut = () => ({ data: new Float32Array(2 * 3 * dim).fill(SENTINEL), shape: [2, 3, dim] });

  const rows: Array<[string, () => { x: unknown; opts?: Record<string, unknown>; noOut?: boolean }, ErrType, RegExp]> = [
    ['x not a tensor', () => ({ x: [1, 2] }), TypeError, /expected a tensor \{ data: Float32Array, shape: number\[\] \} for x but received an Array\(2\)/],
    ['x Float64Array', () => ({ x: { data: new Float64Array(48), shape: [2, 3, 8] } }), TypeError, /expected a Float32Array for x.data but received Float64Array\(48\)/],
    ['x rank 1', () => ({ x: tensor(new Float32Array(8), [8]) }), RangeError, /x must be \[batch, tokens, dim\] or \[tokens, dim\], received shape \[8\]/],
    ['x rank 4', () => ({ x: tensor(new Float32Array(48), [1, 2, 3, 8]) }), RangeError, /received shape \[1, 2, 3, 8\]/],
    ['x wrong dim', () => ({ x: tensor(new Float32Array(42), [2, 3, 7]) }), RangeError, /x.shape\[2\] \(dim\) must equal the block's dim = 8, received 7/],
    ['options not an object', () => ({ x: x(), opts: 'causal' as never }), TypeError, /expected an object for options but received the string "causal"/],
    ['unknown option', () => ({ x: x(), opts: { heads: 2 } }), TypeError, /unknown key "heads" in options; expected one of causal, mask, keyPaddingMask, returnWeights, out/],
    ['causal not a boolean', () => ({ x: x(), opts: { causal: 1 } }), TypeError, /expected a boolean for options.causal but received the number 1/],
    ['returnWeights not a boolean', () => ({ x: x(), opts: { returnWeights: 'yes' } }), TypeError, /expected a boolean for options.returnWeights/],
    ['mask not broadcastable', () => ({ x: x(), opts: { mask: tensor(new Float32Array(4), [2, 2]) } }), RangeError, /options.mask.shape \[2, 2\] must broadcast to \[batch, heads, tokens, tokens\] = \[2, 2, 3, 3\]/],
    ['mask Float64', () => ({ x: x(), opts: { mask: { data: new Float64Array(9), shape: [3, 3] } } }), TypeError, /expected a Float32Array for options.mask.data/],
    ['keyPaddingMask a number[]', () => ({ x: x(), opts: { keyPaddingMask: [0, 1] } }), TypeError, /expected a Uint8Array of batch·tokens bytes or \{ data: Uint8Array, shape: \[batch, tokens\] \} for options.keyPaddingMask but received an Array\(2\)/],
    ['keyPaddingMask wrong length', () => ({ x: x(), opts: { keyPaddingMask: new Uint8Array(5) } }), RangeError, /options.keyPaddingMask.length must be batch·tokens = 6, received 5/],
    ['keyPaddingMask wrong shape', () => ({ x: x(), opts: { keyPaddingMask: { data: new Uint8Array(6), shape: [3, 2] } } }), RangeError, /options.keyPaddingMask.shape must be \[batch, tokens\] = \[2, 3\], received \[3, 2\]/],
    ['keyPaddingMask wrong shape for 2-D x', () => ({ x: tensor(new Float32Array(24), [3, 8]), opts: { keyPaddingMask: { data: new Uint8Array(3), shape: [3, 1] } }, noOut: true }), RangeError, /options.keyPaddingMask.shape must be \[tokens\] = \[3\], received \[3, 1\]/],
    ['out wrong shape', () => ({ x: x(), opts: { out: { data: new Float32Array(48).fill(SENTINEL), shape: [6, 8] } } }), RangeError, /options\.out\.shape must be \[2, 3, 8\], received \[6, 8\]/],
    ['out is x', () => {
      const t = x();
      return { x: t, opts: { out: t } };
    }, RangeError, /options.out must not share memory with x/],
    ['out over a weight', () => ({ x: x(), opts: { out: { data: weights.qkvWeight.data.subarray(0, 48), shape: [2, 3, 8] } } }), RangeError, /options.out must not share memory with the weight config.weights.qkvWeight/],
    ['out over the mask', () => {
      const buf = new Float32Array(48 + 5);
      return { x: x(), opts: { mask: { data: buf.subarray(44, 53), shape: [3, 3] }, out: { data: buf.subarray(0, 48).fill(SENTINEL), shape: [2, 3, 8] } } };
    }, RangeError, /options.out must not share memory with options.mask/],
  ];

  for (const [what, make, type, msg] of rows) {
    test(`${what}: sync`, () => {
      const a = make();
      const out = freshOut();
      const opts = typeof a.opts === 'object' && 'out' in a.opts ? a.opts : { ...(typeof a.opts === 'object' ? a.opts : {}), ...(a.noOut ? {} : { out }) };
      const before = weights.qkvWeight.data.slice();
      expectThrow(() => block.forward(a.x as Tensor, (typeof a.opts === 'string' ? a.opts : opts) as never), type, 'MultiHeadSelfAttention.forward', msg);
      expect(out.data.every((v) => v === SENTINEL)).toBe(true);
      expect(Buffer.from(weights.qkvWeight.data.buffer).equals(Buffer.from(before.buffer))).toBe(true);
    });
    test(`${what}: async rejects`, async () => {
      const a = make();
      const out = freshOut();
      const opts = typeof a.opts === 'object' && 'out' in a.opts ? a.opts : { ...(typeof a.opts === 'object' ? a.opts : {}), ...(a.noOut ? {} : { out }) };
      let p: Promise<unknown> | undefined;
      expect(() => {
        p = block.forwardAsync(a.x as Tensor, (typeof a.opts === 'string' ? a.opts : opts) as never);
      }).not.toThrow();
      const e = await p!.then(() => undefined, (er: unknown) => er);
      expect(e).toBeInstanceOf(type);
      expect((e as Error).message.startsWith('MultiHeadSelfAttention.forwardAsync: ')).toBe(true);
      expect((e as Error).message).toMatch(msg);
      expect(out.data.every((v) => v === SENTINEL)).toBe(true);
    });
  }

  test('the block still works after the errors', () => {
    const r = block.forward(x());
    expect(r.data.every(Number.isFinite)).toBe(true);
  });

  // Each of these was once reported by the stage that first met the buffer, under that op's own
  // argument names ("layerNormMatmulAsync: a ...", "matmul: options.c.data ..."), after earlier stages ran.
  test('async: x or out on a resizable buffer rejects up front, naming it', async () => {
    const Resizable = ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer;
    const resizable = (n: number, fill = 1) => new Float32Array(new Resizable(4 * n, { maxByteLength: 8 * n })).fill(fill);
    for (const [name, args] of [
      ['x', () => ({ x: tensor(resizable(48), [2, 3, dim]), out: freshOut() })],
      ['options.out', () => ({ x: x(), out: { data: resizable(48, SENTINEL), shape: [2, 3, dim] } })],
    ] as const) {
      const a = args();
      await expect(block.forwardAsync(a.x, { out: a.out })).rejects.toThrow(
        new RegExp(`^MultiHeadSelfAttention\\.forwardAsync: ${name.replace('.', '\\.')} is backed by a resizable ArrayBuffer`),
      );
      expect(a.out.data.every((v) => v === SENTINEL)).toBe(true);
      expect(block.forward(a.x, { out: a.out }).data).toBe(a.out.data); // sync calls cannot race a resize
    }
  });

  test('a bias or LayerNorm weight transferred away after construction is named, sync and async', async () => {
    const qkvBias = tensor(new Float32Array(3 * dim).fill(0.5), [3 * dim]);
    const norm = { weight: tensor(new Float32Array(dim).fill(1), [dim]), bias: tensor(new Float32Array(dim), [dim]) };
    const b = new MultiHeadSelfAttention({ dim, heads: 2, weights: { ...weights, qkvBias }, norm });
    structuredClone(qkvBias.data.buffer, { transfer: [qkvBias.data.buffer as ArrayBuffer] });
    const out = freshOut();
    expectThrow(() => b.forward(x(), { out }), TypeError, 'MultiHeadSelfAttention.forward', /config\.weights\.qkvBias is backed by a detached ArrayBuffer$/);
    await expect(b.forwardAsync(x(), { out })).rejects.toThrow(/^MultiHeadSelfAttention\.forwardAsync: config\.weights\.qkvBias is backed by a detached/);
    expect(out.data.every((v) => v === SENTINEL)).toBe(true);
    // The projection weights were copied when packed: transferring them away changes nothing.
    const w2 = { qkvWeight: tensor(weights.qkvWeight.data.slice(), [3 * dim, dim]), outWeight: weights.outWeight };
    const c = new MultiHeadSelfAttention({ dim, heads: 2, weights: w2 });
    const want = c.forward(x()).data.slice();
    structuredClone(w2.qkvWeight.data.buffer, { transfer: [w2.qkvWeight.data.buffer as ArrayBuffer] });
    expect(Array.from(c.forward(x()).data)).toEqual(Array.from(want));
  });

  test('x or a bias transferred away while forwardAsync waits behind another call rejects naming it', async () => {
    const big = tensor(new Float32Array(8 * 64 * dim).fill(0.25), [8, 64, dim]);
    const first = block.forwardAsync(big);
    const mine = x();
    const second = block.forwardAsync(mine);
    structuredClone(mine.data.buffer, { transfer: [mine.data.buffer as ArrayBuffer] });
    const check = expect(second).rejects.toThrow(/^MultiHeadSelfAttention\.forwardAsync: x was detached before the call finished; its result is not defined$/);
    await first;
    await check;
    // A bias the block reads in place, transferred away once the call has begun: named as the caller gave it.
    const qkvBias = tensor(new Float32Array(3 * dim).fill(0.5), [3 * dim]);
    const b = new MultiHeadSelfAttention({ dim, heads: 2, weights: { ...weights, qkvBias } });
    const ahead = b.forwardAsync(big);
    const behind = b.forwardAsync(x());
    structuredClone(qkvBias.data.buffer, { transfer: [qkvBias.data.buffer as ArrayBuffer] });
    const check2 = expect(behind).rejects.toThrow(/^MultiHeadSelfAttention\.forwardAsync: config\.weights\.qkvBias was detached before the call finished/);
    await ahead.catch(() => undefined);
    await check2;
  });
});
