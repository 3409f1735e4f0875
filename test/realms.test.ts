/**
 * Typed arrays made in another realm (a vm context; a test environment whose globals differ from
 * Node's own, where Buffers come from Node's realm) are typed arrays all the same. The checks once
 * used `instanceof`, which is false across realms, and refused them with "expected a Float32Array
 * for a.data but received Float32Array(6)".
 */
import * as vm from 'node:vm';
import { attention, loadSafetensors, matmul, tensor } from '../lib';

const foreign = <T>(code: string): T => vm.runInNewContext(code) as T;

test('a Float32Array from another realm is accepted as data and as out, without a copy', () => {
  const a = foreign<Float32Array>('new Float32Array([1, 2, 3, 4, 5, 6])');
  const b = foreign<Float32Array>('new Float32Array([1, 0, 0, 1, 1, 1])');
  expect(a instanceof Float32Array).toBe(false); // the premise: another realm's constructor
  const out = foreign<Float32Array>('new Float32Array(4).fill(NaN)');
  const r = matmul({ data: a, shape: [2, 3] }, { data: b, shape: [3, 2] }, { out: { data: out, shape: [2, 2] } });
  expect(r.data).toBe(out);
  expect(Array.from(out)).toEqual([1 + 3, 2 + 3, 4 + 6, 5 + 6]);
  expect(tensor(a, [6]).data).toBe(a);
});

test('a Uint8Array keyPaddingMask from another realm pads the same keys as a local one', () => {
  const q = { data: Float32Array.from({ length: 2 * 3 * 4 }, (_, i) => Math.sin(i)), shape: [1, 2, 3, 4] };
  const local = attention(q, q, q, { keyPaddingMask: new Uint8Array([0, 1, 0]) });
  const other = attention(q, q, q, { keyPaddingMask: foreign<Uint8Array>('new Uint8Array([0, 1, 0])') });
  expect(Array.from(other.data)).toEqual(Array.from(local.data));
});

test('loadSafetensors reads a Uint8Array from another realm', () => {
  const header = Buffer.from(JSON.stringify({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }));
  const file = Buffer.alloc(8 + header.length + 8);
  file.writeBigUInt64LE(BigInt(header.length), 0);
  header.copy(file, 8);
  file.writeFloatLE(1.5, 8 + header.length);
  file.writeFloatLE(-2, 12 + header.length);
  const bytes = foreign<Uint8Array>(`new Uint8Array(${file.length})`);
  bytes.set(file);
  expect(Array.from(loadSafetensors(bytes).tensors.w.data)).toEqual([1.5, -2]);
});

test('a Float64Array from another realm is still refused, by its name', () => {
  const a = foreign<Float64Array>('new Float64Array(6)');
  expect(() => matmul({ data: a as unknown as Float32Array, shape: [2, 3] }, { data: new Float32Array(6), shape: [3, 2] })).toThrow(
    /^matmul: expected a Float32Array for a\.data but received Float64Array\(6\)$/,
  );
});
