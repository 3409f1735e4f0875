/**
 * The compiled package in worker_threads: four workers load it (require of the
 * repo root resolves to dist/lib/index.js) and run sync and async ops checked
 * against a plain-JS reference; then a worker is terminated while it has
 * async attention ops in flight, and the main thread carries on correctly.
 */
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { attention, attentionAsync, info, matmul, matmulAsync, setResultPoolLimit, softmax, softmaxAsync, type Tensor } from '../lib';
import { getGc } from './helpers/gc';
import { ensureCompiled } from './helpers/compiled';

const ROOT = path.resolve(__dirname, '..');


// Plain-JS reference kernels and a seeded generator, shared by the workers (as source) and the main thread.
const REFERENCE_JS = String.raw`
function makeRng(seed) {
  let s = seed >>> 0;
  return (n, scale = 1) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      a[i] = ((s / 4294967296) * 2 - 1) * scale;
    }
    return a;
  };
}
// a [batch, M, K] times b [K, N] (b shared by the batch)
function refMatmul(a, batch, M, K, b, N) {
  const out = new Float64Array(batch * M * N);
  for (let t = 0; t < batch; t++)
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let p = 0; p < K; p++) s += a[(t * M + i) * K + p] * b[p * N + j];
        out[(t * M + i) * N + j] = s;
      }
  return out;
}
function refSoftmax(x, rows, cols, scale) {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, scale * x[r * cols + c]);
    let z = 0;
    for (let c = 0; c < cols; c++) z += Math.exp(scale * x[r * cols + c] - m);
    for (let c = 0; c < cols; c++) out[r * cols + c] = Math.exp(scale * x[r * cols + c] - m) / z;
  }
  return out;
}
// bhsd attention, q [B,H,S,D], k/v [B,H,S,D]
function refAttention(q, k, v, B, H, S, D, causal) {
  const out = new Float64Array(B * H * S * D);
  const scale = 1 / Math.sqrt(D);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      const base = (b * H + h) * S * D;
      for (let i = 0; i < S; i++) {
        const w = new Float64Array(S);
        let m = -Infinity;
        for (let j = 0; j < S; j++) {
          if (causal && j > i) { w[j] = -Infinity; continue; }
          let s = 0;
          for (let d = 0; d < D; d++) s += q[base + i * D + d] * k[base + j * D + d];
          w[j] = s * scale;
          m = Math.max(m, w[j]);
        }
        let z = 0;
        for (let j = 0; j < S; j++) { w[j] = Math.exp(w[j] - m); z += w[j]; }
        for (let d = 0; d < D; d++) {
          let s = 0;
          for (let j = 0; j < S; j++) s += w[j] * v[base + j * D + d];
          out[base + i * D + d] = s / z;
        }
      }
    }
  return out;
}
function maxErr(actual, expected) {
  if (actual.length !== expected.length) return Infinity;
  let e = 0;
  for (let i = 0; i < actual.length; i++) {
    const d = Math.abs(actual[i] - expected[i]) / (1 + Math.abs(expected[i]));
    if (!(d <= e)) e = Number.isNaN(d) ? Infinity : d;
  }
  return e;
}
function sameBits(x, y) {
  return Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}
`;

