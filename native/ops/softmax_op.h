// softmax along the last axis; out may be x itself.
#pragma once

#include "call_args.h"
#include "shape.h"

namespace mhsa {

struct SoftmaxArgs {
  Shape x, out;
  int64_t xLength = 0, outLength = 0;
};

struct SoftmaxPlan {
  int64_t rows = 0, cols = 0;
};

Status planSoftmax(const SoftmaxArgs& args, SoftmaxPlan* plan);
void runSoftmax(const SoftmaxPlan& plan, const float* x, float* out, float scale);

// softmax(x, out). out may be x itself.
struct SoftmaxCall {
  SoftmaxPlan plan;
  const float* x = nullptr;
  float* out = nullptr;
  float scale = 1;
};
Status prepareSoftmax(const Descriptor& desc, const BufferArg& x, const BufferArg& out, SoftmaxCall* call);
void runCall(const SoftmaxCall& call);

}  // namespace mhsa
