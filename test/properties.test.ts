/**
 * fast-check property tests: random shapes (dims 0..20) and options for matmul,
 * softmax and attention, each compared to the float64 reference.
 * fast-check runs with the file's seed (MHSA_TEST_SEED to replay; the seed is in
 * the describe title, and fast-check prints the seed and shrink path of a failure).
 */
import fc from 'fast-check';
import { attention, matmul, softmax, type AttentionOptions, type MatmulOptions, type Tensor } from '../lib';
import { expectClose, expectShape, pickSeed, poisoned, randomFloat32, makeRng } from './helpers/random';
import {
  broadcastShape,
  numel,
  refAttention,
  refMatmul,
  refSoftmax,
  singleOutputAttentionScale,
  singleOutputMatmulScale,
} from './helpers/reference';

const SEED = pickSeed();
const TOL = 1e-5;
const NUM_RUNS = 100;
const fcParams = { numRuns: NUM_RUNS, seed: SEED | 0 };

const dim = fc.integer({ min: 0, max: 20 });
/** A coefficient in [lo, hi] with 2 decimals (0 included; no subnormals, whose float32 products underflow). */
const decimal = (lo: number, hi: number) => fc.integer({ min: lo * 100, max: hi * 100 }).map((i) => i / 100);
const coef = decimal(-3, 3);

/** Trailing `keep` dims of `shape`, each replaced by 1 where ones[i] is set. */
function broadcastable(shape: readonly number[], keep: number, ones: readonly boolean[]): number[] {
  const tail = shape.slice(shape.length - Math.min(keep, shape.length));
  return tail.map((d, i) => (ones[i % ones.length] ? 1 : d));
}

