// Attention's decode path with AVX2 intrinsics: decode_avx512.cc's tiles of up
// to 4 queries, sized for 16 ymm registers. Scores: 4 queries x 2 keys of
// dots in 8 accumulators; V: 4 queries x 16 floats of accumulators. One load
// of a K or V vector feeds every query of the tile, and a tile reaches its
// rows from one pointer and the stride (docs/design/attention-tiles.md, the
// decode path). Compiled with -mavx2 -mfma only.
#include "decode_avx2.h"

#include "avx2_lanes.h"

namespace mhsa {

namespace {

using avx2lanes::laneMask;

// Rows ahead that each pass requests into L2, as in decode_avx512.cc.
constexpr int64_t kPrefetchRows = 64;
constexpr int kTileQueries = 4;

inline void prefetchFloats(const float* r, int64_t floats) {
  for (int64_t o = 0; o < floats; o += 16) _mm_prefetch(reinterpret_cast<const char*>(r + o), _MM_HINT_T1);
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
template <int Queries, int Keys>
inline __m256 scoresTile(const float* q, int64_t d, const float* rows, int64_t kStride, int64_t whole, int64_t rest,
                         const float* ahead) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t e = 0; e < whole; e += 8) {
#pragma GCC unroll 2
    for (int r = 0; r < Keys; ++r) {
      // One request per 64-byte line: every other vector.
      if (ahead && (e & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      const __m256 kv = _mm256_loadu_ps(rows + r * kStride + e);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u)
        acc[u * 2 + r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + u * d + e), kv, acc[u * 2 + r]);
    }
  }
  if (rest) {
    const __m256i m = laneMask(rest);
#pragma GCC unroll 2
    for (int r = 0; r < Keys; ++r) {
      const __m256 kv = _mm256_maskload_ps(rows + r * kStride + whole, m);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u)
        acc[u * 2 + r] = _mm256_fmadd_ps(_mm256_maskload_ps(q + u * d + whole, m), kv, acc[u * 2 + r]);
    }
  }
  return laneSums8(acc);
}

inline __m256 scoresTileAny(int queries, int keys, const float* q, int64_t d, const float* rows, int64_t kStride,
                            int64_t whole, int64_t rest, const float* ahead) {
  if (keys == 1) {
    switch (queries) {
      case 1: return scoresTile<1, 1>(q, d, rows, kStride, whole, rest, nullptr);
      case 2: return scoresTile<2, 1>(q, d, rows, kStride, whole, rest, nullptr);
      case 3: return scoresTile<3, 1>(q, d, rows, kStride, whole, rest, nullptr);
      default: return scoresTile<4, 1>(q, d, rows, kStride, whole, rest, nullptr);
    }
  }
  switch (queries) {
    case 1: return scoresTile<1, 2>(q, d, rows, kStride, whole, rest, ahead);
    case 2: return scoresTile<2, 2>(q, d, rows, kStride, whole, rest, ahead);
    case 3: return scoresTile<3, 2>(q, d, rows, kStride, whole, rest, ahead);
    default: return scoresTile<4, 2>(q, d, rows, kStride, whole, rest, ahead);
  }
}

}  // namespace

void decodeScoresAvx2(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                      float scale, float* s) {
  constexpr int kKeys = 2;
  const __m256 vscale = _mm256_set1_ps(scale);
  const int64_t whole = d / 8 * 8, rest = d - whole;
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    const int keys = n - j0 < kKeys ? static_cast<int>(n - j0) : kKeys;
    const float* rows = k + j0 * kStride;
    const bool fetch = keys == kKeys && j0 + kPrefetchRows + kKeys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchFloats(k + j * kStride, d);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
      const float* ahead = fetch && u0 == 0 ? rows + kPrefetchRows * kStride : nullptr;
      alignas(32) float sums[8];
      _mm256_store_ps(sums, _mm256_mul_ps(vscale, scoresTileAny(tq, keys, q + u0 * d, d, rows, kStride, whole, rest, ahead)));
      for (int u = 0; u < tq; ++u)
        for (int r = 0; r < keys; ++r) s[(u0 + u) * n + j0 + r] = sums[u * 2 + r];
    }
  }
}

