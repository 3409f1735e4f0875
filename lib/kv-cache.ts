import { formatShape, rangeError, typeError } from './errors';
import { allocateBf16, allocateFloats, checkAllocation } from './memory';
import { Descriptor, native } from './native';
import {
  checkLengthList,
  checkNoAlias,
  checkTensor,
  splitHeads,
  type Bf16StridedTensor,
  type CheckedTensor,
  type StridedTensor,
  type TensorLike,
} from './tensor';
import { checkObject, checkOptions, optEnum, optPositiveInteger, positiveInteger } from './validate';

/** Options of the {@link KVCache} constructor. */
export interface KVCacheOptions {
  batch: number;
  /** Key/value heads (fewer than the query heads under grouped-query attention). */
  kvHeads: number;
  /** Head dim of the keys. */
  headDim: number;
  /** Positions the cache holds at most; its storage is allocated once, for all of them. */
  maxLength: number;
  /** Head dim of the values. Default headDim. */
  valueDim?: number;
  /**
   * How keys and values are stored. `'bf16'` halves the cache's memory and
   * the bytes a decode step reads: `append` rounds each value to the nearest
   * bf16 (ties to even, as torch's `.to(torch.bfloat16)`), `keys` and
   * `values` are {@link Bf16StridedTensor} views, and attention widens them
   * exactly as it reads them. Default `'float32'`.
   */
  dtype?: 'float32' | 'bf16';
}

/** Options of {@link KVCache.append}. */
export interface KVCacheAppendOptions {
  /**
   * Layout of 4-D k and v: `'bhsd'` [batch, kvHeads, n, dim] (the default) or
   * `'bshd'` [batch, n, kvHeads, dim]. 3-D inputs are [batch, n, kvHeads·dim].
   */
  layout?: 'bhsd' | 'bshd';
  /**
   * For a ragged batch: how many of the n positions are real in each batch
   * entry (one integer in [0, n] per entry). Entry b's real positions are
   * the last lengths[b] of the n, as decoder-only batches pad prompts on the
   * left; they are written at that entry's own length. Default: all n.
   */
  lengths?: Int32Array | readonly number[];
}

const CACHE_KNOWN = ['batch', 'kvHeads', 'headDim', 'maxLength', 'valueDim', 'dtype'] as const;
const APPEND_KNOWN = ['layout', 'lengths'] as const;

/** The view type of a cache's keys and values: float32, or bf16 for `dtype: 'bf16'`. */
export type KVCacheView<D extends KVCacheDtype> = D extends 'bf16' ? Bf16StridedTensor : StridedTensor;

/** How a {@link KVCache} stores keys and values. */
export type KVCacheDtype = 'float32' | 'bf16';

/**
 * Keys and values of past positions for a decoder, in storage allocated once:
 * [batch, kvHeads, maxLength, dim] each. `append` copies new positions in at
 * `length`; `keys` and `values` are views of the first `length` positions,
 * with no copy, that {@link attention} reads in place.
 *
 * In a ragged batch (appends with `lengths`) each entry has its own length,
 * `lengths`; `length` is the longest, the views span it, and attention takes
 * `{ keyLengths: cache.lengths }` so that each entry sees its own keys.
 *
 * @example
 * const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 16 });
 * const step = tensor(new Float32Array(1 * 2 * 3 * 4).fill(0.5), [1, 2, 3, 4]); // 3 positions
 * cache.append(step, step);
 * const q = tensor(new Float32Array(1 * 4 * 1 * 4).fill(0.1), [1, 4, 1, 4]); // 4 query heads, 1 token
 * const o = attention(q, cache.keys, cache.values, { causal: true }); // shape [1, 4, 1, 4]
 * cache.length; // 3
 *
 * // bf16 storage: half the memory, and half the bytes a decode step reads
 * const half = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 16, dtype: 'bf16' });
 * half.append(step, step);
 * attention(q, half.keys, half.values, { causal: true }); // shape [1, 4, 1, 4]
 */
/** k or v as cacheAppend reads it: float rows, with the strides of their batch, position and head axes. */
export interface AppendSource {
  data: Float32Array;
  strides: readonly [batch: number, position: number, head: number];
}

/** A dense k or v of n positions, [batch, n, kvHeads, dim] ('bshd') or [batch, kvHeads, n, dim]. */
function sourceView(data: Float32Array, { n, bshd }: { n: number; bshd: boolean }, kvHeads: number, dim: number): AppendSource {
  return { data, strides: bshd ? [n * kvHeads * dim, kvHeads * dim, dim] : [kvHeads * n * dim, dim, n * dim] };
}

let storageOf: (cache: KVCache<KVCacheDtype>) => { keys: Float32Array | Uint16Array; values: Float32Array | Uint16Array; lengths: Int32Array };

