/**
 * The result pool (docs/design/result-pool.md): results allocated without
 * `out` reuse the memory of collected results. Checked here: every op writes
 * every element of a reused block (the blocks are poisoned with NaN first); a
 * result in use is never handed out again, whatever is collected around it;
 * the pool keeps within its limit and the allocation limit; async ops draw
 * from it too; and with the pool off, results are plain allocations.
 * Transfers to and from worker_threads are in worker-threads.test.ts.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import {
  attention,
  attentionAsync,
  getAllocationLimit,
  info,
  KVCache,
  layerNorm,
  matmul,
  MultiHeadSelfAttention,
  prepack,
  rmsNorm,
  rope,
  setAllocationLimit,
  setResultPoolLimit,
  softmax,
  softmaxAsync,
  tensor,
  type Tensor,
} from '../lib';
import { native } from '../lib/native';
import { getGc } from './helpers/gc';
import { pickSeed, poisoned, randomFloat32, rngFor, type Rng } from './helpers/random';

const SEED = pickSeed();
const gc = getGc()!;
const POOL_LIMIT = 256 * 2 ** 20;

const random = (rng: Rng, n: number, scale = 1): Float32Array => randomFloat32(rng, n).map((v) => v * scale);

function emptyPool(): void {
  setResultPoolLimit(0);
  setResultPoolLimit(POOL_LIMIT);
}

/** Collects garbage until the pool holds at least `blocks` free blocks (V8 may sweep on a background thread). */
async function collectUntilHeld(blocks: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    gc();
    if (native.resultPool().heldBlocks >= blocks) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`the pool holds ${native.resultPool().heldBlocks} free blocks after collecting, expected ${blocks}`);
}

/** Pool blocks for these result sizes, filled with NaN and dropped (a sync function: no async frame keeps one). */
function dropPoisonedBlocks(sizes: number[], copies: number): number {
  let blocks = 0;
  for (const n of sizes) {
    for (let c = 0; c < copies; c++) {
      const r = native.pooledResult(n);
      if (r === null) throw new Error(`the pool served no block of ${n} floats`);
      r.fill(NaN);
      blocks++;
    }
  }
  return blocks;
}

/** Leaves the pool holding only `copies` NaN-filled blocks for each of these result sizes (in floats). */
async function poisonPool(sizes: number[], copies = 3): Promise<void> {
  // Earlier results, collected now, come back before the pool is emptied, not among the poisoned blocks.
  gc();
  await new Promise((r) => setTimeout(r, 20));
  gc();
  emptyPool();
  await collectUntilHeld(dropPoisonedBlocks(sizes, copies));
}

function expectSameResult(got: Float32Array, expected: Float32Array, label: string): void {
  expect(got.length).toBe(expected.length);
  for (let i = 0; i < got.length; i++) {
    if (!Object.is(got[i], expected[i])) {
      throw new Error(`seed ${SEED}, ${label}: element ${i} is ${got[i]} from a reused block, ${expected[i]} written into out`);
    }
  }
}

/** Runs without `out` on NaN-poisoned pool blocks, and with a NaN-poisoned `out`: the two must agree bit for bit. */
async function checkOp(label: string, shape: number[], sizes: number[], run: (out?: Tensor) => Tensor | Promise<Tensor>): Promise<void> {
  const out = tensor(poisoned(shape.reduce((a, b) => a * b, 1)), shape);
  const expected = (await run(out)).data;
  await poisonPool(sizes);
  const hits = info().resultPool.hits;
  const got = await run();
  expect(info().resultPool.hits).toBeGreaterThan(hits);
  expect(got.shape).toEqual(shape);
  expectSameResult(got.data, expected, label);
}

