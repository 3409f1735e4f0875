// binding/async_job.h for the WebAssembly build (docs/design/wasm.md).
//
// Two things differ from the native builds:
// - There is one thread, so an async op computes on the JS thread when it is
//   submitted and only its callback waits: it runs from setImmediate, so the
//   promise still settles after the call returns, with the same bits as sync.
// - Buffers are copies. emnapi copies each typed array's ArrayBuffer into wasm
//   memory when the binding asks for its pointer; what the kernels write there
//   goes back to the caller's arrays here, right after the work ends, before
//   any JS can run. An ArrayBuffer transferred away during the wait for the
//   callback therefore costs nothing but the result (lib/queue.ts reports it).
#include "../binding/async_job.h"

#include <emnapi.h>

#include <string>

#include "../binding/native_error.h"

namespace mhsa {
namespace {

struct EnvState {
  int pending = 0;
};

const MhsaBufferPinning* activePinning = nullptr;

EnvState* stateOf(napi_env env) {
  void* data = nullptr;
  napi_get_instance_data(env, &data);
  return static_cast<EnvState*>(data);
}

// Copies what the op wrote from wasm memory back to the JS arrays.
void copyBack(napi_env env, const JobBuffers& buffers) {
  for (const Napi::Value& v : buffers.written) {
    if (v.IsEmpty() || !v.IsTypedArray() || v.As<Napi::TypedArray>().ByteLength() == 0) continue;
    napi_value value = v;
    emnapi_sync_memory(env, false, &value, 0, NAPI_AUTO_LENGTH);
  }
}

NativeError runCatching(const char* fn, const WorkFn& work) {
  try {
    work();
  } catch (...) {
    return currentExceptionAsError(fn);
  }
  return {};
}

// What the callback gets. Unlike a native job it references none of the op's
// buffers: the work has run and its results are back in JS before the call returns.
struct Delivery {
  napi_ref callback = nullptr;
  NativeError error;
};

// setImmediate's callback: hands the op's outcome to its JS callback.
napi_value deliver(napi_env env, napi_callback_info info) {
  void* data = nullptr;
  napi_get_cb_info(env, info, nullptr, nullptr, nullptr, &data);
  auto* d = static_cast<Delivery*>(data);
  const JobCallback callback = takeCallback(env, d->callback, {}, d->error);
  delete d;
  --stateOf(env)->pending;
  callback.call(env);
  return nullptr;
}

}  // namespace

void initAsync(Napi::Env env) { napi_set_instance_data(env, new EnvState(), nullptr, nullptr); }

int pendingAsync(Napi::Env env) { return stateOf(env)->pending; }

bool pinsAsyncBuffers() { return false; }

void setBufferPinning(const MhsaBufferPinning* pinning) { activePinning = pinning; }

const MhsaBufferPinning* bufferPinning() { return activePinning; }

void submitAsync(const char* fn, Napi::Env env, Napi::Function callback, const JobBuffers& buffers, WorkFn work) {
  auto* d = new Delivery();
  d->error = runCatching(fn, work);
  if (d->error.kind == NativeError::Kind::None) copyBack(env, buffers);
  napi_create_reference(env, callback, 1, &d->callback);
  Napi::Function setImmediate = env.Global().Get("setImmediate").As<Napi::Function>();
  napi_value later = nullptr;
  napi_create_function(env, "mhsaDeliver", NAPI_AUTO_LENGTH, deliver, d, &later);
  ++stateOf(env)->pending;
  setImmediate.Call({later});
}

void runOrSubmit(const char* fn, const Napi::CallbackInfo& info, size_t callbackIndex,
                 const JobBuffers& buffers, WorkFn work) {
  Napi::Env env = info.Env();
  if (info.Length() > callbackIndex && info[callbackIndex].IsFunction()) {
    submitAsync(fn, env, info[callbackIndex].As<Napi::Function>(), buffers, std::move(work));
    return;
  }
  const NativeError error = runCatching(fn, work);
  if (error.kind != NativeError::Kind::None) throw toJsError(env, error);
  copyBack(env, buffers);
}

}  // namespace mhsa
