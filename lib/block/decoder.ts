/**
 * MultiHeadSelfAttention's decoder form (grouped heads, RoPE, RMSNorm,
 * attention's generation options, a KV cache), run as the encoder form runs:
 * checked stages of one native.sequence call over a workspace the block
 * reuses, kept for the next call of the same shapes (lib/block/plan.ts).
 *
 *   norm(x) → xn · Wqkvᵀ (+ b) → qkv; rope(q and k) in place in qkv;
 *   cacheAppend(k, v); attention(q, the cache's keys and values, or k and v) → o;
 *   o · Woᵀ (+ bo) → out
 *
 * q, k and v are read where the projection wrote them (strided views of
 * qkv): no copy of an activation in JS. A decode step against a kept plan
 * only refreshes the positions, the per-entry counts and key lengths, and
 * the length of the cache's views (docs/design/block-plans.md).
 *
 * Every check happens before the sequence runs, the cache's room included;
 * the cache's lengths advance only once the sequence has taken the stages.
 * So a call that throws leaves the cache as it was.
 */
import { attentionStage, type AttentionOptions } from '../attention';
import { broadcastsTo } from '../broadcast';
import { formatShape, rangeError, typeError } from '../errors';
import { advance, cacheAppendArgs, cacheBuffers, cacheStorage, cacheView, KVCache, type KVCacheDtype } from '../kv-cache';
import { layerNormStage } from '../layernorm';
import { matmulStage } from '../matmul';
import { argIndex, fieldIndex, native, sequenceArgs, type NativeCallback, type NativeStage } from '../native';
import { runAsync, type NamedBuffer } from '../queue';
import { ropeInPlaceStage } from '../rope';
import {
  checkKeyPaddingMask,
  checkLengthList,
  checkNoAlias,
  checkTensor,
  resultTensor,
  type Bf16StridedTensor,
  type CheckedTensor,
  type Int8StridedTensor,
  type ResultTensor,
  type StridedTensor,
  type Tensor,
  type TensorLike,
} from '../tensor';
import { checkOptions, optBoolean } from '../validate';
import type { BlockWeights } from './config';
import { callerBuffersOf, checkBlockInput, checkInPlaceWeights, detachedBeforeFinished } from './forward-args';
import { acquireWorkspace, ownDescriptors, releaseWorkspace, type Workspace } from './plan';
import type { MultiHeadSelfAttentionForwardOptions } from './types';

const DECODER_KEYS = ['causal', 'mask', 'keyPaddingMask', 'returnWeights', 'out', 'cache', 'lengths'] as const;

/** Whether a forward call carries a cache or ragged lengths (and so takes the decoder form whatever the block). */
export function takesDecoderPath(options: unknown): boolean {
  if (typeof options !== 'object' || options === null) return false;
  const o = options as { cache?: unknown; lengths?: unknown };
  return o.cache !== undefined || o.lengths !== undefined;
}

/** A checked call: x, its output, the options, and where the cache stood when it was checked. */
interface DecoderCall {
  x: Tensor;
  batch: number;
  tokens: number;
  out: ResultTensor;
  cache?: KVCache<KVCacheDtype>;
  /** Real tokens per batch entry (options.lengths): x's last lengths[b]. */
  lengths?: Int32Array;
  causal: boolean;
  mask?: CheckedTensor;
  pad?: Uint8Array;
  /** Each entry's length before and after the call; keys: the longest after. */
  before: Int32Array;
  after: Int32Array;
  keys: number;
  callerBuffers: NamedBuffer[];
}

