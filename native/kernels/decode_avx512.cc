// Attention's decode path with AVX-512 intrinsics: the query rows of one kv
// head against its K and V, each row of which is read once for all of them.
// Both kernels work on tiles of up to 4 queries, so that one load of a K or
// V vector feeds up to four FMAs and the tile's rows are reached from one
// pointer and its stride (docs/design/attention-tiles.md, the decode path).
// Compiled with the AVX-512 flags only.
#include "decode_avx512.h"

#include "avx512_intrinsics.h"

namespace mhsa {

namespace {

// Rows ahead that each pass requests into L2 (docs/design/attention-tiles.md, the decode path).
constexpr int64_t kPrefetchRows = 64;

// Queries per tile: 4 queries x 4 keys of dots fill the 16 lanes of one reduction, and
// 4 queries x 64 floats of V fill 16 accumulators.
constexpr int kTileQueries = 4;

inline void prefetchFloats(const float* r, int64_t floats) {
  for (int64_t o = 0; o < floats; o += 16) _mm_prefetch(reinterpret_cast<const char*>(r + o), _MM_HINT_T1);
}

// Lane sums of 16 vectors, transposed: the sum of a[i]'s lanes lands in lane
// (i % 4) * 4 + i / 4. Each level adds pairs of half-vectors, halving the
// vector count: 256-bit halves, then 128-bit quarters, then pairs, then
// single floats.
inline __m512 laneSums16(const __m512* a) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i) {
    const __m512 lo = _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44);  // a.lo256 | b.lo256
    const __m512 hi = _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE);  // a.hi256 | b.hi256
    b[i] = _mm512_add_ps(lo, hi);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512 lo = _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88);
    const __m512 hi = _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD);
    c[i] = _mm512_add_ps(lo, hi);
  }
  for (int i = 0; i < 2; ++i) {
    const __m512 lo = _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44);
    const __m512 hi = _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xEE);
    d[i] = _mm512_add_ps(lo, hi);
  }
  const __m512 lo = _mm512_shuffle_ps(d[0], d[1], 0x88);
  const __m512 hi = _mm512_shuffle_ps(d[0], d[1], 0xDD);
  return _mm512_add_ps(lo, hi);
}

// Dots of Queries queries (rows d apart at q) with Keys keys (rows kStride
// apart at rows). The dot of query u with key r accumulates in acc[r * 4 + u],
// so laneSums16 leaves query u's Keys scores in lanes 4u .. 4u + Keys - 1.
// `ahead`, when set, is requested line by line beside the key rows' loads.
template <int Queries, int Keys>
inline __m512 scoresTile(const float* q, int64_t d, const float* rows, int64_t kStride, int64_t whole,
                         __mmask16 tail, const float* ahead) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t e = 0; e < whole; e += 16) {
    __m512 qv[Queries];
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) qv[u] = _mm512_loadu_ps(q + u * d + e);
#pragma GCC unroll 4
    for (int r = 0; r < Keys; ++r) {
      if (ahead) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      const __m512 kv = _mm512_loadu_ps(rows + r * kStride + e);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u) acc[r * 4 + u] = _mm512_fmadd_ps(qv[u], kv, acc[r * 4 + u]);
    }
  }
  if (tail) {
    __m512 qv[Queries];
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) qv[u] = _mm512_maskz_loadu_ps(tail, q + u * d + whole);
#pragma GCC unroll 4
    for (int r = 0; r < Keys; ++r) {
      const __m512 kv = _mm512_maskz_loadu_ps(tail, rows + r * kStride + whole);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u) acc[r * 4 + u] = _mm512_fmadd_ps(qv[u], kv, acc[r * 4 + u]);
    }
  }
  return laneSums16(acc);
}

template <int Queries>
inline __m512 scoresTileKeys(int keys, const float* q, int64_t d, const float* rows, int64_t kStride, int64_t whole,
                             __mmask16 tail, const float* ahead) {
  switch (keys) {
    case 1: return scoresTile<Queries, 1>(q, d, rows, kStride, whole, tail, nullptr);
    case 2: return scoresTile<Queries, 2>(q, d, rows, kStride, whole, tail, nullptr);
    case 3: return scoresTile<Queries, 3>(q, d, rows, kStride, whole, tail, nullptr);
    default: return scoresTile<Queries, 4>(q, d, rows, kStride, whole, tail, ahead);
  }
}

inline __m512 scoresTileAny(int queries, int keys, const float* q, int64_t d, const float* rows, int64_t kStride,
                            int64_t whole, __mmask16 tail, const float* ahead) {
  switch (queries) {
    case 1: return scoresTileKeys<1>(keys, q, d, rows, kStride, whole, tail, ahead);
    case 2: return scoresTileKeys<2>(keys, q, d, rows, kStride, whole, tail, ahead);
    case 3: return scoresTileKeys<3>(keys, q, d, rows, kStride, whole, tail, ahead);
    default: return scoresTileKeys<4>(keys, q, d, rows, kStride, whole, tail, ahead);
  }
}

}  // namespace

