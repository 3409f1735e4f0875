// One op's arguments unwrapped into a prepared call (ops/calls.h), shared by
// the op's own entry point and by sequence(), which prepares every stage
// before it runs any. Each appends the JS values an async job keeps alive.
// Errors name the op, as its own entry point does.
#pragma once

#include <napi.h>

#include <vector>

#include "args.h"
#include "async_job.h"

namespace mhsa {

using KeepAlive = JobBuffers;

// matmul(a, b, c|null, out, desc)
MatmulCall unwrapMatmul(Napi::Env env, const OpArgs& args, KeepAlive* keep);
// layerNormMatmul(a, b, c|null, out, weight|null, bias|null, desc)
MatmulCall unwrapLayerNormMatmul(Napi::Env env, const OpArgs& args, KeepAlive* keep);
// attention(q, k, v, out, mask|null, keyPaddingMask|null, weights|null, desc)
AttentionCall unwrapAttention(Napi::Env env, const OpArgs& args, KeepAlive* keep);
// layerNorm(x, out, weight|null, bias|null, desc)
LayerNormCall unwrapLayerNorm(Napi::Env env, const OpArgs& args, KeepAlive* keep);

// An op's own entry point: its arguments unwrapped by Unwrap, run now or, when
// info[callbackIndex] is a function, queued (async_job.h).
template <typename Call, Call (*Unwrap)(Napi::Env, const OpArgs&, KeepAlive*)>
Napi::Value runOp(const Napi::CallbackInfo& info, const char* fn, size_t callbackIndex) {
  KeepAlive keep;
  const Call call = Unwrap(info.Env(), OpArgs(info), &keep);
  runOrSubmit(fn, info, callbackIndex, keep, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
