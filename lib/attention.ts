import { broadcastsTo } from './broadcast';
import { formatShape, rangeError, typeError } from './errors';
import { allocateFloats, checkAllocation } from './memory';
import { Descriptor, native, type NativeStage } from './native';
import { checkObject, checkOptions, optBoolean, optEnum, optFiniteNumber, optNonNegativeInteger, optPositiveInteger } from './validate';
import { runAsync, type NamedBuffer } from './queue';
import {
  checkBf16StridedTensor,
  checkBf16Tensor,
  checkInt8StridedTensor,
  checkFloat32Array,
  checkKeyPaddingMask,
  checkLengthList,
  checkNoAlias,
  checkShape,
  checkStridedTensor,
  checkTensor,
  denseStrides,
  elementCount,
  lengthOf,
  MAX_ELEMENTS,
  resultTensor,
  splitHeads,
  isBf16Tensor,
  isInt8Tensor,
  type Bf16StridedTensor,
  type Bf16Tensor,
  type Int8StridedTensor,
  type CheckedTensor,
  type StridedTensor,
  type Tensor,
  type TensorLike,
} from './tensor';

/**
 * Memory layout of q, k, v and the output.
 * - `'bhsd'`: [batch, heads, seq, headDim] (the default).
 * - `'bshd'`: [batch, seq, heads, headDim]: the packed [batch, seq, heads·headDim]
 *   projection output viewed per head, with no permute.
 * - `'bhds'`: [batch, heads, headDim, seq]: tokens as columns, O = V·softmax(Kᵀ·Q/√d).
 */
export type AttentionLayout = 'bhsd' | 'bshd' | 'bhds';

/** Options of {@link attention} and {@link attentionAsync}. */
export interface AttentionOptions {
  /** Layout of q, k, v and the output. Default `'bhsd'`; 3-D inputs are `'bshd'`. */
  layout?: AttentionLayout;
  /** Number of query heads; required when q is 3-D [batch, seq, heads·headDim]. */
  heads?: number;
  /** Number of key/value heads for 3-D k and v (grouped-query attention). Default `heads`. */
  kvHeads?: number;
  /** Query i attends keys j ≤ i + (seqKV − seqQ) (bottom-right aligned). Default false. */
  causal?: boolean;
  /**
   * Additive float mask broadcastable to [batch, heads, seqQ, seqKV]; −Infinity blocks a key.
   * A large finite value such as −3.4e38 (`torch.finfo(torch.float32).min`) blocks it too, but
   * a row masked entirely with it gets uniform weights, as in PyTorch (with −Infinity: zeros).
   */
  mask?: TensorLike;
  /** Uint8Array of batch·seqKV bytes (or a tensor of shape [batch, seqKV]); nonzero = ignore that key. */
  keyPaddingMask?: Uint8Array | { data: Uint8Array; shape: readonly number[] };
  /** Multiplies q·kᵀ. Default 1/√headDim. */
  scale?: number;
  /**
   * Caps the scores smoothly: s ← softcap·tanh(s / softcap), after the scale and
   * before the mask (Gemma 2 uses 50). 0 or omitted: none.
   */
  softcap?: number;
  /**
   * A sliding window: the query at key position p = i + seqKV − seqQ sees keys
   * p − left … p + right. An omitted side is unlimited; `causal` is right = 0.
   * Keys outside every query's window are skipped, not computed and masked.
   */
  window?: AttentionWindow;
  /**
   * One learned logit per query head (Float32Array of length heads) that joins
   * each row's softmax denominator only, taking weight from every key (gpt-oss's sinks).
   */
  sinks?: Float32Array | TensorLike;
  /**
   * Keys each batch entry has, for a ragged batch (ONNX's nonpad_kv_seqlen, a
   * {@link KVCache}'s `lengths`): entry b attends to its first keyLengths[b]
   * keys only, and its causal and window positions count from its own end
   * (query i sits at keyLengths[b] − seqQ + i). One integer in [0, seqKV] per
   * batch entry. Default: every entry has all seqKV keys.
   */
  keyLengths?: Int32Array | readonly number[];
  /** Also return the attention probabilities [batch, heads, seqQ, seqKV]. Default false. */
  returnWeights?: boolean;
  /** Where to write the output; q's layout with v's head dim. */
  out?: Tensor;
}

