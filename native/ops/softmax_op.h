// softmax along the last axis; out may be x itself.
#pragma once

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

}  // namespace mhsa
