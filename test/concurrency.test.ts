/**
 * Load and concurrency: 1,000 concurrent async ops of mixed kinds on the main
 * thread; the same 1,000-op mix from 4 worker_threads at once while a fifth
 * worker is terminated mid-operation and the main thread runs its own mix; and
 * several hundred async ops whose inputs nothing references, with the garbage
 * collector running while they are in flight (a child process started with
 * --expose-gc). Every result is checked against the float64 reference and is
 * bit-identical to the same op run synchronously.
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import * as mhsa from '../lib';
import { info } from '../lib';
import { expectClose, pickSeed } from './helpers/random';
import {
  refAttention,
  refLayerNorm,
  refMatmul,
  refSoftmax,
  singleOutputAttentionScale,
  singleOutputMatmulScale,
} from './helpers/reference';
import { refBlock } from './fixtures-scripts/block-reference';
import { ensureCompiled } from './helpers/compiled';

const ROOT = path.resolve(__dirname, '..');
const MIX_PATH = path.join(__dirname, 'fixtures-scripts', 'op-mix.js');
const SEED = pickSeed();
const TOL = 1e-5;

/** An op record of test/fixtures-scripts/op-mix.js (which documents the fields of each kind). */
type MixOp = { kind: 'matmul' | 'softmax' | 'attention' | 'layerNorm' | 'block' } & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
interface MixResult {
  output: Float32Array;
  weights?: Float32Array;
}
interface BlockWeights {
  qkvWeight: Float32Array;
  qkvBias: Float32Array;
  outWeight: Float32Array;
  outBias: Float32Array;
  normWeight: Float32Array;
  normBias: Float32Array;
}
interface OpMix {
  BLOCK_DIM: number;
  BLOCK_HEADS: number;
  makeOps(seed: number, count: number): MixOp[];
  blockWeights(seed: number): BlockWeights;
  runMix(m: typeof mhsa, seed: number, count: number): Promise<{ results: MixResult[]; mismatches: number[] }>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const mix = require(MIX_PATH) as OpMix;


/**
 * The float64 reference of one op of the mix; `scale`, for a product or an attention with a single
 * output element, is the size of its terms, which that element can cancel far below (seed
 * 150937459's op 545, 1x12x1, came to 2.1e-5 of its own size), as test/fuzz measures it.
 */
function reference(op: MixOp, w: BlockWeights): { output: Float64Array; weights?: Float64Array; scale?: number } {
  switch (op.kind) {
    case 'matmul': {
      const opts = {
        transposeA: op.transposeA,
        transposeB: op.transposeB,
        alpha: op.alpha,
        c: op.c,
        cShape: op.cShape,
        beta: op.beta,
      };
      const output = refMatmul(op.a, op.aShape, op.b, op.bShape, opts).data;
      const scale = singleOutputMatmulScale(output.length, op.a, op.aShape, op.b, op.bShape, opts);
      return { output, scale };
    }
    case 'softmax':
      return { output: refSoftmax(op.x, op.shape, op.scale ?? 1).data };
    case 'layerNorm':
      return { output: refLayerNorm(op.x, op.shape, op.weight, op.bias, op.eps ?? 1e-5) };
    case 'attention': {
      const opts = {
        layout: op.layout === '3d' ? undefined : op.layout,
        heads: op.heads,
        kvHeads: op.kvHeads,
        causal: op.causal,
        mask: op.mask,
        maskShape: op.maskShape,
        keyPaddingMask: op.keyPaddingMask,
        scale: op.scale,
      };
      const r = refAttention(op.q, op.qShape, op.k, op.kShape, op.v, op.vShape, opts);
      // One output element is Σ p_j v_j, which signed v can cancel (seed 1589032622's op 492: one
      // query, 12 keys, head dim 1, at 2.6e-5 of its own size): measured against Σ p_j |v_j|.
      const scale = singleOutputAttentionScale(r.output.data.length, op.q, op.qShape, op.k, op.kShape, op.v, op.vShape, opts);
      return { output: r.output.data, weights: op.returnWeights ? r.weights.data : undefined, scale };
    }
    case 'block': {
      const B = op.shape.length === 3 ? op.shape[0] : 1;
      const T = op.shape[op.shape.length - 2];
      const dim = mix.BLOCK_DIM;
      const r = refBlock(op.x, B, T, { dim, heads: mix.BLOCK_HEADS, dimHead: dim / mix.BLOCK_HEADS, ...w }, {
        causal: op.causal,
        keyPaddingMask: op.keyPaddingMask,
      });
      return { output: r.output, weights: op.returnWeights ? r.weights : undefined };
    }
  }
}

/** Checks every result of a mix (rebuilt from its seed) against the float64 reference. */
function verifyMix(seed: number, results: MixResult[], where: string): void {
  const ops = mix.makeOps(seed, results.length);
  const w = mix.blockWeights(seed);
  results.forEach((r, i) => {
    const ref = reference(ops[i], w);
    const ctx = { seed: SEED, label: `${where}: op ${i} (${ops[i].kind}) of the mix with seed ${seed}` };
    expectClose(r.output, ref.output, TOL, { ...ctx, scale: ref.scale });
    expect(r.weights === undefined).toBe(ref.weights === undefined);
    if (ref.weights) expectClose(r.weights!, ref.weights, TOL, { ...ctx, label: `${ctx.label}, weights` });
  });
}

const WORKER_MIX = `
const { parentPort, workerData } = require('node:worker_threads');
const m = require(workerData.root);
const mix = require(workerData.mixPath);
mix.runMix(m, workerData.seed, workerData.count).then(
  (r) => parentPort.postMessage(r),
  (e) => parentPort.postMessage({ fatal: String((e && e.stack) || e) }),
);
`;

// Keeps the mix running (plus long attention ops) until terminated; says when its first ops are in flight.
const WORKER_VICTIM = `
const { parentPort, workerData } = require('node:worker_threads');
const m = require(workerData.root);
const mix = require(workerData.mixPath);
const n = 4 * 512 * 64;
const big = { data: new Float32Array(n).fill(0.01), shape: [1, 4, 512, 64] };
(async () => {
  for (let round = 0; ; round++) {
    const long = [0, 1, 2].map(() => m.attentionAsync(big, big, big, { causal: true }));
    const batch = mix.runMix(m, workerData.seed + round, 500);
    if (round === 0) parentPort.postMessage({ started: true, inFlight: m.info().inFlight });
    await Promise.all([batch, ...long]);
  }
})();
`;

interface WorkerMixResult {
  results?: MixResult[];
  mismatches?: number[];
  fatal?: string;
}

function runWorkerMix(seed: number, count: number): Promise<WorkerMixResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER_MIX, { eval: true, workerData: { root: ROOT, mixPath: MIX_PATH, seed, count } });
    let result: WorkerMixResult | undefined;
    w.once('message', (msg: WorkerMixResult) => {
      result = msg;
    });
    w.once('error', reject);
    w.once('exit', (code) => (result ? resolve(result) : reject(new Error(`mix worker (seed ${seed}) exited with code ${code} before reporting`))));
  });
}