const WORKER_BATCH = `
const { parentPort, workerData } = require('node:worker_threads');
${REFERENCE_JS}
(async () => {
  const m = require(workerData.root);
  const rnd = makeRng(1000 + workerData.id);
  const id = workerData.id;
  const checks = [];
  const check = (what, err) => checks.push({ what, err });
  const same = [];

  // matmul, batched a against a 2-D weight
  const [Bt, M, K, N] = [2 + id, 17, 23 + id, 19];
  const a = m.tensor(rnd(Bt * M * K), [Bt, M, K]);
  const b = m.tensor(rnd(K * N), [K, N]);
  const refMM = refMatmul(a.data, Bt, M, K, b.data, N);
  const mmSync = m.matmul(a, b);
  check('matmul sync', maxErr(mmSync.data, refMM));

  // softmax with a scale
  const x = m.tensor(rnd(5 * 33, 4), [5, 33]);
  const refSM = refSoftmax(x.data, 5, 33, 0.7);
  const smSync = m.softmax(x, { scale: 0.7 });
  check('softmax sync', maxErr(smSync.data, refSM));

  // attention, causal and not
  const [B, H, S, D] = [2, 3, 9 + id, 8];
  const q = m.tensor(rnd(B * H * S * D), [B, H, S, D]);
  const k = m.tensor(rnd(B * H * S * D), [B, H, S, D]);
  const v = m.tensor(rnd(B * H * S * D), [B, H, S, D]);
  const refAt = refAttention(q.data, k.data, v.data, B, H, S, D, false);
  const refAtC = refAttention(q.data, k.data, v.data, B, H, S, D, true);
  const atSync = m.attention(q, k, v);
  const atSyncC = m.attention(q, k, v, { causal: true });
  check('attention sync', maxErr(atSync.data, refAt));
  check('attention causal sync', maxErr(atSyncC.data, refAtC));

  // The async forms, many at once, interleaved with sync work.
  for (let round = 0; round < 5; round++) {
    const ps = [m.matmulAsync(a, b), m.softmaxAsync(x, { scale: 0.7 }), m.attentionAsync(q, k, v), m.attentionAsync(q, k, v, { causal: true })];
    m.matmul(a, b);
    const [mmA, smA, atA, atAC] = await Promise.all(ps);
    check('matmul async', maxErr(mmA.data, refMM));
    check('softmax async', maxErr(smA.data, refSM));
    check('attention async', maxErr(atA.data, refAt));
    check('attention causal async', maxErr(atAC.data, refAtC));
    same.push(sameBits(mmA.data, mmSync.data), sameBits(smA.data, smSync.data), sameBits(atA.data, atSync.data), sameBits(atAC.data, atSyncC.data));
  }

  // Errors in a worker: the right class in the worker's own realm, sync and async.
  let syncError = null, asyncError = null;
  try { m.matmul(a, m.tensor(rnd(6), [2, 3])); } catch (e) { syncError = { name: e.name, instance: e instanceof RangeError, message: e.message }; }
  await m.softmaxAsync({ data: new Float64Array(4), shape: [4] }).catch((e) => { asyncError = { name: e.name, instance: e instanceof TypeError, message: e.message }; });

  const inf = m.info();
  parentPort.postMessage({ id, checks, same, syncError, asyncError, queued: inf.queued, inFlight: inf.inFlight, version: inf.version });
})().catch((e) => parentPort.postMessage({ id: workerData.id, fatal: String(e && e.stack || e) }));
`;

const WORKER_TERMINATED = `
const { parentPort, workerData } = require('node:worker_threads');
${REFERENCE_JS}
const m = require(workerData.root);
const rnd = makeRng(77);
const shape = [1, 8, 1024, 64];
const n = 8 * 1024 * 64;
const q = m.tensor(rnd(n), shape), k = m.tensor(rnd(n), shape), v = m.tensor(rnd(n), shape);
let done = 0;
for (let i = 0; i < 8; i++) m.attentionAsync(q, k, v, { causal: i % 2 === 0 }).then(() => { done++; });
const inf = m.info();
parentPort.postMessage({ started: true, inFlight: inf.inFlight, queued: inf.queued });
// Keep the worker's JS thread busy too, so it is terminated mid-work.
setInterval(() => { m.softmax(m.tensor(rnd(4096), [64, 64])); }, 1);
`;

interface BatchResult {
  id: number;
  fatal?: string;
  checks: Array<{ what: string; err: number }>;
  same: boolean[];
  syncError: { name: string; instance: boolean; message: string } | null;
  asyncError: { name: string; instance: boolean; message: string } | null;
  queued: number;
  inFlight: number;
  version: string;
}

function runWorker(code: string, id: number): Promise<BatchResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(code, { eval: true, workerData: { root: ROOT, id } });
    let result: BatchResult | undefined;
    w.once('message', (msg: BatchResult) => {
      result = msg;
    });
    w.once('error', reject);
    w.once('exit', (codeNum) => {
      if (result) resolve(result);
      else reject(new Error(`worker ${id} exited with code ${codeNum} before reporting`));
    });
  });
}

