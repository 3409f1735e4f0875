#include "args.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {

RopeCall unwrapRope(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "rope";
  using I = rope_args::Index;
  JsBuffer x = floatArg(args[I::x], fn, "x");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  JsBuffer positions = optionalInt32Arg(args[I::positions], fn, "positions");
  RopeCall call;
  throwIfError(env, prepareRope(descriptorArg(args[I::kDescriptor], fn), x.arg, out.arg, positions.arg, &call));
  buffers->read.insert(buffers->read.end(), {x.value, positions.value});
  buffers->written.push_back(out.value);
  return call;
}


}  // namespace mhsa
