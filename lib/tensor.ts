import { types } from 'node:util';
import { describe, detachedError, formatShape, rangeError, typeError } from './errors';
import { allocateResultFloats } from './memory';

/**
 * A dense, row-major float32 tensor: `data` holds the elements, `shape` the dims.
 * Any object with these two fields is a Tensor; no class is needed.
 *
 * @example
 * const x: Tensor = { data: new Float32Array(6), shape: [2, 3] };
 */
export interface Tensor {
  data: Float32Array;
  shape: readonly number[];
}

/**
 * What the ops accept as an input tensor: a {@link Tensor}, or an object with
 * `dims` in place of `shape` (an onnxruntime-node Tensor, for example).
 */
export type TensorLike = Tensor | { data: Float32Array; dims: readonly number[] };

/**
 * A read-only 4-D view with element strides over a larger buffer: what
 * {@link KVCache}'s `keys` and `values` return, [batch, kvHeads, length,
 * headDim] over storage for maxLength positions. `attention` reads it in
 * place; the other ops take only dense tensors.
 */
export interface StridedTensor {
  data: Float32Array;
  shape: readonly number[];
  /** Elements between neighbours along each axis; the last is 1. */
  strides: readonly number[];
}

/**
 * A dense, row-major bfloat16 tensor: each element is the top 16 bits of a
 * float32, held in a Uint16Array. `loadSafetensors(..., { bf16: 'keep' })`
 * returns a checkpoint's BF16 tensors so, without widening them; {@link prepack}
 * (and so `fromTorch`) takes them as weights.
 *
 * @example
 * const w: Bf16Tensor = { data: new Uint16Array([0x3f80, 0x4000]), shape: [2, 1], dtype: 'bf16' };
 * const y = matmul(tensor(new Float32Array([3]), [1, 1]), prepack(w, { transpose: true })); // [1, 2]
 */
export interface Bf16Tensor {
  data: Uint16Array;
  shape: readonly number[];
  dtype: 'bf16';
}

/** A strided view of bf16 values: a bf16 {@link KVCache}'s `keys` and `values`. */
export interface Bf16StridedTensor extends Bf16Tensor {
  /** Elements between neighbours along each axis; the last is 1. */
  strides: readonly number[];
}

/**
 * A weight already quantized to int8: values in [-127, 127], row-major, with
 * one scale per output column given beside it (prepack's `scales`). A
 * checkpoint's I8 tensor, `loadSafetensors(..., { int8: 'keep' })`.
 */
export interface Int8Tensor {
  data: Int8Array;
  shape: readonly number[];
  dtype: 'int8';
}

/**
 * A strided view of int8 values with one float scale per row (per position of
 * each head): an int8 {@link KVCache}'s `keys` and `values`. The row that
 * starts at element o of `data` holds `data[o + e] · scales[o / width]`,
 * width being the last dim; the strides of the other axes are whole rows.
 */
export interface Int8StridedTensor extends Int8Tensor {
  /** Elements between neighbours along each axis; the last is 1. */
  strides: readonly number[];
  scales: Float32Array;
}

/** Whether a tensor argument says it is int8 (its dtype field; checkInt8Tensor checks the rest). */
export function isInt8Tensor(value: unknown): value is Int8Tensor {
  return typeof value === 'object' && value !== null && (value as { dtype?: unknown }).dtype === 'int8';
}

/** Whether a tensor argument says it is bf16 (its dtype field; checkBf16Tensor checks the rest). */
export function isBf16Tensor(value: unknown): value is Bf16Tensor {
  return typeof value === 'object' && value !== null && (value as { dtype?: unknown }).dtype === 'bf16';
}

/** Checks a Uint16Array argument (bf16 values): right type, not detached. */
export function checkUint16Array(fn: string, arg: string, data: unknown): Uint16Array {
  if (!types.isUint16Array(data)) throw typeError(fn, arg, 'a Uint16Array', data);
  if (isDetached(data)) throw detachedError(fn, arg);
  return data;
}

export function checkInt8Array(fn: string, arg: string, data: unknown): Int8Array {
  if (!types.isInt8Array(data)) throw typeError(fn, arg, 'an Int8Array', data);
  if (isDetached(data)) throw detachedError(fn, arg);
  return data;
}

