/**
 * MultiHeadSelfAttention's decoder path: grouped heads, RoPE, RMSNorm,
 * attention's generation options and a KV cache, composed from the public
 * ops one call each (a decode step is a handful of memory-bound calls, so
 * one native.sequence would save little):
 *
 *   y = norm(x) → qkv = y·Wqkvᵀ (+ b) → q, k, v copied apart → rope(q), rope(k)
 *   at the cache's positions → cache.append(k, v) → attention(q, cache) → o·Woᵀ (+ bo)
 *
 * Everything is checked before the first op runs, the cache's room included,
 * so a call that throws leaves the cache as it was.
 */
import { attention, attentionAsync, type AttentionOptions, type KeyValueInput } from '../attention';
import { broadcastsTo } from '../broadcast';
import { formatShape, rangeError, typeError } from '../errors';
import { KVCache, type KVCacheDtype } from '../kv-cache';
import { layerNorm, layerNormAsync, rmsNorm, rmsNormAsync } from '../layernorm';
import { matmul, matmulAsync } from '../matmul';
import { allocateResultFloats } from '../memory';
import { rope, ropeAsync } from '../rope';
import {
  checkKeyPaddingMask,
  checkLengthList,
  checkNoAlias,
  checkTensor,
  resultTensor,
  type Bf16StridedTensor,
  type StridedTensor,
  type Tensor,
  type TensorLike,
} from '../tensor';
import { checkOptions, optBoolean } from '../validate';
import type { BlockWeights } from './config';
import { checkBlockInput } from './forward-args';
import type { MultiHeadSelfAttentionForwardOptions } from './types';

const DECODER_KEYS = ['causal', 'mask', 'keyPaddingMask', 'returnWeights', 'out', 'cache', 'lengths'] as const;

/** Whether a forward call carries a cache or ragged lengths (and so takes the decoder path whatever the block). */
export function takesDecoderPath(options: unknown): boolean {
  if (typeof options !== 'object' || options === null) return false;
  const o = options as { cache?: unknown; lengths?: unknown };
  return o.cache !== undefined || o.lengths !== undefined;
}

/** A cache view [batch, kvHeads, length, dim] seen as 'bshd' [batch, length, kvHeads, dim]: the same elements. */
function asBshd<V extends StridedTensor | Bf16StridedTensor>(view: V): V {
  const [b, h, l, d] = view.shape;
  const [sb, sh, sl] = view.strides;
  return { ...view, shape: [b, l, h, d], strides: [sb, sl, sh, 1] };
}

/** Copies columns [from, from + width) of every row of x [rows, cols] into a new [rows, width] array. */
function columns(x: Float32Array, rows: number, cols: number, from: number, width: number): Float32Array {
  const y = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) y.set(x.subarray(r * cols + from, r * cols + from + width), r * width);
  return y;
}

interface DecoderPlan {
  x: Tensor;
  batch: number;
  tokens: number;
  out: { data: Float32Array; result: Tensor };
  cache?: KVCache<KVCacheDtype>;
  causal: boolean;
  attnOptions: AttentionOptions;
  /** The first token's position: the cache's length, or 0, when every entry has it. */
  offset: number;
  /** Otherwise each token's position, [batch, tokens] (a ragged cache or ragged tokens). */
  positions?: Int32Array;
  /** Real tokens per batch entry (options.lengths): x's last lengths[b]. */
  lengths?: Int32Array;
}