namespace {

// Keys per block of decodeAccumulateAvx2: its V rows stay in L1 across the
// 16-float chunks of the rows and the query tiles.
constexpr int64_t kAccumulateKeys = 32;

// acc rows u < Queries (accStride apart) += w[u * n + j] * row j of `keys` V
// rows, over floats [e0, e0 + 16) of each (masked past dv). Every weight of
// the tile is non-zero. `ahead`: rows requested beside the loads, or null.
template <int Queries>
inline void accumulateChunk(const float* w, int64_t n, const float* rows, int64_t vStride, int64_t keys, int64_t e0,
                            int64_t dv, float* acc, int64_t accStride, const float* ahead) {
  const __m256i m0 = laneMask(dv - e0), m1 = laneMask(dv - e0 - 8);
  __m256 t[Queries][2];
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u) {
    t[u][0] = _mm256_maskload_ps(acc + u * accStride + e0, m0);
    t[u][1] = _mm256_maskload_ps(acc + u * accStride + e0 + 8, m1);
  }
  for (int64_t j = 0; j < keys; ++j) {
    const float* row = rows + j * vStride + e0;
    if (ahead) _mm_prefetch(reinterpret_cast<const char*>(ahead + j * vStride + e0), _MM_HINT_T1);
    const __m256 v0 = _mm256_maskload_ps(row, m0), v1 = _mm256_maskload_ps(row + 8, m1);
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) {
      const __m256 wv = _mm256_broadcast_ss(w + u * n + j);
      t[u][0] = _mm256_fmadd_ps(wv, v0, t[u][0]);
      t[u][1] = _mm256_fmadd_ps(wv, v1, t[u][1]);
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u) {
    _mm256_maskstore_ps(acc + u * accStride + e0, m0, t[u][0]);
    _mm256_maskstore_ps(acc + u * accStride + e0 + 8, m1, t[u][1]);
  }
}

// One query's block, skipping its zero weights: a key that softmax gave no
// weight (masked, padded, or underflowed) is not read, since a blocked key's
// row may hold anything.
inline void accumulateSparse(const float* w, const float* rows, int64_t vStride, int64_t keys, int64_t dv, float* a) {
  for (int64_t e0 = 0; e0 < dv; e0 += 8) {
    const __m256i m = laneMask(dv - e0);
    __m256 t = _mm256_maskload_ps(a + e0, m);
    for (int64_t j = 0; j < keys; ++j) {
      if (w[j] == 0.0f) continue;
      t = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_maskload_ps(rows + j * vStride + e0, m), t);
    }
    _mm256_maskstore_ps(a + e0, m, t);
  }
}

// Whether any of `keys` weights of `queries` rows (n apart) is zero.
inline bool anyZeroWeight(const float* w, int64_t n, int queries, int64_t keys) {
  const __m256 zero = _mm256_setzero_ps();
  for (int u = 0; u < queries; ++u)
    for (int64_t j = 0; j < keys; j += 8) {
      const __m256i m = laneMask(keys - j);
      const __m256 eq = _mm256_cmp_ps(_mm256_maskload_ps(w + u * n + j, m), zero, _CMP_EQ_OQ);
      if (_mm256_movemask_ps(_mm256_and_ps(eq, _mm256_castsi256_ps(m)))) return true;
    }
  return false;
}

}  // namespace

void decodeAccumulateAvx2(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                          float* acc, int64_t accStride) {
  for (int64_t j0 = 0; j0 < n; j0 += kAccumulateKeys) {
    const int64_t keys = n - j0 < kAccumulateKeys ? n - j0 : kAccumulateKeys;
    const float* rows = v + j0 * vStride;
    const bool fetch = j0 + kPrefetchRows + keys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchFloats(v + j * vStride, dv);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
      const float* w = p + u0 * n + j0;
      float* a = acc + u0 * accStride;
      const float* ahead = fetch && u0 == 0 ? rows + kPrefetchRows * vStride : nullptr;
      if (anyZeroWeight(w, n, tq, keys)) {
        if (ahead)
          for (int64_t j = 0; j < keys; ++j) prefetchFloats(ahead + j * vStride, dv);
        for (int u = 0; u < tq; ++u) accumulateSparse(w + u * n, rows, vStride, keys, dv, a + u * accStride);
        continue;
      }
      for (int64_t e0 = 0; e0 < dv; e0 += 16) {
        switch (tq) {
          case 1: accumulateChunk<1>(w, n, rows, vStride, keys, e0, dv, a, accStride, ahead); break;
          case 2: accumulateChunk<2>(w, n, rows, vStride, keys, e0, dv, a, accStride, ahead); break;
          case 3: accumulateChunk<3>(w, n, rows, vStride, keys, e0, dv, a, accStride, ahead); break;
          default: accumulateChunk<4>(w, n, rows, vStride, keys, e0, dv, a, accStride, ahead); break;
        }
      }
    }
  }
}

}  // namespace mhsa
