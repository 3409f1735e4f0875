#include "softmax_op.h"

#include "../kernels/softmax.h"
#include "../runtime/thread_pool.h"
#include "descriptor_layouts.h"

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

Status prepareSoftmax(const Descriptor& desc, const BufferArg& x, const BufferArg& out, SoftmaxCall* call) {
  const char* fn = "softmax";
  SoftmaxFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f));
  SoftmaxArgs args;
  args.x = f.x;
  args.out = f.out;
  const double scale = f.scale;
  if (!isFiniteFloat(scale)) return Status::rangeError("softmax: scale must be a finite float32 number");
  args.xLength = x.length;
  args.outLength = out.length;
  MHSA_RETURN_IF_ERROR(planSoftmax(args, &call->plan));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  call->x = x.floats();
  call->out = out.mutableFloats();
  call->scale = static_cast<float>(scale);
  return Status::success();
}

void runCall(const SoftmaxCall& call) {
  ComputeScope computing;
  runSoftmax(call.plan, call.x, call.out, call.scale);
}

}  // namespace mhsa
