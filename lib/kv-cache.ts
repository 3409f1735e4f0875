import { formatShape, rangeError, typeError } from './errors';
import { allocateBf16, allocateBytes, allocateFloats, checkAllocation } from './memory';
import { Descriptor, native } from './native';
import {
  checkLengthList,
  checkNoAlias,
  checkTensor,
  splitHeads,
  type Bf16StridedTensor,
  type CheckedTensor,
  type Int8StridedTensor,
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
   * exactly as it reads them. `'int8'` quarters it: `append` quantizes each
   * position of each head symmetrically (its largest |value| maps to 127,
   * one float scale per row), `keys` and `values` are
   * {@link Int8StridedTensor} views with those scales, and attention reads the
   * int8 values, about 0.5 % from float32 (docs/design/int8.md). Default
   * `'float32'`.
   */
  dtype?: KVCacheDtype;
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

/** The view type of a cache's keys and values: float32, bf16 or int8 as its dtype says. */
export type KVCacheView<D extends KVCacheDtype> = D extends 'bf16' ? Bf16StridedTensor : D extends 'int8' ? Int8StridedTensor : StridedTensor;

/** How a {@link KVCache} stores keys and values. */
export type KVCacheDtype = 'float32' | 'bf16' | 'int8';

/** A cache's storage: its keys' and values' arrays, whole, their row scales (int8), and its lengths. */
export interface CacheStorage {
  keys: Float32Array | Uint16Array | Int8Array;
  values: Float32Array | Uint16Array | Int8Array;
  /** [batch, kvHeads, maxLength] each, in an int8 cache. */
  keyScales?: Float32Array;
  valueScales?: Float32Array;
  lengths: Int32Array;
}

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
 *
 * // int8 storage: a quarter, with a scale per position and head
 * const quarter = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 16, dtype: 'int8' });
 * quarter.append(step, step);
 * attention(q, quarter.keys, quarter.values, { causal: true }); // shape [1, 4, 1, 4]
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

let storageOf: (cache: KVCache<KVCacheDtype>) => CacheStorage;

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
  d.flag('bf16', cache.dtype === 'bf16').flag('int8', cache.dtype === 'int8');
  return [k.data, v.data, s.keys, s.values, s.lengths, counts, s.keyScales ?? null, s.valueScales ?? null, d.done()];
}

/** Advances each entry's length by counts[b], once its positions are written (or queued to be, first). */
export function advance(cache: KVCache<KVCacheDtype>, counts: Int32Array): void {
  const lengths = storageOf(cache).lengths;
  for (let b = 0; b < cache.batch; b++) lengths[b] += counts[b];
}

/** The cache's storage, for a block's decoder stages. */
export function cacheStorage(cache: KVCache<KVCacheDtype>): CacheStorage {
  return storageOf(cache);
}

/** The written arrays of a cache's storage, named for async errors (lib/queue.ts). */
export function cacheBuffers(storage: CacheStorage): Array<[string, ArrayBufferView, true]> {
  const named: Array<[string, ArrayBufferView, true]> = [["the cache's keys", storage.keys, true], ["the cache's values", storage.values, true]];
  if (storage.keyScales) named.push(["the cache's key scales", storage.keyScales, true]);
  if (storage.valueScales) named.push(["the cache's value scales", storage.valueScales, true]);
  return named;
}

/**
 * The first `keys` positions of a cache's keys or values (storage
 * [batch, kvHeads, maxLength, dim], with its row scales when int8), as a
 * view in `layout`: 'bhsd' [batch, kvHeads, keys, dim] or 'bshd' [batch, keys, kvHeads, dim].
 */
