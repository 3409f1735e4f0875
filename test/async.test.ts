/**
 * The async forms: bit-identical to the sync ones, safe under many concurrent
 * calls, off the JS thread (timers run meanwhile), keeping their buffers alive
 * without JS references, rejecting a job whose buffer was detached while it
 * waited in the queue or ran (without touching freed memory), and leaving the
 * queue empty when everything settles.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import {
  attention,
  attentionAsync,
  info,
  matmul,
  matmulAsync,
  softmax,
  softmaxAsync,
  type AttentionOptions,
  type Tensor,
} from '../lib';
import { native } from '../lib/native';
import { getGc } from './helpers/gc';
import { nativeOnly } from './helpers/backend';

// ---------------------------------------------------------------- helpers

let seed = 2024;
function rnd(n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    a[i] = ((seed / 2 ** 32) * 2 - 1) * scale;
  }
  return a;
}
const prod = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
const T = (shape: number[], scale = 1): Tensor => ({ data: rnd(prod(shape), scale), shape });
const clone = (t: Tensor): Tensor => ({ data: t.data.slice(), shape: [...t.shape] });

/** Bit-for-bit equality of two float arrays (NaN payloads and -0 included). */
function expectSameBits(actual: Float32Array, expected: Float32Array): void {
  expect(actual.length).toBe(expected.length);
  const x = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  const y = Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength);
  if (!x.equals(y)) {
    let i = 0;
    while (i < actual.length && Object.is(actual[i], expected[i])) i++;
    throw new Error(`results differ first at element ${i}: ${actual[i]} vs ${expected[i]}`);
  }
}

