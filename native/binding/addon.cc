// Module entry: registers the op bindings and the runtime knobs.
#include <napi.h>

#include <new>
#include <stdexcept>
#include <string>

#include "../kernels/gemm.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/gemm_int8.h"
#include "../kernels/gemm_blas.h"
#include "../kernels/kernel_table.h"
#include "../kernels/scratch.h"
#include "../ops/descriptor_layouts.h"
#include "../runtime/calibrate.h"
#include "../runtime/cpu_features.h"
#include "../runtime/thread_pool.h"
#include "async_job.h"
#include "bindings.h"
#include "native_error.h"
#include "op_table.h"

namespace mhsa {
namespace {

Napi::Value infoBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object r = Napi::Object::New(env);
#if defined(__wasm__)
  r.Set("backend", "wasm32");
#else
  r.Set("backend", "native");
#endif
  r.Set("isa", kernels().name);
  r.Set("bf16", bf16PathName());
  r.Set("int8", int8Kernels().name);
  const PoolStats pool = poolStats();
  r.Set("threads", pool.threads);
  r.Set("activeThreads", pool.activeThreads);
  r.Set("peakActiveThreads", pool.peakActiveThreads);
  r.Set("scratchBytes", static_cast<double>(scratchBytes().load()));
  if (const char* blas = systemBlasName())
    r.Set("blas", blas);
  else
    r.Set("blas", env.Null());
  r.Set("pendingAsync", pendingAsync(env));
  r.Set("pinsAsyncBuffers", pinsAsyncBuffers());
  return r;
}

// descriptorLayouts() -> { op: { args: name[], fields: [kind, name][], optional: [kind, name][] } }:
// native/ops/descriptor_layouts.h, for the test that checks lib/'s descriptors.
Napi::Value descriptorLayoutsBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto toArray = [&](const DescriptorFieldInfo* fields, size_t count) {
    Napi::Array a = Napi::Array::New(env, count);
    for (size_t i = 0; i < count; ++i) {
      Napi::Array field = Napi::Array::New(env, 2);
      field.Set(0u, fields[i].kind);
      field.Set(1u, fields[i].name);
      a.Set(static_cast<uint32_t>(i), field);
    }
    return a;
  };
  Napi::Object r = Napi::Object::New(env);
  size_t count = 0;
  const DescriptorLayoutInfo* layouts = descriptorLayouts(&count);
  for (size_t i = 0; i < count; ++i) {
    Napi::Object layout = Napi::Object::New(env);
    Napi::Array args = Napi::Array::New(env, layouts[i].argCount);
    for (size_t a = 0; a < layouts[i].argCount; ++a) args.Set(static_cast<uint32_t>(a), layouts[i].args[a]);
    layout.Set("args", args);
    layout.Set("fields", toArray(layouts[i].fields, layouts[i].fieldCount));
    layout.Set("optional", toArray(layouts[i].optional, layouts[i].optionalCount));
    r.Set(layouts[i].op, layout);
  }
  return r;
}

// calibrate(threads, fmaIterations, bandwidthBytes) -> { gflops, gbs }: the
// machine's measured FMA peak and read bandwidth, for benchmarks' % of peak.
// Blocks the calling thread for the measurement (a fraction of a second).
Napi::Value calibrateBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber())
    throw Napi::TypeError::New(env, "calibrate: expected (threads, fmaIterations, bandwidthBytes) as numbers");
  const double threads = info[0].As<Napi::Number>().DoubleValue();
  const double iters = info[1].As<Napi::Number>().DoubleValue();
  const double bytes = info[2].As<Napi::Number>().DoubleValue();
  if (!(threads >= 1 && threads <= 1024) || !(iters >= 1 && iters <= 1e10) || !(bytes >= 0 && bytes <= 16e9))
    throw Napi::RangeError::New(env, "calibrate: arguments out of range");
  Napi::Object r = Napi::Object::New(env);
  r.Set("gflops", measureFmaPeakGflops(static_cast<int>(threads), static_cast<int64_t>(iters), 3));
  r.Set("bf16Gflops", measureBf16PeakGflops(static_cast<int>(threads), static_cast<int64_t>(iters), 3));
  r.Set("gbs", bytes >= 1 << 20 ? measureReadBandwidthGBs(static_cast<int>(threads), static_cast<size_t>(bytes), 3) : 0.0);
  return r;
}

