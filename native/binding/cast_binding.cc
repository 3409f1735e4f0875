#include "args.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {
namespace {

CastBf16Call unwrapCastBf16(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "castBf16";
  JsBuffer src = floatOrBf16Arg(args[0], fn, "src");
  JsBuffer out = floatOrBf16Arg(args[1], fn, "out");
  CastBf16Call call;
  throwIfError(env, prepareCastBf16(descriptorArg(args[2], fn), src.arg, out.arg, &call));
  buffers->read.push_back(src.value);
  buffers->written.push_back(out.value);
  return call;
}

}  // namespace

Napi::Value castBf16Binding(const Napi::CallbackInfo& info) {
  return runOp<CastBf16Call, unwrapCastBf16>(info, "castBf16", 3);
}

}  // namespace mhsa
