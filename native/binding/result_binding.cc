// Results from the result pool (runtime/result_pool.h), as Float32Arrays whose
// memory returns to the pool when V8 frees it (docs/design/result-pool.md).
#include <atomic>
#include <cmath>
#include <string>

#include "../runtime/result_ledger.h"
#include "../runtime/result_pool.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {
namespace {

// Whether the engine takes ArrayBuffers over outside memory: asked once, and
// set to refused also when the V8 table says so (the V8 sandbox).
enum class External { Unknown, Allowed, Refused };
std::atomic<External> external{External::Unknown};

// This JS thread's ledger (runtime/result_ledger.h), made on its first pooled
// result. The thread's hold ends with its environment; its results' holds
// end as V8 frees them, possibly later and on other threads.
thread_local ResultLedger* threadLedger = nullptr;

ResultLedger* ledgerOf(napi_env env) {
  if (threadLedger == nullptr) {
    auto* ledger = new ResultLedger();
    if (napi_add_env_cleanup_hook(
            env,
            [](void* arg) {
              if (threadLedger == arg) threadLedger = nullptr;
              static_cast<ResultLedger*>(arg)->release();
            },
            ledger) != napi_ok) {
      ledger->release();
      return nullptr;
    }
    threadLedger = ledger;
  }
  return threadLedger;
}

// Applies a change to V8's count of this thread's free blocks (result_ledger.h).
void adjustCount(int64_t change) {
  if (change != 0) bufferPinning()->adjustExternalMemory(change);
}

void giveBack(void* memory, size_t bytes, void* hint) {
  auto* ledger = static_cast<ResultLedger*>(hint);
  if (releaseResultBlock(memory, bytes)) ledger->returned(resultBlockBytes(bytes));
  ledger->release();
}

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
  if (bufferPinning() == nullptr) return "no buffer-pinning module for this Node";
  if (external.load() == External::Unknown)
    external.store(runtimeRefusesExternalMemory(env) ? External::Refused : External::Allowed);
  if (external.load() == External::Refused) return "this runtime does not allow external ArrayBuffer memory";
  return nullptr;
}

// info[0] as a non-negative safe integer, or a TypeError / RangeError naming fn and what.
double nonNegativeSafeInteger(const Napi::CallbackInfo& info, const char* fn, const char* what) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, std::string(fn) + ": " + what + " must be a number");
  const double x = info[0].As<Napi::Number>().DoubleValue();
  if (!(x >= 0 && x <= 9007199254740991.0) || x != std::floor(x))
    throw Napi::RangeError::New(env, std::string(fn) + ": " + what + " must be a non-negative safe integer");
  return x;
}

}  // namespace

Napi::Value pooledResultBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double n = nonNegativeSafeInteger(info, "pooledResult", "n");
  if (n * 4 > static_cast<double>(SIZE_MAX >> 2) || unavailableReason(env) != nullptr) return env.Null();
  const size_t bytes = static_cast<size_t>(n) * 4;
  ResultLedger* ledger = resultPoolServes(bytes) ? ledgerOf(env) : nullptr;
  if (ledger == nullptr) return env.Null();
  // First, so that the blocks of results this scavenge finds dead, the most
  // recently written among them, can serve this result.
  bufferPinning()->runYoungGenerationCheck();
  bool reused = false;
  void* memory = acquireResultBlock(bytes, &reused);
  if (memory == nullptr) return env.Null();
  // Before V8 counts the new buffer, so that reusing a block never shows as growth.
  adjustCount(ledger->settle(resultBlockBytes(bytes), reused, resultPoolStats().heldBytes));
  ledger->retain();
  napi_value buffer;
  const MhsaNewBufferResult made = bufferPinning()->newArrayBuffer(memory, bytes, giveBack, ledger, &buffer);
  if (made != kMhsaCreated) {
    if (made != kMhsaNotCreatedFreed) {
      freeResultBlock(memory, bytes);
      ledger->release();
    }
    if (made == kMhsaExternalNotAllowed) external.store(External::Refused);
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
  r.Set("countedFreeBytes", static_cast<double>(threadLedger != nullptr ? threadLedger->addedBytes() : 0));
  // V8's own count of external memory, for tests (process.memoryUsage().external is another figure).
  r.Set("engineExternalBytes",
        bufferPinning() != nullptr ? static_cast<double>(bufferPinning()->adjustExternalMemory(0)) : -1.0);
  return r;
}

Napi::Value setResultPoolLimitBinding(const Napi::CallbackInfo& info) {
  setResultPoolLimit(static_cast<size_t>(nonNegativeSafeInteger(info, "setResultPoolLimit", "bytes")));
  // The blocks it freed leave this thread's count now; other threads' on their next pooled result.
  if (threadLedger != nullptr && bufferPinning() != nullptr)
    adjustCount(threadLedger->bound(resultPoolStats().heldBytes));
  return info.Env().Undefined();
}

}  // namespace mhsa