/**
 * cacheAppend's native arguments (native/ops/cache_append_op.h): n positions
 * of k and v, entry b's last counts[b] of them, written at its length. For
 * KVCache.append and for a block's decoder, which appends as a stage of its
 * own native sequence; the caller has checked the room, and the addon checks
 * every index again.
 */
export function cacheAppendArgs(
  cache: KVCache<KVCacheDtype>,
  k: AppendSource,
  v: AppendSource,
  n: number,
  counts: Int32Array,
  stage?: number,
): unknown[] {
  const s = storageOf(cache);
  const d = new Descriptor('cacheAppend', stage).number('batch', cache.batch).number('kvHeads', cache.kvHeads)
    .number('maxLength', cache.maxLength).number('n', n).number('headDim', cache.headDim).number('valueDim', cache.valueDim);
  for (const [name, t] of [['k', k], ['v', v]] as const) t.strides.forEach((x, a) => d.number(`${name}.strides[${a}]`, x));
  d.flag('bf16', cache.dtype === 'bf16');
  return [k.data, v.data, s.keys, s.values, s.lengths, counts, d.done()];
}

/** Advances each entry's length by counts[b], once its positions are written (or queued to be, first). */
export function advance(cache: KVCache<KVCacheDtype>, counts: Int32Array): void {
  const lengths = storageOf(cache).lengths;
  for (let b = 0; b < cache.batch; b++) lengths[b] += counts[b];
}

/** The cache's storage, for a block's decoder stages: its keys' and values' arrays, whole, and its lengths. */
export function cacheStorage(cache: KVCache<KVCacheDtype>): { keys: Float32Array | Uint16Array; values: Float32Array | Uint16Array; lengths: Int32Array } {
  return storageOf(cache);
}