/** A sliding window's reach either side of a query's own position, in keys. */
export interface AttentionWindow {
  /** Keys before the query's position it may see. Default: all. */
  left?: number;
  /** Keys after the query's position it may see. Default: all (0 with `causal`). */
  right?: number;
}

/** The result of attention with `returnWeights: true`. */
export interface AttentionWithWeights {
  output: Tensor;
  /** Softmax probabilities, [batch, heads, seqQ, seqKV]. */
  weights: Tensor;
}

const KNOWN = [
  'layout', 'heads', 'kvHeads', 'causal', 'mask', 'keyPaddingMask', 'scale', 'softcap', 'window', 'sinks', 'keyLengths',
  'returnWeights', 'out',
] as const;
const STRIDE_FIELDS = ['q', 'k', 'v'].flatMap((t) => [0, 1, 2].map((a) => `${t}.strides[${a}]`));
const LAYOUTS: readonly AttentionLayout[] = ['bhsd', 'bshd', 'bhds'];
const LAYOUT_CODE: Record<AttentionLayout, number> = { bhsd: 0, bshd: 1, bhds: 2 };
// Position of the logical [batch, head, seq, dim] axes in each layout's shape, and their names.
const AXES: Record<AttentionLayout, readonly number[]> = { bhsd: [0, 1, 2, 3], bshd: [0, 2, 1, 3], bhds: [0, 1, 3, 2] };
const AXIS_NAMES = ['batch', 'heads', 'seq', 'headDim'];

interface Logical {
  batch: number;
  heads: number;
  seq: number;
  dim: number;
}

function logical(layout: AttentionLayout, s: readonly number[]): Logical {
  const ax = AXES[layout];
  return { batch: s[ax[0]], heads: s[ax[1]], seq: s[ax[2]], dim: s[ax[3]] };
}

function fromLogical(layout: AttentionLayout, l: Logical): number[] {
  const s = [0, 0, 0, 0];
  const ax = AXES[layout];
  s[ax[0]] = l.batch;
  s[ax[1]] = l.heads;
  s[ax[2]] = l.seq;
  s[ax[3]] = l.dim;
  return s;
}

/** Floats from a strided view's first token to the end of its last: (rows − 1)·stride + width, 0 when empty. */
function tokenSpan(rows: number, width: number, tokenStride: number): number {
  return rows === 0 || width === 0 ? 0 : (rows - 1) * tokenStride + width;
}

/**
 * A 3-D [batch, seq, width] tensor whose tokens are `tokenStride` floats apart
 * (a view into a wider row, such as q inside a fused QKV projection output):
 * its data runs from the first token's first float to the last token's last.
 */
function checkTokenStrided(fn: string, arg: string, value: Tensor, tokenStride: number): CheckedTensor {
  const data = checkFloat32Array(fn, `${arg}.data`, value.data);
  const shape = checkShape(fn, `${arg}.shape`, value.shape);
  if (shape.length !== 3) throw rangeError(fn, `${arg} must have 3 dims, received shape ${formatShape(shape)}`);
  const span = tokenSpan(shape[0] * shape[1], shape[2], tokenStride);
  if (shape[2] > tokenStride || data.length !== span) {
    throw rangeError(fn, `${arg}.data.length must be ${span} for shape ${formatShape(shape)} with token stride ${tokenStride}, received ${data.length}`);
  }
  return { data, shape };
}

/** Whether an argument carries strides (a KVCache view). */
function hasStrides(x: unknown): x is StridedTensor | Bf16StridedTensor | Int8StridedTensor {
  return typeof x === 'object' && x !== null && (x as { strides?: unknown }).strides !== undefined;
}

/**
 * What attention accepts as k and v: a tensor, or a strided view such as a
 * {@link KVCache}'s keys; in float32, or both in bf16 (a bf16 cache's views,
 * or {@link Bf16Tensor}s), which attention widens exactly as it reads them,
 * or both int8 with their row scales (an int8 cache's views).
 */
export type KeyValueInput = TensorLike | StridedTensor | Bf16Tensor | Bf16StridedTensor | Int8StridedTensor;

/** A checked k or v: float32, bf16 or int8 values (with their row scales), strides when it is a view. */
interface CheckedKeyValue {
  data: Float32Array | Uint16Array | Int8Array;
  shape: number[];
  strides?: number[];
  dtype: 'float32' | 'bf16' | 'int8';
  scales?: Float32Array;
}

