// The native entry points besides the ops' own (op_table.h). Tensors arrive as
// typed arrays; shapes, flags and scalars packed in one Float64Array
// descriptor (see lib/native.ts, which builds it). When the last argument is a
// function the call runs asynchronously and calls it with (error | null).
#pragma once

#include <napi.h>

namespace mhsa {

// packedSize(desc) -> floats a packed [K, N] matrix takes on this CPU.
Napi::Value packedSizeBinding(const Napi::CallbackInfo& info);
Napi::Value alignedOffsetBinding(const Napi::CallbackInfo& info);

// sequence(stages, callback?): stages is an array of [kind, ...that op's
// arguments] (no callback), kind an op of op_table.h. Every stage is checked,
// then all run in order as one call (one async job): a block's forward, with
// no return to JS between its stages.
Napi::Value sequenceBinding(const Napi::CallbackInfo& info);

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
