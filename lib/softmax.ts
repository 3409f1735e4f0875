import { formatShape, rangeError } from './errors';
import { Descriptor, native } from './native';
import { checkOptions, optFiniteNumber } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import { checkNoAlias, checkTensor, resultTensor, type Tensor, type TensorLike } from './tensor';

/** Options of {@link softmax} and {@link softmaxAsync}. */
export interface SoftmaxOptions {
  /** Multiplies the logits before the softmax. Default 1. */
  scale?: number;
  /** Where to write the result; x's shape. May be x itself (in place). */
  out?: Tensor;
}

const KNOWN = ['scale', 'out'] as const;

function prepareSoftmax(fn: string, x: TensorLike, options?: SoftmaxOptions) {
  const opts = checkOptions<SoftmaxOptions>(fn, options, KNOWN);
  const tx = checkTensor(fn, 'x', x);
  if (tx.shape.length < 1) throw rangeError(fn, `x must have at least 1 dim, received shape ${formatShape(tx.shape)}`);
  const scale = optFiniteNumber(fn, 'options.scale', opts.scale) ?? 1;
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data, true);
  const args = (): unknown[] => [
    tx.data, out.data, new Descriptor('softmax').shape('x.shape', tx.shape).shape('out.shape', tx.shape).number('scale', scale).done(),
  ];
  const buffers: NamedBuffer[] = [['x', tx.data], ['options.out', out.data, true]];
  return { fn, args, result: out.result, buffers };
}

/**
 * Softmax along the last axis: `exp(s·x − max) / Σ exp(s·x − max)` per row,
 * with the max subtracted so the exp never overflows (s·x itself must be
 * finite: a product past ±3.4e38 is ±Infinity, and a row holding +Infinity
 * gives NaN, as in PyTorch). A row that is all −Infinity gives zeros (no NaN).
 *
 * @example
 * softmax(tensor([1, 2, 3, 1, 1, 1], [2, 3])).data; // [0.090, 0.245, 0.665, 0.333, 0.333, 0.333]
 * const logits = tensor(new Float32Array(8), [2, 4]);
 * softmax(logits, { scale: 0.5, out: logits }); // in place
 */
export function softmax(x: TensorLike, options?: SoftmaxOptions): Tensor {
  const call = prepareSoftmax('softmax', x, options);
  native.softmax(...call.args());
  return call.result;
}

/** {@link softmax} computed off the JS thread; invalid arguments reject the promise. */
export function softmaxAsync(x: TensorLike, options?: SoftmaxOptions): Promise<Tensor> {
  return runAsync(() => prepareSoftmax('softmaxAsync', x, options), (args) => native.softmax(...args));
}
