#include "args.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {

AttentionCall unwrapAttention(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "attention";
  JsBuffer q = floatArg(args[0], fn, "q");
  JsBuffer k = floatOrBf16Arg(args[1], fn, "k");
  JsBuffer v = floatOrBf16Arg(args[2], fn, "v");
  JsBuffer out = floatArg(args[3], fn, "out");
  JsBuffer mask = optionalFloatArg(args[4], fn, "mask");
  JsBuffer pad = optionalByteArg(args[5], fn, "keyPaddingMask");
  JsBuffer weights = optionalFloatArg(args[6], fn, "weights");
  JsBuffer sinks = optionalFloatArg(args[7], fn, "sinks");
  JsBuffer keyLengths = optionalInt32Arg(args[8], fn, "keyLengths");
  AttentionCall call;
  throwIfError(env, prepareAttention(descriptorArg(args[9], fn), q.arg, k.arg, v.arg, out.arg, mask.arg, pad.arg,
                                     weights.arg, sinks.arg, keyLengths.arg, &call));
  buffers->read.insert(buffers->read.end(), {q.value, k.value, v.value, mask.value, pad.value, sinks.value, keyLengths.value});
  buffers->written.insert(buffers->written.end(), {out.value, weights.value});
  return call;
}

Napi::Value attentionBinding(const Napi::CallbackInfo& info) {
  return runOp<AttentionCall, unwrapAttention>(info, "attention", 10);
}

}  // namespace mhsa
