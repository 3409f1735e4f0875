#include "async_job.h"

// Node's full headers have V8's; a build against node-api-headers alone does
// not (CMakeLists.txt looks for them), and from Node 23 on they need C++20
// (v8config.h stops a C++17 compile), which binding.gyp and CMakeLists.txt
// then give the binding layer. Without them jobs cannot hold their buffers'
// memory (pinBackingStore), and info().pinsAsyncBuffers says so.
#if __has_include(<v8.h>) && __has_include(<node_version.h>)
// Node 20's node_version.h defines NAPI_VERSION unconditionally; keep the build's.
#pragma push_macro("NAPI_VERSION")
#undef NAPI_VERSION
#include <node_version.h>
#undef NAPI_VERSION
#pragma pop_macro("NAPI_VERSION")
#if NODE_MAJOR_VERSION < 23 || __cplusplus >= 202002L
#include <v8.h>
#define MHSA_PIN_BACKING_STORES 1
#endif
#endif

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

namespace mhsa {
namespace {

enum class ErrorKind { None, Range, Generic };

struct EnvState {
  napi_threadsafe_function tsfn = nullptr;
  int pending = 0;  // touched only on the JS thread
  int running = 0;  // guarded by the dispatcher's mutex
};

struct Job {
  const char* fn = "";
  WorkFn work;
  std::vector<napi_ref> refs;
#ifdef MHSA_PIN_BACKING_STORES
  // The memory under each buffer (see pinBackingStore), released with the job on the JS thread.
  std::vector<std::shared_ptr<v8::BackingStore>> pinned;
#endif
  napi_ref callback = nullptr;
  EnvState* state = nullptr;
  ErrorKind error = ErrorKind::None;
  std::string message;
};

// Runs work and turns any C++ exception into an error for the callback:
// native code never lets an exception escape into Node.
void runCatching(Job* job) {
  try {
    job->work();
  } catch (const std::bad_alloc&) {
    job->error = ErrorKind::Range;
    job->message = std::string(job->fn) + ": out of memory while computing (std::bad_alloc)";
  } catch (const std::exception& e) {
    job->error = ErrorKind::Generic;
    job->message = std::string(job->fn) + ": " + e.what();
  } catch (...) {
    job->error = ErrorKind::Generic;
    job->message = std::string(job->fn) + ": unknown native error";
  }
}

class Dispatcher {
 public:
  void push(Job* job) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) {
      std::thread([this] { loop(); }).detach();
      started_ = true;
    }
    queue_.push_back(job);
    wake_.notify_one();
  }

  // Drops this environment's queued jobs and waits for its running one.
  void cancelAndDrain(EnvState* state) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->state == state) {
        delete *it;  // its napi_refs die with the environment
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    idle_.wait(lock, [&] { return state->running == 0; });
  }

 private:
  void loop() {
    for (;;) {
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        job = queue_.front();
        queue_.pop_front();
        ++job->state->running;
      }
      EnvState* state = job->state;
      runCatching(job);
      // The callback owns (and deletes) the job from here on.
      napi_call_threadsafe_function(state->tsfn, job, napi_tsfn_blocking);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --state->running;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job*> queue_;
  bool started_ = false;
};

// Never destroyed: its detached thread outlives static destruction at exit.
Dispatcher& dispatcher() {
  static Dispatcher* d = new Dispatcher();
  return *d;
}

void deliver(napi_env env, napi_value /*jsCallback*/, void* /*context*/, void* data) {
  Job* job = static_cast<Job*>(data);
  if (env == nullptr) {  // the environment is being torn down
    delete job;
    return;
  }
  EnvState* state = job->state;
  napi_value callback = nullptr, global = nullptr, arg = nullptr;
  napi_get_reference_value(env, job->callback, &callback);
  napi_get_global(env, &global);
  if (job->error == ErrorKind::None) {
    napi_get_null(env, &arg);
  } else {
    napi_value msg;
    napi_create_string_utf8(env, job->message.c_str(), job->message.size(), &msg);
    if (job->error == ErrorKind::Range)
      napi_create_range_error(env, nullptr, msg, &arg);
    else
      napi_create_error(env, nullptr, msg, &arg);
  }
  for (napi_ref r : job->refs) napi_delete_reference(env, r);
  napi_delete_reference(env, job->callback);
  delete job;
  if (--state->pending == 0) napi_unref_threadsafe_function(env, state->tsfn);
  if (callback != nullptr) napi_call_function(env, global, callback, 1, &arg, nullptr);
}

void cleanupEnv(void* arg) {
  // Runs before the environment frees its ArrayBuffers: once it returns, no
  // job of this environment is queued or touching memory. The state itself is
  // left allocated (a few bytes per environment) because the thread-safe
  // function may still call deliver() for it while the loop winds down.
  dispatcher().cancelAndDrain(static_cast<EnvState*>(arg));
}