Napi::Value setNumThreadsBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "setNumThreads: n must be a number");
  const double n = info[0].As<Napi::Number>().DoubleValue();
  if (!(n >= 1 && n <= 1024) || n != static_cast<int>(n))
    throw Napi::RangeError::New(env, "setNumThreads: n must be an integer from 1 to 1024");
  setNumThreads(static_cast<int>(n));
  return env.Undefined();
}

// setBufferPinning(pinning): the `pinning` export of a buffer-pinning module
// built for the running Node (buffer_pinning.h; lib/load-addon.ts loads it).
Napi::Value setBufferPinningBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool tagged = false;
  if (info[0].IsExternal()) napi_check_object_type_tag(env, info[0], &kBufferPinningTag, &tagged);
  if (!tagged) throw Napi::TypeError::New(env, "setBufferPinning: expected the pinning export of an mhsa buffer-pinning module");
  setBufferPinning(info[0].As<Napi::External<const MhsaBufferPinning>>().Data());
  return env.Undefined();
}

// Runs an entry point so that no C++ exception reaches Node as an abort: an
// allocation failure anywhere in it (argument decoding included) becomes a
// RangeError, anything else an Error, each naming the function.
template <typename Body>
Napi::Value guarded(const Napi::CallbackInfo& info, const char* fn, const Body& body) {
  try {
    return body(info);
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw toJsError(info.Env(), currentExceptionAsError(fn));
  }
}

template <Napi::Value (*Body)(const Napi::CallbackInfo&)>
void exportFunction(Napi::Env env, Napi::Object exports, const char* name) {
  exports.Set(name, Napi::Function::New(
                        env, [name](const Napi::CallbackInfo& info) { return guarded(info, name, Body); }, name));
}

// An op of the table (op_table.h): its arguments, its descriptor, then an optional callback.
template <typename Call, Call (*Unwrap)(Napi::Env, const OpArgs&, JobBuffers*)>
void exportOp(Napi::Env env, Napi::Object exports, const char* name, size_t callbackIndex) {
  const auto body = [name, callbackIndex](const Napi::CallbackInfo& info) {
    return runOp<Call, Unwrap>(info, name, callbackIndex);
  };
  exports.Set(name, Napi::Function::New(
                        env, [name, body](const Napi::CallbackInfo& info) { return guarded(info, name, body); }, name));
}

}  // namespace
}  // namespace mhsa

static Napi::Object InitMhsa(Napi::Env env, Napi::Object exports) {
  using namespace mhsa;
  initAsync(env);
#define MHSA_EXPORT_OP(name, Call, unwrap, argIndices) \
  exportOp<Call, unwrap>(env, exports, #name, argIndices::kDescriptor + 1);
  MHSA_OPS(MHSA_EXPORT_OP)
#undef MHSA_EXPORT_OP
  exportFunction<packedSizeBinding>(env, exports, "packedSize");
  exportFunction<alignedOffsetBinding>(env, exports, "alignedOffset");
  exportFunction<sequenceBinding>(env, exports, "sequence");
  exportFunction<parseSafetensorsBinding>(env, exports, "parseSafetensors");
  exportFunction<decodeHalfBinding>(env, exports, "decodeHalf");
  exportFunction<calibrateBinding>(env, exports, "calibrate");
  exportFunction<infoBinding>(env, exports, "info");
  exportFunction<pooledResultBinding>(env, exports, "pooledResult");
  exportFunction<resultPoolBinding>(env, exports, "resultPool");
  exportFunction<setResultPoolLimitBinding>(env, exports, "setResultPoolLimit");
  exportFunction<descriptorLayoutsBinding>(env, exports, "descriptorLayouts");
  exportFunction<setNumThreadsBinding>(env, exports, "setNumThreads");
  exportFunction<setBufferPinningBinding>(env, exports, "setBufferPinning");
  exports.Set("defaultNumThreads", Napi::Number::New(env, defaultNumThreads()));
  exports.Set("layerNormMatmulMaxK", Napi::Number::New(env, static_cast<double>(kGemmMaxLayerNormK)));
  return exports;
}

NODE_API_MODULE(mhsa, InitMhsa)
