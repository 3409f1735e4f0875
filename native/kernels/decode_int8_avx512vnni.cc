// The decode path's scores over an int8 KV cache on AVX512_VNNI
// (Int8Kernels::decodeScores): queries quantized to int16, key rows
// sign-extended to int16 as they are loaded, and VPDPWSSD adding the products
// of each pair of dims into int32 lanes. One load of a key chunk feeds every
// query of the tile. Converting each int8 value to float and multiplying it
// by every query (the float kernels' way) was compute-bound: it took as long
// as the bf16 cache's step, which reads twice the bytes (docs/design/int8.md,
// the KV cache). Compiled with the AVX-512 flags and VNNI by a target
// attribute, as gemm_int8_avx512vnni.cc; not in the emulated build.
#if !defined(MHSA_EMULATED_AVX512)
#include <cstdint>

#include "avx512_intrinsics.h"
#include "gemm_int8.h"

namespace mhsa {
namespace {

#define MHSA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int kTileKeys = 4, kTileQueries = 4;
// Rows ahead requested into L2 as each tile's rows are read (the float decode tiles' distance).
constexpr int64_t kPrefetchRows = 64;

// Lane sums of 16 int32 vectors, transposed: the sum of a[i]'s lanes lands in
// lane (i % 4) * 4 + i / 4 (decode_avx512.cc's laneSums16, in integers: exact).
MHSA_VNNI inline __m512i laneSums16(const __m512i* a) {
  auto shuffle4 = [](__m512i x, __m512i y, int imm) {
    switch (imm) {
      case 0x44: return _mm512_shuffle_i32x4(x, y, 0x44);
      case 0xEE: return _mm512_shuffle_i32x4(x, y, 0xEE);
      case 0x88: return _mm512_shuffle_i32x4(x, y, 0x88);
      default: return _mm512_shuffle_i32x4(x, y, 0xDD);
    }
  };
  auto shuffle1 = [](__m512i x, __m512i y, bool high) {
    const __m512 fx = _mm512_castsi512_ps(x), fy = _mm512_castsi512_ps(y);
    return _mm512_castps_si512(high ? _mm512_shuffle_ps(fx, fy, 0xEE) : _mm512_shuffle_ps(fx, fy, 0x44));
  };
  auto shuffle2 = [](__m512i x, __m512i y, bool high) {
    const __m512 fx = _mm512_castsi512_ps(x), fy = _mm512_castsi512_ps(y);
    return _mm512_castps_si512(high ? _mm512_shuffle_ps(fx, fy, 0xDD) : _mm512_shuffle_ps(fx, fy, 0x88));
  };
  __m512i b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i) b[i] = _mm512_add_epi32(shuffle4(a[2 * i], a[2 * i + 1], 0x44), shuffle4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i) c[i] = _mm512_add_epi32(shuffle4(b[2 * i], b[2 * i + 1], 0x88), shuffle4(b[2 * i], b[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i) d[i] = _mm512_add_epi32(shuffle1(c[2 * i], c[2 * i + 1], false), shuffle1(c[2 * i], c[2 * i + 1], true));
  return _mm512_add_epi32(shuffle2(d[0], d[1], false), shuffle2(d[0], d[1], true));
}

// The int32 dots of Queries query rows (q, qStride apart, zero past d) with
// Keys key rows, acc[r * 4 + u] for key r and query u, in 32-dim chunks.
template <int Queries, int Keys>
MHSA_VNNI inline __m512i tileDots(const int16_t* q, int64_t qStride, int64_t d, const int8_t* rows, int64_t kStride,
                                  const int8_t* ahead) {
  __m512i acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
  for (int64_t e = 0; e < d; e += 32) {
    const __mmask32 tail = d - e >= 32 ? ~__mmask32(0) : (__mmask32(1) << (d - e)) - 1;
    __m512i qv[Queries];
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) qv[u] = _mm512_loadu_si512(q + u * qStride + e);
#pragma GCC unroll 4
    for (int r = 0; r < Keys; ++r) {
      if (ahead && e % 64 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      const __m512i kv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(tail, rows + r * kStride + e));
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u) acc[r * 4 + u] = _mm512_dpwssd_epi32(acc[r * 4 + u], qv[u], kv);
    }
  }
  return laneSums16(acc);
}

template <int Queries>
MHSA_VNNI inline __m512i tileDotsKeys(int keys, const int16_t* q, int64_t qStride, int64_t d, const int8_t* rows,
                                      int64_t kStride, const int8_t* ahead) {
  switch (keys) {
    case 1: return tileDots<Queries, 1>(q, qStride, d, rows, kStride, nullptr);
    case 2: return tileDots<Queries, 2>(q, qStride, d, rows, kStride, nullptr);
    case 3: return tileDots<Queries, 3>(q, qStride, d, rows, kStride, nullptr);
    default: return tileDots<Queries, 4>(q, qStride, d, rows, kStride, ahead);
  }
}

}  // namespace

MHSA_VNNI void decodeScoresInt8Avx512Vnni(const int16_t* q, int64_t qStride, const float* qScale, int64_t queries,
                                          int64_t d, const int8_t* k, int64_t kStride, int64_t n, float* s) {
  for (int64_t j0 = 0; j0 < n; j0 += kTileKeys) {
    const int keys = n - j0 < kTileKeys ? static_cast<int>(n - j0) : kTileKeys;
    const int8_t* rows = k + j0 * kStride;
    const int8_t* ahead = j0 + kPrefetchRows + kTileKeys <= n ? rows + kPrefetchRows * kStride : nullptr;
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
      const int16_t* qt = q + u0 * qStride;
      const int8_t* fetch = u0 == 0 ? ahead : nullptr;
      __m512i dots;
      switch (tq) {
        case 1: dots = tileDotsKeys<1>(keys, qt, qStride, d, rows, kStride, fetch); break;
        case 2: dots = tileDotsKeys<2>(keys, qt, qStride, d, rows, kStride, fetch); break;
        case 3: dots = tileDotsKeys<3>(keys, qt, qStride, d, rows, kStride, fetch); break;
        default: dots = tileDotsKeys<4>(keys, qt, qStride, d, rows, kStride, fetch); break;
      }
      // Query u's dots sit in lanes 4u .. 4u + keys - 1: each quarter, scaled by its query's scale, is stored.
      const __m512 sums = _mm512_cvtepi32_ps(dots);
      const __mmask16 lanes = lowLanes(keys);
      const __m512 quarters[kTileQueries] = {sums, _mm512_shuffle_f32x4(sums, sums, 0x55),
                                             _mm512_shuffle_f32x4(sums, sums, 0xAA), _mm512_shuffle_f32x4(sums, sums, 0xFF)};
      for (int u = 0; u < tq; ++u)
        _mm512_mask_storeu_ps(s + (u0 + u) * n + j0, lanes, _mm512_mul_ps(quarters[u], _mm512_set1_ps(qScale[u0 + u])));
    }
  }
}

}  // namespace mhsa

#endif  // !MHSA_EMULATED_AVX512