/** Validates a {@link Bf16Tensor} argument: a live Uint16Array `data` whose length matches `shape` (copied). */
export function checkBf16Tensor(fn: string, arg: string, value: unknown): Bf16Tensor & { shape: number[] } {
  const v = value as { data?: unknown; shape?: unknown };
  const data = checkUint16Array(fn, `${arg}.data`, v.data);
  const shape = checkShape(fn, `${arg}.shape`, v.shape);
  const n = elementCount(shape);
  if (n < 0) throw rangeError(fn, `${arg}.shape ${formatShape(shape)} has more than ${MAX_ELEMENTS} elements`);
  const length = typedArrayLength.call(data) as number;
  if (n !== length) {
    throw rangeError(fn, `${arg}.data.length must equal the product of ${arg}.shape ${formatShape(shape)} = ${n}, received ${length}`);
  }
  return { data, shape, dtype: 'bf16' };
}

/** Validates an {@link Int8Tensor} argument: a live Int8Array `data` whose length matches `shape` (copied). */
export function checkInt8Tensor(fn: string, arg: string, value: unknown): Int8Tensor & { shape: number[] } {
  const v = value as { data?: unknown; shape?: unknown };
  const data = checkInt8Array(fn, `${arg}.data`, v.data);
  const shape = checkShape(fn, `${arg}.shape`, v.shape);
  const n = elementCount(shape);
  if (n < 0) throw rangeError(fn, `${arg}.shape ${formatShape(shape)} has more than ${MAX_ELEMENTS} elements`);
  if (n !== data.length) {
    throw rangeError(fn, `${arg}.data.length must equal the product of ${arg}.shape ${formatShape(shape)} = ${n}, received ${data.length}`);
  }
  return { data, shape, dtype: 'int8' };
}

/** Largest element count of one tensor: the most a Float32Array holds in Node 20. */
export const MAX_ELEMENTS = 2 ** 32 - 1;

/** A validated tensor: shape copied into a plain array of safe integers. */
export interface CheckedTensor {
  data: Float32Array;
  shape: number[];
}

// The engine's own accessors, taken once at load: a subclass's getter or an own property on a
// view or its buffer cannot stand in for them (one that hid a resizable buffer from the async
// check crashed the process). They work on views from any realm.
function accessor(proto: object, key: string): ((this: unknown) => unknown) | undefined {
  return Object.getOwnPropertyDescriptor(proto, key)?.get as ((this: unknown) => unknown) | undefined;
}
const typedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
const typedArrayBuffer = accessor(typedArrayPrototype, 'buffer')!;
const typedArrayByteOffset = accessor(typedArrayPrototype, 'byteOffset')!;
const typedArrayByteLength = accessor(typedArrayPrototype, 'byteLength')!;
const typedArrayLength = accessor(typedArrayPrototype, 'length')!;
const dataViewBuffer = accessor(DataView.prototype, 'buffer')!;
const dataViewByteOffset = accessor(DataView.prototype, 'byteOffset')!;
const dataViewByteLength = accessor(DataView.prototype, 'byteLength')!;
const arrayBufferByteLength = accessor(ArrayBuffer.prototype, 'byteLength')!;
const arrayBufferResizable = accessor(ArrayBuffer.prototype, 'resizable');

/** A view's buffer, as the engine knows it. */
export function bufferOf(view: ArrayBufferView): ArrayBufferLike {
  return (types.isDataView(view) ? dataViewBuffer : typedArrayBuffer).call(view) as ArrayBufferLike;
}

/** A view's byte offset, as the engine knows it (0 once detached). */
export function byteOffsetOf(view: ArrayBufferView): number {
  return (types.isDataView(view) ? dataViewByteOffset : typedArrayByteOffset).call(view) as number;
}

/** A view's byte length, as the engine knows it (0 once detached; a detached DataView reads as 0 too). */
export function byteLengthOf(view: ArrayBufferView): number {
  if (!types.isDataView(view)) return typedArrayByteLength.call(view) as number;
  try {
    return dataViewByteLength.call(view) as number;
  } catch {
    return 0;
  }
}

/** A typed array's element count, as the engine knows it. */
export function lengthOf(view: Float32Array | Uint16Array | Int8Array): number {
  return typedArrayLength.call(view) as number;
}

/**
 * True if the ArrayBuffer behind a view has been detached (transferred).
 * Node 20 has no `ArrayBuffer.prototype.detached`; a detached buffer reports
 * byteLength 0, and constructing a view over it throws.
 */
