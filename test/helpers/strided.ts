/** Dense copies of strided views (a KVCache's keys and values), for comparisons. */
import type { Tensor } from '../../lib';

/**
 * The elements of a 4-D strided view as a dense float32 [B, H, L, D] tensor;
 * `value` maps each stored element (a bf16 view's bits, say) to its number.
 */
export function denseCopy(
  view: { data: ArrayLike<number>; shape: readonly number[]; strides: readonly number[] },
  value: (stored: number) => number = (x) => x,
): Tensor {
  const [B, H, L, D] = view.shape;
  const out = new Float32Array(B * H * L * D);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0; t < L; t++)
        for (let d = 0; d < D; d++) {
          out[((b * H + h) * L + t) * D + d] = value(view.data[b * view.strides[0] + h * view.strides[1] + t * view.strides[2] + d]);
        }
  return { data: out, shape: [B, H, L, D] };
}
