#include "layernorm_op.h"

#include <string>

#include "../kernels/layernorm.h"
#include "../runtime/thread_pool.h"
#include "descriptor_layouts.h"

namespace mhsa {

Status prepareLayerNorm(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& weight,
                        const BufferArg& bias, LayerNormCall* call) {
  const char* fn = "layerNorm";
  LayerNormFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f));
  const Shape& xs = f.x;
  const Shape& os = f.out;
  const double eps = f.eps;
  if (xs.empty()) return Status::rangeError("layerNorm: x must have at least 1 dim");
  MHSA_RETURN_IF_ERROR(checkLength(fn, "x", xs, x.length));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "out", os, out.length));
  if (os != xs) return Status::rangeError("layerNorm: out.shape must equal x.shape " + shapeToString(xs));
  const int64_t dim = xs.back();
  if (weight.present && weight.length != dim)
    return Status::rangeError("layerNorm: weight.length must be " + std::to_string(dim) + ", received " +
                              std::to_string(weight.length));
  if (bias.present && bias.length != dim)
    return Status::rangeError("layerNorm: bias.length must be " + std::to_string(dim) + ", received " +
                              std::to_string(bias.length));
  if (!(eps >= 0) || !isFiniteFloat(eps))
    return Status::rangeError("layerNorm: eps must be a finite non-negative number");
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "weight", weight, 4, false));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "bias", bias, 4, false));
  call->x = x.floats();
  call->out = out.mutableFloats();
  call->weight = weight.present ? weight.floats() : nullptr;
  call->bias = bias.present ? bias.floats() : nullptr;
  call->dim = dim;
  call->rows = dim == 0 ? 0 : x.length / dim;
  call->eps = static_cast<float>(eps);
  call->rms = f.rms;
  return Status::success();
}

void runCall(const LayerNormCall& call) {
  ComputeScope computing;
  if (call.rms)
    rmsNormRows(call.x, call.out, call.rows, call.dim, call.weight, call.bias, call.eps);
  else
    layerNormRows(call.x, call.out, call.rows, call.dim, call.weight, call.bias, call.eps);
}

}  // namespace mhsa