export function isDetached(view: ArrayBufferView): boolean {
  // A view with bytes cannot be over a detached buffer; checking that first
  // skips materializing its buffer on every call (a measurable share of a small op).
  if (byteLengthOf(view) !== 0) return false;
  const buffer = bufferOf(view);
  if (types.isSharedArrayBuffer(buffer) || arrayBufferByteLength.call(buffer) !== 0) return false;
  try {
    new Uint8Array(buffer as ArrayBuffer);
    return false;
  } catch {
    return true;
  }
}

/** True if the view's buffer is a resizable (non-shared) ArrayBuffer, which can shrink; a growable SharedArrayBuffer cannot. */
export function isResizable(view: ArrayBufferView): boolean {
  const buffer = bufferOf(view);
  return !types.isSharedArrayBuffer(buffer) && arrayBufferResizable?.call(buffer) === true;
}

/** Element count of a shape, or -1 when it exceeds {@link MAX_ELEMENTS}. Dims must be valid. */
export function elementCount(shape: readonly number[]): number {
  if (shape.includes(0)) return 0;
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > MAX_ELEMENTS) return -1;
  }
  return n;
}

/** A plain copy of shape when it is an array of non-negative safe integers, else undefined (no message built). */
function plainShape(shape: unknown): number[] | undefined {
  if (!Array.isArray(shape)) return undefined;
  const out = new Array<number>(shape.length);
  for (let i = 0; i < shape.length; i++) {
    const d: unknown = shape[i];
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) return undefined;
    out[i] = d;
  }
  return out;
}

/** Checks a shape: an array of non-negative safe integers. Returns a plain copy. */
export function checkShape(fn: string, arg: string, shape: unknown): number[] {
  const plain = plainShape(shape);
  if (plain) return plain;
  // Refused: find the first reason, for the message.
  if (!Array.isArray(shape)) throw typeError(fn, arg, 'an array of dims', shape);
  const i = shape.findIndex((d: unknown) => typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0);
  const d: unknown = shape[i];
  if (typeof d !== 'number') throw typeError(fn, `${arg}[${i}]`, 'a number', d);
  throw rangeError(fn, `${arg}[${i}] must be a non-negative safe integer, received ${d}`);
}

/**
 * A Float32Array whose buffer is still attached. `types.isFloat32Array`, not `instanceof`: an array
 * made in another realm (a vm context, a jest environment) has another realm's constructor.
 */
function isLiveFloat32Array(data: unknown): data is Float32Array {
  // The typed array's own byteLength first: the common case, with no DataView test (byteLengthOf).
  return types.isFloat32Array(data) && (typedArrayByteLength.call(data) !== 0 || !isDetached(data));
}

/** Checks a Float32Array argument: right type, not detached. */
export function checkFloat32Array(fn: string, arg: string, data: unknown): Float32Array {
  if (isLiveFloat32Array(data)) return data;
  if (!types.isFloat32Array(data)) throw typeError(fn, arg, 'a Float32Array', data);
  throw detachedError(fn, arg);
}

/**
 * Validates a tensor argument: an object with a Float32Array `data` and a
 * `shape` (or `dims`) whose product equals data.length.
 */
export function checkTensor(fn: string, arg: string, value: unknown): CheckedTensor {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || Array.isArray(value)) {
    throw typeError(fn, arg, 'a tensor { data: Float32Array, shape: number[] }', value);
  }
  const v = value as { data?: unknown; shape?: unknown; dims?: unknown };
  // Each field read once: a getter cannot return one value to the check and another to the call.
  // Argument names are built only for an error message: string building on
  // every call was a measurable share of a small op.
  const rawData = v.data;
  const data = isLiveFloat32Array(rawData) ? rawData : checkFloat32Array(fn, `${arg}.data`, rawData);
  const shapeField = v.shape;
  const dimsField = shapeField === undefined ? v.dims : undefined;
  const useDims = dimsField !== undefined;
  const rawShape = useDims ? dimsField : shapeField;
  const shape = plainShape(rawShape) ?? checkShape(fn, useDims ? `${arg}.dims` : `${arg}.shape`, rawShape);
  const n = elementCount(shape);
  const shapeName = (): string => `${arg}.${useDims ? 'dims' : 'shape'}`;
  if (n < 0) {
    throw rangeError(fn, `${shapeName()} ${formatShape(shape)} has more than ${MAX_ELEMENTS} elements`);
  }
  const length = lengthOf(data);
  if (n !== length) {
    if ((value as { strides?: unknown }).strides !== undefined) {
      throw rangeError(fn, `${arg} must be a dense tensor, received a strided view (a KVCache's keys or values: only attention reads those)`);
    }
    throw rangeError(
      fn,
      `${arg}.data.length must equal the product of ${shapeName()} ${formatShape(shape)} = ${n}, received ${length}`,
    );
  }
  return { data, shape };
}

