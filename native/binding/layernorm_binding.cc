#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value layerNormBinding(const Napi::CallbackInfo& info) {
  const char* fn = "layerNorm";
  JsBuffer x = floatArg(info[0], fn, "x");
  JsBuffer out = floatArg(info[1], fn, "out");
  JsBuffer weight = optionalFloatArg(info[2], fn, "weight");
  JsBuffer bias = optionalFloatArg(info[3], fn, "bias");
  LayerNormCall call;
  throwIfError(info.Env(),
               prepareLayerNorm(descriptorArg(info[4], fn), x.arg, out.arg, weight.arg, bias.arg, &call));
  runOrSubmit(fn, info, 5, {x.value, out.value, weight.value, bias.value}, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
