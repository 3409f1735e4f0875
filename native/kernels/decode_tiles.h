// The decode path's drivers over tiles of up to kDecodeTileQueries queries,
// shared by decode_avx512.cc and decode_avx2.cc (docs/design/attention-tiles.md,
// the decode path). K and V rows are float, or bf16 (uint16_t, a bf16 KV
// cache) widened as they are loaded: the tiles take the row type T as a
// template argument. Each ISA file supplies the tiles through a struct K:
//   kKeys:  keys per scores tile;  kChunk: floats of V per accumulate chunk;
//   scores(tq, keys, q, d, rows, kStride, ahead, scale, s, n): the tile's
//     scaled dots into s (row u at s + u * n);
//   accumulate(tq, w, n, rows, vStride, keys, e0, dv, acc, accStride, ahead):
//     the chunk [e0, e0 + kChunk) of acc rows += their weights times V rows,
//     for a tile whose weights are all non-zero;
//   accumulateSparse(w, rows, vStride, keys, dv, acc): one query, skipping
//     its zero weights;
//   anyZeroWeight(w, n, tq, keys).
// Include only from a file compiled with the flags of its ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace mhsa {
namespace decode {

// Rows ahead that each pass requests into L2 (prefetcht1), spread one line per line read among the first
// tile's loads: the design note's measurements.
constexpr int64_t kPrefetchRows = 64;
constexpr int kTileQueries = 4;
// Keys per block of the V pass: its rows stay in L1 across the chunks of the rows and the query tiles.
constexpr int64_t kAccumulateKeys = 32;

// Elements of a row type in one 64-byte line.
template <class T>
constexpr int64_t kLineElements = 64 / static_cast<int64_t>(sizeof(T));

template <class T>
inline void prefetchRow(const T* r, int64_t count) {
  for (int64_t o = 0; o < count; o += kLineElements<T>) _mm_prefetch(reinterpret_cast<const char*>(r + o), _MM_HINT_T1);
}

inline int tileQueries(int64_t queries, int64_t u0) {
  return queries - u0 < kTileQueries ? static_cast<int>(queries - u0) : kTileQueries;
}

// Calls f(std::integral_constant<int, tq>) for a tile of tq queries, so that an
// ISA's tile takes its query count as a template argument.
template <class F>
inline decltype(auto) withTileQueries(int tq, F&& f) {
  switch (tq) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    default: return f(std::integral_constant<int, 4>{});
  }
}

template <class K, class T>
void scores(const float* q, int64_t queries, int64_t d, const T* k, int64_t kStride, int64_t n, float scale,
            float* s) {
  for (int64_t j0 = 0; j0 < n; j0 += K::kKeys) {
    const int keys = n - j0 < K::kKeys ? static_cast<int>(n - j0) : K::kKeys;
    const T* rows = k + j0 * kStride;
    // The first tile's pass over a whole block also requests the block kPrefetchRows ahead;
    // near the end, the rows left are requested at once.
    const bool fetch = keys == K::kKeys && j0 + kPrefetchRows + K::kKeys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchRow(k + j * kStride, d);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const T* ahead = fetch && u0 == 0 ? rows + kPrefetchRows * kStride : nullptr;
      K::scores(tileQueries(queries, u0), keys, q + u0 * d, d, rows, kStride, ahead, scale, s + u0 * n + j0, n);
    }
  }
}

// Keys in blocks of kAccumulateKeys, queries in tiles: for each chunk of the
// accumulators, each V row of the block is loaded once into registers and
// added into every query of the tile, and the accumulators are loaded and
// stored once per block. (Adding each row straight into memory kept a
// store-to-load chain through every accumulator, rows 130 floats apart and so
// split across cache lines: 44 % of a decode step's profile.)
template <class K, class T>
void accumulate(const float* p, int64_t queries, int64_t n, const T* v, int64_t vStride, int64_t dv, float* acc,
                int64_t accStride) {
  for (int64_t j0 = 0; j0 < n; j0 += kAccumulateKeys) {
    const int64_t keys = n - j0 < kAccumulateKeys ? n - j0 : kAccumulateKeys;
    const T* rows = v + j0 * vStride;
    const bool fetch = j0 + kPrefetchRows + keys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchRow(v + j * vStride, dv);
    for (int64_t u0 = 0; u0 < queries; u0 += kTileQueries) {
      const int tq = tileQueries(queries, u0);
      const float* w = p + u0 * n + j0;
      float* a = acc + u0 * accStride;
      const T* ahead = fetch && u0 == 0 ? rows + kPrefetchRows * vStride : nullptr;
      if (K::anyZeroWeight(w, n, tq, keys)) {
        if (ahead)
          for (int64_t j = 0; j < keys; ++j) prefetchRow(ahead + j * vStride, dv);
        for (int u = 0; u < tq; ++u) K::accumulateSparse(w + u * n, rows, vStride, keys, dv, a + u * accStride);
        continue;
      }
      for (int64_t e0 = 0; e0 < dv; e0 += K::kChunk) K::accumulate(tq, w, n, rows, vStride, keys, e0, dv, a, accStride, ahead);
    }
  }
}

}  // namespace decode
}  // namespace mhsa