// Main-thread reference helpers (the same source as the workers use).
// eslint-disable-next-line @typescript-eslint/no-implied-eval, no-new-func
const REF = new Function(`${REFERENCE_JS}; return { makeRng, refMatmul, refSoftmax, refAttention, maxErr, sameBits };`)() as {
  makeRng: (seed: number) => (n: number, scale?: number) => Float32Array;
  refMatmul: (a: Float32Array, batch: number, M: number, K: number, b: Float32Array, N: number) => Float64Array;
  refSoftmax: (x: Float32Array, rows: number, cols: number, scale: number) => Float64Array;
  refAttention: (q: Float32Array, k: Float32Array, v: Float32Array, B: number, H: number, S: number, D: number, causal: boolean) => Float64Array;
  maxErr: (a: Float32Array, e: Float64Array) => number;
  sameBits: (a: Float32Array, b: Float32Array) => boolean;
};

/** Checks a batch of sync and async ops on the main thread against the JS reference. */
async function mainThreadBatch(seed: number): Promise<void> {
  const rnd = REF.makeRng(seed);
  const a: Tensor = { data: rnd(3 * 16 * 21), shape: [3, 16, 21] };
  const b: Tensor = { data: rnd(21 * 13), shape: [21, 13] };
  const refMM = REF.refMatmul(a.data, 3, 16, 21, b.data, 13);
  const [B, H, S, D] = [1, 2, 31, 16];
  const q: Tensor = { data: rnd(B * H * S * D), shape: [B, H, S, D] };
  const k: Tensor = { data: rnd(B * H * S * D), shape: [B, H, S, D] };
  const v: Tensor = { data: rnd(B * H * S * D), shape: [B, H, S, D] };
  const refAt = REF.refAttention(q.data, k.data, v.data, B, H, S, D, true);
  const x: Tensor = { data: rnd(4 * 50, 3), shape: [4, 50] };
  const refSM = REF.refSoftmax(x.data, 4, 50, 1);

  expect(REF.maxErr(matmul(a, b).data, refMM)).toBeLessThan(1e-5);
  expect(REF.maxErr(attention(q, k, v, { causal: true }).data, refAt)).toBeLessThan(1e-5);
  const [mm, at, sm] = await Promise.all([matmulAsync(a, b), attentionAsync(q, k, v, { causal: true }), softmaxAsync(x)]);
  expect(REF.maxErr(mm.data, refMM)).toBeLessThan(1e-5);
  expect(REF.maxErr(at.data, refAt)).toBeLessThan(1e-5);
  expect(REF.maxErr(sm.data, refSM)).toBeLessThan(1e-5);
}

beforeAll(() => {
  ensureCompiled();
  expect(require.resolve(ROOT)).toBe(path.join(ROOT, 'dist', 'lib', 'index.js'));
});

test('4 worker_threads load the compiled package and compute correctly (sync and async)', async () => {
  const workers = [0, 1, 2, 3].map((id) => runWorker(WORKER_BATCH, id));
  // The main thread keeps computing while the workers run.
  await mainThreadBatch(5);
  const results = await Promise.all(workers);
  for (const r of results) {
    expect(r.fatal).toBeUndefined();
    expect(r.version).toBe('0.1.0');
    expect(r.checks.length).toBe(4 + 5 * 4);
    for (const c of r.checks) {
      if (!(c.err < 1e-5)) throw new Error(`worker ${r.id}: ${c.what} is off by ${c.err}`);
    }
    // Async results are bit-identical to the sync ones in the worker too.
    expect(r.same.every(Boolean)).toBe(true);
    expect(r.syncError).toEqual(expect.objectContaining({ name: 'RangeError', instance: true }));
    expect(r.syncError!.message).toMatch(/^matmul: b\.shape\[0\] \(K\) must equal a\.shape\[2\]/);
    expect(r.asyncError).toEqual(expect.objectContaining({ name: 'TypeError', instance: true }));
    expect(r.asyncError!.message).toMatch(/^softmaxAsync: expected a Float32Array for x\.data but received Float64Array\(4\)/);
    expect(r.queued).toBe(0);
    expect(r.inFlight).toBe(0);
  }
  await mainThreadBatch(6);
});