/** Strides of a dense tensor of this shape. */
export function denseStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let a = shape.length - 1; a >= 0; a--) {
    strides[a] = step;
    step *= shape[a];
  }
  return strides;
}

/** Elements from a strided view's first to its last, plus one; 0 when it has none. */
export function stridedSpan(shape: readonly number[], strides: readonly number[]): number {
  if (shape.some((d) => d === 0)) return 0;
  return shape.reduce((span, d, a) => span + (d - 1) * strides[a], 1);
}

/**
 * Validates a {@link StridedTensor}: a rank-`rank` shape, as many strides
 * (safe integers ≥ 0, the last 1), and data that ends at the view's last element.
 */
export function checkStridedTensor(fn: string, arg: string, value: StridedTensor, rank: number): CheckedTensor & { strides: number[] } {
  return checkStridedView(fn, arg, checkFloat32Array(fn, `${arg}.data`, value.data), value, rank);
}

/**
 * {@link checkStridedTensor} for a view of int8 rows with their scales (an
 * int8 {@link KVCache}'s keys or values): strides of whole rows, and a scale
 * for every row the view reaches.
 */
export function checkInt8StridedTensor(
  fn: string,
  arg: string,
  value: Int8StridedTensor,
  rank: number,
): { data: Int8Array; scales: Float32Array; shape: number[]; strides: number[] } {
  const t = checkStridedView(fn, arg, checkInt8Array(fn, `${arg}.data`, value.data), value, rank);
  const scales = checkFloat32Array(fn, `${arg}.scales`, value.scales);
  const width = t.shape[rank - 1];
  if (width === 0 || t.shape.some((d) => d === 0)) return { ...t, scales };
  if (t.strides.slice(0, -1).some((s) => s % width !== 0)) {
    throw rangeError(fn, `${arg}.strides ${formatShape(t.strides)} must be whole rows of ${width} (the last dim) but the last`);
  }
  const rows = stridedSpan(t.shape.slice(0, -1), t.strides.slice(0, -1).map((s) => s / width));
  if (lengthOf(scales) < rows) {
    throw rangeError(fn, `${arg}.scales.length must be at least ${rows} (one per row the view reaches), received ${lengthOf(scales)}`);
  }
  return { ...t, scales };
}

/** {@link checkStridedTensor} for a view of bf16 values (a bf16 {@link KVCache}'s keys or values). */
export function checkBf16StridedTensor(
  fn: string,
  arg: string,
  value: Bf16StridedTensor,
  rank: number,
): { data: Uint16Array; shape: number[]; strides: number[] } {
  return checkStridedView(fn, arg, checkUint16Array(fn, `${arg}.data`, value.data), value, rank);
}

function checkStridedView<A extends Float32Array | Uint16Array | Int8Array>(
  fn: string,
  arg: string,
  data: A,
  value: { shape: unknown; strides: unknown },
  rank: number,
): { data: A; shape: number[]; strides: number[] } {
  const shape = checkShape(fn, `${arg}.shape`, value.shape);
  const rawStrides: unknown = value.strides;
  if (!Array.isArray(rawStrides)) throw typeError(fn, `${arg}.strides`, 'an array of integers', rawStrides);
  const strides = Array.prototype.slice.call(rawStrides) as unknown[];
  if (shape.length !== rank || strides.length !== rank) {
    throw rangeError(fn, `${arg} must have ${rank} dims and ${rank} strides, received shape ${formatShape(shape)} and ${strides.length} strides`);
  }
  strides.forEach((st, a) => {
    if (typeof st !== 'number' || !Number.isSafeInteger(st) || st < 0 || (a === rank - 1 && st !== 1)) {
      throw rangeError(fn, `${arg}.strides[${a}] must be ${a === rank - 1 ? '1' : 'a safe integer >= 0'}, received ${describe(st)}`);
    }
  });
  const span = stridedSpan(shape, strides as number[]);
  if (span > MAX_ELEMENTS) throw rangeError(fn, `${arg} spans ${span} elements, more than ${MAX_ELEMENTS}`);
  const length = lengthOf(data);
  if (length !== span) {
    throw rangeError(fn, `${arg}.data.length must be ${span} for shape ${formatShape(shape)} with strides ${formatShape(strides as number[])}, received ${length}`);
  }
  return { data, shape, strides: strides as number[] };
}

