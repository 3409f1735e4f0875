// Results from the result pool (runtime/result_pool.h), as Float32Arrays whose
// memory returns to the pool when V8 frees it (docs/design/result-pool.md).
#include <atomic>
#include <cmath>

#include "../runtime/result_pool.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {
namespace {

// Set once the engine refuses external memory (the V8 sandbox): from then on
// every result is plain, without asking again.
std::atomic<bool> externalRefused{false};

void giveBack(void* memory, size_t bytes, void* /*hint*/) { releaseResultBlock(memory, bytes); }

// Whether this runtime refuses ArrayBuffers over outside memory (the V8
// sandbox), as Node-API itself says: the V8 table knows only how it was built.
bool runtimeRefusesExternalMemory(napi_env env) {
  static char probe[8];
  napi_value buffer;
  return napi_create_external_arraybuffer(env, probe, sizeof probe, nullptr, nullptr, &buffer) ==
         napi_no_external_buffers_allowed;
}

// Why results cannot come from the pool in this process, or nullptr if they can.
const char* unavailableReason(napi_env env) {
  static std::atomic<int> probed{0};  // 0 not yet, 1 allowed
  const MhsaBufferPinning* v8 = bufferPinning();
  if (v8 == nullptr) return "no buffer-pinning module for this Node";
  if (probed.load() == 0 && !externalRefused.load()) {
    if (runtimeRefusesExternalMemory(env)) externalRefused.store(true);
    probed.store(1);
  }
  if (externalRefused.load()) return "this runtime does not allow external ArrayBuffer memory";
  return nullptr;
}

}  // namespace

Napi::Value pooledResultBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "pooledResult: n must be a number");
  const double n = info[0].As<Napi::Number>().DoubleValue();
  if (!(n >= 0 && n <= 9007199254740991.0) || n != std::floor(n))
    throw Napi::RangeError::New(env, "pooledResult: n must be a non-negative safe integer");
  if (n * 4 > static_cast<double>(SIZE_MAX >> 2) || unavailableReason(env) != nullptr) return env.Null();
  const size_t bytes = static_cast<size_t>(n) * 4;
  if (!resultPoolServes(bytes)) return env.Null();
  // First, so that the blocks of results this scavenge finds dead, the most
  // recently written among them, can serve this result.
  bufferPinning()->runYoungGenerationCheck();
  void* memory = acquireResultBlock(bytes);
  if (memory == nullptr) return env.Null();
  napi_value buffer;
  const MhsaNewBufferResult made = bufferPinning()->newArrayBuffer(memory, bytes, giveBack, nullptr, &buffer);
  if (made != kMhsaCreated) {
    if (made != kMhsaNotCreatedFreed) freeResultBlock(memory, bytes);
    if (made == kMhsaExternalNotAllowed) externalRefused.store(true);
    return env.Null();
  }
  // On failure the buffer, unreferenced, is collected and its block returns to the pool.
  napi_value array;
  NAPI_THROW_IF_FAILED(env, napi_create_typedarray(env, napi_float32_array, static_cast<size_t>(n), buffer, 0, &array),
                       Napi::Value());
  return Napi::Value(env, array);
}

Napi::Value resultPoolBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ResultPoolStats s = resultPoolStats();
  Napi::Object r = Napi::Object::New(env);
  const char* reason = unavailableReason(env);
  if (reason != nullptr)
    r.Set("unavailable", reason);
  else
    r.Set("unavailable", env.Null());
  r.Set("minBytes", static_cast<double>(kMinPooledResultBytes));
  r.Set("limitBytes", static_cast<double>(s.limitBytes));
  r.Set("heldBytes", static_cast<double>(s.heldBytes));
  r.Set("heldBlocks", static_cast<double>(s.heldBlocks));
  r.Set("liveBytes", static_cast<double>(s.liveBytes));
  r.Set("hits", static_cast<double>(s.hits));
  r.Set("misses", static_cast<double>(s.misses));
  return r;
}

Napi::Value setResultPoolLimitBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "setResultPoolLimit: bytes must be a number");
  const double bytes = info[0].As<Napi::Number>().DoubleValue();
  if (!(bytes >= 0 && bytes <= 9007199254740991.0) || bytes != std::floor(bytes))
    throw Napi::RangeError::New(env, "setResultPoolLimit: bytes must be a non-negative safe integer");
  setResultPoolLimit(static_cast<size_t>(bytes));
  return env.Undefined();
}

}  // namespace mhsa
