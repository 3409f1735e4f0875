#include "../ops/matmul_op.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value matmulBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "matmul";
  FloatArg a = floatArg(info[0], fn, "a");
  FloatArg b = floatArg(info[2], fn, "b");
  FloatArg c = optionalFloatArg(info[4], fn, "c");
  FloatArg out = floatArg(info[6], fn, "out");
  MatmulArgs args;
  args.a = shapeArg(info[1], fn, "a.shape");
  args.b = shapeArg(info[3], fn, "b.shape");
  args.hasC = !info[4].IsNull() && !info[4].IsUndefined();
  if (args.hasC) args.c = shapeArg(info[5], fn, "c.shape");
  args.out = shapeArg(info[7], fn, "out.shape");
  args.transposeA = boolArg(info[8], fn, "transposeA");
  args.transposeB = boolArg(info[9], fn, "transposeB");
  const float alpha = static_cast<float>(numberArg(info[10], fn, "alpha"));
  const float beta = static_cast<float>(numberArg(info[11], fn, "beta"));
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
  runOrSubmit(info, 12, {a.value, b.value, c.value, out.value},
              [plan, ap, bp, cp, op, alpha, beta] { runMatmul(plan, ap, bp, cp, op, alpha, beta); });
  return env.Undefined();
}

}  // namespace mhsa