/** RangeError unless shape is exactly expected; `what` gives it in symbols, e.g. `[dim, heads·dimHead]`. */
export function checkExactShape(fn: string, arg: string, shape: readonly number[], expected: readonly number[], what: string): void {
  if (shape.length !== expected.length || shape.some((d, i) => d !== expected[i])) {
    throw rangeError(fn, `${arg} must have shape ${what} = ${formatShape(expected)}, received ${formatShape(shape)}`);
  }
}

/**
 * Checks options.keyPaddingMask of attention and the block: undefined, a
 * Uint8Array of batch·keys bytes (nonzero = ignore that key), or
 * `{ data: Uint8Array, shape }` with shape [batch, keys]. keysName names the
 * keys in messages; unbatched (the block's 2-D x: batch 1, no batch axis)
 * takes the shape [keys] or [1, keys]. Returns the bytes.
 */
export function checkKeyPaddingMask(
  fn: string,
  value: unknown,
  batch: number,
  keys: number,
  keysName: 'seqKV' | 'tokens',
  unbatched = false,
): Uint8Array | undefined {
  if (value === undefined) return undefined;
  let data: Uint8Array;
  let shape: number[] | undefined;
  let arg = 'options.keyPaddingMask';
  if (types.isUint8Array(value)) {
    data = value;
  } else {
    // Each field read once, and both before the checks: a getter cannot hand one array to the
    // checks and another to the call, nor detach data after it was checked.
    const field: unknown = typeof value === 'object' && value !== null ? (value as { data?: unknown }).data : undefined;
    if (!types.isUint8Array(field)) {
      if (typeof value === 'object' && value !== null && 'data' in value) {
        throw typeError(fn, 'options.keyPaddingMask.data', `a Uint8Array of batch·${keysName} bytes`, field);
      }
      throw typeError(
        fn,
        'options.keyPaddingMask',
        `a Uint8Array of batch·${keysName} bytes or { data: Uint8Array, shape: [batch, ${keysName}] }`,
        value,
      );
    }
    data = field;
    shape = checkShape(fn, 'options.keyPaddingMask.shape', (value as { shape?: unknown }).shape);
    arg = 'options.keyPaddingMask.data';
  }
  if (isDetached(data)) throw detachedError(fn, arg);
  if (shape) {
    const ok = unbatched
      ? (shape.length === 1 && shape[0] === keys) || (shape.length === 2 && shape[0] === 1 && shape[1] === keys)
      : shape.length === 2 && shape[0] === batch && shape[1] === keys;
    if (!ok) {
      const expected = unbatched ? `[${keysName}] = [${keys}]` : `[batch, ${keysName}] = ${formatShape([batch, keys])}`;
      throw rangeError(fn, `options.keyPaddingMask.shape must be ${expected}, received ${formatShape(shape)}`);
    }
  }
  if (data.length !== batch * keys) {
    throw rangeError(fn, `options.keyPaddingMask.length must be batch·${keysName} = ${batch * keys}, received ${data.length}`);
  }
  return data;
}

/**
 * Wraps data and a shape as a {@link Tensor} after checking that they agree.
 * A Float32Array is used as it is (no copy); any other array-like of numbers
 * is copied into a new Float32Array.
 *
 * @example
 * const t = tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * const u = tensor([1, 2, 3, 4], [2, 2]); // copied into a Float32Array
 */
export function tensor(data: Float32Array | ArrayLike<number>, shape: readonly number[]): Tensor {
  const fn = 'tensor';
  let f32: Float32Array;
  if (types.isFloat32Array(data)) {
    f32 = checkFloat32Array(fn, 'data', data);
  } else if (Array.isArray(data) || (ArrayBuffer.isView(data) && !types.isDataView(data))) {
    if (Array.isArray(data)) {
      // Float32Array.from would turn '1' into 1 and 'x', a hole or an object into NaN without a word.
      for (let i = 0; i < data.length; i++) {
        if (typeof data[i] !== 'number') {
          throw new TypeError(`${typeError(fn, 'data', 'numbers', data).message}, whose element [${i}] is ${describe(data[i])}`);
        }
      }
    }
    try {
      f32 = Float32Array.from(data as ArrayLike<number>);
    } catch (e) {
      // A BigInt64Array or BigUint64Array (arrays were checked element by element above): no conversion to float32.
      const reason = (e as Error).message;
      throw new TypeError(`${typeError(fn, 'data', 'numbers', data).message}, which holds a value that is not one (${reason})`, { cause: e });
    }
  } else {
    throw typeError(fn, 'data', 'a Float32Array or an array of numbers', data);
  }
  const checked = checkTensor(fn, 'tensor', { data: f32, shape });
  return { data: checked.data, shape: checked.shape };
}

