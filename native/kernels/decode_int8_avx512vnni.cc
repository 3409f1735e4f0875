// The decode path over an int8 KV cache on AVX512_VNNI, in integers
// (Int8Kernels::decodeScores and decodeAccumulate). Scores: queries quantized
// to int16, key rows sign-extended to int16 as they are loaded, and VPDPWSSD
// adding the products of each pair of dims into int32 lanes; one load of a key
// chunk feeds every query of the tile. V: each query's weights quantized to
// int16 per block of 32 keys, two value rows interleaved into (key, key + 1)
// pairs per dim, VPDPWSSD per query. Converting each int8 value to float and
// multiplying it by every query (the float kernels' way) was compute-bound: it
// took as long as the bf16 cache's step, which reads twice the bytes
// (docs/design/int8.md, the KV cache). Compiled with the AVX-512 flags and
// VNNI by a target attribute, as gemm_int8_avx512vnni.cc; not in the emulated
// build.
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

// The row scales of keys [0, keys) (keys > 0; at most 16 read, scaleStride apart) in the low lanes, zero above.
MHSA_VNNI inline __m512 rowScales(const float* scale, int64_t scaleStride, int64_t keys) {
  if (scaleStride == 1) return _mm512_maskz_loadu_ps(lowLanes(keys), scale);
  alignas(64) float lanes[16] = {};
  for (int64_t i = 0; i < keys && i < 16; ++i) lanes[i] = scale[i * scaleStride];
  return _mm512_load_ps(lanes);
}

// x * scale, but x where x is 0: a key whose weight or score is 0 stays 0 even
// when its row's scale is not finite (the float path's order: the same bits).
MHSA_VNNI inline __m512 scaledUnlessZero(__m512 x, __m512 scale) {
  return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ), x, scale);
}

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

// Keys per block of the V pass: each query's weights are quantized against
// the block's largest, and the block's int32 sums (at most 2 * 32767 * 127 *
// 16 per lane) are scaled into the float accumulators at its end.
constexpr int64_t kValueBlockKeys = 32;
constexpr int64_t kValueChunk = 64;  // dims per pass over a block: 4 vectors of int32 per query

// A query's weights over keys [0, keys) (at most 32), each times its row's
// scale (scale0: keys 0-15, scale1: 16-31), quantized to int16 against their
// largest (rounded to nearest even), as int32 pairs: key 2i in the low word,
// 2i + 1 in the high, which is how VPDPWSSD pairs them, and the int16 array's
// own layout. Returns the scale (0: all zero). The scaled weights are finite
// and >= 0 (decodeAccumulateInt8Avx512Vnni checks first).
MHSA_VNNI inline float packWeightPairs(const float* w, int64_t keys, __m512 scale0, __m512 scale1, int32_t* pairs) {
  const __m512 w0 = scaledUnlessZero(_mm512_maskz_loadu_ps(lowLanes(keys), w), scale0);
  const __m512 w1 = scaledUnlessZero(_mm512_maskz_loadu_ps(lowLanes(keys - 16), w + 16), scale1);
  const float most = _mm512_reduce_max_ps(_mm512_max_ps(w0, w1));
  const __m512 inverse = _mm512_set1_ps(most == 0.0f ? 0.0f : 32767.0f / most);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(w0, inverse))));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + 8),
                      _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(w1, inverse))));
  return most / 32767.0f;
}

// acc rows u < Queries += scale[u] * the int32 dots of weight pairs with the
// block's V rows, over dims [e0, e0 + 64) (masked past dv). Two rows' bytes
// interleaved (unpack) and sign-extended give 16 int32 lanes of (v[j][e],
// v[j + 1][e]) pairs, for dims in the order 0-7 16-23 | 32-39 48-55 (low
// bytes) and 8-15 24-31 | 40-47 56-63 (high); the 128-bit shuffles at the
// end put them back in order.
template <int Queries>
MHSA_VNNI inline void accumulateChunk(const int32_t (*pairs)[kValueBlockKeys / 2], const float* scale, int64_t keys,
                                      const int8_t* rows, int64_t vStride, int64_t e0, int64_t dv, float* acc,
                                      int64_t accStride) {
  const int64_t width = dv - e0 < kValueChunk ? dv - e0 : kValueChunk;
  const __mmask64 m = width >= 64 ? ~__mmask64(0) : (__mmask64(1) << width) - 1;
  __m512i sum[Queries][4];
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) sum[u][c] = _mm512_setzero_si512();
  for (int64_t j = 0; j < keys; j += 2) {
    const __m512i r0 = _mm512_maskz_loadu_epi8(m, rows + j * vStride + e0);
    const __m512i r1 = j + 1 < keys ? _mm512_maskz_loadu_epi8(m, rows + (j + 1) * vStride + e0) : _mm512_setzero_si512();
    const __m512i lo = _mm512_unpacklo_epi8(r0, r1), hi = _mm512_unpackhi_epi8(r0, r1);
    const __m512i v[4] = {_mm512_cvtepi8_epi16(_mm512_castsi512_si256(lo)), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(lo, 1)),
                          _mm512_cvtepi8_epi16(_mm512_castsi512_si256(hi)), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(hi, 1))};
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) {
      const __m512i w = _mm512_set1_epi32(pairs[u][j / 2]);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) sum[u][c] = _mm512_dpwssd_epi32(sum[u][c], v[c], w);
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u) {
    const __m512 s = _mm512_set1_ps(scale[u]);
    __m512 f[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) f[c] = _mm512_cvtepi32_ps(sum[u][c]);
    // Dims 0-15, 16-31, 32-47, 48-63.
    const __m512 d[4] = {_mm512_shuffle_f32x4(f[0], f[2], 0x44), _mm512_shuffle_f32x4(f[0], f[2], 0xEE),
                         _mm512_shuffle_f32x4(f[1], f[3], 0x44), _mm512_shuffle_f32x4(f[1], f[3], 0xEE)};
    float* a = acc + u * accStride + e0;
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __mmask16 lanes = lowLanes(width - 16 * c);
      if (lanes) _mm512_mask_storeu_ps(a + 16 * c, lanes, _mm512_fmadd_ps(d[c], s, _mm512_maskz_loadu_ps(lanes, a + 16 * c)));
    }
  }
}

