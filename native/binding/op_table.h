// The ops, once: each op that computes on buffers, by the name of its entry
// point (and of its sequence() stage), its prepared call (ops/calls.h), the
// function that unwraps its arguments into one, and the namespace of its
// argument indices (ops/descriptor_layouts.h). addon.cc exports an entry point
// for each, and sequence() takes each as a stage. Adding an op is a line here
// (docs/design/adding-an-op.md).
#pragma once

#include <napi.h>

#include "args.h"
#include "async_job.h"

#define MHSA_OPS(X)                                                                 \
  X(matmul, MatmulCall, unwrapMatmul, matmul_args)                                  \
  X(layerNormMatmul, MatmulCall, unwrapLayerNormMatmul, layer_norm_matmul_args)     \
  X(softmax, SoftmaxCall, unwrapSoftmax, softmax_args)                              \
  X(attention, AttentionCall, unwrapAttention, attention_args)                      \
  X(layerNorm, LayerNormCall, unwrapLayerNorm, layer_norm_args)                     \
  X(packMatrix, PackCall, unwrapPackMatrix, pack_matrix_args)                       \
  X(rope, RopeCall, unwrapRope, rope_args)                                          \
  X(cacheAppend, CacheAppendCall, unwrapCacheAppend, cache_append_args)

namespace mhsa {

// Each unwraps the op's arguments (its buffers in the order of its
// MHSA_*_ARGS list, then its descriptor) into a checked call, adding the
// buffers it reads and writes to a JobBuffers (async_job.h). Errors name the op.
#define MHSA_DECLARE_UNWRAP(name, Call, unwrap, args) Call unwrap(Napi::Env env, const OpArgs& args, JobBuffers* buffers);
MHSA_OPS(MHSA_DECLARE_UNWRAP)
#undef MHSA_DECLARE_UNWRAP

// An op's own entry point: its arguments unwrapped by Unwrap, run now or, when
// info[callbackIndex] (the one after the descriptor) is a function, queued.
template <typename Call, Call (*Unwrap)(Napi::Env, const OpArgs&, JobBuffers*)>
Napi::Value runOp(const Napi::CallbackInfo& info, const char* fn, size_t callbackIndex) {
  JobBuffers buffers;
  const Call call = Unwrap(info.Env(), OpArgs(info), &buffers);
  runOrSubmit(fn, info, callbackIndex, buffers, [call] { runCall(call); });
  return info.Env().Undefined();
}

}  // namespace mhsa
