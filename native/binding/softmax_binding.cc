#include <cmath>

#include "../ops/softmax_op.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value softmaxBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "softmax";
  FloatArg x = floatArg(info[0], fn, "x");
  FloatArg out = floatArg(info[2], fn, "out");
  SoftmaxArgs args;
  args.x = shapeArg(info[1], fn, "x.shape");
  args.out = shapeArg(info[3], fn, "out.shape");
  args.xLength = x.length;
  args.outLength = out.length;
  const double scale = numberArg(info[4], fn, "scale");
  if (!std::isfinite(static_cast<float>(scale)))
    throw Napi::RangeError::New(env, "softmax: scale must be a finite float32 number");
  SoftmaxPlan plan;
  throwIfError(env, planSoftmax(args, &plan));
  checkNoOverlap(env, fn, "out", out.data, out.length * 4, "x", x.data, x.length * 4, true);
  const float* xp = x.data;
  float* op = out.data;
  const float s = static_cast<float>(scale);
  runOrSubmit(info, 5, {x.value, out.value}, [plan, xp, op, s] { runSoftmax(plan, xp, op, s); });
  return env.Undefined();
}

}  // namespace mhsa