export class KVCache<D extends KVCacheDtype = 'float32'> {
  static {
    storageOf = (cache) => ({ keys: cache.#keys, values: cache.#values, lengths: cache.#lengths });
  }

  readonly batch: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly valueDim: number;
  readonly maxLength: number;
  readonly dtype: D;
  /** Positions held per batch entry. */
  readonly #lengths: Int32Array;
  readonly #keys: Float32Array | Uint16Array;
  readonly #values: Float32Array | Uint16Array;

  constructor(options: KVCacheOptions & { dtype?: D }) {
    const fn = 'KVCache';
    const o = checkObject(fn, 'options', options, CACHE_KNOWN) as Partial<KVCacheOptions>;
    this.batch = positiveInteger(fn, 'options.batch', o.batch);
    this.kvHeads = positiveInteger(fn, 'options.kvHeads', o.kvHeads);
    this.headDim = positiveInteger(fn, 'options.headDim', o.headDim);
    this.maxLength = positiveInteger(fn, 'options.maxLength', o.maxLength);
    this.valueDim = optPositiveInteger(fn, 'options.valueDim', o.valueDim) ?? this.headDim;
    this.dtype = (optEnum(fn, 'options.dtype', o.dtype, ['float32', 'bf16'] as const) ?? 'float32') as D;
    const rows = this.batch * this.kvHeads * this.maxLength;
    const keyCount = rows * this.headDim, valueCount = rows * this.valueDim;
    // checkAllocation counts floats: a bf16 value is half of one.
    const perValue = this.dtype === 'bf16' ? 0.5 : 1;
    checkAllocation(fn, [
      ['the keys', keyCount * perValue],
      ['the values', valueCount * perValue],
    ]);
    const allocate = this.dtype === 'bf16' ? allocateBf16 : allocateFloats;
    this.#keys = allocate(fn, 'the keys', keyCount);
    this.#values = allocate(fn, 'the values', valueCount);
    this.#lengths = new Int32Array(this.batch);
  }

  /** Positions held: the longest entry's (all entries have it unless appends were ragged). */
  get length(): number {
    let n = 0;
    for (const l of this.#lengths) n = Math.max(n, l);
    return n;
  }

  /** Positions held by each batch entry, a copy: attention's `keyLengths` for this cache's views. */
  get lengths(): Int32Array {
    return this.#lengths.slice();
  }

  /**
   * The keys of the positions held: [batch, kvHeads, length, headDim], a view
   * of the storage (a {@link Bf16StridedTensor} when dtype is `'bf16'`).
   */
  get keys(): KVCacheView<D> {
    return this.#view(this.#keys, this.headDim) as KVCacheView<D>;
  }

  /** The values of the positions held: [batch, kvHeads, length, valueDim], a view of the storage. */
  get values(): KVCacheView<D> {
    return this.#view(this.#values, this.valueDim) as KVCacheView<D>;
  }

  /**
   * Copies n new positions of k and v (float32) in at each entry's length,
   * rounding them to bf16 in a bf16 cache, then advances it by n (or, with
   * `lengths`, entry b's by lengths[b]).
   * Past maxLength it throws a RangeError and writes nothing.
   * @throws TypeError for a wrong kind of argument, RangeError for shapes that do not fit the cache.
   */
  append(k: TensorLike, v: TensorLike, options?: KVCacheAppendOptions): void {
    const fn = 'KVCache.append';
    const opts = checkOptions<KVCacheAppendOptions>(fn, options, APPEND_KNOWN);
    const layout = optEnum(fn, 'options.layout', opts.layout, ['bhsd', 'bshd'] as const);
    const tk = checkTensor(fn, 'k', k);
    const tv = checkTensor(fn, 'v', v);
    const kn = this.#positions(fn, 'k', tk, this.headDim, 'headDim', layout);
    const vn = this.#positions(fn, 'v', tv, this.valueDim, 'valueDim', layout);
    if (vn.n !== kn.n) throw rangeError(fn, `v must hold as many positions as k (${kn.n}), received ${vn.n}`);
    const n = kn.n;
    const counts =
      opts.lengths === undefined
        ? new Int32Array(this.batch).fill(n)
        : checkLengthList(fn, 'options.lengths', opts.lengths, this.batch, 'batch', n, 'n (the positions appended)');
    // The native copy refuses overlapping buffers: refused here first, under the caller's names.
    for (const [name, t] of [['k', tk], ['v', tv]] as const) {
      checkNoAlias(fn, "the cache's keys", this.#keys, name, t.data);
      checkNoAlias(fn, "the cache's values", this.#values, name, t.data);
    }
    for (let b = 0; b < this.batch; b++) {
      if (this.#lengths[b] + counts[b] > this.maxLength) {
        const held = this.batch > 1 ? `batch entry ${b}'s ${this.#lengths[b]}` : `${this.#lengths[b]}`;
        throw rangeError(fn, `appending ${counts[b]} positions to ${held} would pass maxLength = ${this.maxLength}`);
      }
    }
    native.cacheAppend(...cacheAppendArgs(this, sourceView(tk.data, kn, this.kvHeads, this.headDim), sourceView(tv.data, vn, this.kvHeads, this.valueDim), n, counts));
    advance(this, counts);
  }

  /** Drops the positions from n on in every entry (speculative decoding's rejected tokens); n ≤ length. */
  truncate(n: number): void {
    const fn = 'KVCache.truncate';
    if (typeof n !== 'number') throw typeError(fn, 'n', 'a number', n);
    const length = this.length;
    if (!Number.isSafeInteger(n) || n < 0 || n > length) {
      throw rangeError(fn, `n must be an integer in [0, length = ${length}], received ${n}`);
    }
    for (let b = 0; b < this.batch; b++) this.#lengths[b] = Math.min(this.#lengths[b], n);
  }

  /** Empties the cache (the storage is kept). */
  reset(): void {
    this.#lengths.fill(0);
  }

  #view(storage: Float32Array | Uint16Array, dim: number): StridedTensor | Bf16StridedTensor {
    const L = this.length, rowStride = this.maxLength * dim;
    const span = L === 0 ? 0 : (this.batch * this.kvHeads - 1) * rowStride + L * dim;
    const shape = [this.batch, this.kvHeads, L, dim], strides = [this.kvHeads * rowStride, rowStride, dim, 1];
    if (storage instanceof Uint16Array) return { data: storage.subarray(0, span), shape, strides, dtype: 'bf16' };
    return { data: storage.subarray(0, span), shape, strides };
  }

  /** The positions n in a checked k or v, and whether they are token-major. */
  #positions(
    fn: string,
    arg: string,
    t: CheckedTensor,
    dim: number,
    dimName: string,
    layout: 'bhsd' | 'bshd' | undefined,
  ): { n: number; bshd: boolean } {
    let shape = t.shape;
    if (shape.length === 3) {
      if (layout === 'bhsd') throw rangeError(fn, `3-D ${arg} is [batch, n, kvHeads·${dimName}] ('bshd'), received options.layout = 'bhsd'`);
      shape = splitHeads(fn, arg, t, this.kvHeads, `the cache's kvHeads`);
      layout = 'bshd';
    } else if (shape.length !== 4) {
      throw rangeError(fn, `${arg} must have 4 dims (or 3), received shape ${formatShape(shape)}`);
    }
    const bshd = layout === 'bshd';
    const expected = bshd ? [this.batch, shape[1], this.kvHeads, dim] : [this.batch, this.kvHeads, shape[2], dim];
    if (shape.some((d, i) => d !== expected[i])) {
      const what = bshd ? `[batch, n, kvHeads, ${dimName}]` : `[batch, kvHeads, n, ${dimName}]`;
      const want = bshd ? `[${this.batch}, n, ${this.kvHeads}, ${dim}]` : `[${this.batch}, ${this.kvHeads}, n, ${dim}]`;
      throw rangeError(fn, `${arg} must have shape ${what} = ${want} for this cache, received ${formatShape(shape)}`);
    }
    return { n: bshd ? shape[1] : shape[2], bshd };
  }
}