function prepare(fn: string, w: BlockWeights, x: TensorLike, options: MultiHeadSelfAttentionForwardOptions | undefined): DecoderPlan {
  const opts = checkOptions<MultiHeadSelfAttentionForwardOptions>(fn, options, DECODER_KEYS);
  const { tx, twoD, batch, tokens } = checkBlockInput(fn, w, x);
  const causal = optBoolean(fn, 'options.causal', opts.causal, false);
  if (optBoolean(fn, 'options.returnWeights', opts.returnWeights, false)) {
    throw rangeError(fn, 'options.returnWeights is not available with a cache, grouped heads, RoPE or RMSNorm, received true');
  }
  let cache: KVCache<KVCacheDtype> | undefined;
  let lengths: Int32Array | undefined;
  if (opts.lengths !== undefined) {
    if (opts.cache === undefined) throw rangeError(fn, 'options.lengths needs options.cache (the keys of padded tokens are left out of it)');
    lengths = checkLengthList(fn, 'options.lengths', opts.lengths, batch, 'batch', tokens, 'tokens');
  }
  if (opts.cache !== undefined) {
    if (!(opts.cache instanceof KVCache)) throw typeError(fn, 'options.cache', 'a KVCache', opts.cache);
    cache = opts.cache;
    const want = [batch, w.kvHeads, w.dimHead, w.dimHead];
    const got = [cache.batch, cache.kvHeads, cache.headDim, cache.valueDim];
    if (want.some((d, i) => d !== got[i])) {
      throw rangeError(
        fn,
        `options.cache must have batch, kvHeads, headDim, valueDim = ${want.join(', ')} (x's batch and the block's heads), ` +
          `received ${got.join(', ')}`,
      );
    }
    const held = cache.lengths;
    for (let b = 0; b < batch; b++) {
      const adding = lengths ? lengths[b] : tokens;
      if (held[b] + adding > cache.maxLength) {
        const entry = batch > 1 ? ` (batch entry ${b})` : '';
        throw rangeError(fn, `options.cache holds ${held[b]} of ${cache.maxLength} positions${entry}: no room for ${adding} more`);
      }
    }
  }
  const before = cache ? cache.lengths : new Int32Array(batch);
  const after = before.map((n, b) => n + (lengths ? lengths[b] : tokens));
  const keys = Math.max(0, ...after);
  const ragged = after.some((n) => n !== keys);
  const { softcap, window, sinks } = w.decoderSettings;
  const attnOptions: AttentionOptions = { layout: 'bshd', causal };
  if (ragged) attnOptions.keyLengths = after;
  if (softcap !== undefined) attnOptions.softcap = softcap;
  if (window !== undefined) attnOptions.window = window;
  if (sinks !== undefined) attnOptions.sinks = sinks;
  if (opts.mask !== undefined) {
    const full = [batch, w.heads, tokens, keys];
    const mask = checkTensor(fn, 'options.mask', opts.mask);
    if (!broadcastsTo(mask.shape, full)) {
      throw rangeError(fn, `options.mask.shape ${formatShape(mask.shape)} must broadcast to [batch, heads, tokens, keys] = ${formatShape(full)}`);
    }
    attnOptions.mask = mask;
  }
  const pad = checkKeyPaddingMask(fn, opts.keyPaddingMask, batch, keys, cache ? 'seqKV' : 'tokens', twoD);
  if (pad) attnOptions.keyPaddingMask = pad;
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data);
  for (const [name, data] of w.weightViews) checkNoAlias(fn, 'options.out', out.data, name, data);
  // Entry b's real tokens are its last ones, at positions from its own length on; the padding
  // before them is placed at 0 (its rows are not used).
  let positions: Int32Array | undefined;
  if (lengths || before.some((n) => n !== before[0])) {
    positions = new Int32Array(batch * tokens);
    for (let b = 0; b < batch; b++) {
      const skip = tokens - (lengths ? lengths[b] : tokens);
      for (let t = 0; t < tokens; t++) positions[b * tokens + t] = Math.max(0, before[b] + t - skip);
    }
  }
  return {
    x: { data: tx.data, shape: [batch, tokens, w.dim] },
    batch,
    tokens,
    out,
    cache,
    causal,
    attnOptions,
    offset: before[0] ?? 0,
    positions,
    lengths,
  };
}

/** The steps between the projection and attention, on plain JS arrays: q, k, v apart, and where k and v are read. */
function splitAndStore(w: BlockWeights, p: DecoderPlan, qkv: Float32Array) {
  const rows = p.batch * p.tokens, width = w.innerDim + 2 * w.kvInner;
  const q = columns(qkv, rows, width, 0, w.innerDim);
  const k = columns(qkv, rows, width, w.innerDim, w.kvInner);
  const v = columns(qkv, rows, width, w.innerDim + w.kvInner, w.kvInner);
  const kvShape = [p.batch, p.tokens, w.kvHeads * w.dimHead];
  return {
    q: { data: q, shape: [p.batch, p.tokens, w.innerDim] } as Tensor,
    k: { data: k, shape: kvShape } as Tensor,
    v: { data: v, shape: kvShape } as Tensor,
  };
}

function ropeOptions(w: BlockWeights, heads: number, p: DecoderPlan, out: Tensor) {
  const r = w.decoderSettings.rope!;
  return {
    heads,
    out,
    ...(p.positions ? { positions: p.positions } : { offset: p.offset }),
    ...(r.theta !== undefined ? { theta: r.theta } : {}),
    ...(r.rotaryDim !== undefined ? { rotaryDim: r.rotaryDim } : {}),
    interleaved: r.interleaved ?? false,
  };
}

