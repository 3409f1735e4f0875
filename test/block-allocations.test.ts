/**
 * MultiHeadSelfAttention allocates nothing per call beyond its output: after
 * a warm-up call, forward() creates exactly one result (here 80 KB, so it
 * comes from the result pool rather than a JS constructor) and nothing when
 * `out` is given, and the native scratch memory does not grow.
 * Counted by replacing the global Float32Array and ArrayBuffer constructors
 * with counting proxies while the calls run. (One compute thread here; the
 * JS-side counts do not depend on it.)
 */
import { getNumThreads, info, MultiHeadSelfAttention, setNumThreads, tensor, type Tensor } from '../lib';
import { makeRng, randomFloat32 } from './helpers/random';
import { numel } from './helpers/reference';

const rng = makeRng(4242);
function random(shape: number[], scale = 0.2): Tensor {
  return tensor(randomFloat32(rng, numel(shape)).map((x) => x * scale), shape);
}

/** Runs fn with every `new Float32Array(...)` and `new ArrayBuffer(...)` counted. */
async function countAllocations(fn: () => unknown): Promise<{ float32: number; arrayBuffer: number }> {
  const counts = { float32: 0, arrayBuffer: 0 };
  const g = globalThis as unknown as { Float32Array: Float32ArrayConstructor; ArrayBuffer: ArrayBufferConstructor };
  const originalF32 = g.Float32Array;
  const originalAB = g.ArrayBuffer;
  g.Float32Array = new Proxy(originalF32, {
    construct(target, args) {
      counts.float32++;
      return Reflect.construct(target, args);
    },
  });
  g.ArrayBuffer = new Proxy(originalAB, {
    construct(target, args) {
      counts.arrayBuffer++;
      return Reflect.construct(target, args);
    },
  });
  try {
    await fn();
  } finally {
    g.Float32Array = originalF32;
    g.ArrayBuffer = originalAB;
  }
  return counts;
}

const dim = 96;
const block = new MultiHeadSelfAttention({
  dim,
  heads: 6,
  dimHead: 16,
  weights: {
    qkvWeight: random([3 * 96, dim]),
    qkvBias: random([3 * 96]),
    outWeight: random([dim, 96]),
    outBias: random([dim]),
  },
  norm: { weight: random([dim], 1), bias: random([dim]) },
});
const x = random([3, 70, dim], 1);

// Native scratch is per thread and pool tasks are claimed dynamically, so with
// several threads a helper may first meet a scratch size on any later call.
// One compute thread makes "no growth after the first call" exact.
const threads = getNumThreads();
beforeAll(() => setNumThreads(1));
afterAll(() => setNumThreads(threads));

test('the counting proxy sees allocations (so zero below means zero)', async () => {
  const counts = await countAllocations(() => {
    new Float32Array(4);
    new ArrayBuffer(8);
  });
  expect(counts).toEqual({ float32: 1, arrayBuffer: 1 });
});

test('forward: one result (from the result pool) per call, none with out, no native scratch growth', async () => {
  const expected = block.forward(x); // warm-up: the workspace and native scratch grow here
  const scratch = info().scratchBytes;
  const served = () => info().resultPool.hits + info().resultPool.misses;
  const servedBefore = served();
  let y: Tensor | undefined;
  const withoutOut = await countAllocations(() => {
    y = block.forward(x);
  });
  if (info().resultPool.enabled) {
    expect(withoutOut).toEqual({ float32: 0, arrayBuffer: 0 });
    expect(served()).toBe(servedBefore + 1);
  } else {
    expect(withoutOut).toEqual({ float32: 1, arrayBuffer: 0 });
  }
  expect(y!.data).toEqual(expected.data);

  const out = tensor(new Float32Array(expected.data.length), [3, 70, dim]);
  const servedWithOut = served();
  const withOut = await countAllocations(() => {
    for (let i = 0; i < 20; i++) block.forward(x, { out });
  });
  expect(withOut).toEqual({ float32: 0, arrayBuffer: 0 });
  expect(served()).toBe(servedWithOut);
  expect(out.data).toEqual(expected.data);
  expect(info().scratchBytes).toBe(scratch);
});

test('forwardAsync: the same, with several calls in flight sharing the workspace pool', async () => {
  const expected = block.forward(x);
  await Promise.all([block.forwardAsync(x), block.forwardAsync(x)]); // two workspaces now exist
  const scratch = info().scratchBytes;
  const outs = [0, 1].map(() => tensor(new Float32Array(expected.data.length), [3, 70, dim]));
  const counts = await countAllocations(async () => {
    for (let round = 0; round < 5; round++) await Promise.all(outs.map((out) => block.forwardAsync(x, { out })));
  });
  expect(counts).toEqual({ float32: 0, arrayBuffer: 0 });
  for (const out of outs) expect(out.data).toEqual(expected.data);
  expect(info().scratchBytes).toBe(scratch);
});

test('after a burst of concurrent calls at most two idle workspaces stay, and releaseWorkspaces frees them', async () => {
  const big = random([4, 150, dim], 1);
  const expected = block.forward(big);
  const results = await Promise.all(Array.from({ length: 6 }, () => block.forwardAsync(big)));
  for (const r of results) expect(r.data).toEqual(expected.data);
  const perWorkspace = 4 * 150 * block.dim * 4; // at least the rows of one [4, 150] input
  expect(block.workspaceBytes).toBeGreaterThanOrEqual(perWorkspace);
  expect(block.workspaceBytes).toBeLessThanOrEqual(2 * perWorkspace * 8);
  const idleBefore = block.workspaceBytes;
  block.releaseWorkspaces();
  expect(block.workspaceBytes).toBe(0);
  expect(block.forward(big).data).toEqual(expected.data);
  expect(block.workspaceBytes).toBeLessThanOrEqual(idleBefore);
  expect(block.workspaceBytes).toBeGreaterThan(0);
});