function checkKeyValue(fn: string, arg: string, x: KeyValueInput, tokenStride: number): CheckedKeyValue {
  if (tokenStride > 0) return { ...checkTokenStrided(fn, arg, x as Tensor, tokenStride), dtype: 'float32' };
  if (isBf16Tensor(x)) {
    const t = hasStrides(x) ? checkBf16StridedTensor(fn, arg, x as Bf16StridedTensor, 4) : checkBf16Tensor(fn, arg, x);
    return { data: t.data, shape: [...t.shape], strides: 'strides' in t ? [...t.strides] : undefined, dtype: 'bf16' };
  }
  if (isInt8Tensor(x)) {
    // Rows need their scales, which only a strided view (an int8 cache's) carries.
    const view = { ...(x as Int8StridedTensor) };
    if (view.strides === undefined) view.strides = denseStrides(checkShape(fn, `${arg}.shape`, view.shape));
    const t = checkInt8StridedTensor(fn, arg, view, 4);
    return { data: t.data, shape: t.shape, strides: t.strides, dtype: 'int8', scales: t.scales };
  }
  const t = hasStrides(x) ? checkStridedTensor(fn, arg, x as StridedTensor, 4) : checkTensor(fn, arg, x as TensorLike);
  return { ...t, dtype: 'float32' };
}