/** An op's output: the checked data it writes, and the object it returns (the caller's own `out`). */
export interface ResultTensor extends CheckedTensor {
  result: Tensor;
}

/** Allocates a result, or checks a caller-provided `out` against the expected shape. */
export function resultTensor(fn: string, out: unknown, shape: number[]): ResultTensor {
  const n = elementCount(shape);
  if (n < 0) throw rangeError(fn, `the result shape ${formatShape(shape)} has more than ${MAX_ELEMENTS} elements`);
  if (out === undefined) {
    const data = allocateResultFloats(fn, 'the result', n);
    return { data, shape, result: { data, shape } };
  }
  const o = checkTensor(fn, 'options.out', out);
  if (o.shape.length !== shape.length || o.shape.some((d, i) => d !== shape[i])) {
    throw rangeError(fn, `options.out.shape must be ${formatShape(shape)}, received ${formatShape(o.shape)}`);
  }
  // The op writes o.data, the array just checked, never what out.data reads as later.
  return { data: o.data, shape: o.shape, result: out as Tensor };
}

/** True if two views share at least one byte. */
export function overlaps(x: ArrayBufferView, y: ArrayBufferView): boolean {
  const xLength = byteLengthOf(x), yLength = byteLengthOf(y);
  if (xLength === 0 || yLength === 0 || bufferOf(x) !== bufferOf(y)) return false;
  const xOffset = byteOffsetOf(x), yOffset = byteOffsetOf(y);
  return xOffset < yOffset + yLength && yOffset < xOffset + xLength;
}

/** True if two views cover exactly the same bytes. */
export function sameView(x: ArrayBufferView, y: ArrayBufferView): boolean {
  return bufferOf(x) === bufferOf(y) && byteOffsetOf(x) === byteOffsetOf(y) && byteLengthOf(x) === byteLengthOf(y);
}

/** RangeError if `out` shares memory with `input` (an exact same view is allowed when allowSame). */
export function checkNoAlias(
  fn: string,
  outName: string,
  out: ArrayBufferView,
  inName: string,
  input: ArrayBufferView | undefined,
  allowSame = false,
): void {
  if (!input || !overlaps(out, input)) return;
  if (allowSame && sameView(out, input)) return;
  throw rangeError(
    fn,
    allowSame
      ? `${outName} must be exactly ${inName} or share no memory with it, received a partly overlapping view`
      : `${outName} must not share memory with ${inName}`,
  );
}

/** Splits a 3-D [batch, seq, heads·dim] tensor's shape into bshd [batch, seq, heads, dim]. */
export function splitHeads(fn: string, arg: string, t: { shape: readonly number[] }, heads: number, headsName: string): number[] {
  const [b, s, hd] = t.shape;
  if (hd % heads !== 0) {
    throw rangeError(fn, `${arg}.shape[2] (heads·headDim) must be a multiple of ${headsName} = ${heads}, received ${hd}`);
  }
  return [b, s, heads, hd / heads];
}

/**
 * One integer in [0, max] per entry (`count` of them, `countName` in errors),
 * from an Int32Array or an array of numbers, as a fresh Int32Array:
 * attention's keyLengths, KVCache.append's lengths. `maxName` names the bound.
 */
export function checkLengthList(
  fn: string,
  arg: string,
  value: unknown,
  count: number,
  countName: string,
  max: number,
  maxName: string,
): Int32Array {
  if (!types.isInt32Array(value) && !Array.isArray(value)) {
    throw typeError(fn, arg, 'an Int32Array or an array of integers, one per batch entry', value);
  }
  if (types.isInt32Array(value) && isDetached(value)) throw detachedError(fn, arg);
  const list = value as ArrayLike<unknown>;
  if (list.length !== count) throw rangeError(fn, `${arg}.length must be ${countName} = ${count}, received ${list.length}`);
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const x = list[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > max) {
      throw rangeError(fn, `${arg}[${i}] must be an integer in [0, ${maxName} = ${max}], received ${String(x)}`);
    }
    out[i] = x;
  }
  return out;
}
