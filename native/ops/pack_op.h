// packedSize and packMatrix: a matrix packed once for the GEMM (a prepacked
// weight, matmul's bPacked), in float, bf16 or int8.
#pragma once

#include <cstdint>

#include "../kernels/gemm_bf16.h"
#include "../kernels/gemm_int8.h"
#include "call_args.h"

namespace mhsa {

// packedSize: the elements (floats, bf16 values or int8 bytes) a packed op(b)
// takes on this CPU, b 2-D [K, N].
Status preparePackedSize(const Descriptor& desc, int64_t* floats);

// packMatrix(b, out): out = op(b) packed for the GEMM.
struct PackCall {
  bool bf16 = false;           // packed in bf16 (packWholeBBf16) into out16
  bool int8 = false;           // quantized and packed in int8 (packWholeBInt8) into out8
  bool sourceBf16 = false;     // b is already bf16 (b16)
  bool sourceInt8 = false;     // b is already int8 (b8), with its column scales
  StridedInt8Matrix b8{};
  const float* scales = nullptr;
  StridedBf16Matrix b16{};
  uint16_t* out16 = nullptr;
  int8_t* out8 = nullptr;
  StridedMatrix b{};
  int64_t k = 0, n = 0;
  float* out = nullptr;
};
// scales: absent, or for an int8 b, op(b)'s column scales (N floats).
Status preparePackMatrix(const Descriptor& desc, const BufferArg& b, const BufferArg& out, const BufferArg& scales,
                         PackCall* call);
void runCall(const PackCall& call);

}  // namespace mhsa