describe(`result pool (seed ${SEED})`, () => {
  beforeAll(() => {
    setResultPoolLimit(POOL_LIMIT);
  });
  afterEach(() => {
    setResultPoolLimit(POOL_LIMIT);
  });

  test('results of 64 KiB and more come from the pool; smaller ones and the pool itself are reported', async () => {
    const rng = rngFor(SEED, 'sizes');
    expect(info().resultPool.enabled).toBe(true);
    expect(info().resultPool.fallback).toBeNull();
    // Earlier files' dropped results come back now, not while the counters below are read.
    gc();
    await new Promise((r) => setTimeout(r, 50));
    gc();
    emptyPool();
    const before = info().resultPool;
    softmax(tensor(random(rng, 17 * 63), [17, 63])); // 4 KiB: plain
    expect(info().resultPool.misses).toBe(before.misses);
    let big: Tensor | null = softmax(tensor(random(rng, 197 * 1000), [197, 1000]));
    const afterBig = info().resultPool;
    expect(afterBig.misses).toBe(before.misses + 1);
    // Earlier files' results may be collected meanwhile: the block is what liveBytes grew by.
    const block = afterBig.liveBytes - before.liveBytes;
    expect(block).toBeGreaterThanOrEqual(197 * 1000 * 4);
    expect(block).toBeLessThanOrEqual(197 * 1000 * 4 * 1.125);
    big = null;
    await collectUntilHeld(1);
    expect(info().resultPool.heldBytes).toBeGreaterThanOrEqual(block);
    const again = softmax(tensor(random(rng, 197 * 1000), [197, 1000]));
    expect(info().resultPool.hits).toBe(afterBig.hits + 1);
    expect(again.data.length).toBe(197 * 1000);
    expect(again.data.buffer.byteLength).toBe(197 * 1000 * 4);
    expect(big).toBeNull();
  });

  test('every op writes every element of a reused block', async () => {
    const rng = rngFor(SEED, 'poisoned');
    const x = tensor(random(rng, 197 * 1000, 4), [197, 1000]);
    await checkOp('softmax', [197, 1000], [197 * 1000], (out) => softmax(x, out ? { out } : undefined));
    await checkOp('softmaxAsync', [197, 1000], [197 * 1000], (out) => softmaxAsync(x, out ? { out } : undefined));

    const a = tensor(random(rng, 197 * 63), [197, 63]);
    const b = tensor(random(rng, 63 * 1000), [63, 1000]);
    await checkOp('matmul', [197, 1000], [197 * 1000], (out) => matmul(a, b, out ? { out } : undefined));
    const packed = prepack(tensor(random(rng, 1000 * 63), [1000, 63]), { transpose: true });
    await checkOp('matmul, prepacked', [197, 1000], [197 * 1000], (out) => matmul(a, packed, out ? { out } : undefined));
    const bf16 = prepack(tensor(random(rng, 1000 * 63), [1000, 63]), { transpose: true, dtype: 'bf16' });
    await checkOp('matmul, bf16', [197, 1000], [197 * 1000], (out) => matmul(a, bf16, out ? { out } : undefined));

    const rows = tensor(random(rng, 1000 * 65), [1000, 65]);
    const weight = tensor(random(rng, 65), [65]);
    await checkOp('layerNorm', [1000, 65], [1000 * 65], (out) => layerNorm(rows, { weight, ...(out ? { out } : {}) }));
    await checkOp('rmsNorm', [1000, 65], [1000 * 65], (out) => rmsNorm(rows, { weight, ...(out ? { out } : {}) }));

    const heads = tensor(random(rng, 17 * 197 * 64), [1, 17, 197, 64]);
    await checkOp('rope', [1, 17, 197, 64], [17 * 197 * 64], (out) => rope(heads, out ? { out } : undefined));

    const [q, k, v] = [0, 1, 2].map(() => tensor(random(rng, 3 * 197 * 65), [1, 3, 197, 65]));
    await checkOp('attention', [1, 3, 197, 65], [3 * 197 * 65], (out) => attention(q, k, v, { causal: true, ...(out ? { out } : {}) }));
    await checkOp('attentionAsync, bshd', [1, 3, 197, 65], [3 * 197 * 65], (out) =>
      attentionAsync(q, k, v, { layout: 'bshd', ...(out ? { out } : {}) }),
    );
  });

  test('the block and its decoder path write every element of reused blocks', async () => {
    const rng = rngFor(SEED, 'block');
    const dim = 96;
    const T = 197;
    const block = new MultiHeadSelfAttention({
      dim,
      heads: 3,
      dimHead: 32,
      weights: {
        qkvWeight: tensor(random(rng, 3 * dim * dim, 0.1), [3 * dim, dim]),
        outWeight: tensor(random(rng, dim * dim, 0.1), [dim, dim]),
        outBias: tensor(random(rng, dim), [dim]),
      },
      norm: { weight: tensor(random(rng, dim), [dim]) },
    });
    const x = tensor(random(rng, T * dim), [1, T, dim]);
    await checkOp('forward', [1, T, dim], [T * dim], (out) => block.forward(x, out ? { out } : undefined));
    // With a cache: the result, the normalized input and the attention output all come from the pool.
    const cached = (out?: Tensor) => {
      const cache = new KVCache({ batch: 1, kvHeads: 3, headDim: 32, maxLength: T });
      return block.forward(x, { cache, causal: true, ...(out ? { out } : {}) });
    };
    await checkOp('forward with a KV cache', [1, T, dim], [T * dim, T * dim, 3 * T * dim], cached);
  });

  test('a result still in use is never handed out again, however much is collected around it', async () => {
    const rng = rngFor(SEED, 'in use');
    const x = tensor(random(rng, 300 * 257, 3), [300, 257]);
    emptyPool();
    const kept: { result: Tensor; copy: Float32Array }[] = [];
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 6; i++) {
        const dropped = softmax(x, { scale: 1 + round + i });
        dropped.data.fill(-1);
      }
      const result = softmax(x, { scale: 0.5 + round });
      kept.push({ result, copy: result.data.slice() });
      gc();
      // Reused blocks, overwritten at once: a kept result sharing one would change.
      for (let i = 0; i < 6; i++) softmax(x).data.fill(-2);
    }
    await collectUntilHeld(1);
    expect(info().resultPool.hits).toBeGreaterThan(0);
    for (const [i, { result, copy }] of kept.entries()) expectSameResult(result.data, copy, `kept result ${i}`);
  });

  test('the pool keeps within its limit and within the allocation limit', async () => {
    const rng = rngFor(SEED, 'limit');
    const n = 256 * 1024; // 1 MiB results
    const x = tensor(random(rng, n), [256, 1024]);
    emptyPool();
    setResultPoolLimit(3 * 2 ** 20);
    let live: Tensor[] = [];
    for (let i = 0; i < 8; i++) live.push(softmax(x));
    live = [];
    await collectUntilHeld(3);
    const p = info().resultPool;
    expect(p.limitBytes).toBe(3 * 2 ** 20);
    expect(p.heldBytes).toBeLessThanOrEqual(3 * 2 ** 20);
    // Eight blocks came back and three fit (other tests' garbage, collected now, may take a place).
    expect(p.heldBytes).toBeGreaterThanOrEqual(2 * 2 ** 20);

    const allocationLimit = getAllocationLimit();
    try {
      // The pool may not be set above the caller's allocation limit; lowering that limit leaves the pool alone.
      setAllocationLimit(2 * 2 ** 20);
      expect(info().resultPool.limitBytes).toBe(3 * 2 ** 20);
      expect(() => setResultPoolLimit(2 * 2 ** 20 + 1)).toThrow(RangeError);
      expect(() => setResultPoolLimit(2 * 2 ** 20 + 1)).toThrow(/setResultPoolLimit: bytes must be an integer from 0 to the allocation limit \(2097152\), received 2097153/);
      setResultPoolLimit(2 * 2 ** 20);
      expect(info().resultPool.limitBytes).toBe(2 * 2 ** 20);
      expect(info().resultPool.heldBytes).toBeLessThanOrEqual(2 * 2 ** 20);
    } finally {
      setAllocationLimit(allocationLimit);
    }
    expect(() => setResultPoolLimit(-1)).toThrow(RangeError);
    expect(() => setResultPoolLimit(1.5)).toThrow(RangeError);
    expect(() => setResultPoolLimit(NaN)).toThrow(RangeError);
    expect(() => setResultPoolLimit('1' as unknown as number)).toThrow(TypeError);
    expect(live).toHaveLength(0);
  });

  test('with the limit at 0 the pool is off: results are plain and correct', () => {
    const rng = rngFor(SEED, 'off');
    setResultPoolLimit(0);
    expect(info().resultPool).toMatchObject({ enabled: false, heldBytes: 0 });
    const before = info().resultPool;
    const x = tensor(random(rng, 197 * 1000), [197, 1000]);
    const y = softmax(x);
    expect(info().resultPool.misses).toBe(before.misses);
    const expected = softmax(x, { out: tensor(poisoned(197 * 1000), [197, 1000]) });
    expectSameResult(y.data, expected.data, 'plain result');
  });
});

