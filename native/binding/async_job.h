// Async ops run on one package-owned dispatcher thread, which drives the
// shared compute pool (so in-flight async work never uses more compute threads
// than setNumThreads allows), and report back through a per-environment
// thread-safe function. Each job holds references to its buffers until its
// callback has run on the JS thread.
#pragma once

#include <napi.h>

#include "buffer_pinning.h"

#include <functional>
#include <vector>

namespace mhsa {

using WorkFn = std::function<void()>;

// The JS buffers a job uses, kept alive (and their memory held: buffer_pinning.h) until it ends.
// The WebAssembly build copies the written ones back from wasm memory when it ends (docs/design/wasm.md).
struct JobBuffers {
  std::vector<Napi::Value> read;
  std::vector<Napi::Value> written;

  template <typename Fn>
  void forEach(Fn fn) const {
    for (const Napi::Value& v : read) fn(v);
    for (const Napi::Value& v : written) fn(v);
  }
  size_t size() const { return read.size() + written.size(); }
};

// Per-environment setup (main thread and each worker_thread loading the addon).
void initAsync(Napi::Env env);

// Queues work; callback(error | null) runs later on this environment's JS thread.
void submitAsync(const char* fn, Napi::Env env, Napi::Function callback, const JobBuffers& buffers,
                 WorkFn work);

// Runs work now if info[callbackIndex] is not a function, else queues it.
// fn names the op in errors raised while computing (out of memory).
void runOrSubmit(const char* fn, const Napi::CallbackInfo& info, size_t callbackIndex,
                 const JobBuffers& buffers, WorkFn work);

// Number of async jobs queued or running in this environment.
int pendingAsync(Napi::Env env);

// Whether jobs hold their buffers' memory until they end (buffer_pinning.h).
bool pinsAsyncBuffers();

// Makes jobs submitted from now on hold their buffers' memory with this table.
void setBufferPinning(const MhsaBufferPinning* pinning);

// The table in use, or nullptr when the addon has none (a Node newer than the prebuilt modules).
const MhsaBufferPinning* bufferPinning();

}  // namespace mhsa
