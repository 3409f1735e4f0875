import { formatShape, rangeError } from './errors';
import { allocateBf16, allocateBytes, allocateFloats } from './memory';
import { Descriptor, native } from './native';
import { checkOptions, optBoolean, optEnum } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import { checkBf16Tensor, checkFloat32Array, checkInt8Tensor, checkTensor, isBf16Tensor, isInt8Tensor, type Bf16Tensor, type Int8Tensor, type TensorLike } from './tensor';

/** Deepest K an int8 matrix packs (its sums stay within int32: kInt8MaxDepth, native/kernels/gemm_int8.h). */
const INT8_MAX_DEPTH = 65536;

/**
 * The element type a matrix is packed in: `'float32'`, `'bf16'` (half the
 * bytes, products at the bf16 rate), or `'int8'` (a quarter of the bytes,
 * quantized per column; products in int8 with the activations quantized per row).
 */
export type PackedDtype = 'float32' | 'bf16' | 'int8';

/** A packed matrix's storage: bf16 values in a Uint16Array, int8 panels with their scales in an Int8Array, floats in a Float32Array. */
export type PackedData<D extends PackedDtype> = D extends 'bf16' ? Uint16Array : D extends 'int8' ? Int8Array : Float32Array;

/**
 * A constant right-hand matrix (a weight) packed once into the GEMM's
 * internal panel layout, so every {@link matmul} against it skips the packing
 * step. Create it with {@link prepack}; pass it as `b` to `matmul`.
 *
 * The layout depends on the SIMD path the process runs (`info().isa`), so a
 * PackedMatrix is for this process only: do not persist it.
 */
export class PackedMatrix<D extends PackedDtype = PackedDtype> {
  /** @internal */
  constructor(
    /** The packed panels (not a row-major matrix): floats, bf16 values for dtype 'bf16', or int8 bytes with their scales for 'int8'. */
    readonly data: PackedData<D>,
    /** K: rows of the logical matrix (the inner dimension of the product). */
    readonly rows: number,
    /** N: columns of the logical matrix (the product's last dim). */
    readonly cols: number,
    /** The element type of the packed panels. */
    readonly dtype: D = 'float32' as D,
  ) {
    Object.freeze(this);
  }

  /** The logical shape [K, N]. */
  get shape(): readonly number[] {
    return [this.rows, this.cols];
  }
}

/** Options of {@link prepack}. */
export interface PrepackOptions {
  /**
   * Pack bᵀ instead of b: a PyTorch Linear weight [out, in] packed with
   * `transpose: true` is the [in, out] matrix that `x · Wᵀ` needs. Default false.
   */
  transpose?: boolean;
  /**
   * `'bf16'` stores the matrix in bfloat16, each value rounded to nearest
   * even: half the memory, and products run on the CPU's bf16 instructions
   * (`info().bf16`: AMX or AVX512_BF16), with the activations rounded to
   * bf16 as they are packed and float32 sums and results. About 3 significant
   * digits: a product's error is within 1e-2 of float32's (docs/api.md,
   * "bf16"). Default `'float32'`, or `'bf16'` for a bf16 `b`.
   *
   * `'int8'` quantizes each column of the matrix (each output feature of a
   * Linear weight) to int8 with its own scale, max|column| / 127: a quarter of
   * float32's memory. A product against it quantizes each row of `a` the same
   * way as it starts, sums in int32 and scales back to float32 (docs/api.md,
   * "int8"): about 1 % relative error on N(0, 1) data. K is at most 65536.
   * An {@link Int8Tensor} b (already quantized) packs as it is, with `scales`.
   */
  dtype?: PackedDtype;
  /**
   * With an {@link Int8Tensor} b only: the scale of each column of op(b), N
   * finite numbers (for `transpose: true`, one per row of b: a Linear
   * weight's per-output-channel scales). Its values in [-127, 127] are then
   * used as they are, with no requantizing.
   */
  scales?: Float32Array;
}

/**
 * Packs a 2-D matrix b (or bᵀ) once for repeated products `matmul(a, packed)`.
 * The result holds a copy: later changes to b do not reach it.
 *
 * b may also be a {@link Bf16Tensor} (a checkpoint's weight kept in bf16),
 * which packs in bf16 without passing through float32.
 *
 * @example
 * const w = tensor(new Float32Array(768 * 2304), [2304, 768]); // Linear weight [out, in]
 * const packed = prepack(w, { transpose: true });              // logical [768, 2304]
 * const y = matmul(tensor(new Float32Array(197 * 768), [197, 768]), packed); // [197, 2304]
 * const half = prepack(w, { transpose: true, dtype: 'bf16' }); // half the bytes
 * const z = matmul(tensor(new Float32Array(197 * 768), [197, 768]), half); // [197, 2304]
 * @throws TypeError for a wrong kind of argument, RangeError unless b is 2-D.
 */
