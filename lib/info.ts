import * as fs from 'node:fs';
import * as path from 'node:path';
import { typeError, rangeError } from './errors';
import { native } from './native';
import { resultPoolInfo, type ResultPoolInfo } from './memory';
import { queueStats } from './queue';

/** What {@link info} reports. */
export interface MhsaInfo {
  /** The package version. */
  version: string;
  /**
   * The addon running: 'native' (a platform package or a build from source) or 'wasm32' (the
   * WebAssembly package, where no native one fits: one thread, async ops computed on the JS thread,
   * buffers copied in and out; docs/api.md#webassembly).
   */
  backend: 'native' | 'wasm32';
  /** SIMD path in use: 'avx512', 'avx2', 'portable', 'neon' (arm64) or 'wasm-simd128'. Lower it with MHSA_ISA. */
  isa: string;
  /**
   * Path of products against bf16 weights: 'amx' (AMX-BF16 tiles), 'avx512bf16'
   * (VDPBF16PS), or 'widen' (bf16 widened to float32 for the float kernels: the
   * memory saving without the speed). Lower it with MHSA_BF16=avx512bf16|widen.
   */
  bf16: string;
  /**
   * Kernels of products against int8 weights: 'avx512vnni' (VPDPBUSD),
   * 'avx2' (VPMADDUBSW), 'neon-dotprod' (arm64 SDOT), 'neon' or 'portable'.
   * Lower it with MHSA_ISA (x86).
   */
  int8: string;
  /** System BLAS linked at build time, or null for the built-in kernels. */
  blas: string | null;
  /** Compute threads in use (setNumThreads, MHSA_NUM_THREADS, or the logical CPU count). */
  threads: number;
  /**
   * Threads executing mhsa kernels right now: the pool's helpers, the thread
   * driving the pool (the async dispatcher, or a JS thread in a sync call),
   * and any JS thread computing a sync call alone because the pool was busy.
   */
  activeThreads: number;
  /**
   * The most {@link MhsaInfo.activeThreads} seen at once since the process
   * started or setNumThreads was last called. Async ops alone never exceed
   * `threads`; each JS thread making a sync call meanwhile adds itself.
   */
  peakActiveThreads: number;
  /**
   * Bytes of native scratch memory held for reuse (packed panels, score
   * tiles), summed over the compute threads. It grows to fit the largest
   * problem seen and is then reused: a warmed-up call allocates none.
   */
  scratchBytes: number;
  /** Async ops waiting in the package's queue. */
  queued: number;
  /** Async ops handed to the native dispatcher and not yet settled. */
  inFlight: number;
  /**
   * Whether an async op holds its buffers' memory until it settles, so that one transferred away
   * meanwhile (`postMessage`, `structuredClone` with `transfer`) is never freed under the kernel.
   * True when the addon was built with V8's headers, as `npm install` does wherever Node ships them
   * (Node 20 to 26 tested); false otherwise, and then such a transfer is unsafe.
   */
  pinsAsyncBuffers: boolean;
  /** The pool that results allocated without `out` come from ({@link setResultPoolLimit}). */
  resultPool: ResultPoolInfo;
}

function packageVersion(): string {
  // lib/ when run from source (ts-node, jest), dist/lib/ when compiled.
  for (const rel of ['../package.json', '../../package.json']) {
    const file = path.join(__dirname, rel);
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'mhsa' && pkg.version) return pkg.version;
    }
  }
  return 'unknown';
}

const VERSION = packageVersion();

/**
 * Versions and runtime settings.
 *
 * @example
 * console.log(info());
 * // { version: '0.1.0', backend: 'native', isa: 'avx512', bf16: 'amx', int8: 'avx512vnni', blas: null, threads: 2, activeThreads: 0,
 * //   peakActiveThreads: 2, scratchBytes: 3276800, queued: 0, inFlight: 0, pinsAsyncBuffers: true,
 * //   resultPool: { enabled: true, fallback: null, limitBytes: 268435456, heldBytes: 12582912,
 * //                 liveBytes: 0, hits: 41, misses: 3, countedFreeBytes: 12582912 } }
 */
export function info(): MhsaInfo {
  const n = native.info();
  return {
    version: VERSION,
    backend: n.backend,
    isa: n.isa,
    bf16: n.bf16,
    int8: n.int8,
    blas: n.blas,
    threads: n.threads,
    activeThreads: n.activeThreads,
    peakActiveThreads: n.peakActiveThreads,
    scratchBytes: n.scratchBytes,
    ...queueStats(),
    pinsAsyncBuffers: n.pinsAsyncBuffers,
    resultPool: resultPoolInfo(),
  };
}

/**
 * Sets the number of compute threads shared by every op (sync and async).
 * The default is MHSA_NUM_THREADS if set, else the logical CPU count (hyper-threads included). Also
 * resets {@link MhsaInfo.peakActiveThreads}.
 *
 * @example
 * setNumThreads(1); // run everything on one core
 * @throws TypeError if n is not a number, RangeError unless 1 ≤ n ≤ 1024 and integral.
 */
export function setNumThreads(n: number): void {
  if (typeof n !== 'number') throw typeError('setNumThreads', 'n', 'a number', n);
  if (!Number.isInteger(n) || n < 1 || n > 1024) {
    throw rangeError('setNumThreads', `n must be an integer from 1 to 1024, received ${n}`);
  }
  native.setNumThreads(n);
}

/** The number of compute threads in use. */
export function getNumThreads(): number {
  return native.info().threads;
}