function checkCall(fn: string, w: BlockWeights, x: TensorLike, options: MultiHeadSelfAttentionForwardOptions | undefined): DecoderCall {
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
  }
  const before = cache ? cache.lengths : new Int32Array(batch);
  for (let b = 0; b < batch && cache; b++) {
    const adding = lengths ? lengths[b] : tokens;
    if (before[b] + adding > cache.maxLength) {
      const entry = batch > 1 ? ` (batch entry ${b})` : '';
      throw rangeError(fn, `options.cache holds ${before[b]} of ${cache.maxLength} positions${entry}: no room for ${adding} more`);
    }
  }
  const after = before.map((n, b) => n + (lengths ? lengths[b] : tokens));
  const keys = Math.max(0, ...after);
  let mask: CheckedTensor | undefined;
  if (opts.mask !== undefined) {
    const full = [batch, w.heads, tokens, keys];
    mask = checkTensor(fn, 'options.mask', opts.mask);
    if (!broadcastsTo(mask.shape, full)) {
      throw rangeError(fn, `options.mask.shape ${formatShape(mask.shape)} must broadcast to [batch, heads, tokens, keys] = ${formatShape(full)}`);
    }
  }
  const pad = checkKeyPaddingMask(fn, opts.keyPaddingMask, batch, keys, cache ? 'seqKV' : 'tokens', twoD);
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data);
  for (const [name, data] of w.weightViews) checkNoAlias(fn, 'options.out', out.data, name, data);
  checkNoAlias(fn, 'options.out', out.data, 'options.mask', mask?.data);
  checkNoAlias(fn, 'options.out', out.data, 'options.keyPaddingMask', pad);
  if (cache) {
    for (const [what, storage] of cacheBuffers(cacheStorage(cache))) checkNoAlias(fn, 'options.out', out.data, what, storage);
  }
  checkInPlaceWeights(fn, w);
  const callerBuffers = callerBuffersOf(tx.data, out.data, mask?.data, pad);
  return { x: { data: tx.data, shape: [batch, tokens, w.dim] }, batch, tokens, out, cache, lengths, causal, mask, pad, before, after, keys, callerBuffers };
}

/** Floats per token row of a decoder workspace: the normalized input, q, k and v side by side, the merged heads. */
export function decoderRowFloats(w: BlockWeights): number {
  return (w.hasNorm ? w.dim : 0) + w.innerDim + 2 * w.kvInner + (w.projectOut ? w.innerDim : 0);
}

/** Where a buffer of the call goes: stages[stage][1 + arg]. */
type Slot = readonly [stage: number, arg: number];

/** A decoder call's stages, kept by its workspace for the next call of the same shapes and options. */
export interface DecoderPlan {
  key: string;
  /** The cache the stages were made for (cacheId), or 0; the stages hold none of its arrays between calls. */
  cacheId: number;
  /** native.sequence's argument, descriptors owned. */
  stages: unknown[][];
  /** Refreshed each call: rope's positions [batch·tokens], the counts appended, the key lengths of a ragged cache. */
  positions: Int32Array;
  counts: Int32Array;
  keyLengths?: Int32Array;
  x: Slot;
  out: Slot;
  mask?: Slot;
  pad?: Slot;
  /** The attention stage, its keys and values arguments (and their scales') and where their seq dims sit in its descriptor. */
  attention?: { stage: number; keys: number; values: number; kScales: number; vScales: number; kSeq: number; vSeq: number };
  /** The cache append stage and its storage, scales and starts arguments. */
  append?: { stage: number; keys: number; values: number; keyScales: number; valueScales: number; starts: number };
}

const cacheIds = new WeakMap<KVCache<KVCacheDtype>, number>();
let lastCacheId = 0;

/** A number naming one cache (not the cache: a kept plan must not keep it alive). */
function cacheId(cache: KVCache<KVCacheDtype> | undefined): number {
  if (!cache) return 0;
  let id = cacheIds.get(cache);
  if (id === undefined) cacheIds.set(cache, (id = ++lastCacheId));
  return id;
}

/** What a kept plan depends on besides the caller's buffers and the cache's lengths. */
function planKey(c: DecoderCall): string {
  const ragged = c.after.some((n) => n !== c.keys);
  return `${c.batch},${c.tokens},${c.causal ? 1 : 0},${c.mask ? c.mask.shape.join('x') : '-'},${c.pad ? 1 : 0},` +
    `${c.cache ? c.cache.dtype : '-'},${c.lengths ? 1 : 0},${ragged ? 1 : 0}`;
}

