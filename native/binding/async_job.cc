#include "async_job.h"

#include "buffer_pinning.h"
#include "native_error.h"
#include "../runtime/float_state.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

namespace mhsa {
namespace {

struct EnvState {
  napi_threadsafe_function tsfn = nullptr;
  int pending = 0;  // touched only on the JS thread
  int running = 0;  // guarded by the dispatcher's mutex
};

struct Job {
  const char* fn = "";
  WorkFn work;
  std::vector<napi_ref> refs;
  // The memory under each buffer (buffer_pinning.h), released with the job on the JS thread.
  const MhsaBufferPinning* pinning = nullptr;
  std::vector<void*> held;
  napi_ref callback = nullptr;
  EnvState* state = nullptr;
  NativeError error;

  ~Job() {
    for (void* h : held) pinning->release(h);
  }
};

#ifdef MHSA_LINKED_BUFFER_PINNING
std::atomic<const MhsaBufferPinning*> activePinning{v8BufferPinning()};
#else
std::atomic<const MhsaBufferPinning*> activePinning{nullptr};
#endif

// Runs work and turns any C++ exception into an error for the callback.
void runCatching(Job* job) {
  try {
    job->work();
  } catch (...) {
    job->error = currentExceptionAsError(job->fn);
  }
}

class Dispatcher {
 public:
  void push(Job* job) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) {
      std::thread([this, state = currentFloatState()] {
        applyFloatState(state);
        loop();
      }).detach();
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
  const JobCallback callback = takeCallback(env, job->callback, job->refs, job->error);
  delete job;
  if (--state->pending == 0) napi_unref_threadsafe_function(env, state->tsfn);
  callback.call(env);
}

void cleanupEnv(void* arg) {
  // Runs before the environment frees its ArrayBuffers: once it returns, no
  // job of this environment is queued or touching memory. The state itself is
  // left allocated (a few bytes per environment) because the thread-safe
  // function may still call deliver() for it while the loop winds down.
  dispatcher().cancelAndDrain(static_cast<EnvState*>(arg));
}

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

bool pinsAsyncBuffers() { return activePinning.load() != nullptr; }

void setBufferPinning(const MhsaBufferPinning* pinning) { activePinning.store(pinning); }

const MhsaBufferPinning* bufferPinning() { return activePinning.load(); }

void submitAsync(const char* fn, Napi::Env env, Napi::Function callback, const JobBuffers& buffers, WorkFn work) {
  EnvState* state = stateOf(env);
  auto owned = std::make_unique<Job>();
  owned->pinning = activePinning.load();
  if (owned->pinning != nullptr) {
    owned->held.reserve(buffers.size());
    buffers.forEach([&](const Napi::Value& v) {
      void* handle = nullptr;
      switch (owned->pinning->hold(v, &handle)) {
        case kMhsaHeld:
          owned->held.push_back(handle);
          break;
        case kMhsaNothingToHold:
          break;
        // lib/queue.ts refuses these by name first; this holds whatever reaches the addon by another route.
        case kMhsaResizable:
          throw Napi::TypeError::New(env, std::string(fn) +
                                              ": a buffer is backed by a resizable ArrayBuffer; async ops need "
                                              "fixed-length buffers");
        case kMhsaOutOfMemory:
          throw std::bad_alloc();
      }
    });
  }
  Job* job = owned.release();
  job->fn = fn;
  job->work = std::move(work);
  job->state = state;
  buffers.forEach([&](const Napi::Value& v) {
    if (v.IsEmpty() || v.IsNull() || v.IsUndefined()) return;
    napi_ref r;
    napi_create_reference(env, v, 1, &r);
    job->refs.push_back(r);
  });
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
                 const JobBuffers& buffers, WorkFn work) {
  Napi::Env env = info.Env();
  if (info.Length() > callbackIndex && info[callbackIndex].IsFunction()) {
    submitAsync(fn, env, info[callbackIndex].As<Napi::Function>(), buffers, std::move(work));
    return;
  }
  try {
    work();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw toJsError(env, currentExceptionAsError(fn));
  }
}

}  // namespace mhsa
