/** bf16 rounding in plain JS, the tests' reference for the addon's (PyTorch's rule). */

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** float32 → bf16 bits, round to nearest even; NaN as 0x7FC0. */
export function toBf16(x: number): number {
  scratch[0] = x;
  const u = scratchBits[0];
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bf16 bits → their float value (exact). */
export function fromBf16(h: number): number {
  scratchBits[0] = h << 16;
  return scratch[0];
}

/** Each value rounded to bf16 and widened back. */
export const rounded = (x: Float32Array): Float32Array => x.map((v) => fromBf16(toBf16(v)));

/** Each value's bf16 bits. */
export const bf16Bits = (x: Float32Array): Uint16Array => Uint16Array.from(x, toBf16);
