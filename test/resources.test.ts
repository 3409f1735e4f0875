/**
 * Resource limits: a call whose buffers would exceed the allocation limit is
 * a RangeError (or a rejection) before anything is allocated or written, and
 * the same call with caller-provided buffers, or under a higher limit, works.
 */
import * as os from 'node:os';
import {
  attention,
  attentionAsync,
  getAllocationLimit,
  matmul,
  matmulAsync,
  MultiHeadSelfAttention,
  prepack,
  setAllocationLimit,
  softmax,
  tensor,
  type Tensor,
} from '../lib';

const MiB = 2 ** 20;
const original = getAllocationLimit();
afterEach(() => setAllocationLimit(original));

const filled = (shape: number[], value: number): Tensor =>
  tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(value), shape);
const limitError = (fn: string) =>
  expect.objectContaining({ name: 'RangeError', message: expect.stringMatching(new RegExp(`^${fn}: .*allocation limit`)) });

test('the default limit is half the machine memory, at most 16 GiB, unless MHSA_MAX_ALLOC_BYTES says otherwise', () => {
  const env = process.env.MHSA_MAX_ALLOC_BYTES;
  const expected = env ? Number(env) : Math.min(Math.floor(os.totalmem() / 2), 16 * 2 ** 30);
  expect(original).toBe(expected);
});

test('matmul, softmax and prepack refuse results beyond the limit; out buffers do not count', async () => {
  setAllocationLimit(1 * MiB);
  const a = filled([1024, 1], 1);
  const b = filled([1, 1024], 2); // result 1024 x 1024 floats = 4 MiB
  expect(() => matmul(a, b)).toThrow(limitError('matmul'));
  await expect(matmulAsync(a, b)).rejects.toEqual(limitError('matmulAsync'));
  const out = filled([1024, 1024], NaN);
  matmul(a, b, { out });
  expect(out.data[12345]).toBe(2);
  expect(() => softmax(filled([1024, 1024], 0))).toThrow(limitError('softmax'));
  expect(() => prepack(filled([1024, 1024], 0))).toThrow(limitError('prepack'));
  setAllocationLimit(8 * MiB);
  expect(matmul(a, b).data[0]).toBe(2);
});

test('attention counts the result and the returned weights together, and writes nothing when refused', async () => {
  const q = filled([1, 4, 256, 16], 0.1); // weights 1·4·256·256 floats = 1 MiB; result 64 KiB
  setAllocationLimit(1 * MiB - 1);
  const out = filled([1, 4, 256, 16], NaN);
  expect(() => attention(q, q, q, { returnWeights: true, out })).toThrow(limitError('attention'));
  expect(out.data.every(Number.isNaN)).toBe(true);
  expect(() => attention(q, q, q, { returnWeights: true })).toThrow(limitError('attention'));
  await expect(attentionAsync(q, q, q, { returnWeights: true })).rejects.toEqual(limitError('attentionAsync'));
  expect(attention(q, q, q).data.length).toBe(q.data.length); // the result alone fits
  setAllocationLimit(2 * MiB);
  expect(attention(q, q, q, { returnWeights: true }).weights.data.length).toBe(4 * 256 * 256);
});

test('a block counts its result, workspace growth and weights before allocating any of them', async () => {
  const dim = 32;
  const block = new MultiHeadSelfAttention({
    dim,
    heads: 4,
    dimHead: 8,
    weights: { qkvWeight: filled([3 * dim, dim], 0.01), outWeight: filled([dim, dim], 0.01) },
  });
  const x = filled([4, 200, dim], 0.5);
  setAllocationLimit(64 * 1024);
  expect(() => block.forward(x)).toThrow(limitError('MultiHeadSelfAttention.forward'));
  await expect(block.forwardAsync(x)).rejects.toEqual(limitError('MultiHeadSelfAttention.forwardAsync'));
  setAllocationLimit(16 * MiB);
  const y = block.forward(x);
  expect(y.shape).toEqual([4, 200, dim]);
  // With the workspace grown and the output given, only the weights remain to count.
  setAllocationLimit(4 * 200 * 200 * 5 * 4 - 1);
  expect(() => block.forward(x, { out: y, returnWeights: true })).toThrow(limitError('MultiHeadSelfAttention.forward'));
  expect(block.forward(x, { out: y }).data).toBe(y.data);
});

test('setAllocationLimit checks its argument', () => {
  expect(() => setAllocationLimit('1' as unknown as number)).toThrow(expect.objectContaining({ name: 'TypeError' }));
  for (const bad of [0, -1, 1.5, NaN, Infinity]) {
    expect(() => setAllocationLimit(bad)).toThrow(expect.objectContaining({ name: 'RangeError' }));
  }
});

test('an allocated result owns its whole ArrayBuffer (not a slice of a shared pool), at every size', () => {
  // Results are allocated without zeroing (lib/memory.ts, allocateResultFloats). A pooled
  // allocation (Buffer.allocUnsafe below 4 KiB) would put several results in one ArrayBuffer,
  // so transferring one to a worker would detach the others.
  for (const n of [1, 3, 17, 1000, 300_000]) {
    const x = filled([2, n], 0.5);
    const results = [softmax(x), softmax(x), matmul(filled([1, 2], 1), x)];
    for (const r of results) {
      expect(r.data.byteOffset).toBe(0);
      expect(r.data.buffer.byteLength).toBe(r.data.length * 4);
    }
    expect(results[0].data.buffer).not.toBe(results[1].data.buffer);
    expect(results[1].data.every((v) => Math.abs(v - 1 / n) < 1e-6 / n)).toBe(true);
    expect(results[2].data.every((v) => v === 1)).toBe(true);
  }
});