async function settled(): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const { queued, inFlight } = info();
    if (queued === 0 && inFlight === 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

afterEach(async () => {
  await settled();
});

afterAll(() => {
  const i = info();
  expect(i.queued).toBe(0);
  expect(i.inFlight).toBe(0);
  expect(native.info().pendingAsync).toBe(0);
});

// ---------------------------------------------------------------- async equals sync

describe('async results are bit-identical to sync', () => {
  test('matmul: plain, batched with broadcast, transposed, alpha/beta/c, out = c', async () => {
    const cases: Array<[Tensor, Tensor, object | undefined]> = [
      [T([37, 53]), T([53, 29]), undefined],
      [T([3, 1, 20, 33]), T([4, 33, 17]), undefined],
      [T([2, 33, 20]), T([2, 17, 33]), { transposeA: true, transposeB: true }],
      [T([5, 16, 24]), T([24, 40]), { alpha: 0.75, beta: -1.25, c: T([40]) }],
      [T([64, 64]), T([64, 64]), { c: T([64, 1]), alpha: 2 }],
      [T([0, 5]), T([5, 3]), undefined],
    ];
    for (const [a, b, opts] of cases) {
      const s = matmul(a, b, opts as never);
      const r = await matmulAsync(a, b, opts as never);
      expect(r.shape).toEqual(s.shape);
      expectSameBits(r.data, s.data);
    }
    // out = c (in place accumulate), from identical starting copies.
    const a = T([31, 45]);
    const b = T([45, 23]);
    const c1 = T([31, 23]);
    const c2 = clone(c1);
    matmul(a, b, { c: c1, out: c1, beta: 0.5 });
    const r = await matmulAsync(a, b, { c: c2, out: c2, beta: 0.5 });
    expect(r.data).toBe(c2.data);
    expectSameBits(c2.data, c1.data);
  });

  test('softmax: plain, scaled, wide rows, -Infinity rows, in place', async () => {
    const xs: Array<[Tensor, object | undefined]> = [
      [T([7, 13], 5), undefined],
      [T([3, 4, 1000], 10), { scale: 0.3 }],
      [T([1, 4097], 3), undefined],
      [{ data: new Float32Array(12).fill(-Infinity), shape: [3, 4] }, undefined],
    ];
    for (const [x, opts] of xs) {
      const s = softmax(x, opts as never);
      const r = await softmaxAsync(x, opts as never);
      expectSameBits(r.data, s.data);
    }
    const x1 = T([9, 77], 4);
    const x2 = clone(x1);
    softmax(x1, { out: x1 });
    await softmaxAsync(x2, { out: x2 });
    expectSameBits(x2.data, x1.data);
  });

  test('attention: layouts, causal, mask, key padding, GQA, 3-D, weights, cross-attention', async () => {
    const pad = new Uint8Array(2 * 19);
    for (let i = 0; i < pad.length; i += 5) pad[i] = 1;
    const cases: Array<[Tensor, Tensor, Tensor, object | undefined]> = [
      [T([2, 3, 17, 16]), T([2, 3, 17, 16]), T([2, 3, 17, 16]), undefined],
      [T([2, 3, 17, 16]), T([2, 3, 17, 16]), T([2, 3, 17, 16]), { causal: true, scale: 0.2 }],
      [T([2, 17, 3, 16]), T([2, 19, 3, 16]), T([2, 19, 3, 24]), { layout: 'bshd' }],
      [T([2, 3, 16, 17]), T([2, 3, 16, 19]), T([2, 3, 8, 19]), { layout: 'bhds', causal: true }],
      [T([2, 4, 17, 16]), T([2, 2, 19, 16]), T([2, 2, 19, 16]), { mask: T([17, 19]), keyPaddingMask: pad }],
      [T([2, 17, 64]), T([2, 19, 32]), T([2, 19, 32]), { heads: 4, kvHeads: 2, causal: true }],
      [T([1, 2, 130, 64]), T([1, 2, 130, 64]), T([1, 2, 130, 64]), { mask: T([1, 2, 1, 130]) }],
    ];
    for (const [q, k, v, opts] of cases) {
      const s = attention(q, k, v, opts as AttentionOptions & { returnWeights?: false });
      const r = await attentionAsync(q, k, v, opts as AttentionOptions & { returnWeights?: false });
      expect(r.shape).toEqual(s.shape);
      expectSameBits(r.data, s.data);
    }
    const q = T([1, 2, 33, 8]);
    const s = attention(q, q, q, { returnWeights: true, causal: true });
    const r = await attentionAsync(q, q, q, { returnWeights: true, causal: true });
    expectSameBits(r.output.data, s.output.data);
    expectSameBits(r.weights.data, s.weights.data);
    expect(r.weights.shape).toEqual([1, 2, 33, 33]);
  });
});

// ---------------------------------------------------------------- concurrency

test('120 concurrent async calls of mixed ops all resolve to the sync results', async () => {
  type Job = { run: () => Promise<Tensor>; expected: Float32Array; out?: Float32Array };
  const jobs: Job[] = [];
  for (let i = 0; i < 120; i++) {
    const kind = i % 4;
    if (kind === 0) {
      const a = T([1 + (i % 7), 20 + (i % 13), 16 + (i % 11)]);
      const b = T([16 + (i % 11), 8 + (i % 5)]);
      const opts = i % 8 === 0 ? { c: T([8 + (i % 5)]), alpha: 0.5 } : undefined;
      jobs.push({ run: () => matmulAsync(a, b, opts), expected: matmul(a, b, opts).data });
    } else if (kind === 1) {
      const x = T([3 + (i % 5), 50 + i], 4);
      const expected = softmax(x, { scale: 1 + i / 100 }).data;
      // Half of them in place: x itself is the output.
      const opts = i % 2 ? { scale: 1 + i / 100, out: x } : { scale: 1 + i / 100 };
      jobs.push({ run: () => softmaxAsync(x, opts), expected, out: i % 2 ? x.data : undefined });
    } else if (kind === 2) {
      const shape = [1 + (i % 2), 2, 24 + (i % 9), 16];
      const q = T(shape);
      const k = T(shape);
      const v = T(shape);
      const opts = { causal: i % 3 === 0 };
      jobs.push({ run: () => attentionAsync(q, k, v, opts), expected: attention(q, k, v, opts).data });
    } else {
      const q = T([1, 10 + (i % 6), 32]);
      const kv = T([1, 14, 16]);
      const out = { data: new Float32Array(q.data.length).fill(NaN), shape: q.shape };
      const opts = { heads: 4, kvHeads: 2, out };
      const expected = attention(q, kv, kv, { heads: 4, kvHeads: 2 }).data;
      jobs.push({ run: () => attentionAsync(q, kv, kv, opts), expected, out: out.data });
    }
  }
  const promises = jobs.map((j) => j.run());
  const stats = info();
  expect(stats.inFlight).toBeGreaterThan(0);
  expect(stats.queued + stats.inFlight).toBe(120);
  const results = await Promise.all(promises);
  results.forEach((r, i) => {
    expectSameBits(r.data, jobs[i].expected);
    if (jobs[i].out) expect(r.data).toBe(jobs[i].out);
  });
  expect(info()).toEqual(expect.objectContaining({ queued: 0, inFlight: 0 }));
});

test('async rejections and resolutions interleave without disturbing each other', async () => {
  const good = Array.from({ length: 30 }, () => {
    const a = T([16, 24]);
    const b = T([24, 8]);
    return { p: matmulAsync(a, b), expected: matmul(a, b).data };
  });
  const bad = Array.from({ length: 30 }, (_, i) =>
    i % 2 ? matmulAsync(T([2, 3]), T([4, 2])) : softmaxAsync({ data: new Float32Array(3), shape: [2, 2] }),
  );
  const badResults = await Promise.allSettled(bad);
  for (const r of badResults) {
    expect(r.status).toBe('rejected');
    expect((r as PromiseRejectedResult).reason).toEqual(expect.objectContaining({ name: 'RangeError' }));
  }
  for (const g of good) expectSameBits((await g.p).data, g.expected);
});

// ---------------------------------------------------------------- off the JS thread

// The WebAssembly addon computes async ops on the JS thread (docs/api.md#webassembly).
nativeOnly('a timer and an immediate run while a long attentionAsync is in flight', async () => {
  // Long enough (34 GFLOP, ~0.2 s on 2 cores) that a loaded machine cannot finish it before a 1 ms
  // timer: at a quarter of this size, a fast CPU did, under a full parallel jest run.
  const shape = [1, 8, 4096, 64];
  const q = T(shape);
  const k = T(shape);
  const v = T(shape);
  const events: string[] = [];
  let inFlightSeenByTimer = -1;
  const p = attentionAsync(q, k, v).then((r) => {
    events.push('resolved');
    return r;
  });
  setImmediate(() => events.push('immediate'));
  setTimeout(() => {
    events.push('timeout');
    inFlightSeenByTimer = info().inFlight;
  }, 0);
  events.push('submitted');
  const r = await p;
  // Let anything still pending run, so a late timer would show up after 'resolved'.
  await new Promise((res) => setTimeout(res, 5));
  expect(events[0]).toBe('submitted');
  expect(events.indexOf('immediate')).toBeGreaterThan(0);
  expect(events.indexOf('timeout')).toBeGreaterThan(0);
  expect(events.indexOf('immediate')).toBeLessThan(events.indexOf('resolved'));
  expect(events.indexOf('timeout')).toBeLessThan(events.indexOf('resolved'));
  expect(inFlightSeenByTimer).toBe(1);
  expect(events[events.length - 1]).toBe('resolved');
  expect(r.shape).toEqual(shape);
  expect(r.data.every(Number.isFinite)).toBe(true);
});

// ---------------------------------------------------------------- buffers stay referenced

test('inputs with no JS reference left stay alive until their op completes (gc runs meanwhile)', async () => {
  const gc = getGc();
  const expected: Float32Array[] = [];
  // Inputs live only inside this function; only the promises (and expected results) escape.
  function start(n: number): Array<Promise<Tensor>> {
    const ps: Array<Promise<Tensor>> = [];
    for (let i = 0; i < n; i++) {
      if (i % 3 === 0) {
        const shape = [1, 4, 256 + 16 * i, 64];
        const q = T(shape);
        const k = T(shape);
        const v = T(shape);
        const mask = T([1, 1, shape[2], shape[2]]);
        expected.push(attention(q, k, v, { mask }).data);
        ps.push(attentionAsync(q, k, v, { mask }));
      } else if (i % 3 === 1) {
        const a = T([4, 128, 96]);
        const b = T([96, 112]);
        const c = T([112]);
        expected.push(matmul(a, b, { c }).data);
        ps.push(matmulAsync(a, b, { c }));
      } else {
        const x = T([64, 1000], 5);
        expected.push(softmax(x).data);
        ps.push(softmaxAsync(x, { scale: 1 }));
      }
    }
    return ps;
  }
  const promises = start(18);
  expect(info().queued).toBeGreaterThan(0);
  // Collect garbage (and churn the heap) while ops are queued and running.
  for (let round = 0; round < 4; round++) {
    if (gc) gc();
    const junk: Float32Array[] = [];
    for (let j = 0; j < 20; j++) junk.push(new Float32Array(64 * 1024).fill(round + j));
    await new Promise((r) => setImmediate(r));
  }
  if (gc) gc();
  const results = await Promise.all(promises);
  results.forEach((r, i) => expectSameBits(r.data, expected[i]));
});

// ---------------------------------------------------------------- detached while queued

test('a buffer detached while its op waits in the queue rejects that op only', async () => {
  const shape = [1, 4, 512, 64];
  const ops = Array.from({ length: 10 }, () => {
    const q = T(shape);
    const k = T(shape);
    const v = T(shape);
    return { q, k, v, expected: attention(q, k, v, { causal: true }).data };
  });
  const promises = ops.map((o) => attentionAsync(o.q, o.k, o.v, { causal: true }));
  // Two jobs are handed to native code at a time; the rest wait in the package's queue.
  expect(info()).toEqual(expect.objectContaining({ inFlight: 2, queued: 8 }));
  const last = ops[9].q.data;
  structuredClone(last.buffer, { transfer: [last.buffer as ArrayBuffer] });
  expect(last.byteLength).toBe(0);

  const results = await Promise.allSettled(promises);
  for (let i = 0; i < 9; i++) {
    expect(results[i].status).toBe('fulfilled');
    expectSameBits((results[i] as PromiseFulfilledResult<Tensor>).value.data, ops[i].expected);
  }
  expect(results[9].status).toBe('rejected');
  const reason = (results[9] as PromiseRejectedResult).reason as Error;
  expect(reason).toEqual(expect.objectContaining({ name: 'TypeError' }));
  expect(reason.message).toMatch(/^attentionAsync: q was detached while the call waited in the queue/);
  expect(info()).toEqual(expect.objectContaining({ queued: 0, inFlight: 0 }));
});

test('an out buffer detached while queued rejects; the other queued ops still resolve', async () => {
  const mk = () => {
    const a = T([8, 128, 128]);
    const b = T([128, 128]);
    return { a, b, out: { data: new Float32Array(8 * 128 * 128), shape: [8, 128, 128] }, expected: matmul(a, b).data };
  };
  const ops = Array.from({ length: 6 }, mk);
  const promises = ops.map((o) => matmulAsync(o.a, o.b, { out: o.out }));
  expect(info().queued).toBe(4);
  const victim = ops[4].out.data;
  structuredClone(victim.buffer, { transfer: [victim.buffer as ArrayBuffer] });
  const results = await Promise.allSettled(promises);
  results.forEach((r, i) => {
    if (i === 4) {
      expect(r.status).toBe('rejected');
      const e = (r as PromiseRejectedResult).reason as Error;
      expect(e).toEqual(expect.objectContaining({ name: 'TypeError' }));
      expect(e.message).toMatch(/^matmulAsync: options\.out was detached while the call waited in the queue/);
    } else {
      expect(r.status).toBe('fulfilled');
      expect((r as PromiseFulfilledResult<Tensor>).value.data).toBe(ops[i].out.data);
      expectSameBits(ops[i].out.data, ops[i].expected);
    }
  });
});

// ---------------------------------------------------------------- detached while running

/**
 * The child: a call whose out is transferred away once the addon has it, then one queued in the
 * addon behind another; each time the transferred copy is collected and same-sized arrays are allocated.
 * Before the addon held the buffers' memory, the call wrote into freed memory (a segfault, or
 * another array's elements), so this runs in a process of its own.
 */
const DETACH_CHILD = String.raw`
const m = require(process.argv[1]);
const n = 8 * 2048 * 64; // 4 MiB: glibc maps and unmaps a buffer this large on its own
const rnd = (len) => { const a = new Float32Array(len); for (let i = 0; i < len; i++) a[i] = Math.random() - 0.5; return a; };
const shape = [1, 8, 2048, 64];
const q = { data: rnd(n), shape };
async function scenario(label, startOthers) {
  const out = { data: new Float32Array(n), shape };
  const others = startOthers();
  // Handed to the addon at once (inFlight counts it): the transfer below comes while the
  // dispatcher starts or computes it, or while it waits there behind the other call.
  const p = m.attentionAsync(q, q, q, { out });
  const before = m.info();
  structuredClone(out.data.buffer, { transfer: [out.data.buffer] });
  gc(); gc();
  const victims = Array.from({ length: 4 }, () => new Float32Array(n).fill(-7));
  const outcome = await p.then(() => 'resolved', (e) => e.constructor.name + ': ' + e.message);
  await Promise.all(others);
  let overwritten = 0;
  for (const v of victims) for (let i = 0; i < n; i++) if (v[i] !== -7) overwritten++;
  return { label, inFlight: before.inFlight, outcome, overwritten };
}
(async () => {
  const results = [
    await scenario('handed to the addon', () => []),
    await scenario('queued in the addon', () => [m.attentionAsync(q, q, q)]),
  ];
  console.log(JSON.stringify(results));
})();
`;

nativeOnly('the addon holds async buffers (built with V8\'s headers, C++20 from Node 23 on)', () => {
  // Both builds find v8.h beside the running Node (node-gyp through nodedir, CMakeLists.txt through
  // execPath) and link buffer_pinning_v8.cc; binding.gyp and CMakeLists.txt switch it to C++20 where
  // V8 needs it. The prebuilt packages load it per Node ABI instead (release:rehearse checks those).
  expect(info().pinsAsyncBuffers).toBe(true);
});

nativeOnly('setBufferPinning takes only a buffer-pinning module\'s export (a type-tagged external), and changes nothing otherwise', () => {
  for (const bad of [{}, null, 42, new Float32Array(1)]) {
    expect(() => native.setBufferPinning(bad)).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringContaining('setBufferPinning: expected the pinning export') }),
    );
  }
  expect(info().pinsAsyncBuffers).toBe(true);
});

