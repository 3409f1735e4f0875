import { broadcastShapes, broadcastsTo } from './broadcast';
import { formatShape, rangeError } from './errors';
import { Descriptor, native, type NativeStage } from './native';
import { checkOptions, optBoolean, optFiniteNumber } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import { PackedMatrix } from './prepack';
import { checkFloat32Array, checkInt8Array, checkNoAlias, checkShape, checkTensor, checkUint16Array, resultTensor, type Tensor, type TensorLike } from './tensor';

/** Options of {@link matmul} and {@link matmulAsync}. */
export interface MatmulOptions {
  /** Read a's last two dims transposed (no copy is made). Default false. */
  transposeA?: boolean;
  /** Read b's last two dims transposed (no copy is made). Default false. */
  transposeB?: boolean;
  /** Multiplies the product. Default 1. */
  alpha?: number;
  /** Multiplies `c`. Default 1 when `c` is given; not allowed without `c`. */
  beta?: number;
  /** Added to the product after scaling by beta; broadcasts to the result shape. */
  c?: TensorLike;
  /** Where to write the result; must have the result's exact shape. May be the very same view as `c`. */
  out?: Tensor;
}

const KNOWN = ['transposeA', 'transposeB', 'alpha', 'beta', 'c', 'out'] as const;

function prepareMatmul(fn: string, a: TensorLike, b: TensorLike | PackedMatrix, options?: MatmulOptions) {
  const opts = checkOptions<MatmulOptions>(fn, options, KNOWN);
  const ta = checkTensor(fn, 'a', a);
  const packed = b instanceof PackedMatrix;
  // A PackedMatrix's fields are checked too: its constructor is public to JS, though not meant to be called.
  const bf16 = packed && b.dtype === 'bf16', int8 = packed && b.dtype === 'int8';
  const packedData = (m: PackedMatrix) =>
    int8 ? checkInt8Array(fn, 'b.data', m.data) : bf16 ? checkUint16Array(fn, 'b.data', m.data) : checkFloat32Array(fn, 'b.data', m.data);
  const tb = packed ? { data: packedData(b), shape: checkShape(fn, 'b.shape', [b.rows, b.cols]) } : checkTensor(fn, 'b', b);
  if (packed && opts.transposeB) {
    throw rangeError(fn, 'options.transposeB cannot apply to a PackedMatrix (pass transpose to prepack instead)');
  }
  if (ta.shape.length < 2) throw rangeError(fn, `a must have at least 2 dims, received shape ${formatShape(ta.shape)}`);
  if (tb.shape.length < 2) throw rangeError(fn, `b must have at least 2 dims, received shape ${formatShape(tb.shape)}`);
  const transposeA = optBoolean(fn, 'options.transposeA', opts.transposeA, false);
  const transposeB = optBoolean(fn, 'options.transposeB', opts.transposeB, false);
  const alpha = optFiniteNumber(fn, 'options.alpha', opts.alpha) ?? 1;
  const betaOpt = optFiniteNumber(fn, 'options.beta', opts.beta);
  const tc = opts.c === undefined ? undefined : checkTensor(fn, 'options.c', opts.c);
  if (betaOpt !== undefined && !tc) throw rangeError(fn, `options.beta needs options.c, received beta = ${betaOpt} without c`);
  const beta = betaOpt ?? (tc ? 1 : 0);

  const ra = ta.shape.length;
  const rb = tb.shape.length;
  // Axes of M and K in a, K and N in b, after the optional transposes.
  const aM = transposeA ? ra - 1 : ra - 2;
  const aK = transposeA ? ra - 2 : ra - 1;
  const bK = transposeB ? rb - 1 : rb - 2;
  const bN = transposeB ? rb - 2 : rb - 1;
  if (tb.shape[bK] !== ta.shape[aK]) {
    throw rangeError(
      fn,
      `b.shape[${bK}] (K${transposeB ? ', b transposed' : ''}) must equal a.shape[${aK}]` +
        `${transposeA ? ' (a transposed)' : ''} = ${ta.shape[aK]}, received ${tb.shape[bK]}`,
    );
  }
  // Two 2-D operands (the common case) have no batch dims to broadcast.
  const batch = ra === 2 && rb === 2 ? [] : broadcastShapes(ta.shape.slice(0, -2), tb.shape.slice(0, -2));
  if (!batch) {
    throw rangeError(
      fn,
      `batch dims of a ${formatShape(ta.shape.slice(0, -2))} and b ${formatShape(tb.shape.slice(0, -2))} do not broadcast`,
    );
  }
  const shape = batch;
  shape.push(ta.shape[aM], tb.shape[bN]);
  if (tc && !broadcastsTo(tc.shape, shape)) {
    throw rangeError(fn, `options.c.shape ${formatShape(tc.shape)} must broadcast to the result shape ${formatShape(shape)}`);
  }
  const out = resultTensor(fn, opts.out, shape);
  checkNoAlias(fn, 'options.out', out.data, 'a', ta.data);
  if (!packed) checkNoAlias(fn, 'options.out', out.data, 'b', tb.data);
  checkNoAlias(fn, 'options.out', out.data, 'options.c', tc?.data, true);
  return { fn, a: ta, b: tb, c: tc, out, shape, transposeA, transposeB, alpha, beta, packed, bf16, int8 };
}

