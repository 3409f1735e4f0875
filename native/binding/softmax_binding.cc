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
  FloatArg out = floatArg(info[1], fn, "out");
  Descriptor desc(info[2], fn);
  SoftmaxArgs args;
  args.x = desc.shape("x.shape");
  args.out = desc.shape("out.shape");
  const double scale = desc.number("scale");
  desc.finish();
  args.xLength = x.length;
  args.outLength = out.length;
  if (!std::isfinite(static_cast<float>(scale)))
    throw Napi::RangeError::New(env, "softmax: scale must be a finite float32 number");
  SoftmaxPlan plan;
  throwIfError(env, planSoftmax(args, &plan));
  checkNoOverlap(env, fn, "out", out.data, out.length * 4, "x", x.data, x.length * 4, true);
  const float* xp = x.data;
  float* op = out.data;
  const float s = static_cast<float>(scale);
  runOrSubmit(fn, info, 3, {x.value, out.value}, [plan, xp, op, s] { runSoftmax(plan, xp, op, s); });
  return env.Undefined();
}

}  // namespace mhsa
