// Attention's decode path with AVX2 intrinsics: decode_avx512.cc's tiles of up
// to 4 queries, sized for 16 ymm registers (decode_tiles.h drives them).
// Scores: 4 queries x 2 keys of dots in 8 accumulators; V: 4 queries x 16
// floats of accumulators. Rows of bf16 (a bf16 KV cache) are widened in
// registers as they are loaded, and int8 rows (an int8 KV cache) converted.
// Compiled with -mavx2 -mfma only.
#include "decode_avx2.h"

#include <cstring>

#include "avx2_lanes.h"
#include "decode_tiles.h"

namespace mhsa {

namespace {

using avx2lanes::laneMask;

inline __m256 widenBf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return widenBf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// The first `count` elements of a row (clamped to [0, 8]) as floats, zeros past them.
struct Tail {
  __m256i mask;
  int64_t count;
  explicit Tail(int64_t n) : mask(laneMask(n)), count(n) {}
};
inline __m256 load8(const Tail& t, const float* p) { return _mm256_maskload_ps(p, t.mask); }
inline __m256 load8(const Tail& t, const uint16_t* p) {
  if (t.count >= 8) return load8(p);
  alignas(16) uint16_t h[8] = {};
  if (t.count > 0) std::memcpy(h, p, static_cast<size_t>(t.count) * sizeof(uint16_t));
  return widenBf16(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
// int8 rows (an int8 KV cache) convert exactly; their row scales are the driver's (attention.cc).
inline __m256 widenInt8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }
inline __m256 load8(const int8_t* p) { return widenInt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const Tail& t, const int8_t* p) {
  if (t.count >= 8) return load8(p);
  alignas(16) int8_t b[16] = {};
  if (t.count > 0) std::memcpy(b, p, static_cast<size_t>(t.count));
  return widenInt8(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
}

// Lane i of the result is the sum of a[i]'s 8 lanes.
inline __m256 laneSums8(const __m256* a) {
  const __m256 s01 = _mm256_hadd_ps(a[0], a[1]), s23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 s45 = _mm256_hadd_ps(a[4], a[5]), s67 = _mm256_hadd_ps(a[6], a[7]);
  // Each 128-bit half now holds a[0..3]'s (t0) or a[4..7]'s (t1) sums over that half's lanes.
  const __m256 t0 = _mm256_hadd_ps(s01, s23), t1 = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

// Dots of Queries queries (rows d apart at q) with Keys keys (rows kStride
// apart at rows): query u's dot with key r in lane 2u + r of the result.
// `ahead`, when set, is requested line by line beside the key rows' loads.
// FixedD, when not 0, is d known at compile time (as in decode_avx512.cc).
template <int Queries, int Keys, class T, int FixedD = 0>
inline __m256 scoresTile(const float* q, int64_t runtimeD, const T* rows, int64_t kStride, const T* ahead) {
  const int64_t d = FixedD ? FixedD : runtimeD;
  const int64_t whole = d / 8 * 8;
  __m256 acc[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  // Unrolled 16 steps, which is whole for FixedD 128: the K pass took 0.84x the
  // time of the loop GCC leaves (attention-tiles.md). The run-time d
  // instances unroll too, with a remainder loop.
#pragma GCC unroll 16
  for (int64_t e = 0; e < whole; e += 8) {
#pragma GCC unroll 2
    for (int r = 0; r < Keys; ++r) {
      // One request per 64-byte line.
      if (ahead && e % decode::kLineElements<T> == 0)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      const __m256 kv = load8(rows + r * kStride + e);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u)
        acc[u * 2 + r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + u * d + e), kv, acc[u * 2 + r]);
    }
  }
  if (d > whole) {
    const Tail tail(d - whole);
    const __m256i m = tail.mask;
#pragma GCC unroll 2
    for (int r = 0; r < Keys; ++r) {
      const __m256 kv = load8(tail, rows + r * kStride + whole);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u)
        acc[u * 2 + r] = _mm256_fmadd_ps(_mm256_maskload_ps(q + u * d + whole, m), kv, acc[u * 2 + r]);
    }
  }
  return laneSums8(acc);
}

template <int Queries, class T>
inline __m256 scoresTileKeys(int keys, const float* q, int64_t d, const T* rows, int64_t kStride, const T* ahead) {
  if (keys == 1) return scoresTile<Queries, 1, T>(q, d, rows, kStride, nullptr);
  if (d == 128) return scoresTile<Queries, 2, T, 128>(q, d, rows, kStride, ahead);
  if (d == 64) return scoresTile<Queries, 2, T, 64>(q, d, rows, kStride, ahead);
  return scoresTile<Queries, 2, T>(q, d, rows, kStride, ahead);
}

// acc rows u < Queries (accStride apart) += w[u * n + j] * row j of `keys` V
// rows, over floats [e0, e0 + 16) of each (masked past dv). Full: all 16
// are below dv, and the loads and stores take no mask.
template <int Queries, class T, bool Full>
inline void accumulateChunk(const float* w, int64_t n, const T* rows, int64_t vStride, int64_t keys, int64_t e0,
                            int64_t dv, float* acc, int64_t accStride, const T* ahead) {
  const Tail tail0(dv - e0), tail1(dv - e0 - 8);
  const __m256i m0 = tail0.mask, m1 = tail1.mask;
  __m256 t[Queries][2];
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u) {
    t[u][0] = Full ? _mm256_loadu_ps(acc + u * accStride + e0) : _mm256_maskload_ps(acc + u * accStride + e0, m0);
    t[u][1] = Full ? _mm256_loadu_ps(acc + u * accStride + e0 + 8)
                   : _mm256_maskload_ps(acc + u * accStride + e0 + 8, m1);
  }
  for (int64_t j = 0; j < keys; ++j) {
    const T* row = rows + j * vStride + e0;
    if (ahead && e0 % decode::kLineElements<T> == 0)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + j * vStride + e0), _MM_HINT_T1);
    const __m256 v0 = Full ? load8(row) : load8(tail0, row), v1 = Full ? load8(row + 8) : load8(tail1, row + 8);
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) {
      const __m256 wv = _mm256_broadcast_ss(w + u * n + j);
      t[u][0] = _mm256_fmadd_ps(wv, v0, t[u][0]);
      t[u][1] = _mm256_fmadd_ps(wv, v1, t[u][1]);
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u) {
    if (Full) {
      _mm256_storeu_ps(acc + u * accStride + e0, t[u][0]);
      _mm256_storeu_ps(acc + u * accStride + e0 + 8, t[u][1]);
    } else {
      _mm256_maskstore_ps(acc + u * accStride + e0, m0, t[u][0]);
      _mm256_maskstore_ps(acc + u * accStride + e0 + 8, m1, t[u][1]);
    }
  }
}

