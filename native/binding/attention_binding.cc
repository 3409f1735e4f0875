#include "args.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {

AttentionCall unwrapAttention(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "attention";
  using I = attention_args::Index;
  JsBuffer q = floatArg(args[I::q], fn, "q");
  JsBuffer k = floatBf16OrInt8Arg(args[I::k], fn, "k");
  JsBuffer v = floatBf16OrInt8Arg(args[I::v], fn, "v");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  JsBuffer mask = optionalFloatArg(args[I::mask], fn, "mask");
  JsBuffer pad = optionalByteArg(args[I::keyPaddingMask], fn, "keyPaddingMask");
  JsBuffer weights = optionalFloatArg(args[I::weights], fn, "weights");
  JsBuffer sinks = optionalFloatArg(args[I::sinks], fn, "sinks");
  JsBuffer keyLengths = optionalInt32Arg(args[I::keyLengths], fn, "keyLengths");
  JsBuffer kScales = optionalFloatArg(args[I::kScales], fn, "kScales");
  JsBuffer vScales = optionalFloatArg(args[I::vScales], fn, "vScales");
  AttentionCall call;
  throwIfError(env, prepareAttention(descriptorArg(args[I::kDescriptor], fn), q.arg, k.arg, v.arg, out.arg, mask.arg, pad.arg,
                                     weights.arg, sinks.arg, keyLengths.arg, &call, kScales.arg, vScales.arg));
  buffers->read.insert(buffers->read.end(), {q.value, k.value, v.value, mask.value, pad.value, sinks.value, keyLengths.value,
                                             kScales.value, vScales.value});
  buffers->written.insert(buffers->written.end(), {out.value, weights.value});
  return call;
}


}  // namespace mhsa