/** The first `keys` positions of a cache's keys or values as 'bshd' views (the block's heads have one dim). */
function cacheViews(cache: KVCache<KVCacheDtype>, keys: number): [KeyOrValue, KeyOrValue] {
  const s = cacheStorage(cache);
  return [
    cacheView(cache, s.keys, s.keyScales, cache.headDim, keys, 'bshd'),
    cacheView(cache, s.values, s.valueScales, cache.valueDim, keys, 'bshd'),
  ];
}
type KeyOrValue = StridedTensor | Bf16StridedTensor | Int8StridedTensor;

/** Sets a plan's per-call values: rope's positions, the counts, the key lengths, the caller's buffers and the cache's views. */
function refresh(plan: DecoderPlan, c: DecoderCall): void {
  const { batch, tokens } = c;
  for (let b = 0; b < batch; b++) {
    const real = c.lengths ? c.lengths[b] : tokens, skip = tokens - real;
    plan.counts[b] = real;
    // Entry b's real tokens are its last ones, at positions from its own length on; the
    // padding before them is placed at 0 (its rows are not used).
    for (let t = 0; t < tokens; t++) plan.positions[b * tokens + t] = Math.max(0, c.before[b] + t - skip);
  }
  plan.keyLengths?.set(c.after);
  const put = (slot: Slot | undefined, value: unknown) => {
    if (slot) plan.stages[slot[0]][1 + slot[1]] = value;
  };
  put(plan.x, c.x.data);
  put(plan.out, c.out.data);
  put(plan.mask, c.mask?.data);
  put(plan.pad, c.pad);
  const a = plan.attention, app = plan.append;
  if (a && app && c.cache) {
    const storage = cacheStorage(c.cache);
    const stage = plan.stages[a.stage];
    const [keys, values] = cacheViews(c.cache, c.keys);
    stage[1 + a.keys] = keys.data;
    stage[1 + a.values] = values.data;
    stage[1 + a.kScales] = storage.keyScales ?? null;
    stage[1 + a.vScales] = storage.valueScales ?? null;
    const desc = stage[stage.length - 1] as Float64Array;
    desc[a.kSeq] = c.keys;
    desc[a.vSeq] = c.keys;
    const append = plan.stages[app.stage];
    append[1 + app.keys] = storage.keys;
    append[1 + app.values] = storage.values;
    append[1 + app.keyScales] = storage.keyScales ?? null;
    append[1 + app.valueScales] = storage.valueScales ?? null;
    append[1 + app.starts] = storage.lengths;
  }
}

/**
 * Empties a kept plan's slots for the caller's arrays once its call is over:
 * x may view a whole dataset, and a cache may be large and done with.
 */
export function dropDecoderBuffers(plan: DecoderPlan | undefined): void {
  if (!plan) return;
  const slots: Array<Slot | undefined> = [plan.x, plan.out, plan.mask, plan.pad];
  const a = plan.attention, app = plan.append;
  if (a) slots.push([a.stage, a.keys], [a.stage, a.values], [a.stage, a.kScales], [a.stage, a.vScales]);
  if (app) slots.push([app.stage, app.keys], [app.stage, app.values], [app.stage, app.keyScales], [app.stage, app.valueScales], [app.stage, app.starts]);
  for (const slot of slots) if (slot) plan.stages[slot[0]][1 + slot[1]] = null;
}