function prepareAttention(
  fn: string,
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions,
  tokenStride = 0,
) {
  const opts = checkOptions<AttentionOptions>(fn, options, KNOWN);
  const strided = tokenStride > 0;
  const tq: CheckedTensor & { strides?: number[] } = strided
    ? checkTokenStrided(fn, 'q', q as Tensor, tokenStride)
    : hasStrides(q) ? checkStridedTensor(fn, 'q', q, 4) : checkTensor(fn, 'q', q);
  const tk = checkKeyValue(fn, 'k', k, tokenStride);
  const tv = checkKeyValue(fn, 'v', v, tokenStride);
  // From the checked views: a caller's getter is read once.
  const qStrided = tq.strides !== undefined, kStrided = tk.strides !== undefined, vStrided = tv.strides !== undefined;
  if (tk.dtype !== tv.dtype) {
    const [arg, other, data, want] = tk.dtype !== 'float32' ? ['v.data', 'k', tv.data, tk.dtype] : ['k.data', 'v', tk.data, tv.dtype];
    const what = want === 'bf16' ? 'bf16 values (a Uint16Array)' : 'int8 values (an Int8Array) with scales';
    throw typeError(fn, arg, `${what} like ${other}'s`, data);
  }
  const layoutOpt = optEnum(fn, 'options.layout', opts.layout, LAYOUTS);
  const headsOpt = optPositiveInteger(fn, 'options.heads', opts.heads);
  const kvHeadsOpt = optPositiveInteger(fn, 'options.kvHeads', opts.kvHeads);
  const causal = optBoolean(fn, 'options.causal', opts.causal, false);
  const scale = optFiniteNumber(fn, 'options.scale', opts.scale);
  const returnWeights = optBoolean(fn, 'options.returnWeights', opts.returnWeights, false);
  const softcap = optFiniteNumber(fn, 'options.softcap', opts.softcap) ?? 0;
  if (softcap < 0) throw rangeError(fn, `options.softcap must be >= 0 (0: none), received ${softcap}`);
  let windowLeft = -1, windowRight = -1;
  if (opts.window !== undefined) {
    const w = checkObject(fn, 'options.window', opts.window, ['left', 'right']);
    windowLeft = optNonNegativeInteger(fn, 'options.window.left', w.left) ?? -1;
    windowRight = optNonNegativeInteger(fn, 'options.window.right', w.right) ?? -1;
  }

  const rank = tq.shape.length;
  if (rank !== 3 && rank !== 4) {
    throw rangeError(fn, `q must have 4 dims (or 3 with options.heads), received shape ${formatShape(tq.shape)}`);
  }
  if ((kStrided || vStrided) && rank !== 4) {
    throw rangeError(fn, `q must have 4 dims with a strided k or v (a KVCache's keys or values), received shape ${formatShape(tq.shape)}`);
  }
  if (qStrided && rank !== 4) throw rangeError(fn, `a strided q must have 4 dims, received shape ${formatShape(tq.shape)}`);
  for (const [name, t] of [['k', tk], ['v', tv]] as const) {
    if (t.shape.length !== rank) {
      throw rangeError(fn, `${name} must have ${rank} dims like q, received shape ${formatShape(t.shape)}`);
    }
  }

  let layout: AttentionLayout;
  let qs: number[], ks: number[], vs: number[];
  if (rank === 3) {
    if (layoutOpt !== undefined && layoutOpt !== 'bshd') {
      throw rangeError(fn, `3-D inputs are [batch, seq, heads·headDim] ('bshd'), received options.layout = '${layoutOpt}'`);
    }
    if (headsOpt === undefined) {
      throw rangeError(fn, `options.heads is required for 3-D q [batch, seq, heads·headDim], received undefined`);
    }
    layout = 'bshd';
    const kvHeads = kvHeadsOpt ?? headsOpt;
    qs = splitHeads(fn, 'q', tq, headsOpt, 'options.heads');
    ks = splitHeads(fn, 'k', tk, kvHeads, kvHeadsOpt === undefined ? 'options.heads' : 'options.kvHeads');
    vs = splitHeads(fn, 'v', tv, kvHeads, kvHeadsOpt === undefined ? 'options.heads' : 'options.kvHeads');
    if (ks[3] !== qs[3]) {
      // The check below would name k.shape[3], which 3-D k does not have.
      const kvName = kvHeadsOpt === undefined ? 'options.heads' : 'options.kvHeads';
      throw rangeError(
        fn,
        `k's head dim k.shape[2] / ${kvName} = ${tk.shape[2]} / ${kvHeads} must equal q's, q.shape[2] / options.heads = ` +
          `${tq.shape[2]} / ${headsOpt} = ${qs[3]}, received ${ks[3]}`,
      );
    }
  } else {
    layout = layoutOpt ?? 'bhsd';
    qs = tq.shape;
    ks = tk.shape;
    vs = tv.shape;
  }

  const ax = AXES[layout];
  const lq = logical(layout, qs);
  const lk = logical(layout, ks);
  const lv = logical(layout, vs);
  const mismatch = (arg: string, axis: number, ref: string, want: number, got: number) =>
    rangeError(
      fn,
      `${arg}.shape[${ax[axis]}] (${AXIS_NAMES[axis]}) must equal ${ref}.shape[${ax[axis]}] = ${want}, received ${got}`,
    );
  if (rank === 4) {
    if (headsOpt !== undefined && headsOpt !== lq.heads) {
      throw rangeError(fn, `options.heads must equal q.shape[${ax[1]}] = ${lq.heads}, received ${headsOpt}`);
    }
    if (kvHeadsOpt !== undefined && kvHeadsOpt !== lk.heads) {
      throw rangeError(fn, `options.kvHeads must equal k.shape[${ax[1]}] = ${lk.heads}, received ${kvHeadsOpt}`);
    }
  }
  if (lk.batch !== lq.batch) throw mismatch('k', 0, 'q', lq.batch, lk.batch);
  if (lv.batch !== lq.batch) throw mismatch('v', 0, 'q', lq.batch, lv.batch);
  if (lk.dim !== lq.dim) throw mismatch('k', 3, 'q', lq.dim, lk.dim);
  if (lv.heads !== lk.heads) throw mismatch('v', 1, 'k', lk.heads, lv.heads);
  if (lv.seq !== lk.seq) throw mismatch('v', 2, 'k', lk.seq, lv.seq);
  if (lk.heads === 0 ? lq.heads !== 0 : lq.heads % lk.heads !== 0) {
    throw rangeError(fn, `q's heads (${lq.heads}) must be a multiple of k's heads (${lk.heads})`);
  }

  const B = lq.batch, H = lq.heads, Sq = lq.seq, Skv = lk.seq;
  const full = [B, H, Sq, Skv];
  let maskArgs: [Float32Array | null, number[] | null] = [null, null];
  if (opts.mask !== undefined) {
    const tm = checkTensor(fn, 'options.mask', opts.mask);
    if (!broadcastsTo(tm.shape, full)) {
      throw rangeError(
        fn,
        `options.mask.shape ${formatShape(tm.shape)} must broadcast to [batch, heads, seqQ, seqKV] = ${formatShape(full)}`,
      );
    }
    maskArgs = [tm.data, tm.shape];
  }
  const pad = checkKeyPaddingMask(fn, opts.keyPaddingMask, B, Skv, 'seqKV');
  let sinks: Float32Array | undefined;
  if (opts.sinks !== undefined) {
    sinks = ArrayBuffer.isView(opts.sinks) ? checkFloat32Array(fn, 'options.sinks', opts.sinks) : checkTensor(fn, 'options.sinks', opts.sinks).data;
    if (lengthOf(sinks) !== H) throw rangeError(fn, `options.sinks must hold one logit per query head (${H}), received ${lengthOf(sinks)}`);
  }

  // A fresh copy (the addon copies it too), so it needs no alias checks.
  const keyLengths =
    opts.keyLengths === undefined ? undefined : checkLengthList(fn, 'options.keyLengths', opts.keyLengths, B, 'batch', Skv, 'seqKV');

  const out4 = fromLogical(layout, { batch: B, heads: H, seq: Sq, dim: lv.dim });
  const outShape = rank === 3 ? [B, Sq, H * lv.dim] : out4;
  const weightCount = returnWeights ? elementCount(full) : 0;
  if (weightCount < 0) throw rangeError(fn, `the weights ${formatShape(full)} would have more than ${MAX_ELEMENTS} elements (returnWeights)`);
  const outCount = opts.out === undefined ? elementCount(outShape) : 0;
  checkAllocation(fn, [
    ['the result', Math.max(outCount, 0)],
    ['the weights', weightCount],
  ]);
  const out = resultTensor(fn, opts.out, outShape);
  const weights: Tensor | undefined = returnWeights
    ? { data: allocateFloats(fn, 'the weights', weightCount), shape: full }
    : undefined;
  checkNoAlias(fn, 'options.out', out.data, 'q', tq.data);
  checkNoAlias(fn, 'options.out', out.data, 'k', tk.data);
  checkNoAlias(fn, 'options.out', out.data, 'v', tv.data);
  checkNoAlias(fn, 'options.out', out.data, 'k.scales', tk.scales);
  checkNoAlias(fn, 'options.out', out.data, 'v.scales', tv.scales);
  checkNoAlias(fn, 'options.out', out.data, 'options.mask', maskArgs[0] ?? undefined);
  checkNoAlias(fn, 'options.out', out.data, 'options.keyPaddingMask', pad);
  checkNoAlias(fn, 'options.out', out.data, 'options.sinks', sinks);
  if (weights) checkNoAlias(fn, 'the weights', weights.data, 'options.sinks', sinks);
  // Strides of axes 0-2 of q, k and v in their shape order, when any is not dense.
  let strides: number[] | undefined;
  if (strided) {
    const s = [qs[1] * tokenStride, tokenStride, qs[3]];  // [batch, seq, heads] of the bshd views
    strides = [...s, ...s, ...s];
  } else if (qStrided || kStrided || vStrided) {
    const outer = (t: { shape: number[]; strides?: number[] }) => (t.strides ?? denseStrides(t.shape)).slice(0, 3);
    strides = [...outer(tq), ...outer(tk), ...outer(tv)];
  }

  // Only checked values from here on (out.data too): no getter of the caller's runs while the
  // shared Descriptor is filled, so no nested call can overwrite it.
  const args = (stage?: number): unknown[] => {
    const d = new Descriptor('attention', stage)
      .number('layout', LAYOUT_CODE[layout]).shape('q.shape', qs).shape('k.shape', ks).shape('v.shape', vs)
      .shape('out.shape', out4).flag('hasScale', scale !== undefined).number('scale', scale ?? 0)
      .flag('causal', causal).shape('mask.shape', maskArgs[1]).number('softcap', softcap)
      .number('window.left', windowLeft).number('window.right', windowRight).flag('kvBf16', tk.dtype === 'bf16')
      .flag('kvInt8', tk.dtype === 'int8');
    if (strides) {
      STRIDE_FIELDS.forEach((name, i) => d.number(name, strides[i]));
    }
    return [
      tq.data, tk.data, tv.data, out.data, maskArgs[0], pad ?? null, weights ? weights.data : null, sinks ?? null,
      keyLengths ?? null, tk.scales ?? null, tv.scales ?? null, d.done(),
    ];
  };
  const buffers: NamedBuffer[] = [['q', tq.data], ['k', tk.data], ['v', tv.data], ['options.out', out.data, true]];
  if (tk.scales) buffers.push(['k.scales', tk.scales]);
  if (tv.scales) buffers.push(['v.scales', tv.scales]);
  if (maskArgs[0]) buffers.push(['options.mask', maskArgs[0]]);
  if (pad) buffers.push(['options.keyPaddingMask', pad]);
  if (sinks) buffers.push(['options.sinks', sinks]);
  if (weights) buffers.push(['the weights', weights.data, true]);
  const result: Tensor | AttentionWithWeights = weights ? { output: out.result, weights } : out.result;
  return { fn, args, result, buffers };
}

