#include "args.h"
#include "async_job.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {

MatmulCall unwrapMatmul(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "matmul";
  using I = matmul_args::Index;
  JsBuffer a = floatArg(args[I::a], fn, "a");
  JsBuffer b = floatBf16OrInt8Arg(args[I::b], fn, "b");
  JsBuffer c = optionalFloatArg(args[I::c], fn, "c");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  MatmulCall call;
  throwIfError(env, prepareMatmul(descriptorArg(args[I::kDescriptor], fn), a.arg, b.arg, c.arg, out.arg, &call));
  buffers->read.insert(buffers->read.end(), {a.value, b.value, c.value});
  buffers->written.push_back(out.value);
  return call;
}

MatmulCall unwrapLayerNormMatmul(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "layerNormMatmul";
  using I = layer_norm_matmul_args::Index;
  JsBuffer a = floatArg(args[I::a], fn, "a");
  JsBuffer b = floatBf16OrInt8Arg(args[I::b], fn, "b");
  JsBuffer c = optionalFloatArg(args[I::c], fn, "c");
  JsBuffer out = floatArg(args[I::out], fn, "out");
  JsBuffer weight = optionalFloatArg(args[I::weight], fn, "weight");
  JsBuffer bias = optionalFloatArg(args[I::bias], fn, "bias");
  MatmulCall call;
  throwIfError(env, prepareLayerNormMatmul(descriptorArg(args[I::kDescriptor], fn), a.arg, b.arg, c.arg, out.arg, weight.arg,
                                           bias.arg, &call));
  buffers->read.insert(buffers->read.end(), {a.value, b.value, c.value, weight.value, bias.value});
  buffers->written.push_back(out.value);
  return call;
}


Napi::Value packedSizeBinding(const Napi::CallbackInfo& info) {
  int64_t floats = 0;
  throwIfError(info.Env(), preparePackedSize(descriptorArg(info[packed_size_args::kDescriptor], "packMatrix"), &floats));
  return Napi::Number::New(info.Env(), static_cast<double>(floats));
}

// alignedOffset(view): elements from the start of a Float32Array,
// Uint16Array or Int8Array to its first 64-byte boundary. A large typed array's memory
// never moves, so prepack places its panels there: the kernels load whole
// 64-byte rows of them (vectors, AMX tile rows), and a row that straddles two
// cache lines costs two. Sapphire Rapids, 2 threads, the same packed weight
// at both addresses in one process, 197 x 768 x 2304: 16 bytes off took
// 1.065 and 1.067x the time in float32, 1.043 and 1.055x in bf16 (AMX); the
// memory-bound 1 x 4096 x 4096 moved 0.96-1.02x either way.
Napi::Value alignedOffsetBinding(const Napi::CallbackInfo& info) {
  JsBuffer view = floatBf16OrInt8Arg(info[0], "alignedOffset", "view");
  const auto address = reinterpret_cast<uintptr_t>(view.arg.data);
  const int64_t bytes = static_cast<int64_t>((64 - address % 64) % 64);
  return Napi::Number::New(info.Env(), static_cast<double>(bytes / view.arg.elementBytes()));
}

PackCall unwrapPackMatrix(Napi::Env env, const OpArgs& args, JobBuffers* buffers) {
  const char* fn = "packMatrix";
  using I = pack_matrix_args::Index;
  JsBuffer b = floatBf16OrInt8Arg(args[I::b], fn, "b");
  JsBuffer out = floatBf16OrInt8Arg(args[I::out], fn, "out");
  JsBuffer scales = optionalFloatArg(args[I::scales], fn, "scales");
  PackCall call;
  throwIfError(env, preparePackMatrix(descriptorArg(args[I::kDescriptor], fn), b.arg, out.arg, scales.arg, &call));
  buffers->read.insert(buffers->read.end(), {b.value, scales.value});
  buffers->written.push_back(out.value);
  return call;
}

}  // namespace mhsa
