#include "pack_op.h"

#include <cmath>
#include <string>

#include "../runtime/thread_pool.h"
#include "descriptor_layouts.h"

namespace mhsa {

namespace {

// Values already quantized must be symmetric (the AVX2 kernel's sign trick
// and the int32 bound assume |v| <= 127), and their scales finite numbers.
Status checkQuantized(const BufferArg& b, const BufferArg& scales, int64_t n) {
  if (scales.length != n)
    return Status::rangeError("packMatrix: scales must hold one per column of op(b), " + std::to_string(n) +
                              ", received " + std::to_string(scales.length));
  for (int64_t i = 0; i < b.length; ++i)
    if (b.bytes()[i] == -128)
      return Status::rangeError("packMatrix: b holds -128 at element " + std::to_string(i) +
                                ": int8 weights are symmetric, in [-127, 127]");
  for (int64_t j = 0; j < n; ++j)
    if (!std::isfinite(scales.floats()[j]))
      return Status::rangeError("packMatrix: scales[" + std::to_string(j) + "] is not a finite number");
  return Status::success();
}

}  // namespace

Status preparePackedSize(const Descriptor& desc, int64_t* floats) {
  PackedSizeFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, "packMatrix", &f));
  const Shape& s = f.b;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  if (elementCount(s) < 0)
    return Status::rangeError("packMatrix: b.shape " + shapeToString(s) + " is too large");
  if (f.bf16 && f.int8) return Status::rangeError("packMatrix: bf16 and int8 are two dtypes; choose one");
  *floats = f.int8 ? packedInt8Bytes(s[0], s[1]) : f.bf16 ? packedBf16Size(s[0], s[1]) : packedBSize(s[0], s[1]);
  return Status::success();
}

Status preparePackMatrix(const Descriptor& desc, const BufferArg& b, const BufferArg& out, const BufferArg& scales,
                         PackCall* call) {
  const char* fn = "packMatrix";
  PackMatrixFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f));
  const Shape& s = f.b;
  const bool transpose = f.transpose;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "b", s, b.length));
  // The packed matrix is op(b): [K, N] = b's shape, or its transpose.
  const int64_t k = transpose ? s[1] : s[0], n = transpose ? s[0] : s[1];
  if (f.bf16 && f.int8) return Status::rangeError("packMatrix: bf16 and int8 are two dtypes; choose one");
  if (out.bf16 != f.bf16 || out.int8 != f.int8)
    return Status::typeError(f.int8   ? "packMatrix: out must be an Int8Array for int8"
                             : f.bf16 ? "packMatrix: out must be a Uint16Array for bf16"
                                      : "packMatrix: out must be a Float32Array");
  if (b.int8 && !f.int8) return Status::rangeError("packMatrix: an int8 b packs only in int8");
  if (b.int8 != scales.present)
    return Status::rangeError(b.int8 ? "packMatrix: an int8 b needs its scales, one per column of op(b)"
                                     : "packMatrix: scales go only with an int8 b");
  if (b.bf16 && !f.bf16)
    return Status::rangeError("packMatrix: a bf16 b packs only in bf16");
  if (f.int8 && k > kInt8MaxDepth)
    return Status::rangeError("packMatrix: int8 packs a depth K of at most " + std::to_string(kInt8MaxDepth) +
                              " (int32 sums), received " + std::to_string(k));
  const int64_t want = f.int8 ? packedInt8Bytes(k, n) : f.bf16 ? packedBf16Size(k, n) : packedBSize(k, n);
  if (out.length != want)
    return Status::rangeError("packMatrix: out must hold " + std::to_string(want) +
                              (f.int8 ? " bytes" : f.bf16 ? " bf16 values" : " floats") + ", received " +
                              std::to_string(out.length));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, out.elementBytes(), "b", b, b.elementBytes(), false));
  if (b.int8) MHSA_RETURN_IF_ERROR(checkQuantized(b, scales, n));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, out.elementBytes(), "scales", scales, 4, false));
  const int64_t rowStride = transpose ? 1 : s[1], colStride = transpose ? s[1] : 1;
  call->bf16 = f.bf16;
  call->int8 = f.int8;
  if (f.int8) call->out8 = static_cast<int8_t*>(const_cast<void*>(out.data));
  call->sourceBf16 = b.bf16;
  call->sourceInt8 = b.int8;
  if (b.int8) {
    call->b8 = StridedInt8Matrix{b.bytes(), rowStride, colStride};
    call->scales = scales.floats();
  } else if (b.bf16)
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
  if (call.sourceInt8) {
    packWholeBQuantized(call.b8, call.k, call.n, call.scales, call.out8);
  } else if (call.int8) {
    packWholeBInt8(call.b, call.k, call.n, call.out8);
  } else if (!call.bf16) {
    packWholeB(call.b, call.k, call.n, call.out);
  } else if (call.sourceBf16) {
    packWholeBBf16(call.b16, call.k, call.n, call.out16);
  } else {
    packWholeBBf16(call.b, call.k, call.n, call.out16);
  }
}

}  // namespace mhsa