describe(`property tests vs float64 reference (seed ${SEED})`, () => {
  test('matmul: random shapes, broadcasting, transposes, alpha/beta/c, out', () => {
    const arb = fc.record({
      M: dim,
      K: dim,
      N: dim,
      batch: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 2 }),
      aKeep: fc.integer({ min: 0, max: 2 }),
      bKeep: fc.integer({ min: 0, max: 2 }),
      aOnes: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }),
      bOnes: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }),
      transposeA: fc.boolean(),
      transposeB: fc.boolean(),
      alpha: fc.option(coef, { nil: undefined }),
      c: fc.option(
        fc.record({
          keep: fc.integer({ min: 0, max: 4 }),
          ones: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
          beta: fc.option(coef, { nil: undefined }),
        }),
        { nil: undefined },
      ),
      out: fc.constantFrom('none', 'poisoned', 'c'),
      dataSeed: fc.integer({ min: 0, max: 0x7fffffff }),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const aBatch = broadcastable(p.batch, p.aKeep, p.aOnes);
        const bBatch = broadcastable(p.batch, p.bKeep, p.bOnes);
        const aShape = [...aBatch, ...(p.transposeA ? [p.K, p.M] : [p.M, p.K])];
        const bShape = [...bBatch, ...(p.transposeB ? [p.N, p.K] : [p.K, p.N])];
        const resShape = [...broadcastShape(aBatch, bBatch), p.M, p.N];
        const a: Tensor = { data: randomFloat32(rng, numel(aShape)), shape: aShape };
        const b: Tensor = { data: randomFloat32(rng, numel(bShape)), shape: bShape };
        const opts: MatmulOptions = { transposeA: p.transposeA, transposeB: p.transposeB };
        if (p.alpha !== undefined) opts.alpha = p.alpha;
        let c: Tensor | undefined;
        let cCopy: Float32Array | undefined;
        const outMode = p.out === 'c' && !p.c ? 'poisoned' : p.out;
        if (p.c) {
          const cShape = outMode === 'c' ? resShape : broadcastable(resShape, p.c.keep, p.c.ones);
          cCopy = randomFloat32(rng, numel(cShape));
          c = { data: Float32Array.from(cCopy), shape: cShape };
          opts.c = c;
          if (p.c.beta !== undefined) opts.beta = p.c.beta;
        }
        if (outMode === 'c') opts.out = c;
        else if (outMode === 'poisoned') opts.out = { data: poisoned(numel(resShape)), shape: resShape };
        const ref = refMatmul(a.data, aShape, b.data, bShape, {
          ...opts,
          c: cCopy,
          cShape: c?.shape,
        });
        const ctx = { seed: SEED, label: `property matmul ${JSON.stringify({ aShape, bShape, ...opts, c: c?.shape, out: outMode })}` };
        // A single output element can cancel far below its terms: measured against their size, as test/fuzz does.
        const scale = singleOutputMatmulScale(ref.data.length, a.data, aShape, b.data, bShape, { ...opts, c: cCopy, cShape: c?.shape });
        const r = matmul(a, b, opts);
        expectShape(r.shape, ref.shape, ctx);
        expectClose(r.data, ref.data, TOL, { ...ctx, scale });
        if (opts.out) expect(r).toBe(opts.out);
      }),
      fcParams,
    );
  });

  test('softmax: random shapes, scale, -Infinity entries and rows, out / in place', () => {
    const arb = fc.record({
      shape: fc.array(dim, { minLength: 1, maxLength: 3 }),
      scale: fc.option(decimal(-5, 5), { nil: undefined }),
      magnitude: fc.constantFrom(1, 10, 1e30),
      infProb: fc.constantFrom(0, 0.3, 1),
      out: fc.constantFrom('none', 'poisoned', 'inplace'),
      dataSeed: fc.integer({ min: 0, max: 0x7fffffff }),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const n = numel(p.shape);
        const scale = p.scale;
        // Large logits only with |scale| <= 1, so that scale·x stays finite in float32.
        const magnitude = p.magnitude === 1e30 && scale !== undefined && Math.abs(scale) > 1 ? 10 : p.magnitude;
        const x = randomFloat32(rng, n).map((v) => v * magnitude);
        // -Infinity logits only where the scale keeps them -Infinity (scale > 0).
        const canInf = scale === undefined || scale > 0;
        if (canInf && p.infProb > 0) for (let i = 0; i < n; i++) if (rng() < p.infProb) x[i] = -Infinity;
        const ref = refSoftmax(x, p.shape, scale ?? 1);
        const xs: Tensor = { data: Float32Array.from(x), shape: p.shape };
        const opts: { scale?: number; out?: Tensor } = {};
        if (scale !== undefined) opts.scale = scale;
        if (p.out === 'inplace') opts.out = xs;
        else if (p.out === 'poisoned') opts.out = { data: poisoned(n), shape: p.shape };
        const ctx = { seed: SEED, label: `property softmax shape=[${p.shape}] scale=${scale} magnitude=${magnitude} infProb=${p.infProb} out=${p.out}` };
        const r = softmax(xs, opts);
        expectShape(r.shape, p.shape, ctx);
        expectClose(r.data, ref.data, TOL, ctx);
        if (opts.out) expect(r).toBe(opts.out);
      }),
      fcParams,
    );
  });

  test('attention: random layouts, shapes, heads, causal, masks, padding, scale, weights, out', () => {
    const arb = fc.record({
      layout: fc.constantFrom('bhsd', 'bshd', 'bhds', '3d'),
      B: fc.integer({ min: 0, max: 3 }),
      Hkv: fc.integer({ min: 1, max: 3 }),
      group: fc.integer({ min: 1, max: 3 }),
      Sq: dim,
      Skv: dim,
      D: dim,
      Dv: fc.option(dim, { nil: undefined }),
      causal: fc.boolean(),
      scale: fc.option(decimal(-2, 2), { nil: undefined }),
      mask: fc.option(
        fc.record({
          kind: fc.constantFrom('SqSkv', 'B1SqSkv', '1H1Skv', 'BHSqSkv', 'Skv'),
          infProb: fc.constantFrom(0, 0.2, 0.6),
        }),
        { nil: undefined },
      ),
      padding: fc.constantFrom('none', 'u8', 'tensor'),
      returnWeights: fc.boolean(),
      out: fc.boolean(),
      dataSeed: fc.integer({ min: 0, max: 0x7fffffff }),
    });
    fc.assert(
      fc.property(arb, (p) => {
        const rng = makeRng(p.dataSeed);
        const { B, Hkv, Sq, Skv, D } = p;
        const H = Hkv * p.group;
        const Dv = p.Dv ?? D;
        const shape4 = (h: number, s: number, d: number): number[] =>
          p.layout === 'bhsd' ? [B, h, s, d] : p.layout === 'bhds' ? [B, h, d, s] : p.layout === 'bshd' ? [B, s, h, d] : [B, s, h * d];
        const qShape = shape4(H, Sq, D);
        const kShape = shape4(Hkv, Skv, D);
        const vShape = shape4(Hkv, Skv, Dv);
        const q: Tensor = { data: randomFloat32(rng, numel(qShape)).map((x) => 2 * x), shape: qShape };
        const k: Tensor = { data: randomFloat32(rng, numel(kShape)).map((x) => 2 * x), shape: kShape };
        const v: Tensor = { data: randomFloat32(rng, numel(vShape)), shape: vShape };
        const opts: AttentionOptions = { causal: p.causal, returnWeights: p.returnWeights };
        if (p.layout === '3d') {
          opts.heads = H;
          opts.kvHeads = Hkv;
        } else {
          opts.layout = p.layout;
        }
        if (p.scale !== undefined) opts.scale = p.scale;
        let maskData: Float32Array | undefined;
        let maskShape: number[] | undefined;
        if (p.mask) {
          maskShape = {
            SqSkv: [Sq, Skv],
            B1SqSkv: [B, 1, Sq, Skv],
            '1H1Skv': [1, H, 1, Skv],
            BHSqSkv: [B, H, Sq, Skv],
            Skv: [Skv],
          }[p.mask.kind];
          const infProb = p.mask.infProb;
          maskData = randomFloat32(rng, numel(maskShape)).map((x) => (rng() < infProb ? -Infinity : 2 * x));
          opts.mask = { data: maskData, shape: maskShape };
        }
        let pad: Uint8Array | undefined;
        if (p.padding !== 'none') {
          pad = new Uint8Array(B * Skv).map(() => (rng() < 0.3 ? 1 : 0));
          opts.keyPaddingMask = p.padding === 'u8' ? pad : { data: pad, shape: [B, Skv] };
        }
        const refOpts = {
          layout: p.layout === '3d' ? undefined : p.layout,
          heads: H,
          kvHeads: Hkv,
          causal: p.causal,
          mask: maskData,
          maskShape,
          keyPaddingMask: pad,
          scale: p.scale,
        };
        const ref = refAttention(q.data, qShape, k.data, kShape, v.data, vShape, refOpts);
        // One output element is Σ p_j v_j, which signed v can cancel: measured against Σ p_j |v_j|, as test/fuzz does.
        const scale = singleOutputAttentionScale(ref.output.data.length, q.data, qShape, k.data, kShape, v.data, vShape, refOpts);
        if (p.out) opts.out = { data: poisoned(numel(ref.output.shape)), shape: ref.output.shape };
        const ctx = {
          seed: SEED,
          label: `property attention ${JSON.stringify({ ...p, H, qShape, kShape, vShape })}`,
        };
        const r = attention(q, k, v, opts) as Tensor | { output: Tensor; weights: Tensor };
        const output = 'output' in r ? r.output : r;
        expectShape(output.shape, ref.output.shape, ctx);
        expectClose(output.data, ref.output.data, TOL, { ...ctx, scale });
        if (p.out) expect(output).toBe(opts.out);
        if (p.returnWeights) {
          expect('weights' in r).toBe(true);
          const w = (r as { weights: Tensor }).weights;
          expectShape(w.shape, ref.weights.shape, ctx);
          expectClose(w.data, ref.weights.data, TOL, { ...ctx, label: `${ctx.label} (weights)` });
        } else {
          expect('weights' in r).toBe(false);
        }
      }),
      fcParams,
    );
  });
});
