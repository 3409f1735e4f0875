#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value softmaxBinding(const Napi::CallbackInfo& info) {
  const char* fn = "softmax";
  JsBuffer x = floatArg(info[0], fn, "x");
  JsBuffer out = floatArg(info[1], fn, "out");
  SoftmaxCall call;
  throwIfError(info.Env(), prepareSoftmax(descriptorArg(info[2], fn), x.arg, out.arg, &call));
  runOrSubmit(fn, info, 3, JobBuffers{{x.value}, {out.value}}, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
