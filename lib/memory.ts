/**
 * The allocation limit: every buffer the package allocates for a call (a
 * result without `out`, returned weights, a block's workspace, a packed
 * matrix) is checked against it first, so an oversized request is a
 * RangeError before anything is allocated, instead of an out-of-memory kill
 * of the whole process (Linux overcommits, then kills on first touch).
 */
import { Buffer, constants as bufferConstants } from 'node:buffer';
import * as os from 'node:os';
import { rangeError, typeError } from './errors';
import { native } from './native';
import { positiveInteger } from './validate';

const GiB = 2 ** 30;

function defaultLimit(): number {
  const env = process.env.MHSA_MAX_ALLOC_BYTES;
  if (env !== undefined && /^\d+$/.test(env) && Number(env) > 0) return Number(env);
  // Half the machine's memory, at most 16 GiB (the largest Float32Array).
  return Math.min(Math.floor(os.totalmem() / 2), 16 * GiB);
}

let limitBytes = defaultLimit();

function formatBytes(n: number): string {
  if (n >= GiB) return `${(n / GiB).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${n} bytes`;
}

/**
 * Sets the most bytes one call may allocate (results, returned weights,
 * workspaces). The default is half the machine's memory, at most 16 GiB, or
 * the environment variable MHSA_MAX_ALLOC_BYTES. Buffers you pass as `out`
 * do not count.
 *
 * @example
 * setAllocationLimit(256 * 2 ** 20); // a service answering untrusted requests: 256 MiB per call
 * @throws TypeError if bytes is not a number, RangeError unless it is a positive integer.
 */
export function setAllocationLimit(bytes: number): void {
  limitBytes = positiveInteger('setAllocationLimit', 'bytes', bytes);
}

/** The current per-call allocation limit in bytes (see {@link setAllocationLimit}). */
export function getAllocationLimit(): number {
  return limitBytes;
}

/** Whether this many floats, allocated by one call, fit the allocation limit. */
export function fitsAllocationLimit(floats: number): boolean {
  return floats * 4 <= limitBytes;
}

/**
 * RangeError unless the float buffers listed, together, fit the allocation
 * limit. Call it once per call with everything that call will allocate.
 */
export function checkAllocation(fn: string, buffers: ReadonlyArray<readonly [what: string, floats: number]>): void {
  const floats = buffers.reduce((sum, [, n]) => sum + n, 0);
  if (fitsAllocationLimit(floats)) return;
  const total = floats * 4;
  const parts = buffers
    .filter(([, floats]) => floats > 0)
    .map(([what, floats]) => `${what} ${formatBytes(floats * 4)}`)
    .join(' + ');
  throw rangeError(
    fn,
    `this call would allocate ${formatBytes(total)} (${parts}), more than the allocation limit of ` +
      `${formatBytes(limitBytes)}; pass preallocated buffers as out, or raise it with setAllocationLimit / MHSA_MAX_ALLOC_BYTES`,
  );
}

/** An array of n floats' bytes from make(), within the limit; allocation failure is a RangeError naming fn. */
function allocate<T>(fn: string, what: string, n: number, make: () => T): T {
  checkAllocation(fn, [[what, n]]);
  try {
    return make();
  } catch (e) {
    throw rangeError(fn, `could not allocate ${what} (${formatBytes(n * 4)}): ${(e as Error).message}`);
  }
}

/** A new zeroed Uint16Array of n bf16 values, within the limit; allocation failure is a RangeError naming fn. */
export function allocateBf16(fn: string, what: string, n: number): Uint16Array {
  return allocate(fn, what, n / 2, () => new Uint16Array(n));
}

/** A new zeroed Int8Array of n bytes, within the limit; allocation failure is a RangeError naming fn. */
export function allocateBytes(fn: string, what: string, n: number): Int8Array {
  return allocate(fn, what, n / 4, () => new Int8Array(n));
}

/** A new zeroed Float32Array of n elements, within the limit; allocation failure is a RangeError naming fn. */
export function allocateFloats(fn: string, what: string, n: number): Float32Array {
  return allocate(fn, what, n, () => new Float32Array(n));
}

