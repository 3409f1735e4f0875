#include "../ops/matmul_op.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value matmulBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "matmul";
  FloatArg a = floatArg(info[0], fn, "a");
  FloatArg b = floatArg(info[1], fn, "b");
  FloatArg c = optionalFloatArg(info[2], fn, "c");
  FloatArg out = floatArg(info[3], fn, "out");
  Descriptor desc(info[4], fn);
  MatmulArgs args;
  args.a = desc.shape("a.shape");
  args.b = desc.shape("b.shape");
  args.c = desc.shape("c.shape");
  args.hasC = c.data != nullptr || !isNullish(info[2]);
  args.out = desc.shape("out.shape");
  args.transposeA = desc.flag("transposeA");
  args.transposeB = desc.flag("transposeB");
  const float alpha = static_cast<float>(desc.number("alpha"));
  const float beta = static_cast<float>(desc.number("beta"));
  args.bPacked = desc.flag("bPacked");
  desc.finish();
  args.aLength = a.length;
  args.bLength = b.length;
  args.cLength = c.length;
  args.outLength = out.length;
  MatmulPlan plan;
  throwIfError(env, planMatmul(args, &plan));
  const int64_t outBytes = out.length * 4;
  checkNoOverlap(env, fn, "out", out.data, outBytes, "a", a.data, a.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "b", b.data, b.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "c", c.data, c.length * 4, true);
  const float* ap = a.data;
  const float* bp = b.data;
  const float* cp = c.data;
  float* op = out.data;
  runOrSubmit(fn, info, 5, {a.value, b.value, c.value, out.value},
              [plan, ap, bp, cp, op, alpha, beta] { runMatmul(plan, ap, bp, cp, op, alpha, beta); });
  return env.Undefined();
}

Napi::Value packedSizeBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Descriptor desc(info[0], "packMatrix");
  const Shape s = desc.shape("b.shape");
  desc.finish();
  if (s.size() != 2 || elementCount(s) < 0) throw Napi::RangeError::New(env, "packMatrix: b must be 2-D");
  return Napi::Number::New(env, static_cast<double>(packedBSize(s[0], s[1])));
}

Napi::Value packMatrixBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "packMatrix";
  FloatArg b = floatArg(info[0], fn, "b");
  FloatArg out = floatArg(info[1], fn, "out");
  Descriptor desc(info[2], fn);
  const Shape s = desc.shape("b.shape");
  const bool transpose = desc.flag("transpose");
  desc.finish();
  if (s.size() != 2) throw Napi::RangeError::New(env, "packMatrix: b must be 2-D, received " + shapeToString(s));
  throwIfError(env, checkLength(fn, "b", s, b.length));
  // The packed matrix is op(b): [K, N] = b's shape, or its transpose.
  const int64_t k = transpose ? s[1] : s[0], n = transpose ? s[0] : s[1];
  if (out.length != packedBSize(k, n))
    throw Napi::RangeError::New(env, "packMatrix: out must hold " + std::to_string(packedBSize(k, n)) + " floats");
  checkNoOverlap(env, fn, "out", out.data, out.length * 4, "b", b.data, b.length * 4, false);
  const StridedMatrix view{b.data, transpose ? 1 : s[1], transpose ? s[1] : 1};
  packWholeB(view, k, n, out.data);
  return env.Undefined();
}

}  // namespace mhsa
