// One op's arguments unwrapped into a prepared call (ops/calls.h), shared by
// the op's own entry point and by sequence(), which prepares every stage
// before it runs any. Each adds the buffers it reads and writes to a
// JobBuffers (async_job.h).
// Errors name the op, as its own entry point does.
#pragma once

#include <napi.h>

#include <vector>

#include "args.h"
#include "async_job.h"

namespace mhsa {

// Each takes the op's arguments in the order of its MHSA_*_ARGS list
// (ops/descriptor_layouts.h): its buffers, then its descriptor.
MatmulCall unwrapMatmul(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
MatmulCall unwrapLayerNormMatmul(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
AttentionCall unwrapAttention(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
LayerNormCall unwrapLayerNorm(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
RopeCall unwrapRope(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
CacheAppendCall unwrapCacheAppend(Napi::Env env, const OpArgs& args, JobBuffers* buffers);

// An op's own entry point: its arguments unwrapped by Unwrap, run now or, when
// info[callbackIndex] is a function, queued (async_job.h).
template <typename Call, Call (*Unwrap)(Napi::Env, const OpArgs&, JobBuffers*)>
Napi::Value runOp(const Napi::CallbackInfo& info, const char* fn, size_t callbackIndex) {
  JobBuffers buffers;
  const Call call = Unwrap(info.Env(), OpArgs(info), &buffers);
  runOrSubmit(fn, info, callbackIndex, buffers, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