/**
 * Scaled dot-product attention, batched over batch and heads:
 * `out = softmax(scale · q·kᵀ + mask) · v` per head.
 *
 * seqQ may differ from seqKV (cross-attention, a decode step against a cache),
 * v's head dim may differ from q's, and k/v may have fewer heads than q
 * (grouped-query attention: query head h uses kv head ⌊h / (heads / kvHeads)⌋).
 * A query row whose keys are all blocked gives zeros.
 *
 * @example
 * // 1 batch, 2 heads, 3 tokens, head dim 4, default layout [batch, heads, seq, headDim]
 * const q = tensor(new Float32Array(24).fill(0.1), [1, 2, 3, 4]);
 * const o = attention(q, q, q, { causal: true }); // shape [1, 2, 3, 4]
 *
 * // The packed projection output [batch, seq, heads·headDim], no reshape needed:
 * const x = tensor(new Float32Array(1 * 3 * 8), [1, 3, 8]);
 * attention(x, x, x, { heads: 2 }); // shape [1, 3, 8]
 * @throws TypeError for a wrong kind of argument, RangeError for mismatched or invalid shapes and values.
 */
export function attention(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options: AttentionOptions & { returnWeights: true },
): AttentionWithWeights;
export function attention(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions & { returnWeights?: false },
): Tensor;
export function attention(q: TensorLike, k: KeyValueInput, v: KeyValueInput, options?: AttentionOptions): Tensor | AttentionWithWeights;
export function attention(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions,
): Tensor | AttentionWithWeights {
  const call = prepareAttention('attention', q, k, v, options);
  native.attention(...call.args());
  return call.result;
}

