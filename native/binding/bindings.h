// The native entry points, one file per op family. Tensors arrive as typed
// arrays; shapes, flags and scalars packed in one Float64Array descriptor
// (see lib/native.ts, which builds it). When the last argument is a function
// the op runs asynchronously and calls it with (error | null).
#pragma once

#include <napi.h>

namespace mhsa {

// matmul(a, b, c|null, out, desc, callback?)
// desc: a.shape, b.shape, c.shape (rank 0 when no c), out.shape (each as rank, dims...),
//       transposeA, transposeB, alpha, beta, bPacked
Napi::Value matmulBinding(const Napi::CallbackInfo& info);

// layerNormMatmul(a, b, c|null, out, weight|null, bias|null, desc, callback?)
// desc: matmul's, then eps. matmul of a with its rows LayerNorm'd on the way
// into the product (the block's LayerNorm + QKV projection; ops/calls.h).
Napi::Value layerNormMatmulBinding(const Napi::CallbackInfo& info);

// packedSize(desc[b.shape]) -> floats a packed [K, N] matrix takes on this CPU.
// packMatrix(b, out, desc[b.shape, transpose]): out = op(b) packed for the GEMM.
Napi::Value packedSizeBinding(const Napi::CallbackInfo& info);
Napi::Value alignedOffsetBinding(const Napi::CallbackInfo& info);
Napi::Value packMatrixBinding(const Napi::CallbackInfo& info);

// softmax(x, out, desc, callback?)
// desc: x.shape, out.shape, scale
Napi::Value softmaxBinding(const Napi::CallbackInfo& info);

// attention(q, k, v, out, mask|null, keyPaddingMask|null, weights|null, desc, callback?)
// desc: layout (0 bhsd, 1 bshd, 2 bhds), q.shape, k.shape, v.shape, out.shape,
//       hasScale, scale, causal, mask.shape (rank 0 when no mask)
Napi::Value attentionBinding(const Napi::CallbackInfo& info);

// sequence(stages, callback?): stages is an array of [kind, ...arguments],
// kind 'matmul', 'layerNormMatmul', 'attention' or 'layerNorm' with that
// entry point's arguments (no callback). Every stage is checked, then all run
// in order as one call (one async job): the block's forward, with no return to
// JS between its stages (stages.h).
Napi::Value sequenceBinding(const Napi::CallbackInfo& info);

// layerNorm(x, out, weight|null, bias|null, desc, callback?)
// desc: x.shape, out.shape, eps. Normalizes over the last dim.
Napi::Value layerNormBinding(const Napi::CallbackInfo& info);

// rope(x, out, positions|null, desc, callback?): rotary position embedding
// (kernels/rope.h); desc: descriptor_layouts.h's MHSA_ROPE_FIELDS.
Napi::Value ropeBinding(const Napi::CallbackInfo& info);

// castBf16(src, out, desc, callback?): float rows rounded to bf16 (a bf16
// KV cache's append); desc: descriptor_layouts.h's MHSA_CAST_BF16_FIELDS.
Napi::Value castBf16Binding(const Napi::CallbackInfo& info);

// parseSafetensors(bytes: Uint8Array) -> { dataStart, entries: [name, dtype, shape, begin, end][],
//   metadata: [key, value][] } or { errorKind: 'TypeError' | 'RangeError', message }: the checked
//   header of a safetensors image (formats/safetensors.h). Errors come back as values so lib/ can
//   throw them in the caller's realm with the file's name.
// decodeHalf(bytes: Uint8Array, out: Float32Array, bf16: boolean): out = the little-endian F16
//   (or BF16) values in bytes, exactly.
Napi::Value parseSafetensorsBinding(const Napi::CallbackInfo& info);
Napi::Value decodeHalfBinding(const Napi::CallbackInfo& info);

// pooledResult(n) -> Float32Array | null: a result of n floats whose memory comes
// from the result pool and returns to it once V8 frees the buffer; null when
// the pool cannot serve it (too small, pool off or unavailable), and the
// caller allocates a plain array (runtime/result_pool.h).
// resultPool() -> { unavailable: string | null, minBytes, limitBytes, heldBytes,
//   heldBlocks, liveBytes, hits, misses }; setResultPoolLimit(bytes).
Napi::Value pooledResultBinding(const Napi::CallbackInfo& info);
Napi::Value resultPoolBinding(const Napi::CallbackInfo& info);
Napi::Value setResultPoolLimitBinding(const Napi::CallbackInfo& info);

}  // namespace mhsa
