/**
 * The async forms: bit-identical to the sync ones, safe under many concurrent
 * calls, off the JS thread (timers run meanwhile), keeping their buffers alive
 * without JS references, rejecting a job whose buffer was detached while it
 * waited in the queue or ran (without touching freed memory), and leaving the
 * queue empty when everything settles.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
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
import { asyncCopies } from '../lib/async-copies';
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
 * another array's elements), so this runs in a process of its own. It writes its findings to the
 * file named second: Windows' node.exe under wine cannot write to a pipe.
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
  require('node:fs').writeFileSync(process.argv[2], JSON.stringify(results));
})();
`;

/** Runs DETACH_CHILD with env added; returns its exit and findings. */
function detachChild(env: NodeJS.ProcessEnv = {}) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-detach-')), 'results.json');
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', DETACH_CHILD, path.resolve(__dirname, '..'), file], {
    encoding: 'utf8',
    timeout: 120000,
    env: { ...process.env, ...env },
  });
  const results = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { label: string; inFlight: number; outcome: string; overwritten: number }[]) : [];
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
  return { exit: { status: r.status, signal: r.signal, stderr: r.stderr }, results };
}

function expectDetachFindings(results: { label: string; inFlight: number; outcome: string; overwritten: number }[]): void {
  expect(results.map((x) => [x.label, x.inFlight])).toEqual([
    ['handed to the addon', 1],
    ['queued in the addon', 2],
  ]);
  for (const x of results) {
    expect(x.outcome).toBe('TypeError: attentionAsync: options.out was detached while the call ran; its result is not defined');
    expect(x.overwritten).toBe(0);
  }
}

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
  const { exit, results } = detachChild();
  expect(exit).toEqual({ status: 0, signal: null, stderr: '' });
  expectDetachFindings(results);
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

// ---------------------------------------------------------------- without pinning: private copies

/**
 * Where the addon cannot hold buffers (the Windows package: info().pinsAsyncBuffers false), each async
 * call computes on private copies of its buffers and copies what it wrote back (lib/async-copies.ts).
 * MHSA_ASYNC_COPIES=1 takes that path anywhere: here in a second instance of the package, so the rest
 * of this file keeps the addon's own choice.
 */
