#include "args.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {

LayerNormCall unwrapLayerNorm(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "layerNorm";
  JsBuffer x = floatArg(args[0], fn, "x");
  JsBuffer out = floatArg(args[1], fn, "out");
  JsBuffer weight = optionalFloatArg(args[2], fn, "weight");
  JsBuffer bias = optionalFloatArg(args[3], fn, "bias");
  LayerNormCall call;
  throwIfError(env, prepareLayerNorm(descriptorArg(args[4], fn), x.arg, out.arg, weight.arg, bias.arg, &call));
  buffers->read.insert(buffers->read.end(), {x.value, weight.value, bias.value});
  buffers->written.push_back(out.value);
  return call;
}

Napi::Value layerNormBinding(const Napi::CallbackInfo& info) {
  return runOp<LayerNormCall, unwrapLayerNorm>(info, "layerNorm", 5);
}

}  // namespace mhsa
