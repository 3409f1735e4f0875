#include "args.h"
#include "op_table.h"

namespace mhsa {

SoftmaxCall unwrapSoftmax(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "softmax";
  using I = softmax_args::Index;
  JsBuffer x = floatArg(args[I::x], fn, "x");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  SoftmaxCall call;
  throwIfError(env, prepareSoftmax(descriptorArg(args[I::kDescriptor], fn), x.arg, out.arg, &call));
  buffers->read.push_back(x.value);
  buffers->written.push_back(out.value);
  return call;
}

}  // namespace mhsa
