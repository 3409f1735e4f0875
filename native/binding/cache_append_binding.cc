#include "args.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {

CacheAppendCall unwrapCacheAppend(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "cacheAppend";
  using I = cache_append_args::Index;
  JsBuffer kIn = floatArg(args[I::k], fn, "k");
  JsBuffer vIn = floatArg(args[I::v], fn, "v");
  JsBuffer keysOut = floatBf16OrInt8Arg(args[I::keys], fn, "keys");
  JsBuffer valuesOut = floatBf16OrInt8Arg(args[I::values], fn, "values");
  JsBuffer startList = int32Arg(args[I::starts], fn, "starts");
  JsBuffer countList = int32Arg(args[I::counts], fn, "counts");
  JsBuffer keyScales = optionalFloatArg(args[I::keyScales], fn, "keyScales");
  JsBuffer valueScales = optionalFloatArg(args[I::valueScales], fn, "valueScales");
  CacheAppendCall call;
  throwIfError(env, prepareCacheAppend(descriptorArg(args[I::kDescriptor], fn), kIn.arg, vIn.arg, keysOut.arg,
                                       valuesOut.arg, startList.arg, countList.arg, &call, keyScales.arg,
                                       valueScales.arg));
  buffers->read.insert(buffers->read.end(), {kIn.value, vIn.value, startList.value, countList.value});
  buffers->written.insert(buffers->written.end(), {keysOut.value, valuesOut.value, keyScales.value, valueScales.value});
  return call;
}


}  // namespace mhsa
