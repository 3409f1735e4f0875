// The two things Node-API cannot do, done with V8's API (docs/design/prebuilds.md):
// holding a buffer's memory while an async job computes on it, and handing
// out an ArrayBuffer whose memory goes back to the result pool when V8 frees
// it (docs/design/result-pool.md).
//
// A reference keeps a typed array's JS object alive, not its memory: JS can
// detach the ArrayBuffer while a job is queued or computing
// (structuredClone(buf, { transfer: [buf] }), postMessage), and once the
// buffer it went to is collected the memory is freed under the native code.
// V8's BackingStore has a shared owner that keeps the bytes allocated until
// the job lets go, whether or not a buffer still points at them.
//
// V8's C++ API ties a binary to one Node ABI, so the addon reaches it through
// this plain C table: linked in when the addon is built against Node's own
// headers (MHSA_LINKED_BUFFER_PINNING), or given at load time by a small
// module built once per Node ABI (the prebuilt packages' buffer-pinning-node<ABI>.node).
#pragma once

#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {

enum MhsaHoldResult { kMhsaHeld = 0, kMhsaNothingToHold = 1, kMhsaResizable = 2, kMhsaOutOfMemory = 3 };

enum MhsaNewBufferResult {
  kMhsaCreated = 0,
  kMhsaExternalNotAllowed = 1,
  kMhsaNotCreated = 2,        // memory is still the caller's
  kMhsaNotCreatedFreed = 3,   // failed after V8 took memory: free_memory has already been called
};

typedef void (*MhsaFreeMemory)(void* memory, size_t bytes, void* hint);

struct MhsaBufferPinning {
  // Holds the memory under value (a typed array, DataView or ArrayBuffer)
  // until release(*handle). Nothing to hold when value owns no detachable
  // memory (not a buffer, or a SharedArrayBuffer). A buffer that JS can
  // shrink is refused: shrinking gives pages back, held or not. No C++
  // exception crosses this table: the two sides may have separate runtimes.
  MhsaHoldResult (*hold)(napi_value value, void** handle);
  void (*release)(void* handle);
  // *result = a new ArrayBuffer of `bytes` over `memory`. Once no ArrayBuffer
  // and no hold uses the memory, V8 calls free_memory(memory, bytes, hint),
  // on any thread, even after the environment that made it has ended.
  // kMhsaExternalNotAllowed where the engine keeps ArrayBuffer memory in its
  // own sandbox (V8_ENABLE_SANDBOX, as in Electron): Node-API's external
  // buffers fail there too.
  MhsaNewBufferResult (*newArrayBuffer)(void* memory, size_t bytes, MhsaFreeMemory free_memory, void* hint,
                                        napi_value* result);
  // Runs the check V8 makes before it allocates a buffer itself, which
  // newArrayBuffer's memory skips: a scavenge once young buffers pile up.
  void (*runYoungGenerationCheck)(void);
  // Adds change to the current isolate's count of external memory, the one
  // that starts collections as it grows, and returns the count (-1 without
  // an isolate). The caller keeps its own total >= 0: V8 counts buffers
  // there too, and newer V8 aborts on an underflow.
  int64_t (*adjustExternalMemory)(int64_t change);
};

}  // extern "C"

namespace mhsa {

// V8's implementation, compiled against one Node's headers (buffer_pinning_v8.cc).
const MhsaBufferPinning* v8BufferPinning();

// The type tag of the external that a buffer-pinning module exports as `pinning`.
// Its last byte is the table's version ('3': adjustExternalMemory added), so a module of another
// release is refused rather than read past its end.
constexpr napi_type_tag kBufferPinningTag = {0x6d6873612d70696eULL, 0x6e696e672d763033ULL};

}  // namespace mhsa
