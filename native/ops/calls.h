// One function per native entry point that turns raw arguments (buffers as
// pointer + length, and the descriptor of doubles built by lib/native.ts) into
// a checked, ready-to-run call. Every check that protects memory lives here:
// shapes against lengths, sizes against overflow, out against aliasing. The
// Node binding only unwraps typed arrays and calls these; the native tests and
// the fuzzer call them directly. A call that prepares successfully can run
// without reading or writing outside its buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../kernels/gemm_bf16.h"
#include "../kernels/rope.h"
#include "attention_op.h"
#include "matmul_op.h"
#include "softmax_op.h"

namespace mhsa {

// A typed array as the binding saw it. present is false for null/undefined.
// length counts elements (floats, or bytes for a Uint8Array).
struct BufferArg {
  const void* data = nullptr;
  int64_t length = 0;
  bool present = false;

  // A Uint16Array of bf16 values (a prepacked bf16 matrix, or a checkpoint's
  // tensor kept in bf16), where the op takes one.
  bool bf16 = false;

  const float* floats() const { return static_cast<const float*>(data); }
  const uint16_t* halves() const { return static_cast<const uint16_t*>(data); }
  int64_t elementBytes() const { return bf16 ? 2 : 4; }
  float* mutableFloats() const { return static_cast<float*>(const_cast<void*>(data)); }
};

struct Descriptor {
  const double* data = nullptr;
  size_t length = 0;
};

// Each call's descriptor holds the fields that descriptor_layouts.h lists for it.

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

// softmax(x, out). out may be x itself.
struct SoftmaxCall {
  SoftmaxPlan plan;
  const float* x = nullptr;
  float* out = nullptr;
  float scale = 1;
};
Status prepareSoftmax(const Descriptor& desc, const BufferArg& x, const BufferArg& out, SoftmaxCall* call);
void runCall(const SoftmaxCall& call);

// attention(q, k, v, out, mask?, keyPaddingMask?, weights?, sinks?, keyLengths?).
// keyLengths (int32 [batch]) is copied into the call: the kernel's key ranges
// come from it, so a later change to the caller's buffer cannot move them.
struct AttentionCall {
  AttentionProblem problem{};
  std::vector<int64_t> keyLengths;
};
Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, const BufferArg& keyLengths,
                        AttentionCall* call);
// The same without keyLengths.
Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, AttentionCall* call);
void runCall(const AttentionCall& call);

// layerNorm(x, out, weight?, bias?). out may be x.
struct LayerNormCall {
  const float* x = nullptr;
  float* out = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  int64_t rows = 0, dim = 0;
  float eps = 1e-5f;
  bool rms = false;
};
Status prepareLayerNorm(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& weight,
                        const BufferArg& bias, LayerNormCall* call);
void runCall(const LayerNormCall& call);

// packedSize: the floats a packed op(b) takes on this CPU, b 2-D [K, N].
Status preparePackedSize(const Descriptor& desc, int64_t* floats);

// packMatrix(b, out): out = op(b) packed for the GEMM.
struct PackCall {
  bool bf16 = false;           // packed in bf16 (packWholeBBf16) into out16
  bool sourceBf16 = false;     // b is already bf16 (b16)
  StridedBf16Matrix b16{};
  uint16_t* out16 = nullptr;
  StridedMatrix b{};
  int64_t k = 0, n = 0;
  float* out = nullptr;
};
Status preparePackMatrix(const Descriptor& desc, const BufferArg& b, const BufferArg& out, PackCall* call);
void runCall(const PackCall& call);

// rope(x, out, positions?): x and out 4-D in the layout given (bhsd or bshd),
// out = x or disjoint from it; positions an Int32Array of [seq] or
// [batch, seq] non-negative positions, or absent (offset + token index).
struct RopeCall {
  RopeProblem problem{};
};
Status prepareRope(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& positions,
                   RopeCall* call);
void runCall(const RopeCall& call);

// castBf16(src, out): rows x width floats of src (rows src.rowStride apart)
// rounded to nearest-even bf16 into out (rows out.rowStride apart), as
// torch's .to(torch.bfloat16) rounds: a bf16 KV cache's append. src and out
// must not overlap.
struct CastBf16Call {
  const float* src = nullptr;
  uint16_t* out = nullptr;
  int64_t rows = 0, width = 0, srcRowStride = 0, outRowStride = 0;
};
Status prepareCastBf16(const Descriptor& desc, const BufferArg& src, const BufferArg& out, CastBf16Call* call);
void runCall(const CastBf16Call& call);

// RangeError unless out's bytes are disjoint from in's (or, when allowSame,
// exactly the same view). Absent or empty buffers never overlap.
Status checkNoOverlap(const char* fn, const char* outName, const BufferArg& out, int64_t outElementBytes,
                      const char* inName, const BufferArg& in, int64_t inElementBytes, bool allowSame);

}  // namespace mhsa
