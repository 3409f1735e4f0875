#include "args.h"
#include "async_job.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {

LayerNormCall unwrapLayerNorm(Napi::Env env, const OpArgs& args, KeepAlive* keep) {
  const char* fn = "layerNorm";
  JsBuffer x = floatArg(args[0], fn, "x");
  JsBuffer out = floatArg(args[1], fn, "out");
  JsBuffer weight = optionalFloatArg(args[2], fn, "weight");
  JsBuffer bias = optionalFloatArg(args[3], fn, "bias");
  LayerNormCall call;
  throwIfError(env, prepareLayerNorm(descriptorArg(args[4], fn), x.arg, out.arg, weight.arg, bias.arg, &call));
  keep->insert(keep->end(), {x.value, out.value, weight.value, bias.value});
  return call;
}

Napi::Value layerNormBinding(const Napi::CallbackInfo& info) {
  KeepAlive keep;
  const LayerNormCall call = unwrapLayerNorm(info.Env(), OpArgs(info), &keep);
  runOrSubmit("layerNorm", info, 5, keep, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
