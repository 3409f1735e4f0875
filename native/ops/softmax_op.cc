#include "softmax_op.h"

#include "../kernels/softmax.h"

namespace mhsa {

Status planSoftmax(const SoftmaxArgs& args, SoftmaxPlan* plan) {
  if (args.x.empty())
    return Status::rangeError("softmax: x must have at least 1 dim, received shape []");
  Status st = checkLength("softmax", "x", args.x, args.xLength);
  if (!st.ok()) return st;
  if (!(st = checkLength("softmax", "out", args.out, args.outLength)).ok()) return st;
  if (args.out != args.x)
    return Status::rangeError("softmax: out.shape must be " + shapeToString(args.x) + ", received " +
                              shapeToString(args.out));
  plan->cols = args.x.back();
  plan->rows = plan->cols == 0 ? 0 : elementCount(args.x) / plan->cols;
  return Status::success();
}

void runSoftmax(const SoftmaxPlan& plan, const float* x, float* out, float scale) {
  softmaxRows(x, out, plan.rows, plan.cols, scale);
}

}  // namespace mhsa
