// matmul: out[..., M, N] = alpha * op(a)[..., M, K] * op(b)[..., K, N] + beta * c
// with numpy broadcasting of the leading (batch) dims, and c broadcast to out.
#pragma once

#include "../kernels/gemm.h"
#include "call_args.h"
#include "shape.h"

namespace mhsa {

struct MatmulArgs {
  const char* fn = "matmul";  // the entry point its errors name
  Shape a, b, out;
  Shape c;  // used only when hasC
  bool hasC = false;
  bool transposeA = false, transposeB = false;
  // b is a prepacked matrix (packWholeB) of logical shape [K, N]: its data is
  // packedBSize(K, N) floats, not K * N.
  bool bPacked = false;
  bool bBf16 = false;  // b is packed in bf16 (packWholeBBf16): bLength counts uint16 elements
  bool bInt8 = false;  // b is packed in int8 (packWholeBInt8): bLength counts bytes
  int64_t aLength = 0, bLength = 0, cLength = 0, outLength = 0;
};

struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0;
  Shape batch;                                 // broadcast batch dims of the result
  Shape aBatchStrides, bBatchStrides, cBatchStrides;
  int64_t aRowStride = 0, aColStride = 0;      // of op(a)
  int64_t bRowStride = 0, bColStride = 0;      // of op(b)
  int64_t cRowStride = 0, cColStride = 0;      // 0 where c broadcasts
  bool hasC = false;
  bool bPacked = false;
  bool bBf16 = false;
  bool bInt8 = false;
  int64_t batchCount = 0;
};

// Checks every shape and length; on success fills plan.
Status planMatmul(const MatmulArgs& args, MatmulPlan* plan);

// Runs a planned product on the thread pool. c may be null (then beta is ignored)
// and may equal out. aNorm, when set, LayerNorms a's rows as they are packed
// (GemmProblem::aLayerNorm: a row-major a, a prepacked b, K <= kGemmMaxLayerNormK).
void runMatmul(const MatmulPlan& plan, const float* a, const float* b, const float* c, float* out,
               float alpha, float beta, const RowLayerNorm* aNorm = nullptr);

// matmul(a, b, c?, out).
struct MatmulCall {
  MatmulPlan plan;
  const float* a = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  float* out = nullptr;
  float alpha = 1, beta = 0;
  bool layerNorm = false;  // a's rows LayerNorm'd as they are packed (norm)
  RowLayerNorm norm{};
};
Status prepareMatmul(const Descriptor& desc, const BufferArg& a, const BufferArg& b, const BufferArg& c,
                     const BufferArg& out, MatmulCall* call);
void runCall(const MatmulCall& call);

// layerNormMatmul(a, b, c?, out, weight?, bias?):
// matmul of LayerNorm(a's rows) without writing the normalized a anywhere
// (the block's LayerNorm before its QKV projection): a row-major (no
// transposeA), b prepacked, K <= kGemmMaxLayerNormK, weight and bias K long.
Status prepareLayerNormMatmul(const Descriptor& desc, const BufferArg& a, const BufferArg& b, const BufferArg& c,
                              const BufferArg& out, const BufferArg& weight, const BufferArg& bias, MatmulCall* call);

}  // namespace mhsa
