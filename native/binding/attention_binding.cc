#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value attentionBinding(const Napi::CallbackInfo& info) {
  const char* fn = "attention";
  JsBuffer q = floatArg(info[0], fn, "q");
  JsBuffer k = floatArg(info[1], fn, "k");
  JsBuffer v = floatArg(info[2], fn, "v");
  JsBuffer out = floatArg(info[3], fn, "out");
  JsBuffer mask = optionalFloatArg(info[4], fn, "mask");
  JsBuffer pad = optionalByteArg(info[5], fn, "keyPaddingMask");
  JsBuffer weights = optionalFloatArg(info[6], fn, "weights");
  AttentionCall call;
  throwIfError(info.Env(), prepareAttention(descriptorArg(info[7], fn), q.arg, k.arg, v.arg, out.arg, mask.arg,
                                            pad.arg, weights.arg, &call));
  runOrSubmit(fn, info, 8, {q.value, k.value, v.value, out.value, mask.value, pad.value, weights.value},
              [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