// A reference keeps a typed array's JS object alive, not its memory: JS can
// detach the ArrayBuffer while the job is queued or computing
// (structuredClone(buf, { transfer: [buf] }), postMessage), and once the
// object it was transferred to is collected the memory is freed under the
// native code (a use-after-free, seen as a segfault). Node-API has no way to
// hold the memory itself, so this takes V8's: the buffer's BackingStore, whose
// shared owner keeps the bytes allocated until the job is released, whether
// or not the buffer it was transferred to still lives. (While that buffer
// lives it shares the bytes: it sees the job's writes until the job ends.)
// The JS queue then rejects the call, naming the detached buffer
// (lib/queue.ts). A resizable buffer can still give its pages back when
// shrunk, so async calls refuse those up front.
// napi_value is a v8::Local<v8::Value> under another name (Node's own
// v8impl::V8LocalValueFromJsValue converts it the same way).
#ifdef MHSA_PIN_BACKING_STORES
std::shared_ptr<v8::BackingStore> pinBackingStore(napi_value value) {
  static_assert(sizeof(v8::Local<v8::Value>) == sizeof(napi_value), "napi_value is a v8::Local");
  v8::Local<v8::Value> local;
  std::memcpy(static_cast<void*>(&local), &value, sizeof(value));
  if (local.IsEmpty()) return nullptr;
  v8::Local<v8::ArrayBuffer> buffer;
  if (local->IsArrayBufferView())
    buffer = local.As<v8::ArrayBufferView>()->Buffer();
  else if (local->IsArrayBuffer())
    buffer = local.As<v8::ArrayBuffer>();
  // A SharedArrayBuffer cannot be detached; other values own no memory.
  if (buffer.IsEmpty() || buffer->IsSharedArrayBuffer()) return nullptr;
  return buffer->GetBackingStore();
}
#endif

}  // namespace

void initAsync(Napi::Env env) {
  auto* state = new EnvState();
  napi_value name;
  napi_create_string_utf8(env, "mhsa", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, nullptr, nullptr, name, 0, 1, nullptr, nullptr, nullptr, deliver,
                                      &state->tsfn) != napi_ok)
    throw Napi::Error::New(env, "mhsa: could not create the async completion channel");
  // Idle until a job is pending, so the addon never keeps the process alive by itself.
  napi_unref_threadsafe_function(env, state->tsfn);
  // Added after the thread-safe function so that, hooks running in reverse
  // order, this one drains jobs before Node closes the function.
  napi_add_env_cleanup_hook(env, cleanupEnv, state);
  napi_set_instance_data(env, state, nullptr, nullptr);
}

EnvState* stateOf(Napi::Env env) {
  void* data = nullptr;
  napi_get_instance_data(env, &data);
  return static_cast<EnvState*>(data);
}

int pendingAsync(Napi::Env env) { return stateOf(env)->pending; }

bool pinsAsyncBuffers() {
#ifdef MHSA_PIN_BACKING_STORES
  return true;
#else
  return false;
#endif
}

void submitAsync(const char* fn, Napi::Env env, Napi::Function callback,
                 const std::vector<Napi::Value>& keepAlive, WorkFn work) {
  EnvState* state = stateOf(env);
#ifdef MHSA_PIN_BACKING_STORES
  std::vector<std::shared_ptr<v8::BackingStore>> pinned;
  for (const Napi::Value& v : keepAlive) {
    std::shared_ptr<v8::BackingStore> store = pinBackingStore(v);  // null for null, undefined, non-buffers
    if (!store) continue;
    // Shrinking a resizable buffer gives its pages back at once, pinned or not. lib/queue.ts
    // refuses these by name first; this holds whatever reaches the addon by another route.
    if (store->IsResizableByUserJavaScript())
      throw Napi::TypeError::New(env, std::string(fn) +
                                          ": a buffer is backed by a resizable ArrayBuffer; async ops need "
                                          "fixed-length buffers");
    pinned.push_back(std::move(store));
  }
#endif
  auto* job = new Job();
  job->fn = fn;
  job->work = std::move(work);
  job->state = state;
#ifdef MHSA_PIN_BACKING_STORES
  job->pinned = std::move(pinned);
#endif
  for (const Napi::Value& v : keepAlive) {
    if (v.IsEmpty() || v.IsNull() || v.IsUndefined()) continue;
    napi_ref r;
    napi_create_reference(env, v, 1, &r);
    job->refs.push_back(r);
  }
  napi_create_reference(env, callback, 1, &job->callback);
  if (state->pending++ == 0) napi_ref_threadsafe_function(env, state->tsfn);
  try {
    dispatcher().push(job);
  } catch (...) {
    // Not queued (no memory, or the dispatcher thread could not start): undo
    // everything so the process is not kept alive by a job that never runs.
    for (napi_ref r : job->refs) napi_delete_reference(env, r);
    napi_delete_reference(env, job->callback);
    delete job;
    if (--state->pending == 0) napi_unref_threadsafe_function(env, state->tsfn);
    throw;
  }
}

void runOrSubmit(const char* fn, const Napi::CallbackInfo& info, size_t callbackIndex,
                 const std::vector<Napi::Value>& keepAlive, WorkFn work) {
  Napi::Env env = info.Env();
  if (info.Length() > callbackIndex && info[callbackIndex].IsFunction()) {
    submitAsync(fn, env, info[callbackIndex].As<Napi::Function>(), keepAlive, std::move(work));
    return;
  }
  try {
    work();
  } catch (const std::bad_alloc&) {
    throw Napi::RangeError::New(env, std::string(fn) + ": out of memory while computing (std::bad_alloc)");
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string(fn) + ": " + e.what());
  } catch (...) {
    throw Napi::Error::New(env, std::string(fn) + ": unknown native error");
  }
}

}  // namespace mhsa