/**
 * Attention on a fused QKV projection output [batch, seq, 3·inner] (q, k and
 * v side by side in each token's row, as `x·W_qkvᵀ` gives them), read in
 * place through a token stride of 3·inner: no split copies. Checked now, run
 * later as a stage of native.sequence. For MultiHeadSelfAttention; options
 * as {@link attention}'s 3-D form (heads required); `result` is what
 * attention would return.
 * @internal
 */
export function attentionOnFusedQkvStage(
  fn: string,
  qkv: Tensor,
  options: AttentionOptions,
): { stage: NativeStage; result: Tensor | AttentionWithWeights } {
  const [batch, seq, width] = qkv.shape;
  const inner = width / 3;
  const span = tokenSpan(batch * seq, inner, width);
  const view = (i: number): Tensor => ({ data: qkv.data.subarray(i * inner, i * inner + span), shape: [batch, seq, inner] });
  const call = prepareAttention(fn, view(0), view(1), view(2), options, width);
  return { stage: { kind: 'attention', args: call.args }, result: call.result };
}

/**
 * Internal (MultiHeadSelfAttention's decoder): {@link attention} checked now,
 * run later as a stage of native.sequence; q may be a strided view too (q
 * inside the projection's output). `result` is what attention would return.
 */
export function attentionStage(
  fn: string,
  q: Tensor | StridedTensor,
  k: KeyValueInput,
  v: KeyValueInput,
  options: AttentionOptions,
): { stage: NativeStage; result: Tensor | AttentionWithWeights } {
  const call = prepareAttention(fn, q as TensorLike, k, v, options);
  return { stage: { kind: 'attention', args: call.args }, result: call.result };
}

/** {@link attention} computed off the JS thread; invalid arguments reject the promise. */
export function attentionAsync(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options: AttentionOptions & { returnWeights: true },
): Promise<AttentionWithWeights>;
export function attentionAsync(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions & { returnWeights?: false },
): Promise<Tensor>;
export function attentionAsync(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions,
): Promise<Tensor | AttentionWithWeights>;
export function attentionAsync(
  q: TensorLike,
  k: KeyValueInput,
  v: KeyValueInput,
  options?: AttentionOptions,
): Promise<Tensor | AttentionWithWeights> {
  return runAsync(() => prepareAttention('attentionAsync', q, k, v, options), (args) => native.attention(...args));
}