type PreparedMatmul = ReturnType<typeof prepareMatmul>;

/** The native call's arguments, the descriptor built last (it is shared and read before the call returns). */
function nativeArgs(p: PreparedMatmul, stage?: number): unknown[] {
  return [p.a.data, p.b.data, p.c ? p.c.data : null, p.out.data, matmulFields(p, 'matmul', stage).done()];
}

function matmulFields(p: PreparedMatmul, op: 'matmul' | 'layerNormMatmul', stage?: number): Descriptor {
  return new Descriptor(op, stage)
    .shape('a.shape', p.a.shape).shape('b.shape', p.b.shape).shape('c.shape', p.c ? p.c.shape : null)
    .shape('out.shape', p.shape).flag('transposeA', p.transposeA).flag('transposeB', p.transposeB)
    .number('alpha', p.alpha).number('beta', p.beta).flag('bPacked', p.packed).flag('bBf16', p.bf16)
    .flag('bInt8', p.int8);
}

function matmulDescriptor(p: PreparedMatmul): Float64Array {
  return matmulFields(p, 'matmul').done();
}

/**
 * Matrix product `alpha · op(a) · op(b) + beta · c` over the last two dims,
 * with the leading (batch) dims broadcast by numpy rules.
 *
 * a is [..., M, K] and b is [..., K, N] (or transposed with the options); the
 * result is [...batch, M, N]. A 2-D b against a batched a applies one weight
 * matrix to every batch entry (a projection). A b made by {@link prepack}
 * skips the packing of b on every call (weights).
 *
 * @example
 * const a = tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
 * const b = tensor(new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2]);
 * matmul(a, b); // { data: Float32Array [4, 5, 10, 11], shape: [2, 2] }
 * matmul(a, a, { transposeB: true }); // a · aᵀ, shape [2, 2]
 * @throws TypeError for a wrong kind of argument, RangeError for mismatched or invalid shapes and values.
 */
export function matmul(a: TensorLike, b: TensorLike | PackedMatrix, options?: MatmulOptions): Tensor {
  const p = prepareMatmul('matmul', a, b, options);
  native.matmul(p.a.data, p.b.data, p.c ? p.c.data : null, p.out.data, matmulDescriptor(p));
  return p.out.result;
}

/**
 * {@link matmul} computed off the JS thread. The buffers stay referenced until
 * the promise settles; do not write to them, or transfer them, meanwhile.
 * Invalid arguments reject the promise.
 */