describe('private copies (what an addon without pinning does; MHSA_ASYNC_COPIES=1)', () => {
  let m: typeof import('../lib');

  beforeAll(() => {
    const saved = process.env.MHSA_ASYNC_COPIES;
    process.env.MHSA_ASYNC_COPIES = '1';
    try {
      jest.isolateModules(() => {
        m = require('../lib') as typeof import('../lib');
        // Decided once, at the first async call: now, while the variable is set.
        expect((require('../lib/async-copies') as typeof import('../lib/async-copies')).asyncCopies()).toBe(true);
      });
    } finally {
      if (saved === undefined) delete process.env.MHSA_ASYNC_COPIES;
      else process.env.MHSA_ASYNC_COPIES = saved;
    }
  });

  afterEach(async () => {
    for (let i = 0; i < 100 && (m.info().queued > 0 || m.info().inFlight > 0); i++) await new Promise((r) => setTimeout(r, 10));
  });

  test('the package copies by itself exactly where the addon holds no buffers (wasm copies in the addon)', () => {
    expect(asyncCopies()).toBe(process.env.MHSA_ASYNC_COPIES === '1' || (!info().pinsAsyncBuffers && info().backend !== 'wasm32'));
  });

  test('results are bit-identical to sync: matmul (c, out = c, packed b), softmax, attention (mask, padding, weights), norms, prepack', async () => {
    const a = T([3, 37, 53]);
    const b = T([53, 29]);
    const bias = T([29]);
    expectSameBits((await m.matmulAsync(a, b, { c: bias, alpha: 0.5 })).data, m.matmul(a, b, { c: bias, alpha: 0.5 }).data);
    const c1 = T([3, 37, 29]);
    const c2 = clone(c1);
    m.matmul(a, b, { c: c1, out: c1, beta: 0.25 });
    const r = await m.matmulAsync(a, b, { c: c2, out: c2, beta: 0.25 });
    expect(r.data).toBe(c2.data);
    expectSameBits(c2.data, c1.data);
    const packed = await m.prepackAsync(b);
    expectSameBits(packed.data as Float32Array, m.prepack(b).data as Float32Array);
    expectSameBits((await m.matmulAsync(a, packed)).data, m.matmul(a, b).data);

    const x = T([4, 5, 300], 4);
    expectSameBits((await m.softmaxAsync(x, { scale: 0.7 })).data, m.softmax(x, { scale: 0.7 }).data);
    const w = T([300]);
    const nb = T([300]);
    expectSameBits((await m.layerNormAsync(x, { weight: w, bias: nb })).data, m.layerNorm(x, { weight: w, bias: nb }).data);
    expectSameBits((await m.rmsNormAsync(x, { weight: w })).data, m.rmsNorm(x, { weight: w }).data);

    const pad = new Uint8Array(2 * 19);
    for (let i = 0; i < pad.length; i += 5) pad[i] = 1;
    const [q, k, v] = [T([2, 4, 17, 16]), T([2, 2, 19, 16]), T([2, 2, 19, 16])];
    const opts = { mask: T([17, 19]), keyPaddingMask: pad, returnWeights: true as const };
    const s = m.attention(q, k, v, opts);
    const ra = await m.attentionAsync(q, k, v, opts);
    expectSameBits(ra.output.data, s.output.data);
    expectSameBits(ra.weights.data, s.weights.data);
  });

  test('in-place ops still work: softmax (out: x), rope (out: x)', async () => {
    const x1 = T([9, 77], 4);
    const x2 = clone(x1);
    m.softmax(x1, { out: x1 });
    expect((await m.softmaxAsync(x2, { out: x2 })).data).toBe(x2.data);
    expectSameBits(x2.data, x1.data);

    const r1 = T([2, 3, 11, 16]);
    const r2 = clone(r1);
    const ropeOpts = { offset: 5, rotaryDim: 12 };
    m.rope(r1, { ...ropeOpts, out: r1 });
    expect((await m.ropeAsync(r2, { ...ropeOpts, out: r2 })).data).toBe(r2.data);
    expectSameBits(r2.data, r1.data);
  });

  test('views sharing one ArrayBuffer share it in the copy too; bytes outside what the call writes stay the caller\'s', async () => {
    // a [16, 24], b [24, 8] and c = out [16, 8] over one buffer, at offsets that are not 64-byte aligned, with gaps.
    const buffer = new ArrayBuffer(4 * 1024);
    const all = new Float32Array(buffer);
    all.set(rnd(all.length));
    const a = { data: new Float32Array(buffer, 4 * 3, 16 * 24), shape: [16, 24] };
    const b = { data: new Float32Array(buffer, 4 * (3 + 16 * 24 + 5), 24 * 8), shape: [24, 8] };
    const cOut = { data: new Float32Array(buffer, 4 * (3 + 16 * 24 + 5 + 24 * 8 + 7), 16 * 8), shape: [16, 8] };
    const gapAt = 3 + 16 * 24 + 2; // between a and b: in the copied span, in no view
    const reference = new Float32Array(all);
    const ref = (offset: number, n: number) => reference.subarray(offset / 4, offset / 4 + n);
    m.matmul({ data: ref(a.data.byteOffset, a.data.length), shape: a.shape }, { data: ref(b.data.byteOffset, b.data.length), shape: b.shape }, {
      c: { data: ref(cOut.data.byteOffset, cOut.data.length), shape: cOut.shape },
      out: { data: ref(cOut.data.byteOffset, cOut.data.length), shape: cOut.shape },
      beta: 0.5,
    });
    const p = m.matmulAsync(a, b, { c: cOut, out: cOut, beta: 0.5 });
    all[gapAt] = 42; // the caller's own change while the call runs, to bytes the call does not use
    reference[gapAt] = 42;
    const r = await p;
    expect(r.data).toBe(cOut.data);
    expectSameBits(all, reference);
  });

  test('an input or out transferred mid-call rejects naming it, touches nothing, and leaves other calls exact', async () => {
    const shape = [1, 4, 256, 64];
    const mk = () => ({ q: T(shape), k: T(shape), v: T(shape), out: { data: new Float32Array(prod(shape)).fill(-7), shape } });
    const calls = [mk(), mk(), mk(), mk()];
    const expected = calls.map((c) => m.attention(c.q, c.k, c.v).data);
    const promises = calls.map((c) => m.attentionAsync(c.q, c.k, c.v, { out: c.out }));
    expect(m.info().inFlight).toBe(2); // calls 0 and 1 are native's now, on their copies
    const movedQ = structuredClone(calls[0].q.data.buffer, { transfer: [calls[0].q.data.buffer as ArrayBuffer] });
    const movedOut = structuredClone(calls[1].out.data.buffer, { transfer: [calls[1].out.data.buffer as ArrayBuffer] });
    const results = await Promise.allSettled(promises);
    expect(results.map((x) => x.status)).toEqual(['rejected', 'rejected', 'fulfilled', 'fulfilled']);
    expect(((results[0] as PromiseRejectedResult).reason as Error).message).toBe(
      'attentionAsync: q was detached while the call ran; its result is not defined',
    );
    expect(((results[1] as PromiseRejectedResult).reason as Error).message).toBe(
      'attentionAsync: options.out was detached while the call ran; its result is not defined',
    );
    // The job wrote its own copy: the memory that moved with the transfer still holds what it held.
    expect(new Float32Array(movedOut).every((x) => x === -7)).toBe(true);
    expect(movedQ.byteLength).toBe(prod(shape) * 4);
    for (const i of [2, 3]) expectSameBits(calls[i].out.data, expected[i]);
  });

  test('many concurrent calls of the same sizes (whose copies later calls reuse) each get their own result', async () => {
    const calls = Array.from({ length: 40 }, (_, i) => {
      const a = T([33, 70]);
      const b = T([70, 45]);
      const out = i % 2 ? { data: new Float32Array(33 * 45), shape: [33, 45] } : undefined;
      return { a, b, out, expected: m.matmul(a, b).data };
    });
    const results = await Promise.all(calls.map((c) => m.matmulAsync(c.a, c.b, c.out ? { out: c.out } : undefined)));
    results.forEach((r, i) => {
      expectSameBits(r.data, calls[i].expected);
      if (calls[i].out) expect(r.data).toBe(calls[i].out!.data);
    });
  });

  test('the block: forwardAsync (sequence stages, out, returnWeights) and a decoder step over a KV cache', async () => {
    const dim = 48;
    const r = (n: number, s: number) => rnd(n, s);
    const block = new m.MultiHeadSelfAttention({
      dim,
      heads: 4,
      norm: { weight: m.tensor(r(dim, 1), [dim]), bias: m.tensor(r(dim, 0.1), [dim]) },
      weights: {
        qkvWeight: m.tensor(r(3 * dim * dim, 0.15), [3 * dim, dim]),
        outWeight: m.tensor(r(dim * dim, 0.15), [dim, dim]),
        outBias: m.tensor(r(dim, 0.1), [dim]),
      },
    });
    const x = T([2, 13, dim]);
    expectSameBits((await block.forwardAsync(x)).data, block.forward(x).data);
    const out = { data: new Float32Array(2 * 13 * dim), shape: [2, 13, dim] };
    expect((await block.forwardAsync(x, { out, causal: true })).data).toBe(out.data);
    expectSameBits(out.data, block.forward(x, { causal: true }).data);
    const sw = block.forward(x, { returnWeights: true });
    const aw = await block.forwardAsync(x, { returnWeights: true });
    expectSameBits(aw.output.data, sw.output.data);
    expectSameBits(aw.weights.data, sw.weights.data);

    const decoder = new m.MultiHeadSelfAttention({
      dim: 32,
      heads: 4,
      kvHeads: 2,
      norm: { type: 'rms', weight: m.tensor(r(32, 1), [32]) },
      rope: { theta: 10000, rotaryDim: 8, interleaved: false },
      weights: { qkvWeight: m.tensor(r(64 * 32, 0.2), [64, 32]), outWeight: m.tensor(r(32 * 32, 0.2), [32, 32]) },
    });
    const syncCache = new m.KVCache({ batch: 1, kvHeads: 2, headDim: 8, maxLength: 8 });
    const asyncCache = new m.KVCache({ batch: 1, kvHeads: 2, headDim: 8, maxLength: 8 });
    const steps = T([1, 6, 32]);
    for (let t = 0; t < 6; t++) {
      const step = { data: steps.data.slice(t * 32, (t + 1) * 32), shape: [1, 1, 32] };
      const s1 = decoder.forward(step, { cache: syncCache, causal: true });
      const s2 = await decoder.forwardAsync(step, { cache: asyncCache, causal: true });
      expectSameBits(s2.data, s1.data);
    }
  });

  test('a buffer transferred away and collected while its call runs: rejects naming it, and no freed memory is touched', () => {
    const { exit, results } = detachChild({ MHSA_ASYNC_COPIES: '1' });
    expect({ status: exit.status, signal: exit.signal }).toEqual({ status: 0, signal: null });
    expectDetachFindings(results);
  });
});
