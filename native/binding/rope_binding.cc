#include "args.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {
namespace {

RopeCall unwrapRope(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "rope";
  JsBuffer x = floatArg(args[0], fn, "x");
  JsBuffer out = floatArg(args[1], fn, "out");
  JsBuffer positions = optionalInt32Arg(args[2], fn, "positions");
  RopeCall call;
  throwIfError(env, prepareRope(descriptorArg(args[3], fn), x.arg, out.arg, positions.arg, &call));
  buffers->read.insert(buffers->read.end(), {x.value, positions.value});
  buffers->written.push_back(out.value);
  return call;
}

}  // namespace

Napi::Value ropeBinding(const Napi::CallbackInfo& info) { return runOp<RopeCall, unwrapRope>(info, "rope", 4); }

}  // namespace mhsa