void decodeScoresAvx512(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                        float scale, float* s) {
  constexpr int kKeys = 4;
  const __m512 vscale = _mm512_set1_ps(scale);
  const __mmask16 tail = lowLanes(d % 16);
  const int64_t whole = d / 16 * 16;
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    const int keys = n - j0 < kKeys ? static_cast<int>(n - j0) : kKeys;
    const float* rows = k + j0 * kStride;
    // The first tile's pass over a whole block also requests the block kPrefetchRows ahead.
    const bool fetch = keys == kKeys && j0 + kPrefetchRows + kKeys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchFloats(k + j * kStride, d);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
      const float* ahead = fetch && u0 == 0 ? rows + kPrefetchRows * kStride : nullptr;
      const __m512 sums = _mm512_mul_ps(vscale, scoresTileAny(tq, keys, q + u0 * d, d, rows, kStride, whole, tail, ahead));
      // Query u's scores sit in lanes 4u..4u+3: each quarter is broadcast to the low lanes and stored.
      const __mmask16 lanes = lowLanes(keys);
      float* out = s + u0 * n + j0;
      _mm512_mask_storeu_ps(out, lanes, sums);
      if (tq > 1) _mm512_mask_storeu_ps(out + n, lanes, _mm512_shuffle_f32x4(sums, sums, 0x55));
      if (tq > 2) _mm512_mask_storeu_ps(out + 2 * n, lanes, _mm512_shuffle_f32x4(sums, sums, 0xAA));
      if (tq > 3) _mm512_mask_storeu_ps(out + 3 * n, lanes, _mm512_shuffle_f32x4(sums, sums, 0xFF));
    }
  }
}

namespace {

// Keys per block of decodeAccumulateAvx512: its V rows stay in L1 across the
// 64-float chunks of the rows and the query tiles.
constexpr int64_t kAccumulateKeys = 32;

// acc rows u < Queries (accStride apart) += w[u * n + j] * row j of `keys` V
// rows, over floats [e0, e0 + 64) of each (masked past dv). Every weight of
// the tile is non-zero. `ahead`: rows requested beside the loads, or null.
template <int Queries>
inline void accumulateChunk(const float* w, int64_t n, const float* rows, int64_t vStride, int64_t keys, int64_t e0,
                            int64_t dv, float* acc, int64_t accStride, const float* ahead) {
  __mmask16 m[4];
  __m512 t[Queries][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) m[i] = lowLanes(dv - e0 - 16 * i);
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) t[u][i] = _mm512_maskz_loadu_ps(m[i], acc + u * accStride + e0 + 16 * i);
  for (int64_t j = 0; j < keys; ++j) {
    const float* row = rows + j * vStride + e0;
    if (ahead)
      for (int i = 0; i < 4 && e0 + 16 * i < dv; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j * vStride + e0 + 16 * i), _MM_HINT_T1);
    __m512 vv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) vv[i] = _mm512_maskz_loadu_ps(m[i], row + 16 * i);
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) {
      const __m512 wv = _mm512_set1_ps(w[u * n + j]);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) t[u][i] = _mm512_fmadd_ps(wv, vv[i], t[u][i]);
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) _mm512_mask_storeu_ps(acc + u * accStride + e0 + 16 * i, m[i], t[u][i]);
}

// One query's block, skipping its zero weights: a key that softmax gave no
// weight (masked, padded, or underflowed) is not read, since a blocked key's
// row may hold anything.
inline void accumulateSparse(const float* w, const float* rows, int64_t vStride, int64_t keys, int64_t dv, float* a) {
  for (int64_t e0 = 0; e0 < dv; e0 += 64) {
    __mmask16 m[4];
    __m512 t[4];
    for (int i = 0; i < 4; ++i) {
      m[i] = lowLanes(dv - e0 - 16 * i);
      t[i] = _mm512_maskz_loadu_ps(m[i], a + e0 + 16 * i);
    }
    for (int64_t j = 0; j < keys; ++j) {
      if (w[j] == 0.0f) continue;
      const __m512 wv = _mm512_set1_ps(w[j]);
      const float* row = rows + j * vStride + e0;
      for (int i = 0; i < 4; ++i) t[i] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[i], row + 16 * i), t[i]);
    }
    for (int i = 0; i < 4; ++i) _mm512_mask_storeu_ps(a + e0 + 16 * i, m[i], t[i]);
  }
}

// Whether any of `keys` weights of `queries` rows (n apart) is zero.
inline bool anyZeroWeight(const float* w, int64_t n, int queries, int64_t keys) {
  const __m512 zero = _mm512_setzero_ps();
  for (int u = 0; u < queries; ++u)
    for (int64_t j = 0; j < keys; j += 16) {
      const __mmask16 m = lowLanes(keys - j);
      if (_mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, w + u * n + j), zero, _CMP_EQ_OQ)) return true;
    }
  return false;
}

}  // namespace

// Keys in blocks of kAccumulateKeys, queries in tiles of up to 4: for each
// 64 floats of the accumulators, each V row of the block is loaded once into
// registers and added into every query of the tile, and the accumulators
// are loaded and stored once per block. (Adding each row straight into memory
// kept a store-to-load chain through every accumulator, rows 130 floats apart
// and so split across cache lines: 44 % of a decode step's profile.)
void decodeAccumulateAvx512(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                            float* acc, int64_t accStride) {
  for (int64_t j0 = 0; j0 < n; j0 += kAccumulateKeys) {
    const int64_t keys = n - j0 < kAccumulateKeys ? n - j0 : kAccumulateKeys;
    const float* rows = v + j0 * vStride;
    // As in decodeScoresAvx512: the rows kPrefetchRows on are requested line by line among the
    // first tile's loads (a whole block ahead), or all at once near the end.
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
      for (int64_t e0 = 0; e0 < dv; e0 += 64) {
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
