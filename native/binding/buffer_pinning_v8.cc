// V8's side of buffer_pinning.h: compiled into the addon when it is built
// against Node's own headers, and on its own, once per Node ABI, as the
// prebuilt packages' buffer-pinning module (MHSA_BUFFER_PINNING_MODULE).
#include "buffer_pinning.h"

// Node 20's node_version.h defines NAPI_VERSION unconditionally; keep the build's.
#pragma push_macro("NAPI_VERSION")
#undef NAPI_VERSION
#include <node_version.h>
#undef NAPI_VERSION
#pragma pop_macro("NAPI_VERSION")
#include <v8.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace mhsa {
namespace {

using Held = std::shared_ptr<v8::BackingStore>;

// napi_value is a v8::Local<v8::Value> under another name (Node's own
// v8impl::V8LocalValueFromJsValue converts it the same way).
MhsaHoldResult hold(napi_value value, void** handle) {
  static_assert(sizeof(v8::Local<v8::Value>) == sizeof(napi_value), "napi_value is a v8::Local");
  *handle = nullptr;
  v8::Local<v8::Value> local;
  std::memcpy(static_cast<void*>(&local), &value, sizeof(value));
  if (local.IsEmpty()) return kMhsaNothingToHold;
  v8::Local<v8::ArrayBuffer> buffer;
  if (local->IsArrayBufferView())
    buffer = local.As<v8::ArrayBufferView>()->Buffer();
  else if (local->IsArrayBuffer())
    buffer = local.As<v8::ArrayBuffer>();
  // A SharedArrayBuffer cannot be detached; other values own no memory.
  if (buffer.IsEmpty() || buffer->IsSharedArrayBuffer()) return kMhsaNothingToHold;
  Held store = buffer->GetBackingStore();
  if (store->IsResizableByUserJavaScript()) return kMhsaResizable;
  // malloc, not new: its failure is a status, never an exception across the table.
  void* memory = std::malloc(sizeof(Held));
  if (memory == nullptr) return kMhsaOutOfMemory;
  *handle = new (memory) Held(std::move(store));
  return kMhsaHeld;
}

void release(void* handle) {
  static_cast<Held*>(handle)->~Held();
  std::free(handle);
}

MhsaNewBufferResult newArrayBuffer(void* memory, size_t bytes, MhsaFreeMemory free_memory, void* hint,
                                   napi_value* result) {
#ifdef V8_ENABLE_SANDBOX
  (void)memory, (void)bytes, (void)free_memory, (void)hint, (void)result;
  return kMhsaExternalNotAllowed;
#else
  static_assert(sizeof(v8::Local<v8::Value>) == sizeof(napi_value), "napi_value is a v8::Local");
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return kMhsaNotCreated;
  // No exception crosses the table. Where this side has exceptions (linked
  // into a source build), allocating the BackingStore or the shared_ptr's
  // control block may throw: once the BackingStore owns the memory, its
  // destructor has given it back already. The prebuilt module is built
  // without exceptions, and there an allocation failure ends the process.
  bool taken = false;
#if defined(__cpp_exceptions)
  try {
#endif
    std::unique_ptr<v8::BackingStore> owner = v8::ArrayBuffer::NewBackingStore(memory, bytes, free_memory, hint);
    taken = true;
    std::shared_ptr<v8::BackingStore> store(std::move(owner));
    v8::Local<v8::Value> buffer = v8::ArrayBuffer::New(isolate, std::move(store));
    std::memcpy(static_cast<void*>(result), &buffer, sizeof(buffer));
    return kMhsaCreated;
#if defined(__cpp_exceptions)
  } catch (...) {
    return taken ? kMhsaNotCreatedFreed : kMhsaNotCreated;
  }
#else
  (void)taken;
#endif
#endif
}

// When V8 allocates a buffer's memory itself, it first checks the young
// generation: once young buffers hold more than twice the semi-space, it runs
// a scavenge, which finds the results a loop has dropped within a fraction of
// a millisecond. Memory handed in from outside skips that check, and only the
// external-memory limit, a full mark-compact every ~64 MiB, found them.
// Allocating one byte through V8 runs the check (result-pool.md).
void runYoungGenerationCheck() {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return;
#if defined(__cpp_exceptions)
  try {
    std::unique_ptr<v8::BackingStore> oneByte = v8::ArrayBuffer::NewBackingStore(isolate, 1);
  } catch (...) {
    // Only the check is lost.
  }
#else
  std::unique_ptr<v8::BackingStore> oneByte = v8::ArrayBuffer::NewBackingStore(isolate, 1);
#endif
}

// V8 13 marks this for removal in favour of ExternalMemoryAccounter, which
// must be back at zero when it is destroyed; the amount here outlives no
// isolate but has no owner object to hold it. Both reach the same count.
int64_t adjustExternalMemory(int64_t change) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return -1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return isolate->AdjustAmountOfExternalAllocatedMemory(change);
#pragma GCC diagnostic pop
}

constexpr MhsaBufferPinning kV8BufferPinning = {hold, release, newArrayBuffer, runYoungGenerationCheck,
                                                adjustExternalMemory};

}  // namespace

const MhsaBufferPinning* v8BufferPinning() { return &kV8BufferPinning; }

}  // namespace mhsa

#ifdef MHSA_BUFFER_PINNING_MODULE
// The module's exports: { pinning: <external>, nodeModuleVersion }. Node loads
// a Node-API module under any ABI, so the module refuses one not its own.
NAPI_MODULE_INIT() {
  napi_value global, process, versions, modules;
  char running[16] = {0};
  size_t length = 0;
  if (napi_get_global(env, &global) != napi_ok || napi_get_named_property(env, global, "process", &process) != napi_ok ||
      napi_get_named_property(env, process, "versions", &versions) != napi_ok ||
      napi_get_named_property(env, versions, "modules", &modules) != napi_ok ||
      napi_get_value_string_utf8(env, modules, running, sizeof running, &length) != napi_ok)
    return nullptr;
  if (std::strcmp(running, NODE_STRINGIFY(NODE_MODULE_VERSION)) != 0) {
    napi_throw_error(env, nullptr,
                     "mhsa: this buffer-pinning module is built for Node ABI " NODE_STRINGIFY(
                         NODE_MODULE_VERSION) ", not the running Node's");
    return nullptr;
  }
  napi_value pinning, abi;
  napi_create_external(env, const_cast<MhsaBufferPinning*>(mhsa::v8BufferPinning()), nullptr, nullptr, &pinning);
  napi_type_tag_object(env, pinning, &mhsa::kBufferPinningTag);
  napi_set_named_property(env, exports, "pinning", pinning);
  napi_create_int32(env, NODE_MODULE_VERSION, &abi);
  napi_set_named_property(env, exports, "nodeModuleVersion", abi);
  return exports;
}
#endif
