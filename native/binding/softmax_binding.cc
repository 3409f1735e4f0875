#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value softmaxBinding(const Napi::CallbackInfo& info) {
  const char* fn = "softmax";
  using I = softmax_args::Index;
  JsBuffer x = floatArg(info[I::x], fn, "x");
  JsBuffer out = floatArg(info[I::out], fn, "out");
  SoftmaxCall call;
  throwIfError(info.Env(), prepareSoftmax(descriptorArg(info[I::kDescriptor], fn), x.arg, out.arg, &call));
  runOrSubmit(fn, info, I::kDescriptor + 1, JobBuffers{{x.value}, {out.value}}, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
