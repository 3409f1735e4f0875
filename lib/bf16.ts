/** Widening a bf16 tensor kept from a checkpoint to float32, in native code (exact: a shift of each value's bits). */
import { native } from './native';
import type { Bf16Tensor, Tensor } from './tensor';

export function widenBf16(t: { data: Uint16Array; shape: readonly number[] } | Bf16Tensor): Tensor {
  const data = new Float32Array(t.data.length);
  native.decodeHalf(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), data, true);
  return { data, shape: [...t.shape] };
}