/** Appends k and v to the cache (if any) and returns what attention reads as k and v, 'bshd'. */
function keysAndValues(w: BlockWeights, p: DecoderPlan, k: Tensor, v: Tensor): [KeyValueInput, KeyValueInput] {
  if (!p.cache) {
    const shape = [p.batch, p.tokens, w.kvHeads, w.dimHead];
    return [{ data: k.data, shape }, { data: v.data, shape }];
  }
  p.cache.append(k, v, p.lengths ? { lengths: p.lengths } : undefined);
  return [asBshd(p.cache.keys), asBshd(p.cache.values)];
}

function outputs(fn: string, w: BlockWeights, p: DecoderPlan) {
  const rows = p.batch * p.tokens;
  const o: Tensor = w.projectOut
    ? { data: allocateResultFloats(fn, 'the attention output', rows * w.innerDim), shape: [p.batch, p.tokens, w.heads, w.dimHead] }
    : { data: p.out.data, shape: [p.batch, p.tokens, w.heads, w.dimHead] };
  return { o, o2: { data: o.data, shape: [rows, w.innerDim] }, out2: { data: p.out.data, shape: [rows, w.dim] } };
}

function normOptions(w: BlockWeights, out: Tensor) {
  return w.normType === 'rms'
    ? { weight: w.normWeight, eps: w.eps, out }
    : { weight: w.normWeight, ...(w.normBias ? { bias: w.normBias } : {}), eps: w.eps, out };
}

/** The decoder path of forward. */
export function decoderForward(fn: string, w: BlockWeights, x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions): Tensor {
  const p = prepare(fn, w, x, options);
  const rows = p.batch * p.tokens;
  let y = p.x;
  if (w.hasNorm) {
    y = { data: allocateResultFloats(fn, 'the normalized input', rows * w.dim), shape: p.x.shape };
    (w.normType === 'rms' ? rmsNorm : layerNorm)(p.x, normOptions(w, y));
  }
  const qkv = matmul({ data: y.data, shape: [rows, w.dim] }, w.packedQkv, { c: w.bqkv });
  const { q, k, v } = splitAndStore(w, p, qkv.data);
  if (w.decoderSettings.rope) {
    rope(q, ropeOptions(w, w.heads, p, q));
    rope(k, ropeOptions(w, w.kvHeads, p, k));
  }
  const [keys, values] = keysAndValues(w, p, k, v);
  const { o, o2, out2 } = outputs(fn, w, p);
  attention({ data: q.data, shape: [p.batch, p.tokens, w.heads, w.dimHead] }, keys, values, { ...p.attnOptions, out: o });
  if (w.projectOut) matmul(o2, w.packedOut!, { c: w.bo, out: out2 });
  return p.out.result;
}

/** {@link decoderForward} with each op off the JS thread. */
export async function decoderForwardAsync(
  fn: string,
  w: BlockWeights,
  x: TensorLike,
  options?: MultiHeadSelfAttentionForwardOptions,
): Promise<Tensor> {
  const p = prepare(fn, w, x, options);
  const rows = p.batch * p.tokens;
  let y = p.x;
  if (w.hasNorm) {
    y = { data: allocateResultFloats(fn, 'the normalized input', rows * w.dim), shape: p.x.shape };
    await (w.normType === 'rms' ? rmsNormAsync : layerNormAsync)(p.x, normOptions(w, y));
  }
  const qkv = await matmulAsync({ data: y.data, shape: [rows, w.dim] }, w.packedQkv, { c: w.bqkv });
  const { q, k, v } = splitAndStore(w, p, qkv.data);
  if (w.decoderSettings.rope) {
    await Promise.all([ropeAsync(q, ropeOptions(w, w.heads, p, q)), ropeAsync(k, ropeOptions(w, w.kvHeads, p, k))]);
  }
  const [keys, values] = keysAndValues(w, p, k, v);
  const { o, o2, out2 } = outputs(fn, w, p);
  await attentionAsync({ data: q.data, shape: [p.batch, p.tokens, w.heads, w.dimHead] }, keys, values, { ...p.attnOptions, out: o });
  if (w.projectOut) await matmulAsync(o2, w.packedOut!, { c: w.bo, out: out2 });
  return p.out.result;
}