// Without the buffers held, the child would crash: only where the addon holds them.
(info().pinsAsyncBuffers ? test : test.skip)('a buffer transferred away while its call runs: the call rejects naming it, and no freed memory is touched', () => {
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', DETACH_CHILD, path.resolve(__dirname, '..')], {
    encoding: 'utf8',
    timeout: 120000,
  });
  expect({ status: r.status, signal: r.signal, stderr: r.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
  const results = JSON.parse(r.stdout.trim()) as { label: string; inFlight: number; outcome: string; overwritten: number }[];
  expect(results.map((x) => [x.label, x.inFlight])).toEqual([
    ['handed to the addon', 1],
    ['queued in the addon', 2],
  ]);
  for (const x of results) {
    expect(x.outcome).toBe('TypeError: attentionAsync: options.out was detached while the call ran; its result is not defined');
    expect(x.overwritten).toBe(0);
  }
});

// ---------------------------------------------------------------- queue accounting

test('info().queued and inFlight return to 0 after everything settles', async () => {
  const ps: Array<Promise<unknown>> = [];
  for (let i = 0; i < 12; i++) {
    const x = T([32, 500]);
    ps.push(softmaxAsync(x));
    ps.push(matmulAsync(T([2, 3]), T([5, 2])).catch(() => 'rejected')); // rejects at call time
  }
  const during = info();
  expect(during.queued + during.inFlight).toBe(12);
  expect(during.inFlight).toBeLessThanOrEqual(2);
  await Promise.all(ps);
  const after = info();
  expect(after.queued).toBe(0);
  expect(after.inFlight).toBe(0);
  expect(native.info().pendingAsync).toBe(0);
});
