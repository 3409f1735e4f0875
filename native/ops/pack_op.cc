#include "pack_op.h"

#include <string>

#include "../runtime/thread_pool.h"
#include "descriptor_layouts.h"

namespace mhsa {

Status preparePackedSize(const Descriptor& desc, int64_t* floats) {
  PackedSizeFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, "packMatrix", &f));
  const Shape& s = f.b;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  if (elementCount(s) < 0)
    return Status::rangeError("packMatrix: b.shape " + shapeToString(s) + " is too large");
  *floats = f.bf16 ? packedBf16Size(s[0], s[1]) : packedBSize(s[0], s[1]);
  return Status::success();
}

Status preparePackMatrix(const Descriptor& desc, const BufferArg& b, const BufferArg& out, PackCall* call) {
  const char* fn = "packMatrix";
  PackMatrixFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f));
  const Shape& s = f.b;
  const bool transpose = f.transpose;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "b", s, b.length));
  // The packed matrix is op(b): [K, N] = b's shape, or its transpose.
  const int64_t k = transpose ? s[1] : s[0], n = transpose ? s[0] : s[1];
  if (out.bf16 != f.bf16)
    return Status::typeError(f.bf16 ? "packMatrix: out must be a Uint16Array for bf16" : "packMatrix: out must be a Float32Array");
  if (b.bf16 && !f.bf16)
    return Status::rangeError("packMatrix: a bf16 b packs only in bf16");
  const int64_t want = f.bf16 ? packedBf16Size(k, n) : packedBSize(k, n);
  if (out.length != want)
    return Status::rangeError("packMatrix: out must hold " + std::to_string(want) + (f.bf16 ? " bf16 values" : " floats") +
                              ", received " + std::to_string(out.length));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, out.elementBytes(), "b", b, b.elementBytes(), false));
  const int64_t rowStride = transpose ? 1 : s[1], colStride = transpose ? s[1] : 1;
  call->bf16 = f.bf16;
  call->sourceBf16 = b.bf16;
  if (b.bf16)
    call->b16 = StridedBf16Matrix{b.halves(), rowStride, colStride};
  else
    call->b = StridedMatrix{b.floats(), rowStride, colStride};
  if (f.bf16) call->out16 = static_cast<uint16_t*>(const_cast<void*>(out.data));
  call->k = k;
  call->n = n;
  call->out = out.mutableFloats();
  return Status::success();
}

void runCall(const PackCall& call) {
  ComputeScope computing;
  if (!call.bf16) {
    packWholeB(call.b, call.k, call.n, call.out);
  } else if (call.sourceBf16) {
    packWholeBBf16(call.b16, call.k, call.n, call.out16);
  } else {
    packWholeBBf16(call.b, call.k, call.n, call.out16);
  }
}

}  // namespace mhsa