export function prepack(b: TensorLike, options?: PrepackOptions & { dtype?: 'float32' }): PackedMatrix<'float32'>;
export function prepack(b: TensorLike | Bf16Tensor, options: PrepackOptions & { dtype: 'bf16' }): PackedMatrix<'bf16'>;
export function prepack(b: TensorLike, options: PrepackOptions & { dtype: 'int8' }): PackedMatrix<'int8'>;
export function prepack(b: Int8Tensor, options: PrepackOptions & { scales: Float32Array }): PackedMatrix<'int8'>;
export function prepack(b: Bf16Tensor, options?: PrepackOptions): PackedMatrix<'bf16'>;
export function prepack(b: TensorLike | Bf16Tensor | Int8Tensor, options?: PrepackOptions): PackedMatrix;
export function prepack(b: TensorLike | Bf16Tensor | Int8Tensor, options?: PrepackOptions): PackedMatrix {
  const call = preparePack('prepack', b, options);
  native.packMatrix(...call.args());
  return call.result;
}

/**
 * {@link prepack} computed off the JS thread (packing a large weight takes
 * about a millisecond per million elements); invalid arguments reject the
 * promise. Do not modify b until it settles.
 *
 * @example
 * const packed = await prepackAsync(w, { transpose: true });
 */
export function prepackAsync(b: TensorLike, options?: PrepackOptions & { dtype?: 'float32' }): Promise<PackedMatrix<'float32'>>;
export function prepackAsync(b: TensorLike | Bf16Tensor, options: PrepackOptions & { dtype: 'bf16' }): Promise<PackedMatrix<'bf16'>>;
export function prepackAsync(b: TensorLike, options: PrepackOptions & { dtype: 'int8' }): Promise<PackedMatrix<'int8'>>;
export function prepackAsync(b: Int8Tensor, options: PrepackOptions & { scales: Float32Array }): Promise<PackedMatrix<'int8'>>;
export function prepackAsync(b: Bf16Tensor, options?: PrepackOptions): Promise<PackedMatrix<'bf16'>>;
export function prepackAsync(b: TensorLike | Bf16Tensor | Int8Tensor, options?: PrepackOptions): Promise<PackedMatrix>;
export function prepackAsync(b: TensorLike | Bf16Tensor | Int8Tensor, options?: PrepackOptions): Promise<PackedMatrix> {
  return runAsync(() => preparePack('prepackAsync', b, options), (args) => native.packMatrix(...args));
}

function preparePack(fn: string, b: TensorLike | Bf16Tensor | Int8Tensor, options: PrepackOptions | undefined) {
  const opts = checkOptions<PrepackOptions>(fn, options, ['transpose', 'dtype', 'scales']);
  const sourceBf16 = isBf16Tensor(b), sourceInt8 = isInt8Tensor(b);
  const tb = sourceBf16 ? checkBf16Tensor(fn, 'b', b) : sourceInt8 ? checkInt8Tensor(fn, 'b', b) : checkTensor(fn, 'b', b);
  if (tb.shape.length !== 2) throw rangeError(fn, `b must be 2-D, received shape ${formatShape(tb.shape)}`);
  const transpose = optBoolean(fn, 'options.transpose', opts.transpose, false);
  const dtype =
    optEnum(fn, 'options.dtype', opts.dtype, ['float32', 'bf16', 'int8'] as const) ?? (sourceBf16 ? 'bf16' : sourceInt8 ? 'int8' : 'float32');
  const bf16 = dtype === 'bf16', int8 = dtype === 'int8';
  if (sourceBf16 && !bf16) {
    throw rangeError(fn, "a bf16 b packs only with dtype 'bf16' (load it widened to float32 for a float32 weight)");
  }
  if (sourceInt8 && !int8) throw rangeError(fn, `an int8 b packs only with dtype 'int8', received '${dtype}'`);
  const [k, n] = transpose ? [tb.shape[1], tb.shape[0]] : tb.shape;
  let scales: Float32Array | null = null;
  if (sourceInt8) {
    if (opts.scales === undefined) throw rangeError(fn, `options.scales (one per column of op(b), ${n}) is required with an int8 b, received undefined`);
    scales = checkFloat32Array(fn, 'options.scales', opts.scales);
    if (scales.length !== n) throw rangeError(fn, `options.scales must hold one scale per column of op(b), ${n}, received ${scales.length}`);
  } else if (opts.scales !== undefined) {
    throw rangeError(fn, 'options.scales goes only with an int8 b (an Int8Tensor)');
  }
  if (int8 && k > INT8_MAX_DEPTH) throw rangeError(fn, `int8 packs a depth K of at most ${INT8_MAX_DEPTH}, received ${k}`);
  const size = native.packedSize(new Descriptor('packedSize').shape('b.shape', [k, n]).flag('bf16', bf16).flag('int8', int8).done());
  // Panels start on a 64-byte boundary (the binding's alignedOffset says why): 64 bytes spare.
  const spare = int8 ? 64 : bf16 ? 32 : 16;
  const storage = int8
    ? allocateBytes(fn, 'the packed matrix', size + spare)
    : bf16 ? allocateBf16(fn, 'the packed matrix', size + spare) : allocateFloats(fn, 'the packed matrix', size + spare);
  const start = native.alignedOffset(storage);
  const data = storage.subarray(start, start + size);
  const args = (): unknown[] => [
    tb.data,
    data,
    scales,
    new Descriptor('packMatrix').shape('b.shape', tb.shape).flag('transpose', transpose).flag('bf16', bf16).flag('int8', int8).done(),
  ];
  const buffers: NamedBuffer[] = [['b', tb.data], ['the packed result', data, true]];
  if (scales) buffers.push(['options.scales', scales]);
  return { fn, args, result: new PackedMatrix<PackedDtype>(data, k, n, dtype), buffers };
}
