#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value matmulBinding(const Napi::CallbackInfo& info) {
  const char* fn = "matmul";
  JsBuffer a = floatArg(info[0], fn, "a");
  JsBuffer b = floatArg(info[1], fn, "b");
  JsBuffer c = optionalFloatArg(info[2], fn, "c");
  JsBuffer out = floatArg(info[3], fn, "out");
  MatmulCall call;
  throwIfError(info.Env(), prepareMatmul(descriptorArg(info[4], fn), a.arg, b.arg, c.arg, out.arg, &call));
  runOrSubmit(fn, info, 5, {a.value, b.value, c.value, out.value}, [call] { runCall(call); });
  return info.Env().Undefined();
}

Napi::Value layerNormMatmulBinding(const Napi::CallbackInfo& info) {
  const char* fn = "layerNormMatmul";
  JsBuffer a = floatArg(info[0], fn, "a");
  JsBuffer b = floatArg(info[1], fn, "b");
  JsBuffer c = optionalFloatArg(info[2], fn, "c");
  JsBuffer out = floatArg(info[3], fn, "out");
  JsBuffer weight = optionalFloatArg(info[4], fn, "weight");
  JsBuffer bias = optionalFloatArg(info[5], fn, "bias");
  MatmulCall call;
  throwIfError(info.Env(), prepareLayerNormMatmul(descriptorArg(info[6], fn), a.arg, b.arg, c.arg, out.arg, weight.arg,
                                                  bias.arg, &call));
  runOrSubmit(fn, info, 7, {a.value, b.value, c.value, out.value, weight.value, bias.value}, [call] { runCall(call); });
  return info.Env().Undefined();
}

Napi::Value packedSizeBinding(const Napi::CallbackInfo& info) {
  int64_t floats = 0;
  throwIfError(info.Env(), preparePackedSize(descriptorArg(info[0], "packMatrix"), &floats));
  return Napi::Number::New(info.Env(), static_cast<double>(floats));
}

Napi::Value packMatrixBinding(const Napi::CallbackInfo& info) {
  const char* fn = "packMatrix";
  JsBuffer b = floatArg(info[0], fn, "b");
  JsBuffer out = floatArg(info[1], fn, "out");
  PackCall call;
  throwIfError(info.Env(), preparePackMatrix(descriptorArg(info[2], fn), b.arg, out.arg, &call));
  runOrSubmit(fn, info, 3, {b.value, out.value}, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
