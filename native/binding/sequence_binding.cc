#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "args.h"
#include "async_job.h"
#include "bindings.h"
#include "op_table.h"

namespace mhsa {
namespace {

// A block's forward has at most six: its norm, the QKV projection, rope on q
// and k, the cache append, attention and the output projection (or, in the
// encoder form, the weights' head average).
constexpr uint32_t kMaxStages = 8;

// A checked stage, ready to run.
using StageCall = std::function<void()>;

// The most arguments any stage's op takes: attention's buffers and its descriptor.
constexpr uint32_t kMaxStageArgs = attention_args::kDescriptor + 1;

// One stage as read out of the JS array: its kind and its arguments.
struct StageValues {
  std::string kind;
  std::vector<Napi::Value> args;
};

StageValues readStage(Napi::Env env, const Napi::Value& value, uint32_t index) {
  const std::string where = "sequence: stage " + std::to_string(index);
  if (!value.IsArray()) throw Napi::TypeError::New(env, where + " must be an array [kind, ...arguments]");
  const Napi::Array stage = value.As<Napi::Array>();
  const Napi::Value kind = stage.Get(0u);
  if (!kind.IsString()) throw Napi::TypeError::New(env, where + ": its kind (item 0) must be a string");
  StageValues r{kind.As<Napi::String>().Utf8Value(), {}};
  // Only the items the stage has are read (each read is a property lookup); the rest are undefined.
  const uint32_t given = std::min(stage.Length(), kMaxStageArgs + 1);
  r.args.reserve(kMaxStageArgs);
  for (uint32_t i = 1; i < given; ++i) r.args.push_back(stage.Get(i));
  while (r.args.size() < kMaxStageArgs) r.args.push_back(env.Undefined());
  return r;
}

StageCall unwrapStage(Napi::Env env, const StageValues& stage, uint32_t index, JobBuffers* buffers) {
  const OpArgs args(stage.args);
#define MHSA_UNWRAP_STAGE(name, Call, unwrap, argIndices) \
  if (stage.kind == #name) return [call = unwrap(env, args, buffers)] { runCall(call); };
  MHSA_OPS(MHSA_UNWRAP_STAGE)
#undef MHSA_UNWRAP_STAGE
#define MHSA_KIND_NAME(name, Call, unwrap, argIndices) " " #name
  throw Napi::RangeError::New(env, "sequence: stage " + std::to_string(index) + ": kind must be one of" +
                                       MHSA_OPS(MHSA_KIND_NAME) + ", received '" + stage.kind + "'");
#undef MHSA_KIND_NAME
}

}  // namespace

Napi::Value sequenceBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray()) throw Napi::TypeError::New(env, "sequence: stages must be an array");
  const Napi::Array list = info[0].As<Napi::Array>();
  const uint32_t count = list.Length();
  if (count > kMaxStages)
    throw Napi::RangeError::New(env, "sequence: at most " + std::to_string(kMaxStages) + " stages, received " +
                                         std::to_string(count));
  // Every item is read first: reading one can run JS (a getter, a Proxy's
  // trap), which must not meet a buffer already unwrapped into a pointer
  // (it could detach or shrink it). Then every stage is unwrapped and checked
  // before any runs: a bad stage throws with nothing written.
  std::vector<StageValues> values;
  values.reserve(count);
  for (uint32_t i = 0; i < count; ++i) values.push_back(readStage(env, list.Get(i), i));
  JobBuffers buffers;
  std::vector<StageCall> calls;
  calls.reserve(count);
  for (uint32_t i = 0; i < count; ++i) calls.push_back(unwrapStage(env, values[i], i, &buffers));
  runOrSubmit("sequence", info, 1, buffers, [calls] {
    for (const StageCall& call : calls) call();
  });
  return env.Undefined();
}

}  // namespace mhsa