export function matmulAsync(a: TensorLike, b: TensorLike | PackedMatrix, options?: MatmulOptions): Promise<Tensor> {
  return runAsync(() => {
    const p = prepareMatmul('matmulAsync', a, b, options);
    const buffers: NamedBuffer[] = [['a', p.a.data], ['b', p.b.data], ['options.out', p.out.data, true]];
    if (p.c) buffers.push(['options.c', p.c.data]);
    return { fn: p.fn, args: () => nativeArgs(p), result: p.out.result, buffers };
  }, (args) => native.matmul(...args));
}

/** The LayerNorm that {@link layerNormMatmul} applies to a's rows; weight and bias are K long. */
export interface RowLayerNorm {
  weight?: Tensor;
  bias?: Tensor;
  eps: number;
}

/** Widest row the fused LayerNorm takes (kGemmMaxLayerNormK in native/kernels/gemm.h, exported by the addon). */
export const LAYER_NORM_MATMUL_MAX_K = native.layerNormMatmulMaxK;

/**
 * Internal (the block's LayerNorm + QKV projection, not exported by the
 * package): matmul(LayerNorm(a), packed, options) with a's rows normalized as
 * they are packed for the product, so the normalized input is never written
 * out. a is row-major [..., M, K] with K <= LAYER_NORM_MATMUL_MAX_K; norm's
 * tensors are checked by the caller. Gives the bits of layerNorm then matmul.
 */
export function layerNormMatmul(a: TensorLike, packed: PackedMatrix, norm: RowLayerNorm, options: MatmulOptions): Tensor {
  const p = prepareMatmul('layerNormMatmul', a, packed, options);
  native.layerNormMatmul(...layerNormMatmulArgs(p, norm));
  return p.out.result;
}

/** {@link layerNormMatmul} off the JS thread (see {@link matmulAsync}). */
export function layerNormMatmulAsync(
  a: TensorLike,
  packed: PackedMatrix,
  norm: RowLayerNorm,
  options: MatmulOptions,
): Promise<Tensor> {
  return runAsync(() => {
    const p = prepareMatmul('layerNormMatmulAsync', a, packed, options);
    const buffers: NamedBuffer[] = [['a', p.a.data], ['b', p.b.data], ['options.out', p.out.data, true]];
    if (p.c) buffers.push(['options.c', p.c.data]);
    if (norm.weight) buffers.push(['the LayerNorm weight', norm.weight.data]);
    if (norm.bias) buffers.push(['the LayerNorm bias', norm.bias.data]);
    return { fn: p.fn, args: () => layerNormMatmulArgs(p, norm), result: p.out.result, buffers };
  }, (args) => native.layerNormMatmul(...args));
}

function layerNormMatmulArgs(p: PreparedMatmul, norm: RowLayerNorm, stage?: number): unknown[] {
  return [
    p.a.data, p.b.data, p.c ? p.c.data : null, p.out.data, norm.weight?.data ?? null, norm.bias?.data ?? null,
    matmulFields(p, 'layerNormMatmul', stage).number('eps', norm.eps).done(),
  ];
}

/**
 * Internal (MultiHeadSelfAttention's stages): {@link matmul}'s arguments
 * checked now, for a native.sequence call that runs it later.
 */
export function matmulStage(a: TensorLike, b: TensorLike | PackedMatrix, options?: MatmulOptions): NativeStage {
  const p = prepareMatmul('matmul', a, b, options);
  return { kind: 'matmul', args: (stage) => nativeArgs(p, stage) };
}

/** Internal: {@link layerNormMatmul} as a stage (see {@link matmulStage}). */
export function layerNormMatmulStage(a: TensorLike, packed: PackedMatrix, norm: RowLayerNorm, options: MatmulOptions): NativeStage {
  const p = prepareMatmul('layerNormMatmul', a, packed, options);
  return { kind: 'layerNormMatmul', args: (stage) => layerNormMatmulArgs(p, norm, stage) };
}
