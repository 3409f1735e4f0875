// Module entry: registers the op bindings and the runtime knobs.
#include <napi.h>

#include "../kernels/kernel_table.h"
#include "../runtime/calibrate.h"
#include "../runtime/cpu_features.h"
#include "../runtime/thread_pool.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {
namespace {

Napi::Value infoBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object r = Napi::Object::New(env);
  r.Set("isa", kernels().name);
  const PoolStats pool = poolStats();
  r.Set("threads", pool.threads);
  r.Set("activeThreads", pool.activeThreads);
  r.Set("peakActiveThreads", pool.peakActiveThreads);
#ifdef MHSA_BLAS
  r.Set("blas", MHSA_BLAS);
#else
  r.Set("blas", env.Null());
#endif
  r.Set("pendingAsync", pendingAsync(env));
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

}  // namespace
}  // namespace mhsa

static Napi::Object InitMhsa(Napi::Env env, Napi::Object exports) {
  using namespace mhsa;
  initAsync(env);
  exports.Set("matmul", Napi::Function::New(env, matmulBinding, "matmul"));
  exports.Set("softmax", Napi::Function::New(env, softmaxBinding, "softmax"));
  exports.Set("attention", Napi::Function::New(env, attentionBinding, "attention"));
  exports.Set("packedSize", Napi::Function::New(env, packedSizeBinding, "packedSize"));
  exports.Set("packMatrix", Napi::Function::New(env, packMatrixBinding, "packMatrix"));
  exports.Set("layerNorm", Napi::Function::New(env, layerNormBinding, "layerNorm"));
  exports.Set("calibrate", Napi::Function::New(env, calibrateBinding, "calibrate"));
  exports.Set("info", Napi::Function::New(env, infoBinding, "info"));
  exports.Set("setNumThreads", Napi::Function::New(env, setNumThreadsBinding, "setNumThreads"));
  exports.Set("defaultNumThreads", Napi::Number::New(env, defaultNumThreads()));
  return exports;
}

NODE_API_MODULE(mhsa, InitMhsa)
