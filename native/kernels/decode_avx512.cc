// Attention's decode path with AVX-512 intrinsics: the query rows of one kv
// head against its K and V, each row of which is read once for all of them,
// in tiles of up to 4 queries (decode_tiles.h drives them). Scores: 4 queries
// x 4 keys of dots in 16 accumulators and one transposing reduction; V: 4
// queries x 64 floats of accumulators. One load of a K or V vector feeds
// every query of the tile, and a tile reaches its rows from one pointer and
// the stride (docs/design/attention-tiles.md, the decode path). Rows of bf16
// (a bf16 KV cache) are widened in registers as they are loaded: a shift of
// each value into the top half of a float, so half the bytes are read for the
// same arithmetic; int8 rows (an int8 KV cache) are converted the same way.
// Compiled with the AVX-512 flags only.
#include "decode_avx512.h"

#include "avx512_intrinsics.h"
#include "decode_tiles.h"

namespace mhsa {

namespace {

inline __m512 widenBf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// 16 elements of a K or V row as floats; the masked forms zero the lanes off the mask.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return widenBf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(__mmask16 m, const uint16_t* p) { return widenBf16(_mm256_maskz_loadu_epi16(m, p)); }
// int8 rows (an int8 KV cache) convert exactly; their row scales are the driver's (attention.cc).
inline __m512 widenInt8(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); }
inline __m512 load16(const int8_t* p) { return widenInt8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m512 load16(__mmask16 m, const int8_t* p) { return widenInt8(_mm_maskz_loadu_epi8(m, p)); }

// Whether the 16-element vector at element e of a row starts a 64-byte line
// (the rows' prefetches are one per line).
template <class T>
inline bool startsLine(int64_t e) {
  return e % decode::kLineElements<T> == 0;
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
// FixedD, when not 0, is d known at compile time: the loop over d then has a
// fixed count and no tail, and the accumulators stay in registers from the
// first FMA to the lane sums (with d at run time GCC keeps them on the stack at
// both ends of each tile; docs/design/attention-tiles.md, the decode path).
template <int Queries, int Keys, class T, int FixedD = 0>
inline __m512 scoresTile(const float* q, int64_t runtimeD, const T* rows, int64_t kStride, const T* ahead) {
  const int64_t d = FixedD ? FixedD : runtimeD;
  const int64_t whole = d / 16 * 16;
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t e = 0; e < whole; e += 16) {
    __m512 qv[Queries];
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) qv[u] = _mm512_loadu_ps(q + u * d + e);
#pragma GCC unroll 4
    for (int r = 0; r < Keys; ++r) {
      if (ahead && startsLine<T>(e)) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      const __m512 kv = load16(rows + r * kStride + e);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u) acc[r * 4 + u] = _mm512_fmadd_ps(qv[u], kv, acc[r * 4 + u]);
    }
  }
  if (const __mmask16 tail = lowLanes(d - whole)) {
    __m512 qv[Queries];
#pragma GCC unroll 4
    for (int u = 0; u < Queries; ++u) qv[u] = _mm512_maskz_loadu_ps(tail, q + u * d + whole);
#pragma GCC unroll 4
    for (int r = 0; r < Keys; ++r) {
      const __m512 kv = load16(tail, rows + r * kStride + whole);
#pragma GCC unroll 4
      for (int u = 0; u < Queries; ++u) acc[r * 4 + u] = _mm512_fmadd_ps(qv[u], kv, acc[r * 4 + u]);
    }
  }
  return laneSums16(acc);
}

template <int Queries, class T>
inline __m512 scoresTileKeys(int keys, const float* q, int64_t d, const T* rows, int64_t kStride, const T* ahead) {
  switch (keys) {
    case 1: return scoresTile<Queries, 1, T>(q, d, rows, kStride, nullptr);
    case 2: return scoresTile<Queries, 2, T>(q, d, rows, kStride, nullptr);
    case 3: return scoresTile<Queries, 3, T>(q, d, rows, kStride, nullptr);
    default:
      // The head sizes of most models get a tile of their own.
      if (d == 128) return scoresTile<Queries, 4, T, 128>(q, d, rows, kStride, ahead);
      if (d == 64) return scoresTile<Queries, 4, T, 64>(q, d, rows, kStride, ahead);
      return scoresTile<Queries, 4, T>(q, d, rows, kStride, ahead);
  }
}

