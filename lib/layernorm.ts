import { formatShape, rangeError } from './errors';
import { Descriptor, native, type NativeStage } from './native';
import { checkEps, checkOptions } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import { checkNoAlias, checkTensor, resultTensor, type Tensor, type TensorLike } from './tensor';

/** Options of {@link layerNorm} and {@link layerNormAsync}. */
export interface LayerNormOptions {
  /** Per-feature scale (PyTorch's `weight`), shape [dim] for x's last dim (leading 1s allowed: [1, dim]). Default 1. */
  weight?: TensorLike;
  /** Per-feature shift, shape [dim] (leading 1s allowed). Default 0. */
  bias?: TensorLike;
  /** Added to the variance. Default 1e-5 (PyTorch's default). */
  eps?: number;
  /** Where to write the result; x's shape. May be x itself. */
  out?: Tensor;
}

/** Options of {@link rmsNorm} and {@link rmsNormAsync}. */
export interface RmsNormOptions {
  /** Per-feature scale, shape [dim] for x's last dim (leading 1s allowed). Default 1. */
  weight?: TensorLike;
  /** Added to the mean of squares. Default 1e-6 (LLaMA's `rms_norm_eps`). */
  eps?: number;
  /** Where to write the result; x's shape. May be x itself. */
  out?: Tensor;
}

const KNOWN = ['weight', 'bias', 'eps', 'out'] as const;
const RMS_KNOWN = ['weight', 'eps', 'out'] as const;

function prepareLayerNorm(fn: string, x: TensorLike, options?: LayerNormOptions, rms = false) {
  const opts = checkOptions<LayerNormOptions>(fn, options, rms ? RMS_KNOWN : KNOWN);
  const tx = checkTensor(fn, 'x', x);
  if (tx.shape.length < 1) throw rangeError(fn, `x must have at least 1 dim, received shape ${formatShape(tx.shape)}`);
  const dim = tx.shape[tx.shape.length - 1];
  const weight = opts.weight === undefined ? undefined : checkTensor(fn, 'options.weight', opts.weight);
  const bias = opts.bias === undefined ? undefined : checkTensor(fn, 'options.bias', opts.bias);
  for (const [name, t] of [['weight', weight], ['bias', bias]] as const) {
    // [dim], or [1, dim] and the like (a row kept 2-D); not merely dim elements in another shape.
    if (t && (t.shape[t.shape.length - 1] !== dim || t.shape.slice(0, -1).some((d) => d !== 1))) {
      throw rangeError(fn, `options.${name}.shape must be [${dim}] (x's last dim, leading 1s allowed), received ${formatShape(t.shape)}`);
    }
  }
  const eps = opts.eps === undefined && rms ? 1e-6 : checkEps(fn, 'options.eps', opts.eps);
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data, true);
  checkNoAlias(fn, 'options.out', out.data, 'options.weight', weight?.data);
  checkNoAlias(fn, 'options.out', out.data, 'options.bias', bias?.data);
  const args = (stage?: number): unknown[] => [
    tx.data, out.data, weight ? weight.data : null, bias ? bias.data : null,
    new Descriptor('layerNorm', stage).shape('x.shape', tx.shape).shape('out.shape', tx.shape).number('eps', eps)
      .flag('rms', rms).done(),
  ];
  const buffers: NamedBuffer[] = [['x', tx.data], ['options.out', out.data, true]];
  if (weight) buffers.push(['options.weight', weight.data]);
  if (bias) buffers.push(['options.bias', bias.data]);
  return { fn, args, result: out.result, buffers };
}

/**
 * Layer normalization over the last axis, as PyTorch's `nn.LayerNorm(dim)`:
 * `(x − mean) / √(var + eps) · weight + bias` per row (biased variance).
 *
 * @example
 * layerNorm(tensor([1, 2, 3, 4], [1, 4])).data; // ≈ [-1.342, -0.447, 0.447, 1.342]
 * @throws TypeError for a wrong kind of argument, RangeError for mismatched shapes and invalid values.
 */
export function layerNorm(x: TensorLike, options?: LayerNormOptions): Tensor {
  const call = prepareLayerNorm('layerNorm', x, options);
  native.layerNorm(...call.args());
  return call.result;
}

/** Internal (MultiHeadSelfAttention's stages): {@link layerNorm}, or {@link rmsNorm} with rms, checked now, for a native.sequence call. */
export function layerNormStage(x: TensorLike, options?: LayerNormOptions, rms = false): NativeStage {
  const call = prepareLayerNorm(rms ? 'rmsNorm' : 'layerNorm', x, options, rms);
  return { kind: 'layerNorm', args: call.args };
}

/** {@link layerNorm} computed off the JS thread; invalid arguments reject the promise. */
export function layerNormAsync(x: TensorLike, options?: LayerNormOptions): Promise<Tensor> {
  return runAsync(() => prepareLayerNorm('layerNormAsync', x, options), (args) => native.layerNorm(...args));
}

/**
 * Root-mean-square normalization over the last axis, as LLaMA's `RMSNorm`:
 * `x / √(mean(x²) + eps) · weight` per row (no centering, no bias).
 *
 * @example
 * rmsNorm(tensor([1, 2, 3, 4], [1, 4])).data; // ≈ [0.365, 0.730, 1.095, 1.461]
 * @throws TypeError for a wrong kind of argument, RangeError for mismatched shapes and invalid values.
 */
export function rmsNorm(x: TensorLike, options?: RmsNormOptions): Tensor {
  const call = prepareLayerNorm('rmsNorm', x, options, true);
  native.layerNorm(...call.args());
  return call.result;
}

/** {@link rmsNorm} computed off the JS thread; invalid arguments reject the promise. */
export function rmsNormAsync(x: TensorLike, options?: RmsNormOptions): Promise<Tensor> {
  return runAsync(() => prepareLayerNorm('rmsNormAsync', x, options, true), (args) => native.layerNorm(...args));
}
