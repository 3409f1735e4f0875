#include <string>
#include <variant>
#include <vector>

#include "args.h"
#include "async_job.h"
#include "bindings.h"
#include "stages.h"

namespace mhsa {
namespace {

// A block's forward has at most five: LayerNorm, the QKV projection,
// attention, the output projection and the weights' head average.
constexpr uint32_t kMaxStages = 8;

using StageCall = std::variant<MatmulCall, AttentionCall, LayerNormCall>;

StageCall unwrapStage(Napi::Env env, const Napi::Value& value, uint32_t index, KeepAlive* keep) {
  const std::string where = "sequence: stage " + std::to_string(index);
  if (!value.IsArray()) throw Napi::TypeError::New(env, where + " must be an array [kind, ...arguments]");
  const Napi::Array stage = value.As<Napi::Array>();
  const Napi::Value kindValue = stage.Get(0u);
  if (!kindValue.IsString()) throw Napi::TypeError::New(env, where + ": its kind (item 0) must be a string");
  const std::string kind = kindValue.As<Napi::String>().Utf8Value();
  const OpArgs args(stage, 1);
  if (kind == "matmul") return unwrapMatmul(env, args, keep);
  if (kind == "layerNormMatmul") return unwrapLayerNormMatmul(env, args, keep);
  if (kind == "attention") return unwrapAttention(env, args, keep);
  if (kind == "layerNorm") return unwrapLayerNorm(env, args, keep);
  throw Napi::RangeError::New(env, where + ": kind must be matmul, layerNormMatmul, attention or layerNorm, received '" +
                                       kind + "'");
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
  // Every stage is unwrapped and checked before any runs: a bad stage throws
  // with nothing written.
  KeepAlive keep;
  std::vector<StageCall> calls;
  calls.reserve(count);
  for (uint32_t i = 0; i < count; ++i) calls.push_back(unwrapStage(env, list.Get(i), i, &keep));
  runOrSubmit("sequence", info, 1, keep, [calls] {
    for (const StageCall& call : calls) std::visit([](const auto& c) { runCall(c); }, call);
  });
  return env.Undefined();
}

}  // namespace mhsa