export function cacheView(
  cache: KVCache<KVCacheDtype>,
  storage: Float32Array | Uint16Array | Int8Array,
  scales: Float32Array | undefined,
  dim: number,
  keys: number,
  layout: 'bhsd' | 'bshd',
): StridedTensor | Bf16StridedTensor | Int8StridedTensor {
  const { batch, kvHeads, maxLength } = cache;
  const rowStride = maxLength * dim;
  const span = keys === 0 ? 0 : (batch * kvHeads - 1) * rowStride + keys * dim;
  const shape = layout === 'bshd' ? [batch, keys, kvHeads, dim] : [batch, kvHeads, keys, dim];
  const strides = layout === 'bshd' ? [kvHeads * rowStride, dim, rowStride, 1] : [kvHeads * rowStride, rowStride, dim, 1];
  if (storage instanceof Uint16Array) return { data: storage.subarray(0, span), shape, strides, dtype: 'bf16' };
  if (storage instanceof Int8Array) return { data: storage.subarray(0, span), scales: scales!, shape, strides, dtype: 'int8' };
  return { data: storage.subarray(0, span), shape, strides };
}

export class KVCache<D extends KVCacheDtype = 'float32'> {
  static {
    storageOf = (cache) => ({
      keys: cache.#keys,
      values: cache.#values,
      keyScales: cache.#keyScales,
      valueScales: cache.#valueScales,
      lengths: cache.#lengths,
    });
  }

  readonly batch: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly valueDim: number;
  readonly maxLength: number;
  readonly dtype: D;
  /** Positions held per batch entry. */
  readonly #lengths: Int32Array;
  readonly #keys: Float32Array | Uint16Array | Int8Array;
  readonly #values: Float32Array | Uint16Array | Int8Array;
  /** One scale per row [batch, kvHeads, maxLength], in an int8 cache. */
  readonly #keyScales?: Float32Array;
  readonly #valueScales?: Float32Array;

  constructor(options: KVCacheOptions & { dtype?: D }) {
    const fn = 'KVCache';
    const o = checkObject(fn, 'options', options, CACHE_KNOWN) as Partial<KVCacheOptions>;
    this.batch = positiveInteger(fn, 'options.batch', o.batch);
    this.kvHeads = positiveInteger(fn, 'options.kvHeads', o.kvHeads);
    this.headDim = positiveInteger(fn, 'options.headDim', o.headDim);
    this.maxLength = positiveInteger(fn, 'options.maxLength', o.maxLength);
    this.valueDim = optPositiveInteger(fn, 'options.valueDim', o.valueDim) ?? this.headDim;
    this.dtype = (optEnum(fn, 'options.dtype', o.dtype, ['float32', 'bf16', 'int8'] as const) ?? 'float32') as D;
    const rows = this.batch * this.kvHeads * this.maxLength;
    const keyCount = rows * this.headDim, valueCount = rows * this.valueDim;
    const int8 = this.dtype === 'int8';
    // checkAllocation counts floats: a bf16 value is half of one, an int8 value a quarter.
    const perValue = this.dtype === 'bf16' ? 0.5 : int8 ? 0.25 : 1;
    checkAllocation(fn, [
      ['the keys', keyCount * perValue],
      ['the values', valueCount * perValue],
      ['the row scales', int8 ? 2 * rows : 0],
    ]);
    const allocate = this.dtype === 'bf16' ? allocateBf16 : int8 ? allocateBytes : allocateFloats;
    this.#keys = allocate(fn, 'the keys', keyCount);
    this.#values = allocate(fn, 'the values', valueCount);
    if (int8) {
      this.#keyScales = allocateFloats(fn, "the keys' scales", rows);
      this.#valueScales = allocateFloats(fn, "the values' scales", rows);
    }
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
   * of the storage (a {@link Bf16StridedTensor} when dtype is `'bf16'`, an
   * {@link Int8StridedTensor} with the rows' scales when it is `'int8'`).
   */
  get keys(): KVCacheView<D> {
    return cacheView(this, this.#keys, this.#keyScales, this.headDim, this.length, 'bhsd') as KVCacheView<D>;
  }

  /** The values of the positions held: [batch, kvHeads, length, valueDim], a view of the storage. */
  get values(): KVCacheView<D> {
    return cacheView(this, this.#values, this.#valueScales, this.valueDim, this.length, 'bhsd') as KVCacheView<D>;
  }

  /**
   * Copies n new positions of k and v (float32) in at each entry's length,
   * rounding them to bf16 in a bf16 cache and quantizing each row in an int8
   * one, then advances it by n (or, with
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
      for (const [what, storage] of cacheBuffers(storageOf(this))) checkNoAlias(fn, what, storage, name, t.data);
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
