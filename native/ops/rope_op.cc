#include "rope_op.h"

#include <cmath>
#include <string>

#include "../runtime/thread_pool.h"
#include "descriptor.h"
#include "descriptor_layouts.h"

namespace mhsa {

Status prepareRope(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& positions,
                   RopeCall* call) {
  const char* fn = "rope";
  RopeFields f;
  RopeStrideFields strideFields;
  bool hasStrides = false;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f, &strideFields, &hasStrides));
  if (f.layout != 0 && f.layout != 1) return Status::rangeError("rope: layout code must be 0 (bhsd) or 1 (bshd)");
  if (f.x.size() != 4) return Status::rangeError("rope: x must be 4-D, received " + shapeToString(f.x));
  if (f.out != f.x) return Status::rangeError("rope: out.shape must equal x.shape " + shapeToString(f.x));
  // Strides of axes 0-2 in the shape's order; dense unless given. Saturating: a
  // shape with no elements may have huge other dims, and never addresses memory.
  int64_t strides[3] = {mulSat(mulSat(f.x[1], f.x[2]), f.x[3]), mulSat(f.x[2], f.x[3]), f.x[3]};
  if (hasStrides) {
    // Rotated in place: out is x's own view.
    MHSA_RETURN_IF_ERROR(readStrides(fn, "x", {strideFields.s0, strideFields.s1, strideFields.s2}, strides));
    if (out.data != x.data || out.length != x.length)
      return Status::rangeError("rope: with strides, out must be x itself (rotated in place)");
    MHSA_RETURN_IF_ERROR(checkStridedLength(fn, "x", f.x, strides, x.length));
  } else {
    MHSA_RETURN_IF_ERROR(checkLength(fn, "x", f.x, x.length));
    MHSA_RETURN_IF_ERROR(checkLength(fn, "out", f.out, out.length));
  }
  const bool bshd = f.layout == 1;
  const int64_t batch = f.x[0], seq = bshd ? f.x[1] : f.x[2], heads = bshd ? f.x[2] : f.x[1], headDim = f.x[3];
  const double rd = f.rotaryDim;
  if (!(rd >= 0 && rd <= static_cast<double>(headDim)) || std::floor(rd) != rd || std::fmod(rd, 2.0) != 0)
    return Status::rangeError("rope: rotaryDim must be an even whole number from 0 to headDim = " +
                              std::to_string(headDim));
  if (!(f.theta > 0) || !std::isfinite(f.theta))
    return Status::rangeError("rope: theta must be a finite number above 0");
  if (!(f.offset >= 0 && f.offset <= kMaxSafeInteger) || std::floor(f.offset) != f.offset)
    return Status::rangeError("rope: offset must be a non-negative safe integer");
  const int64_t offset = static_cast<int64_t>(f.offset);
  if (offset > static_cast<int64_t>(kMaxSafeInteger) - seq)
    return Status::rangeError("rope: offset + seq must be a safe integer");
  if (positions.present != !f.positions.empty())
    return Status::rangeError("rope: positions.shape must be given exactly when positions is");
  bool perBatch = false;
  if (positions.present && offset != 0) return Status::rangeError("rope: offset must be 0 when positions is given");
  if (positions.present) {
    const Shape& ps = f.positions;
    perBatch = ps.size() == 2;
    if (!(ps.size() == 1 && ps[0] == seq) && !(ps.size() == 2 && ps[0] == batch && ps[1] == seq))
      return Status::rangeError("rope: positions.shape must be [seq] = [" + std::to_string(seq) +
                                "] or [batch, seq] = [" + std::to_string(batch) + ", " + std::to_string(seq) +
                                "], received " + shapeToString(ps));
    MHSA_RETURN_IF_ERROR(checkLength(fn, "positions", ps, positions.length));
    const auto* pos = static_cast<const int32_t*>(positions.data);
    for (int64_t i = 0; i < positions.length; ++i)
      if (pos[i] < 0)
        return Status::rangeError("rope: positions[" + std::to_string(i) + "] must be non-negative, received " +
                                  std::to_string(pos[i]));
  }
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "positions", positions, 4, false));
  RopeProblem& p = call->problem;
  p.x = x.floats();
  p.out = out.mutableFloats();
  p.batch = batch;
  p.seq = seq;
  p.heads = heads;
  p.headDim = headDim;
  p.batchStride = strides[0];
  p.seqStride = bshd ? strides[1] : strides[2];
  p.headStride = bshd ? strides[2] : strides[1];
  p.rotaryDim = static_cast<int64_t>(rd);
  p.interleaved = f.interleaved;
  p.theta = f.theta;
  p.positions = positions.present ? static_cast<const int32_t*>(positions.data) : nullptr;
  p.positionsPerBatch = perBatch;
  p.offset = offset;
  return Status::success();
}

void runCall(const RopeCall& call) {
  ComputeScope computing;
  ropeForward(call.problem);
}

}  // namespace mhsa