test('terminating a worker with async attention ops in flight leaves the main thread working', async () => {
  const w = new Worker(WORKER_TERMINATED, { eval: true, workerData: { root: ROOT } });
  const errors: unknown[] = [];
  w.on('error', (e) => errors.push(e));
  const started = await new Promise<{ started: boolean; inFlight: number; queued: number }>((resolve, reject) => {
    w.once('message', resolve);
    w.once('exit', (c) => reject(new Error(`worker exited early with code ${c}`)));
  });
  expect(started).toEqual({ started: true, inFlight: 2, queued: 6 });

  // Main-thread async work submitted before the termination shares the native dispatcher with the worker's jobs.
  const rnd = REF.makeRng(9);
  const shape = [1, 4, 256, 32];
  const n = 4 * 256 * 32;
  const q: Tensor = { data: rnd(n), shape };
  const k: Tensor = { data: rnd(n), shape };
  const v: Tensor = { data: rnd(n), shape };
  const expected = attention(q, k, v);
  const pending = Array.from({ length: 4 }, () => attentionAsync(q, k, v));

  await new Promise((r) => setTimeout(r, 20));
  const exitCode = await w.terminate();
  expect(exitCode).toBe(1);
  expect(errors).toEqual([]);

  for (const r of await Promise.all(pending)) expect(REF.sameBits(r.data, expected.data)).toBe(true);
  await mainThreadBatch(7);
  // A fresh worker loads the package again after the termination and works.
  const again = await runWorker(WORKER_BATCH, 1);
  expect(again.fatal).toBeUndefined();
  expect(again.checks.every((c) => c.err < 1e-5)).toBe(true);
  expect(info()).toEqual(expect.objectContaining({ queued: 0, inFlight: 0 }));
});

// Receives a result transferred from the main thread, churns its own result pool around it, and
// sends back its sum and a result of its own, transferred; then exits with that result still in use.
const WORKER_POOLED = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const v8 = require('node:v8');
const vm = require('node:vm');
v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc');
const m = require(workerData.root);
parentPort.once('message', ({ data }) => {
  const ones = m.tensor(new Float32Array(data.length).fill(1), [1, data.length]);
  for (let i = 0; i < 20; i++) {
    m.softmax(ones).data.fill(-1);
    collect();
  }
  let sum = 0;
  for (let i = 0; i < data.length; i++) sum += data[i];
  const x = m.tensor(Float32Array.from({ length: 300 * 257 }, (_, i) => Math.sin(i)), [300, 257]);
  const own = m.softmax(x, { scale: 2 });
  parentPort.postMessage({ sum, own: own.data, pool: m.info().resultPool }, [own.data.buffer]);
});
`;

test('pooled results transferred to and from a worker stay valid, there and after the worker exits', async () => {
  const gc = getGc()!;
  setResultPoolLimit(256 * 2 ** 20);
  const x: Tensor = { data: REF.makeRng(11)(200 * 1000, 4), shape: [200, 1000] };
  const sent = softmax(x);
  expect(info().resultPool.liveBytes).toBeGreaterThanOrEqual(200 * 1000 * 4);
  let expectedSum = 0;
  for (let i = 0; i < sent.data.length; i++) expectedSum += sent.data[i];

  const w = new Worker(WORKER_POOLED, { eval: true, workerData: { root: ROOT } });
  const reply = new Promise<{ sum: number; own: Float32Array; pool: { hits: number } }>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  const exited = new Promise((resolve) => w.once('exit', resolve));
  w.postMessage({ data: sent.data }, [sent.data.buffer as ArrayBuffer]);
  expect(sent.data.length).toBe(0);
  // The main thread's pool meanwhile reuses whatever it gets back: never the transferred block.
  for (let i = 0; i < 20; i++) {
    softmax(x).data.fill(-1);
    gc();
  }
  const { sum, own, pool } = await reply;
  expect(sum).toBe(expectedSum);
  expect(pool.hits).toBeGreaterThan(0);
  await exited;

  const source: Tensor = { data: Float32Array.from({ length: 300 * 257 }, (_, i) => Math.sin(i)), shape: [300, 257] };
  const expected = softmax(source, { scale: 2, out: { data: new Float32Array(300 * 257), shape: [300, 257] } });
  for (let i = 0; i < 20; i++) {
    softmax(source).data.fill(-1);
    gc();
  }
  expect(REF.sameBits(own, expected.data)).toBe(true);
});