// Whether every weight times its row's scale (unless 0) is finite.
MHSA_VNNI bool scaledWeightsFinite(const float* p, int64_t queries, int64_t n, const float* vScale,
                                   int64_t scaleStride) {
  __mmask16 finite = 0xFFFF;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 lanes = lowLanes(n - j0);
    const __m512 scale = rowScales(vScale + j0 * scaleStride, scaleStride, n - j0);
    for (int64_t u = 0; u < queries; ++u) {
      const __m512 w = scaledUnlessZero(_mm512_maskz_loadu_ps(lanes, p + u * n + j0), scale);
      // x - x is 0 exactly when x is finite.
      finite &= _mm512_cmp_ps_mask(_mm512_sub_ps(w, w), _mm512_setzero_ps(), _CMP_EQ_OQ);
    }
  }
  return finite == 0xFFFF;
}

}  // namespace

MHSA_VNNI bool decodeAccumulateInt8Avx512Vnni(const float* p, int64_t queries, int64_t n, const int8_t* v,
                                              int64_t vStride, const float* vScale, int64_t scaleStride, int64_t dv,
                                              float* acc, int64_t accStride) {
  if (!scaledWeightsFinite(p, queries, n, vScale, scaleStride)) return false;
  for (int64_t j0 = 0; j0 < n; j0 += kValueBlockKeys) {
    const int64_t keys = n - j0 < kValueBlockKeys ? n - j0 : kValueBlockKeys;
    const int8_t* rows = v + j0 * vStride;
    const __m512 scale0 = rowScales(vScale + j0 * scaleStride, scaleStride, keys);
    const __m512 scale1 =
        keys > 16 ? rowScales(vScale + (j0 + 16) * scaleStride, scaleStride, keys - 16) : _mm512_setzero_ps();
    for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j)
      for (int64_t e = 0; e < dv; e += 64) _mm_prefetch(reinterpret_cast<const char*>(v + j * vStride + e), _MM_HINT_T1);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
      int32_t pairs[kTileQueries][kValueBlockKeys / 2];
      float scale[kTileQueries];
      for (int u = 0; u < tq; ++u) scale[u] = packWeightPairs(p + (u0 + u) * n + j0, keys, scale0, scale1, pairs[u]);
      float* a = acc + u0 * accStride;
      for (int64_t e0 = 0; e0 < dv; e0 += kValueChunk) {
        switch (tq) {
          case 1: accumulateChunk<1>(pairs, scale, keys, rows, vStride, e0, dv, a, accStride); break;
          case 2: accumulateChunk<2>(pairs, scale, keys, rows, vStride, e0, dv, a, accStride); break;
          case 3: accumulateChunk<3>(pairs, scale, keys, rows, vStride, e0, dv, a, accStride); break;
          default: accumulateChunk<4>(pairs, scale, keys, rows, vStride, e0, dv, a, accStride); break;
        }
      }
    }
  }
  return true;
}

MHSA_VNNI void decodeScoresInt8Avx512Vnni(const int16_t* q, int64_t qStride, const float* qScale, int64_t queries,
                                          int64_t d, const int8_t* k, int64_t kStride, const float* kScale,
                                          int64_t scaleStride, int64_t n, float* s) {
  for (int64_t j0 = 0; j0 < n; j0 += kTileKeys) {
    const int keys = n - j0 < kTileKeys ? static_cast<int>(n - j0) : kTileKeys;
    const int8_t* rows = k + j0 * kStride;
    const __m512 scale = rowScales(kScale + j0 * scaleStride, scaleStride, keys);
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
      // Query u's dots sit in lanes 4u .. 4u + keys - 1: each quarter, scaled by its query's scale and
      // then by the rows' scales, is stored.
      const __m512 sums = _mm512_cvtepi32_ps(dots);
      const __mmask16 lanes = lowLanes(keys);
      const __m512 quarters[kTileQueries] = {sums, _mm512_shuffle_f32x4(sums, sums, 0x55),
                                             _mm512_shuffle_f32x4(sums, sums, 0xAA), _mm512_shuffle_f32x4(sums, sums, 0xFF)};
      for (int u = 0; u < tq; ++u)
        _mm512_mask_storeu_ps(s + (u0 + u) * n + j0, lanes,
                              scaledUnlessZero(_mm512_mul_ps(quarters[u], _mm512_set1_ps(qScale[u0 + u])), scale));
    }
  }
}

}  // namespace mhsa

#endif  // !MHSA_EMULATED_AVX512
