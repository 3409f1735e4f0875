import { formatShape, rangeError } from './errors';
import { allocateFloats } from './memory';
import { Descriptor, native } from './native';
import { checkOptions, optBoolean } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import { checkTensor, type TensorLike } from './tensor';

/**
 * A constant right-hand matrix (a weight) packed once into the GEMM's
 * internal panel layout, so every {@link matmul} against it skips the packing
 * step. Create it with {@link prepack}; pass it as `b` to `matmul`.
 *
 * The layout depends on the SIMD path the process runs (`info().isa`), so a
 * PackedMatrix is for this process only: do not persist it.
 */
export class PackedMatrix {
  /** @internal */
  constructor(
    /** The packed panels (not a row-major matrix). */
    readonly data: Float32Array,
    /** K: rows of the logical matrix (the inner dimension of the product). */
    readonly rows: number,
    /** N: columns of the logical matrix (the product's last dim). */
    readonly cols: number,
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
}

/**
 * Packs a 2-D matrix b (or bᵀ) once for repeated products `matmul(a, packed)`.
 * The result holds a copy: later changes to b do not reach it.
 *
 * @example
 * const w = tensor(new Float32Array(768 * 2304), [2304, 768]); // Linear weight [out, in]
 * const packed = prepack(w, { transpose: true });              // logical [768, 2304]
 * const y = matmul(tensor(new Float32Array(197 * 768), [197, 768]), packed); // [197, 2304]
 * @throws TypeError for a wrong kind of argument, RangeError unless b is 2-D.
 */
export function prepack(b: TensorLike, options?: PrepackOptions): PackedMatrix {
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
export function prepackAsync(b: TensorLike, options?: PrepackOptions): Promise<PackedMatrix> {
  return runAsync(() => preparePack('prepackAsync', b, options), (args) => native.packMatrix(...args));
}

function preparePack(fn: string, b: TensorLike, options: PrepackOptions | undefined) {
  const opts = checkOptions<PrepackOptions>(fn, options, ['transpose']);
  const tb = checkTensor(fn, 'b', b);
  if (tb.shape.length !== 2) throw rangeError(fn, `b must be 2-D, received shape ${formatShape(tb.shape)}`);
  const transpose = optBoolean(fn, 'options.transpose', opts.transpose, false);
  const [k, n] = transpose ? [tb.shape[1], tb.shape[0]] : tb.shape;
  const size = native.packedSize(new Descriptor('packedSize').shape('b.shape', [k, n]).done());
  const data = allocateFloats(fn, 'the packed matrix', size);
  const args = (): unknown[] => [tb.data, data, new Descriptor('packMatrix').shape('b.shape', tb.shape).flag('transpose', transpose).done()];
  const buffers: NamedBuffer[] = [['b', tb.data], ['the packed result', data]];
  return { fn, args, result: new PackedMatrix(data, k, n), buffers };
}
