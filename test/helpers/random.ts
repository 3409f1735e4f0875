/**
 * Seeded randomness and comparison helpers for the randomized tests.
 *
 * Every test file picks one seed with {@link pickSeed} (MHSA_TEST_SEED when set,
 * else a fresh random one) and puts it in its describe() title; every failed
 * comparison throws an Error whose message carries the seed and the case, so a
 * failure can be replayed with `MHSA_TEST_SEED=<seed> npx jest test/<file>`.
 */
import { randomInt } from 'node:crypto';
import { rng } from '../../benchmarks/cli/data';

/** A PRNG returning floats in [0, 1). */
export type Rng = () => number;

/** mulberry32, the same seeded generator the benchmarks draw their data from. */
export const makeRng: (seed: number) => Rng = rng;

/** FNV-1a hash of a string, to derive an independent stream per test from one seed. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A PRNG for one named test: the same (seed, label) always gives the same stream, whatever the test order. */
export function rngFor(seed: number, label: string): Rng {
  return makeRng((seed ^ hashString(label)) >>> 0);
}

/** The seed of this run: MHSA_TEST_SEED if set (decimal or 0x hex), else a fresh random 32-bit value. */
export function pickSeed(): number {
  const env = process.env.MHSA_TEST_SEED;
  if (env !== undefined && env.trim() !== '') {
    const v = Number(env.trim());
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw new Error(`MHSA_TEST_SEED must be an integer in [0, 2^32), received '${env}'`);
    }
    return v >>> 0;
  }
  return randomInt(0, 0xffffffff) >>> 0;
}

/** n float32 values uniform in [-1, 1). */
export function randomFloat32(rng: Rng, n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = rng() * 2 - 1;
  return a;
}

/** A random integer in [lo, hi]. */
export function randInt(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** A random element of a list. */
export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)];
}

/** The awkward sizes the randomized tests draw from (tails for every SIMD width, a prime, 1). */
export const SIZES = [1, 3, 17, 63, 65, 197] as const;

/** A Float32Array of n NaNs: an `out` buffer whose every element must be written. */
export function poisoned(n: number): Float32Array {
  return new Float32Array(n).fill(NaN);
}

