// int8 products: a weight quantized once per output column, activations
// quantized per row as each product starts, int32 sums, a float epilogue.
// The scheme and its reasons: docs/design/int8.md.
//
//   w_q[k][j] = round(w[k][j] * 127 / max_k |w[.][j]|)      (int8, |w_q| <= 127)
//   a_q[i][k] = round(a[i][k] * 127 / max_k |a[i][.]|)      (int8, |a_q| <= 127)
//   out[i][j] = alpha * (float(sum_k a_q * w_q) * (sa[i] * sw[j]))  (+ out if accumulate)  (+ bias[j])
//
// with sa = max|a row| / 127 and sw = max|w column| / 127, each step rounded
// to float32 as written (round: to nearest even, in float32 after the
// multiply). The sums are exact in int32, so every kernel gives the same bits.
#pragma once

#include <cstdint>
#include <limits>

#include "gemm.h"

namespace mhsa {

// Columns per packed sliver, and depths per group: a sliver holds, for each
// group of 4 depths, 32 columns x 4 int8 (the operand of VPDPBUSD).
constexpr int64_t kInt8SliverColumns = 32;
constexpr int64_t kInt8DepthGroup = 4;
// The deepest product: |sum| <= 255 * 127 * k must stay below 2^31.
constexpr int64_t kInt8MaxDepth = 65536;

// Bytes of a packed k x n int8 matrix: the slivers, then each padded
// column's int32 sum of its values, then its float scale.
int64_t packedInt8Bytes(int64_t k, int64_t n);

// Quantizes and packs op(B) (k x n, floats). Non-finite values make their
// column's scale non-finite, and so its outputs.
void packWholeBInt8(const StridedMatrix& b, int64_t k, int64_t n, int8_t* packed);

// Packs op(B) already quantized (k x n int8 values in [-127, 127]) with its
// column scales as they are, quantizing nothing.
using StridedInt8Matrix = Strided<int8_t>;
void packWholeBQuantized(const StridedInt8Matrix& b, int64_t k, int64_t n, const float* scales, int8_t* packed);

// A packed matrix's parts. The sums and scales are read as bytes (memcpy):
// prepack places them 4-byte aligned, a forged Int8Array need not.
struct PackedInt8View {
  const int8_t* slivers;  // sliver s at s * groups * 128 bytes
  const int8_t* sums;     // per padded column: int32 sum over k of w_q
  const int8_t* scales;   // per padded column: float sw
  int64_t groups;         // ceil(k / 4)
};
PackedInt8View packedInt8View(const int8_t* packed, int64_t k, int64_t n);

// The scale and multiplier of a row or column from its largest magnitude:
// max|v| / 127 and 127 / max|v|; both 0 for all zeros; a NaN scale and a zero
// multiplier when a value is not finite (its outputs are then NaN).
struct Int8Quantizer {
  float scale, inverse;
};
inline Int8Quantizer int8QuantizerOf(float most, bool finite) {
  if (!finite) return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  if (most == 0.0f) return {0.0f, 0.0f};
  return {most / 127.0f, 127.0f / most};
}

// Quantizes n contiguous floats as the scheme quantizes a row (the bits of
// the products' own quantizer) into out, and returns the scale: an int8 KV
// cache's rows (cache_append.cc).
float quantizeInt8(const float* v, int64_t n, int8_t* out);

// The kernels an int8 product runs on, chosen at run time (int8Kernels()).
//  tile: rows (1..mr) x 32 int32 sums, acc[i * 32 + j] = sum over the groups
//   of A's packed rows (ap: per group, mr rows x 4 bytes) times one sliver.
//  unsignedA: A's bytes are a_q + 128 (VPDPBUSD multiplies unsigned by
//   signed); the driver subtracts 128 * sums[j].
//  quantizeRow: k contiguous floats quantized as the scheme defines (the
//   same bits as the driver's scalar loop), each byte XOR flip, depth d
//   written at dst[(d / 4) * groupStride + d % 4]; returns the row's scale.
//   Null: the driver's scalar loop.
//  decodeScores: an int8 KV cache's decode scores against queries quantized
//   to int16 (attention.cc), t = float(sum over e < d of q[u * qStride + e] *
//   k[j * kStride + e]) * qScale[u], then s[u * n + j] = t * kScale[j *
//   scaleStride] (t where t is 0: a zero score stays zero whatever the row's
//   scale), q zero from d to qStride; the int32 sums are exact
//   (quantizeQueryInt16 bounds q). Null: the float decode kernels convert the
//   int8 rows instead.
using Int8DecodeScores = void (*)(const int16_t* q, int64_t qStride, const float* qScale, int64_t queries, int64_t d,
                                  const int8_t* k, int64_t kStride, const float* kScale, int64_t scaleStride,
                                  int64_t n, float* s);
//  decodeAccumulate: acc[u * accStride + e] += sum over j < n of
//   w * v[j * vStride + e], e < dv, where w = p[u * n + j] * vScale[j *
//   scaleStride] (p where p is 0), each query's w quantized to int16 per
//   block of 32 keys against the block's largest. The weights p are >= 0.
//   Returns false, with acc untouched, when some w is not finite (a non-finite
//   value in V makes its row's scale NaN): the driver then runs the float
//   kernels. Null: the float kernels.
using Int8DecodeAccumulate = bool (*)(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                                      const float* vScale, int64_t scaleStride, int64_t dv, float* acc,
                                      int64_t accStride);
struct Int8Kernels {
  const char* name;
  int mr;
  bool unsignedA;
  void (*tile)(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc);
  float (*quantizeRow)(const float* row, int64_t k, int8_t* dst, int64_t groupStride, int8_t flip);
  Int8DecodeScores decodeScores;
  Int8DecodeAccumulate decodeAccumulate;
};

// Queries' int16 rows for Int8Kernels::decodeScores: width d padded to this.
constexpr int64_t kInt8DecodeQueryAlign = 32;

// Quantizes d floats of a query to int16 symmetrically (max|q| to the largest
// value whose sums against d int8 values fit int32: 32767 up to d = 516),
// zeros from d to the padded width, and returns the scale (NaN for a
// non-finite query, 0 for a zero one).
float quantizeQueryInt16(const float* q, int64_t d, int64_t padded, int16_t* out);

// "avx512vnni", "avx2" or "portable": the best this CPU runs, lowered by
// MHSA_ISA as the float table is.
const Int8Kernels& int8Kernels();
// The kernels of each path this CPU runs, best first (the tests try each).
int availableInt8Kernels(const Int8Kernels** list, int capacity);

// The product of a (m x k, strided) and p.packedBInt8 into out (row stride
// outRowStride; outColStride must be 1), with alpha, accumulate and bias as
// GemmProblem says, over the thread pool.
void gemmInt8(const GemmProblem& p, const Int8Kernels& kernels);
inline void gemmInt8(const GemmProblem& p) { gemmInt8(p, int8Kernels()); }

// Per-ISA paths (x86 builds only).
const Int8Kernels& avx512VnniInt8Kernels();
void decodeScoresInt8Avx512Vnni(const int16_t* q, int64_t qStride, const float* qScale, int64_t queries, int64_t d,
                                const int8_t* k, int64_t kStride, const float* kScale, int64_t scaleStride, int64_t n,
                                float* s);
bool decodeAccumulateInt8Avx512Vnni(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                                    const float* vScale, int64_t scaleStride, int64_t dv, float* acc,
                                    int64_t accStride);
const Int8Kernels& avx2Int8Kernels();
// arm64 builds only (gemm_int8_neon.cc): with the dot-product instructions,
// which cpuHasDotProduct() detects (Linux), and with plain NEON.
const Int8Kernels& neonDotInt8Kernels();
const Int8Kernels& neonInt8Kernels();
bool cpuHasDotProduct();

}  // namespace mhsa
