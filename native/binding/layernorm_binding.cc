#include "args.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {

LayerNormCall unwrapLayerNorm(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "layerNorm";
  using I = layer_norm_args::Index;
  JsBuffer x = floatArg(args[I::x], fn, "x");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  JsBuffer weight = optionalFloatArg(args[I::weight], fn, "weight");
  JsBuffer bias = optionalFloatArg(args[I::bias], fn, "bias");
  LayerNormCall call;
  throwIfError(env, prepareLayerNorm(descriptorArg(args[I::kDescriptor], fn), x.arg, out.arg, weight.arg, bias.arg, &call));
  buffers->read.insert(buffers->read.end(), {x.value, weight.value, bias.value});
  buffers->written.push_back(out.value);
  return call;
}


}  // namespace mhsa