/** New checked stages for call c over workspace ws, and the plan that keeps them. */
function newPlan(fn: string, w: BlockWeights, c: DecoderCall, ws: Workspace<DecoderPlan>): DecoderPlan {
  const { batch, tokens } = c;
  const rows = batch * tokens, width = w.innerDim + 2 * w.kvInner, cap = ws.rows;
  let at = 0;
  const region = (floats: number): Float32Array => {
    const r = ws.buffer.subarray(at * cap, at * cap + rows * floats);
    at += floats;
    return r;
  };
  const xn = w.hasNorm ? region(w.dim) : undefined;
  const qkv = region(width);
  const o = w.projectOut ? region(w.innerDim) : undefined;
  // q, k or v inside qkv: 'bshd' [batch, tokens, heads, dimHead], a token row `width` floats apart.
  const part = (from: number, heads: number): StridedTensor => {
    const span = rows === 0 ? 0 : (rows - 1) * width + heads * w.dimHead;
    return { data: qkv.subarray(from, from + span), shape: [batch, tokens, heads, w.dimHead], strides: [tokens * width, width, w.dimHead, 1] };
  };
  const q = part(0, w.heads), k = part(w.innerDim, w.kvHeads), v = part(w.innerDim + w.kvInner, w.kvHeads);
  const positions = new Int32Array(rows), counts = new Int32Array(batch);
  const ragged = c.after.some((n) => n !== c.keys);
  const keyLengths = ragged ? new Int32Array(batch) : undefined;

  const stages: NativeStage[] = [];
  if (xn) {
    const norm = { weight: w.normWeight, ...(w.normType === 'layer' && w.normBias ? { bias: w.normBias } : {}), eps: w.eps, out: { data: xn, shape: c.x.shape } };
    stages.push(layerNormStage(c.x, norm, w.normType === 'rms'));
  }
  stages.push(matmulStage({ data: xn ?? c.x.data, shape: [rows, w.dim] }, w.packedQkv, { c: w.bqkv, out: { data: qkv, shape: [rows, width] } }));
  // q's heads and then k's sit side by side in each token's row: one rope stage turns both, each
  // token's angles computed once.
  const rope = w.decoderSettings.rope;
  if (rope) stages.push(ropeInPlaceStage(part(0, w.heads + w.kvHeads), positions, rope));
  let keys: KeyOrValue = k, values: KeyOrValue = v;
  let appendStage = -1;
  if (c.cache) {
    const cache = c.cache;
    const source = (t: StridedTensor) => ({ data: t.data, strides: [t.strides[0], t.strides[1], t.strides[2]] as const });
    appendStage = stages.push({ kind: 'cacheAppend', args: (stage) => cacheAppendArgs(cache, source(k), source(v), tokens, counts, stage) }) - 1;
    [keys, values] = cacheViews(cache, c.keys);
  }
  const { softcap, window, sinks } = w.decoderSettings;
  const options: AttentionOptions = {
    layout: 'bshd',
    causal: c.causal,
    out: { data: o ?? c.out.data, shape: [batch, tokens, w.heads, w.dimHead] },
  };
  if (keyLengths) options.keyLengths = c.after;
  if (softcap !== undefined) options.softcap = softcap;
  if (window !== undefined) options.window = window;
  if (sinks !== undefined) options.sinks = sinks;
  if (c.mask) options.mask = c.mask;
  if (c.pad) options.keyPaddingMask = c.pad;
  const att = stages.push(attentionStage(fn, q, keys, values, options).stage) - 1;
  if (o) stages.push(matmulStage({ data: o, shape: [rows, w.innerDim] }, w.packedOut!, { c: w.bo, out: { data: c.out.data, shape: [rows, w.dim] } }));

  const owned = ownDescriptors(sequenceArgs(stages));
  const plan: DecoderPlan = {
    key: planKey(c),
    cacheId: cacheId(c.cache),
    stages: owned,
    positions,
    counts,
    keyLengths,
    x: [0, xn ? argIndex('layerNorm', 'x') : argIndex('matmul', 'a')],
    out: o ? [stages.length - 1, argIndex('matmul', 'out')] : [att, argIndex('attention', 'out')],
    mask: c.mask ? [att, argIndex('attention', 'mask')] : undefined,
    pad: c.pad ? [att, argIndex('attention', 'keyPaddingMask')] : undefined,
  };
  if (keyLengths) owned[att][1 + argIndex('attention', 'keyLengths')] = keyLengths;
  if (c.cache) {
    plan.append = {
      stage: appendStage,
      keys: argIndex('cacheAppend', 'keys'),
      values: argIndex('cacheAppend', 'values'),
      keyScales: argIndex('cacheAppend', 'keyScales'),
      valueScales: argIndex('cacheAppend', 'valueScales'),
      starts: argIndex('cacheAppend', 'starts'),
    };
    const desc = owned[att][owned[att].length - 1] as Float64Array;
    // The seq dim of 'bshd' [batch, seq, kvHeads, dim]: after the rank and the batch.
    plan.attention = {
      stage: att,
      keys: argIndex('attention', 'k'),
      values: argIndex('attention', 'v'),
      kScales: argIndex('attention', 'kScales'),
      vScales: argIndex('attention', 'vScales'),
      kSeq: fieldIndex('attention', desc, 'k.shape') + 2,
      vSeq: fieldIndex('attention', desc, 'v.shape') + 2,
    };
  }
  return plan;
}