/**
 * A new Float32Array of n elements for a result that the op then writes in
 * full, within the limit: from the result pool when it serves this size
 * ({@link setResultPoolLimit}), else a plain allocation. Its memory is not zeroed first: `new Float32Array(n)`
 * zeroes reused memory with a memset that, for a softmax over 6144 x 512, cost
 * as much as the softmax. Every op writes every element of its result (the
 * tests poison `out` with NaN to check it), so no stale byte stays visible.
 * Beyond Buffer's largest size it falls back to a zeroed array.
 */
export function allocateResultFloats(fn: string, what: string, n: number): Float32Array {
  if (n * 4 > bufferConstants.MAX_LENGTH) return allocateFloats(fn, what, n);
  if (n * 4 >= poolMinBytes && fitsAllocationLimit(n)) {
    const pooled = native.pooledResult(n);
    if (pooled !== null) return pooled;
  }
  return allocate(fn, what, n, () => {
    const bytes = Buffer.allocUnsafeSlow(n * 4);
    return new Float32Array(bytes.buffer, bytes.byteOffset, n);
  });
}

// The result pool (native/runtime/result_pool.h, docs/design/result-pool.md): one per process,
// shared by every worker thread; its limit starts at MHSA_RESULT_POOL_BYTES, read natively once.
const poolMinBytes = native.resultPool().minBytes;

/**
 * Sets the most bytes of free memory the result pool keeps. A result that an
 * op allocates (no `out`) of 64 KiB or more comes from the pool: memory that
 * an earlier, collected result used, already faulted in, instead of fresh
 * pages the OS must map and zero on first write. The pool is shared by every
 * thread of the process (the last call sets it for all) and never holds more
 * than this limit, which may not exceed the caller's allocation limit. Results
 * still in use do not count: they are ordinary ArrayBuffers to JS, each
 * checked against the allocation limit. 0 turns the pool off; the default is
 * MHSA_RESULT_POOL_BYTES, else 256 MiB.
 *
 * @example
 * setResultPoolLimit(64 * 2 ** 20); // keep at most 64 MiB of free result memory
 * @throws TypeError if bytes is not a number, RangeError unless it is an integer from 0 to the allocation limit.
 */
export function setResultPoolLimit(bytes: number): void {
  const fn = 'setResultPoolLimit';
  if (typeof bytes !== 'number') throw typeError(fn, 'bytes', 'a number', bytes);
  if (!Number.isInteger(bytes) || bytes < 0 || bytes > limitBytes) {
    throw rangeError(fn, `bytes must be an integer from 0 to the allocation limit (${limitBytes}), received ${bytes}`);
  }
  native.setResultPoolLimit(bytes);
}

/** What {@link info} reports of the result pool (see {@link setResultPoolLimit}). */
export interface ResultPoolInfo {
  /** Whether results come from the pool: false when its limit is 0 or the runtime cannot use it (see `fallback`). */
  enabled: boolean;
  /** Why results are plain allocations in this process (no V8 module for this Node; a V8 sandbox, as in Electron), or null. */
  fallback: string | null;
  /** The most bytes of free memory the pool keeps. */
  limitBytes: number;
  /** Bytes of free memory it keeps now. */
  heldBytes: number;
  /** Bytes of pool memory under results that are not collected yet. */
  liveBytes: number;
  /** Results served from memory the pool kept. */
  hits: number;
  /** Results that needed new memory. */
  misses: number;
  /**
   * Bytes of the pool's free memory that this thread has added to V8's count of external memory
   * (the count that starts collections as it grows), at most `heldBytes` as of this thread's last
   * pooled result. With it, reusing a kept block of the same size is not new memory to V8's collector.
   */
  countedFreeBytes: number;
}

export function resultPoolInfo(): ResultPoolInfo {
  const p = native.resultPool();
  return {
    enabled: p.unavailable === null && p.limitBytes > 0,
    fallback: p.unavailable,
    limitBytes: p.limitBytes,
    heldBytes: p.heldBytes,
    liveBytes: p.liveBytes,
    hits: p.hits,
    misses: p.misses,
    countedFreeBytes: p.countedFreeBytes,
  };
}