/** ‖out − ref‖ and ‖ref‖ in float64 (NaN anywhere gives NaN). */
function norms(out: ArrayLike<number>, ref: ArrayLike<number>): { diff: number; ref: number } {
  if (out.length !== ref.length) throw new Error(`relErr: length ${out.length} vs reference length ${ref.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return { diff: Math.sqrt(num), ref: Math.sqrt(den) };
}

/** ||out − ref|| / ||ref|| in float64; ||out − ref|| when ||ref|| is 0. NaN anywhere gives NaN. */
export function relErr(out: ArrayLike<number>, ref: ArrayLike<number>): number {
  const n = norms(out, ref);
  return n.ref === 0 ? n.diff : n.diff / n.ref;
}

/**
 * The scale a dot-product result's rounding error is bounded against (Higham: |fl(x·y) − x·y| ≤ γ_K Σ|x_k y_k|):
 * ‖|alpha|·|A|·|B| + |beta|·|C|‖, the norm of refMatmulMagnitude's result (reference.ts).
 * Normally ‖ref‖ is of that order; a single output element can cancel far below it.
 */
export function dotProductScale(absResult: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < absResult.length; i++) s += absResult[i] * absResult[i];
  return Math.sqrt(s);
}

function fmtShape(shape: readonly number[] | undefined): string {
  return shape ? `[${shape.join(', ')}]` : '';
}

/** Index and values of the first element that differs most from the reference (for error messages). */
function worst(out: ArrayLike<number>, ref: ArrayLike<number>): string {
  let bi = -1;
  let bd = -1;
  for (let i = 0; i < Math.min(out.length, ref.length); i++) {
    const d = Number.isNaN(out[i]) ? Infinity : Math.abs(out[i] - ref[i]);
    if (d > bd) {
      bd = d;
      bi = i;
    }
  }
  return bi < 0 ? 'no elements' : `worst at flat index ${bi}: received ${out[bi]}, expected ${ref[bi]}`;
}

/**
 * Throws (with the seed and the case in the message) unless out matches ref:
 * same length, no NaN, and relErr(out, ref) ≤ tol.
 *
 * `context.scale`, when given, is a floor for the denominator ‖ref‖: the size of the terms the
 * result was summed from (see {@link dotProductScale}). Without it a result that cancels to almost
 * nothing would demand more than fp32 summation can give.
 */
export function expectClose(
  out: ArrayLike<number>,
  ref: ArrayLike<number>,
  tol: number,
  context: { seed: number; label: string; shape?: readonly number[]; scale?: number; [k: string]: unknown },
): void {
  const where = `[seed ${context.seed} — replay with MHSA_TEST_SEED=${context.seed}] ${context.label} ${fmtShape(context.shape)}`;
  if (out.length !== ref.length) {
    throw new Error(`${where}: result has ${out.length} elements, reference ${ref.length}`);
  }
  for (let i = 0; i < out.length; i++) {
    if (Number.isNaN(out[i]) && !Number.isNaN(ref[i])) {
      throw new Error(`${where}: NaN at flat index ${i} (expected ${ref[i]})`);
    }
  }
  const n = norms(out, ref);
  const den = Math.max(n.ref, context.scale ?? 0);
  const err = den === 0 ? n.diff : n.diff / den;
  if (!(err <= tol)) {
    throw new Error(`${where}: relErr ${err.toExponential(3)} > ${tol}; ${worst(out, ref)}`);
  }
}

/** Throws (with the seed and the case) unless the shapes are equal. */
export function expectShape(
  shape: readonly number[],
  want: readonly number[],
  context: { seed: number; label: string },
): void {
  if (shape.length !== want.length || shape.some((d, i) => d !== want[i])) {
    throw new Error(`[seed ${context.seed}] ${context.label}: shape ${fmtShape(shape)}, expected ${fmtShape(want)}`);
  }
}

/** Throws unless the two float32 arrays are bit-for-bit identical. */
export function expectBitEqual(
  got: Float32Array,
  want: Float32Array,
  context: { seed: number; label: string },
): void {
  const g = Buffer.from(got.buffer, got.byteOffset, got.byteLength);
  const w = Buffer.from(want.buffer, want.byteOffset, want.byteLength);
  if (!g.equals(w)) {
    let i = 0;
    while (i < got.length && Object.is(got[i], want[i])) i++;
    throw new Error(
      `[seed ${context.seed}] ${context.label}: async result differs from sync` +
        (i < got.length ? ` at ${i}: ${got[i]} vs ${want[i]}` : ` (lengths ${got.length} vs ${want.length})`),
    );
  }
}

/**
 * A copy of src placed at a random offset inside a larger buffer whose other
 * elements are `guard` (NaN by default): a kernel that reads outside the view
 * then produces NaN, and the view has a nonzero byteOffset.
 */
export function guardedCopy(rng: Rng, src: ArrayLike<number>, guard = NaN): Float32Array {
  const before = randInt(rng, 0, 7);
  const after = randInt(rng, 0, 7);
  const buf = new Float32Array(before + src.length + after).fill(guard);
  buf.set(src, before);
  return buf.subarray(before, before + src.length);
}

/** Sentinel written around guarded outputs; any other value there means an out-of-bounds write. */
export const GUARD_SENTINEL = 1234.5;

/** A NaN-poisoned output view of n elements inside a buffer whose other elements are GUARD_SENTINEL. */
export function guardedOut(rng: Rng, n: number): Float32Array {
  const before = randInt(rng, 1, 7);
  const after = randInt(rng, 1, 7);
  const buf = new Float32Array(before + n + after).fill(GUARD_SENTINEL);
  buf.fill(NaN, before, before + n);
  return buf.subarray(before, before + n);
}

/** Throws unless every element of view's buffer outside the view still holds GUARD_SENTINEL. */
export function expectGuardsIntact(view: Float32Array, context: { seed: number; label: string }): void {
  const all = new Float32Array(view.buffer);
  const start = view.byteOffset / 4;
  const end = start + view.length;
  for (let i = 0; i < all.length; i++) {
    if ((i < start || i >= end) && all[i] !== GUARD_SENTINEL) {
      throw new Error(
        `[seed ${context.seed}] ${context.label}: write outside out at buffer index ${i} ` +
          `(out covers ${start}..${end - 1}): found ${all[i]}`,
      );
    }
  }
}