/** The stages of call c: the workspace's kept plan refreshed, or a new one (the caller keeps it once the call is under way). */
function stagesFor(fn: string, w: BlockWeights, c: DecoderCall, ws: Workspace<DecoderPlan>): DecoderPlan {
  const kept = ws.plan;
  const plan = kept && kept.cacheId === cacheId(c.cache) && kept.key === planKey(c) ? kept : newPlan(fn, w, c, ws);
  refresh(plan, c);
  return plan;
}

/** The decoder form of forward. */
export function decoderForward(
  fn: string,
  w: BlockWeights,
  pool: Workspace<DecoderPlan>[],
  x: TensorLike,
  options?: MultiHeadSelfAttentionForwardOptions,
): Tensor {
  const c = checkCall(fn, w, x, options);
  const ws = acquireWorkspace(pool, w, c.batch * c.tokens, decoderRowFloats(w)) as Workspace<DecoderPlan>;
  try {
    const plan = stagesFor(fn, w, c, ws);
    native.sequence(plan.stages);
    if (c.cache) advance(c.cache, plan.counts);
    ws.plan = plan;
    return c.out.result;
  } finally {
    dropDecoderBuffers(ws.plan);
    releaseWorkspace(pool, ws);
  }
}

/** Whether the cache's lengths are still `lengths`. */
function holds(cache: KVCache<KVCacheDtype>, lengths: Int32Array): boolean {
  return cacheStorage(cache).lengths.every((n, b) => n === lengths[b]);
}

/**
 * {@link decoderForward} as one async job. The stages are made when the job
 * leaves the queue: a call queued behind another on the same cache is checked
 * again there, against the lengths that call left.
 */
export async function decoderForwardAsync(
  fn: string,
  w: BlockWeights,
  pool: Workspace<DecoderPlan>[],
  x: TensorLike,
  options?: MultiHeadSelfAttentionForwardOptions,
): Promise<Tensor> {
  let c = checkCall(fn, w, x, options);
  const ws = acquireWorkspace(pool, w, c.batch * c.tokens, decoderRowFloats(w)) as Workspace<DecoderPlan>;
  const buffers: NamedBuffer[] = [...c.callerBuffers, ...w.inPlaceWeights];
  if (c.cache) {
    // Written by the job: private copies (lib/async-copies.ts) give them back.
    buffers.push(...cacheBuffers(cacheStorage(c.cache)));
  }
  let plan: DecoderPlan | undefined;
  let started = false;
  try {
    await runAsync(
      () => ({
        fn,
        args: () => {
          if (c.cache && !holds(c.cache, c.before)) c = checkCall(fn, w, x, options);
          plan = stagesFor(fn, w, c, ws);
          return [plan.stages];
        },
        result: c.out.result,
        buffers,
      }),
      (a) => {
        native.sequence(a[0] as unknown[][], a[1] as NativeCallback);
        started = true;
        if (c.cache) advance(c.cache, plan!.counts);
      },
    );
    ws.plan = plan;
    return c.out.result;
  } catch (e) {
    // A job that ran but failed (a buffer detached while it ran): the cache goes back to where it
    // was, unless a later call has appended since.
    if (started && c.cache && holds(c.cache, c.after)) cacheStorage(c.cache).lengths.set(c.before);
    throw detachedBeforeFinished(fn, buffers) ?? e;
  } finally {
    dropDecoderBuffers(ws.plan);
    releaseWorkspace(pool, ws);
  }
}