beforeAll(() => {
  ensureCompiled();
});

afterAll(() => {
  expect(info()).toEqual(expect.objectContaining({ queued: 0, inFlight: 0 }));
});

describe(`concurrency (seed ${SEED})`, () => {
  test('1,000 concurrent async ops of mixed kinds: each bit-identical to sync and within the float64 reference', async () => {
    const seed = SEED;
    const pending = mix.runMix(mhsa, seed, 1000);
    const { queued, inFlight } = info();
    expect(inFlight).toBeGreaterThan(0);
    expect(queued).toBeGreaterThan(100);
    const { results, mismatches } = await pending;
    expect(mismatches).toEqual([]);
    verifyMix(seed, results, 'main thread');
    expect(info()).toEqual(expect.objectContaining({ queued: 0, inFlight: 0 }));
  });

  test('the 1,000-op mix from 4 worker_threads at once, a fifth terminated mid-operation, the main thread mixing too', async () => {
    const victim = new Worker(WORKER_VICTIM, { eval: true, workerData: { root: ROOT, mixPath: MIX_PATH, seed: SEED ^ 0xbad } });
    const victimErrors: unknown[] = [];
    victim.on('error', (e) => victimErrors.push(e));
    const started = await new Promise<{ started: boolean; inFlight: number }>((resolve, reject) => {
      victim.once('message', resolve);
      victim.once('exit', (code) => reject(new Error(`the victim worker exited early with code ${code}`)));
    });
    expect(started).toEqual({ started: true, inFlight: 2 });

    const seeds = [1, 2, 3, 4].map((i) => (SEED + i * 7919) >>> 0);
    const workers = seeds.map((seed) => runWorkerMix(seed, 1000));
    const mainSeed = (SEED + 104729) >>> 0;
    const mainMix = mix.runMix(mhsa, mainSeed, 1000);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(await victim.terminate()).toBe(1);
    expect(victimErrors).toEqual([]);

    const [main, ...fromWorkers] = await Promise.all([mainMix, ...workers]);
    expect(main.mismatches).toEqual([]);
    verifyMix(mainSeed, main.results, 'main thread');
    fromWorkers.forEach((r, i) => {
      expect(r.fatal).toBeUndefined();
      expect(r.mismatches).toEqual([]);
      expect(r.results).toHaveLength(1000);
      verifyMix(seeds[i], r.results!, `worker ${i}`);
    });
  });

  test('several hundred async ops with unreferenced inputs survive repeated gc() while in flight (child process)', () => {
    const script = path.join(__dirname, 'fixtures-scripts', 'gc-child.js');
    const stdout = execFileSync(process.execPath, ['--expose-gc', script, ROOT, String(SEED), '500'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const report = JSON.parse(stdout.trim().split('\n').pop()!) as {
      ops: number;
      mismatches: unknown[];
      gcCalls: number;
      gcWhileInFlight: number;
    };
    expect(report.ops).toBe(500);
    expect(report.mismatches).toEqual([]);
    expect(report.gcWhileInFlight).toBeGreaterThanOrEqual(5);
  });
});