struct Avx2Tiles {
  static constexpr int kKeys = 2;
  static constexpr int64_t kChunk = 16;

  template <class T>
  static void scores(int tq, int keys, const float* q, int64_t d, const T* rows, int64_t kStride, const T* ahead,
                     float scale, float* s, int64_t n) {
    __m256 sums = decode::withTileQueries(tq, [&](auto queries) {
      return scoresTileKeys<decltype(queries)::value, T>(keys, q, d, rows, kStride, ahead);
    });
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_mul_ps(_mm256_set1_ps(scale), sums));
    for (int u = 0; u < tq; ++u)
      for (int r = 0; r < keys; ++r) s[u * n + r] = lanes[u * 2 + r];
  }

  template <class T>
  static void accumulate(int tq, const float* w, int64_t n, const T* rows, int64_t vStride, int64_t keys, int64_t e0,
                         int64_t dv, float* acc, int64_t accStride, const T* ahead) {
    decode::withTileQueries(tq, [&](auto queries) {
      if (dv - e0 >= kChunk)
        accumulateChunk<decltype(queries)::value, T, true>(w, n, rows, vStride, keys, e0, dv, acc, accStride, ahead);
      else
        accumulateChunk<decltype(queries)::value, T, false>(w, n, rows, vStride, keys, e0, dv, acc, accStride, ahead);
    });
  }

  // A blocked key's row may hold anything, so it is not read.
  template <class T>
  static void accumulateSparse(const float* w, const T* rows, int64_t vStride, int64_t keys, int64_t dv, float* a) {
    for (int64_t e0 = 0; e0 < dv; e0 += 8) {
      const Tail tail(dv - e0);
      __m256 t = _mm256_maskload_ps(a + e0, tail.mask);
      for (int64_t j = 0; j < keys; ++j)
        if (w[j] != 0.0f) t = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(tail, rows + j * vStride + e0), t);
      _mm256_maskstore_ps(a + e0, tail.mask, t);
    }
  }

  static bool anyZeroWeight(const float* w, int64_t n, int tq, int64_t keys) {
    for (int u = 0; u < tq; ++u)
      for (int64_t j = 0; j < keys; j += 8) {
        const __m256i m = laneMask(keys - j);
        const __m256 eq = _mm256_cmp_ps(_mm256_maskload_ps(w + u * n + j, m), _mm256_setzero_ps(), _CMP_EQ_OQ);
        if (_mm256_movemask_ps(_mm256_and_ps(eq, _mm256_castsi256_ps(m)))) return true;
      }
    return false;
  }
};

}  // namespace

void decodeScoresAvx2(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                      float scale, float* s) {
  decode::scores<Avx2Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateAvx2(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                          float* acc, int64_t accStride) {
  decode::accumulate<Avx2Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

void decodeScoresBf16Avx2(const float* q, int64_t queries, int64_t d, const uint16_t* k, int64_t kStride, int64_t n,
                          float scale, float* s) {
  decode::scores<Avx2Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateBf16Avx2(const float* p, int64_t queries, int64_t n, const uint16_t* v, int64_t vStride,
                              int64_t dv, float* acc, int64_t accStride) {
  decode::accumulate<Avx2Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

void decodeScoresInt8Avx2(const float* q, int64_t queries, int64_t d, const int8_t* k, int64_t kStride, int64_t n,
                          float scale, float* s) {
  decode::scores<Avx2Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateInt8Avx2(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                              int64_t dv, float* acc, int64_t accStride) {
  decode::accumulate<Avx2Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

}  // namespace mhsa
