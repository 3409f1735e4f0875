// The int8 tile on AVX512_VNNI: VPDPBUSD multiplies 4 unsigned bytes of A by
// 4 signed bytes of B and adds the 4 products into each int32 lane. A tile of
// up to 12 rows x 32 columns holds 24 accumulators, as the float kernel does;
// each group of 4 depths loads two vectors of the sliver and broadcasts one
// 32-bit word per row. Compiled with the AVX-512 flags, and VNNI by a target
// attribute (the CPU check is cpuHasAvx512Vnni). Not in the emulated AVX-512
// test build: the attribute would emit real AVX-512 there (SIMDe's dpbusd.h
// could stand in; not wired), and there the CPU check says no.
#if !defined(MHSA_EMULATED_AVX512)
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "avx512_intrinsics.h"
#include "gemm_int8.h"

namespace mhsa {
namespace {

constexpr int kMr = 12;

#define MHSA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

template <int R>
MHSA_VNNI void tileRows(int64_t groups, const int8_t* ap, const int8_t* bp, int32_t* acc) {
  // Every loop over rows unrolled: GCC keeps an array of vectors in registers
  // only when each index is a constant (docs/design/gemm-blocking.md).
  __m512i sum[R][2];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) sum[i][0] = sum[i][1] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i b0 = _mm512_loadu_si512(bp);
    const __m512i b1 = _mm512_loadu_si512(bp + 64);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, ap + 4 * i, 4);
      const __m512i a = _mm512_set1_epi32(word);
      sum[i][0] = _mm512_dpbusd_epi32(sum[i][0], a, b0);
      sum[i][1] = _mm512_dpbusd_epi32(sum[i][1], a, b1);
    }
    ap += 4 * kMr;
    bp += 128;
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    _mm512_storeu_si512(acc + 32 * i, sum[i][0]);
    _mm512_storeu_si512(acc + 32 * i + 16, sum[i][1]);
  }
}

MHSA_VNNI void tile(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc) {
  switch (rows) {
#define MHSA_INT8_CASE(R) \
  case R: return tileRows<R>(groups, ap, bp, acc);
    MHSA_INT8_CASE(12) MHSA_INT8_CASE(1) MHSA_INT8_CASE(2) MHSA_INT8_CASE(3) MHSA_INT8_CASE(4) MHSA_INT8_CASE(5)
    MHSA_INT8_CASE(6) MHSA_INT8_CASE(7) MHSA_INT8_CASE(8) MHSA_INT8_CASE(9) MHSA_INT8_CASE(10) MHSA_INT8_CASE(11)
#undef MHSA_INT8_CASE
    default: return;
  }
}

// The row's largest magnitude, and whether every value is finite, 16 lanes
// at a time; then each value times the multiplier, rounded to nearest even by
// VCVTPS2DQ (the default rounding, as the scalar loop's float adder rounds),
// clamped to +-127 (a NaN converts to INT_MIN and clamps to -127, as the
// scalar loop's clamp takes it) and narrowed.
MHSA_VNNI float quantizeRow(const float* row, int64_t k, int8_t* dst, int64_t groupStride, int8_t flip) {
  const __m512 signless = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  __m512 most = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (int64_t d = 0; d < k; d += 16) {
    const __mmask16 m = static_cast<__mmask16>(k - d >= 16 ? 0xffff : (1u << (k - d)) - 1);
    const __m512 magnitude = _mm512_and_ps(_mm512_maskz_loadu_ps(m, row + d), signless);
    bad |= _mm512_cmp_ps_mask(magnitude, largest, _CMP_NLE_UQ);
    most = _mm512_max_ps(most, magnitude);
  }
  const Int8Quantizer q = int8QuantizerOf(_mm512_reduce_max_ps(most), bad == 0);
  const __m512 inverse = _mm512_set1_ps(q.inverse);
  const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
  const __m128i flips = _mm_set1_epi8(flip);
  for (int64_t d = 0; d < k; d += 16) {
    const __mmask16 m = static_cast<__mmask16>(k - d >= 16 ? 0xffff : (1u << (k - d)) - 1);
    const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + d), inverse));
    alignas(16) int8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes),
                    _mm_xor_si128(_mm512_cvtepi32_epi8(_mm512_min_epi32(hi, _mm512_max_epi32(lo, r))), flips));
    for (int64_t g = 0; g < 16 && d + g < k; g += 4)
      std::memcpy(dst + ((d + g) / 4) * groupStride, bytes + g, static_cast<size_t>(std::min<int64_t>(4, k - d - g)));
  }
  return q.scale;
}

const Int8Kernels kKernels = {"avx512vnni", kMr, true, tile, quantizeRow, decodeScoresInt8Avx512Vnni,
                                decodeAccumulateInt8Avx512Vnni};

}  // namespace

const Int8Kernels& avx512VnniInt8Kernels() { return kKernels; }

}  // namespace mhsa

#endif  // !MHSA_EMULATED_AVX512