// acc rows u < Queries (accStride apart) += w[u * n + j] * row j of `keys` V
// rows, over floats [e0, e0 + 64) of each (masked past dv). Full: all 64
// are below dv, and the loads and stores take no mask.
template <int Queries, class T, bool Full>
inline void accumulateChunk(const float* w, int64_t n, const T* rows, int64_t vStride, int64_t keys, int64_t e0,
                            int64_t dv, float* acc, int64_t accStride, const T* ahead) {
  __mmask16 m[4];
  __m512 t[Queries][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) m[i] = lowLanes(dv - e0 - 16 * i);
#pragma GCC unroll 4
  for (int u = 0; u < Queries; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      t[u][i] = Full ? _mm512_loadu_ps(acc + u * accStride + e0 + 16 * i)
                     : _mm512_maskz_loadu_ps(m[i], acc + u * accStride + e0 + 16 * i);
  for (int64_t j = 0; j < keys; ++j) {
    const T* row = rows + j * vStride + e0;
    if (ahead)
      for (int i = 0; i < 4 && e0 + 16 * i < dv; ++i)
        if (startsLine<T>(16 * i))
          _mm_prefetch(reinterpret_cast<const char*>(ahead + j * vStride + e0 + 16 * i), _MM_HINT_T1);
    __m512 vv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) vv[i] = Full ? load16(row + 16 * i) : load16(m[i], row + 16 * i);
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
    for (int i = 0; i < 4; ++i) {
      if (Full)
        _mm512_storeu_ps(acc + u * accStride + e0 + 16 * i, t[u][i]);
      else
        _mm512_mask_storeu_ps(acc + u * accStride + e0 + 16 * i, m[i], t[u][i]);
    }
}

struct Avx512Tiles {
  static constexpr int kKeys = 4;
  static constexpr int64_t kChunk = 64;

  template <class T>
  static void scores(int tq, int keys, const float* q, int64_t d, const T* rows, int64_t kStride, const T* ahead,
                     float scale, float* s, int64_t n) {
    __m512 sums = decode::withTileQueries(tq, [&](auto queries) {
      return scoresTileKeys<decltype(queries)::value, T>(keys, q, d, rows, kStride, ahead);
    });
    sums = _mm512_mul_ps(_mm512_set1_ps(scale), sums);
    // Query u's scores sit in lanes 4u..4u+3: each quarter is broadcast to the low lanes and stored.
    const __mmask16 lanes = lowLanes(keys);
    _mm512_mask_storeu_ps(s, lanes, sums);
    if (tq > 1) _mm512_mask_storeu_ps(s + n, lanes, _mm512_shuffle_f32x4(sums, sums, 0x55));
    if (tq > 2) _mm512_mask_storeu_ps(s + 2 * n, lanes, _mm512_shuffle_f32x4(sums, sums, 0xAA));
    if (tq > 3) _mm512_mask_storeu_ps(s + 3 * n, lanes, _mm512_shuffle_f32x4(sums, sums, 0xFF));
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
    for (int64_t e0 = 0; e0 < dv; e0 += 16) {
      const __mmask16 m = lowLanes(dv - e0);
      __m512 t = _mm512_maskz_loadu_ps(m, a + e0);
      for (int64_t j = 0; j < keys; ++j)
        if (w[j] != 0.0f) t = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(m, rows + j * vStride + e0), t);
      _mm512_mask_storeu_ps(a + e0, m, t);
    }
  }

  static bool anyZeroWeight(const float* w, int64_t n, int tq, int64_t keys) {
    for (int u = 0; u < tq; ++u)
      for (int64_t j = 0; j < keys; j += 16) {
        const __mmask16 m = lowLanes(keys - j);
        if (_mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, w + u * n + j), _mm512_setzero_ps(), _CMP_EQ_OQ))
          return true;
      }
    return false;
  }
};

}  // namespace

void decodeScoresAvx512(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                        float scale, float* s) {
  decode::scores<Avx512Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateAvx512(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                            float* acc, int64_t accStride) {
  decode::accumulate<Avx512Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

void decodeScoresBf16Avx512(const float* q, int64_t queries, int64_t d, const uint16_t* k, int64_t kStride, int64_t n,
                            float scale, float* s) {
  decode::scores<Avx512Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateBf16Avx512(const float* p, int64_t queries, int64_t n, const uint16_t* v, int64_t vStride,
                                int64_t dv, float* acc, int64_t accStride) {
  decode::accumulate<Avx512Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

void decodeScoresInt8Avx512(const float* q, int64_t queries, int64_t d, const int8_t* k, int64_t kStride, int64_t n,
                            float scale, float* s) {
  decode::scores<Avx512Tiles>(q, queries, d, k, kStride, n, scale, s);
}

void decodeAccumulateInt8Avx512(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                                int64_t dv, float* acc, int64_t accStride) {
  decode::accumulate<Avx512Tiles>(p, queries, n, v, vStride, dv, acc, accStride);
}

}  // namespace mhsa
