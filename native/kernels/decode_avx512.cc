// Attention's decode path with AVX-512 intrinsics: the query rows of one kv
// head against its K and V, each row of which is read once for all of them.
// The portable loops (portable_kernels.inc) spent ~27 ns per (query, key) at
// d 128 (one dot's 32-lane tree per key; separate multiply and add), as much
// as streaming the row from DRAM, so a group of four query heads ran
// compute-bound. Here a query's dots with 16 keys at a time accumulate in 16
// registers with FMAs, and one transposing reduction turns them into a
// vector of 16 scores. Compiled with the AVX-512 flags only.
#include "decode_avx512.h"

#include "avx512_intrinsics.h"

namespace mhsa {

namespace {

// Rows ahead that each pass requests into L2 (docs/design/attention-tiles.md, the decode path):
// a multiple of the 16- and 32-key blocks.
constexpr int64_t kPrefetchRows = 64;

inline void prefetchFloats(const float* r, int64_t floats) {
  for (int64_t o = 0; o < floats; o += 16) _mm_prefetch(reinterpret_cast<const char*>(r + o), _MM_HINT_T1);
}

// Where laneSums16's adds leave key i's sum: lane (i % 4) * 4 + i / 4.
alignas(64) constexpr int32_t kLaneOrder[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

// Lane sums of 16 vectors: result lane i = sum of a[i]'s lanes. Each level
// adds pairs of half-vectors, halving the vector count: 256-bit halves, then
// 128-bit quarters, then pairs, then single floats; the last permute puts
// the sums back in key order.
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
  const __m512i order = _mm512_loadu_si512(kLaneOrder);
  return _mm512_permutexvar_ps(order, _mm512_add_ps(lo, hi));
}

}  // namespace

namespace {

// One query's scores with keys [0, Keys) of rows (Keys <= 16), a compile-time
// count so that the 16 accumulators stay in registers.
template <int Keys>
inline __m512 scoresBlock(const float* qu, const float* rows, int64_t kStride, int64_t whole, __mmask16 tail,
                          const float* ahead) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t e = 0; e < whole; e += 16) {
    const __m512 qv = _mm512_loadu_ps(qu + e);
#pragma GCC unroll 16
    for (int r = 0; r < Keys; ++r) {
      // The same line of the row kPrefetchRows on, one request per line read: spread among
      // the loads, not a burst that fills the miss buffers.
      if (ahead) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * kStride + e), _MM_HINT_T1);
      acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rows + r * kStride + e), acc[r]);
    }
  }
  if (tail) {
    const __m512 qv = _mm512_maskz_loadu_ps(tail, qu + whole);
#pragma GCC unroll 16
    for (int r = 0; r < Keys; ++r)
      acc[r] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(tail, rows + r * kStride + whole), acc[r]);
  }
  return laneSums16(acc);
}

// scoresBlock for a last block of 1-15 keys.
inline __m512 scoresTail(int keys, const float* qu, const float* rows, int64_t kStride, int64_t whole,
                         __mmask16 tail) {
  switch (keys) {
#define MHSA_DECODE_TAIL(K) \
  case K: return scoresBlock<K>(qu, rows, kStride, whole, tail, nullptr);
    MHSA_DECODE_TAIL(1) MHSA_DECODE_TAIL(2) MHSA_DECODE_TAIL(3) MHSA_DECODE_TAIL(4) MHSA_DECODE_TAIL(5)
    MHSA_DECODE_TAIL(6) MHSA_DECODE_TAIL(7) MHSA_DECODE_TAIL(8) MHSA_DECODE_TAIL(9) MHSA_DECODE_TAIL(10)
    MHSA_DECODE_TAIL(11) MHSA_DECODE_TAIL(12) MHSA_DECODE_TAIL(13) MHSA_DECODE_TAIL(14) MHSA_DECODE_TAIL(15)
#undef MHSA_DECODE_TAIL
    default: return scoresBlock<16>(qu, rows, kStride, whole, tail, nullptr);
  }
}

}  // namespace

void decodeScoresAvx512(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                        float scale, float* s) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const __mmask16 tail = lowLanes(d % 16);
  const int64_t whole = d / 16 * 16;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int keys = n - j0 < 16 ? static_cast<int>(n - j0) : 16;
    const float* rows = k + j0 * kStride;
    // The first query's pass over a whole block also requests the block kPrefetchRows ahead.
    const bool fetch = keys == 16 && j0 + kPrefetchRows + 16 <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchFloats(k + j * kStride, d);
    for (int64_t u = 0; u < queries; ++u) {
      const float* qu = q + u * d;
      const float* ahead = fetch && u == 0 ? rows + kPrefetchRows * kStride : nullptr;
      const __m512 sums = keys == 16 ? scoresBlock<16>(qu, rows, kStride, whole, tail, ahead)
                                     : scoresTail(keys, qu, rows, kStride, whole, tail);
      _mm512_mask_storeu_ps(s + u * n + j0, lowLanes(keys), _mm512_mul_ps(vscale, sums));
    }
  }
}

// Keys in blocks of kAccumulateKeys: for each query and each 64 floats of
// its accumulator, the block's V rows (in L1 after the first pass) are added
// into registers, and the accumulator is loaded and stored once per block.
// (Adding each row straight into memory kept a store-to-load chain through
// every accumulator, rows 130 floats apart and so split across cache lines:
// 44 % of a decode step's profile.)
void decodeAccumulateAvx512(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                            float* acc, int64_t accStride) {
  constexpr int64_t kAccumulateKeys = 32;
  for (int64_t j0 = 0; j0 < n; j0 += kAccumulateKeys) {
    const int64_t keys = n - j0 < kAccumulateKeys ? n - j0 : kAccumulateKeys;
    const float* rows = v + j0 * vStride;
    // As in decodeScoresAvx512: the rows kPrefetchRows on are requested line by line among the
    // first query's loads (a whole block ahead), or all at once near the end.
    const bool fetch = j0 + kPrefetchRows + keys <= n;
    if (!fetch)
      for (int64_t j = j0 + kPrefetchRows; j < j0 + kPrefetchRows + keys && j < n; ++j) prefetchFloats(v + j * vStride, dv);
    for (int64_t u = 0; u < queries; ++u) {
      const float* w = p + u * n + j0;
      float* a = acc + u * accStride;
      for (int64_t e0 = 0; e0 < dv; e0 += 64) {
        __mmask16 m[4];
        __m512 t[4];
        for (int i = 0; i < 4; ++i) {
          m[i] = lowLanes(dv - e0 - 16 * i);
          t[i] = _mm512_maskz_loadu_ps(m[i], a + e0 + 16 * i);
        }
        for (int64_t j = 0; j < keys; ++j) {
          if (fetch && u == 0)
            for (int i = 0; i < 4 && e0 + 16 * i < dv; ++i)
              _mm_prefetch(reinterpret_cast<const char*>(rows + (j + kPrefetchRows) * vStride + e0 + 16 * i), _MM_HINT_T1);
          if (w[j] == 0.0f) continue;  // a blocked key's row is not read (it may hold anything)
          const __m512 vw = _mm512_set1_ps(w[j]);
          const float* row = rows + j * vStride + e0;
          for (int i = 0; i < 4; ++i) t[i] = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(m[i], row + 16 * i), t[i]);
        }
        for (int i = 0; i < 4; ++i) _mm512_mask_storeu_ps(a + e0 + 16 * i, m[i], t[i]);
      }
    }
  }
}

}  // namespace mhsa