test('MHSA_RESULT_POOL_BYTES=0 starts a process with the pool off', () => {
  const script = `
    const m = require(${JSON.stringify(path.resolve(__dirname, '..', 'lib'))});
    const y = m.softmax(m.tensor(new Float32Array(100000).fill(1), [100, 1000]));
    const p = m.info().resultPool;
    console.log(JSON.stringify({ p, first: y.data[0], last: y.data[99999] }));
  `;
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
    env: { ...process.env, MHSA_RESULT_POOL_BYTES: '0' },
    encoding: 'utf8',
  });
  expect({ status: r.status, stderr: r.status === 0 ? '' : r.stderr }).toEqual({ status: 0, stderr: '' });
  const out = JSON.parse(r.stdout) as { p: { enabled: boolean; limitBytes: number; misses: number }; first: number; last: number };
  expect(out.p).toMatchObject({ enabled: false, limitBytes: 0, misses: 0 });
  expect(out.first).toBeCloseTo(0.001, 7);
  expect(out.last).toBeCloseTo(0.001, 7);
});

// In a process of its own, so that nothing else moves V8's count of external memory meanwhile.
test("the pool's free blocks count in V8's external memory: reusing one is not growth, and nothing drifts", () => {
  const script = `
    const m = { ...require(${JSON.stringify(path.resolve(__dirname, '..', 'lib'))}), ...require(${JSON.stringify(path.resolve(__dirname, '..', 'lib', 'native'))}) };
    const MiB = 2 ** 20;
    const external = () => m.native.resultPool().engineExternalBytes;
    const pool = () => m.info().resultPool;
    // V8 subtracts a freed buffer from its count after the pool has the block back, and may sweep
    // on a background thread: collect until the pool has its blocks and the count stops moving.
    async function collectUntil(done) {
      let last = -1;
      for (let i = 0; i < 400; i++) {
        gc();
        await new Promise((r) => setTimeout(r, 5));
        if (done() && external() === last) return;
        last = external();
      }
      throw new Error('the pool did not get its blocks back: ' + JSON.stringify(pool()));
    }
    // Random sizes, some kept a while, the limit moved once: afterwards the count is exactly what is alive and what the pool keeps.
    function churn() {
      let seed = ${SEED} >>> 0;
      const next = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
      const kept = [];
      for (let i = 0; i < 300; i++) {
        const rows = 64 + Math.floor(next() * 6) * 256;
        const r = m.softmax(m.tensor(new Float32Array(rows * 1024), [rows, 1024]));
        if (next() < 0.3) kept.push(r);
        if (kept.length > 4) kept.splice(Math.floor(next() * kept.length), 1);
        if (i === 150) m.setResultPoolLimit(16 * MiB);
      }
    }
    (async () => {
      m.setResultPoolLimit(64 * MiB);
      const x = m.tensor(new Float32Array(MiB).fill(1), [1024, 1024]); // 4 MiB results
      // Node frees some of its own start-up buffers at the first collections (~0.2 MiB on Node 24).
      await collectUntil(() => true);
      const base = external();
      let a = m.softmax(x), b = m.softmax(x);
      a = b = null;
      await collectUntil(() => pool().heldBytes === 8 * MiB);
      const e0 = external();
      const c = m.softmax(x); // reuses one block; the other now counts as free memory
      const e1 = external(), counted1 = pool().countedFreeBytes;
      const d = m.softmax(x); // reuses the other while c is alive
      const e2 = external(), counted2 = pool().countedFreeBytes;
      const e = m.softmax(x); // new memory
      const e3 = external();
      churn(); // a sync function: no async frame keeps its last result
      await collectUntil(() => pool().liveBytes === 12 * MiB); // c, d and e
      // A thread credits only blocks of the size it makes now (result_ledger.h): two results of
      // x's size come back, the next one reuses one, and the other stays counted as free memory.
      let f = m.softmax(x), g = m.softmax(x);
      f = g = null;
      await collectUntil(() => pool().liveBytes === 12 * MiB);
      const countedBefore = pool().countedFreeBytes;
      const last = m.softmax(x);
      const settled = pool();
      console.log(JSON.stringify({
        reuse: [e1 - e0, e2 - e1, e3 - e2, counted1, counted2],
        drift: external() - base - (16 * MiB + settled.countedFreeBytes),
        counted: settled.countedFreeBytes, countedBefore, held: settled.heldBytes,
        alive: [c, d, e, last].every((t) => t.data[0] > 0),
      }));
    })().catch((e) => { console.error(e); process.exit(1); });
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '-r', 'ts-node/register/transpile-only', '-e', script], { encoding: 'utf8' });
  expect({ status: r.status, stderr: r.status === 0 ? '' : r.stderr }).toEqual({ status: 0, stderr: '' });
  const out = JSON.parse(r.stdout) as {
    reuse: number[];
    drift: number;
    counted: number;
    countedBefore: number;
    held: number;
    alive: boolean;
  };
  const MiB = 2 ** 20;
  // c: 4 MiB alive plus 4 MiB counted free; d: nothing new; e: 4 MiB of new memory.
  // Node's own external memory moves by a few KiB meanwhile.
  const near = (bytes: number) => expect.objectContaining({ near: true, bytes });
  const within = (got: number, bytes: number) => ({ near: Math.abs(got - bytes) <= 256 * 1024, bytes, got });
  expect(out.reuse.slice(0, 3).map((got, i) => within(got, [8 * MiB, 0, 4 * MiB][i]))).toEqual([near(8 * MiB), near(0), near(4 * MiB)]);
  expect(out.reuse.slice(3)).toEqual([4 * MiB, 0]);
  expect(within(out.drift, 0)).toEqual(near(0));
  expect(out.counted).toBeLessThanOrEqual(out.held);
  expect(out.counted).toBe(Math.min(out.countedBefore + 4 * MiB, out.held));
  expect(out.counted).toBeGreaterThanOrEqual(4 * MiB);
  expect(out.alive).toBe(true);
});
