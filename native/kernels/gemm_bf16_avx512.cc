// The bf16 GEMM strip on AVX512_BF16 (Zen 4, Sapphire Rapids): a 12 x 32
// tile of C in 24 zmm accumulators, as the float micro-kernel holds it. Each
// step takes two depths: two vectors of the packed B sliver (16 column pairs
// each) and a broadcast pair of each A row, 24 VDPBF16PS. Zen 4 issues them
// at the FMA rate, so twice the float flops per cycle.
// Compiled with the AVX-512 flags and -mavx512bf16.
#include <cstdint>
#include <cstring>

#include "avx512_intrinsics.h"
#include "gemm_bf16.h"
#include "tile_store_avx512.h"

namespace mhsa {
namespace {

constexpr int kRows = 12;
// How far ahead the tile requests B: a 1-2 row strip (a decode step's
// projection) does two VDPBF16PS per 128 bytes of B, so only requests well
// ahead keep the stream going (docs/design/bf16.md).
constexpr uintptr_t kPrefetchBytes = 2048;

// 16 floats to 16 bf16 as floatToBf16 (bf16.h) rounds them: to nearest even,
// in integer arithmetic, NaN to 0x7FC0.
__m256i floatsToBf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(r);
}

}  // namespace

void convertRowsToBf16Avx512(const float* src, int64_t rowStride, int64_t rows, int64_t kc, int64_t kpad,
                             uint16_t* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * rowStride;
    uint16_t* d = dst + i * kpad;
    for (int64_t k = 0; k < kpad; k += 16) {
      const __m512 x = _mm512_maskz_loadu_ps(lowLanes(kc - k), s + k);  // zeros past kc
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + k), floatsToBf16(x));
    }
  }
}

namespace {

inline __m512bh asBf16Pairs(__m512i x) {
  __m512bh r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}

inline __m512bh broadcastPair(const uint16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return asBf16Pairs(_mm512_set1_epi32(pair));
}

// R rows x V vectors of 16 columns (R < 12 only for the last rows of a strip,
// V = 1 for a last sliver of at most 16 columns).
template <int R, int V>
void tile(int64_t kpad, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, float alpha, bool accumulate,
          int cols, const float* bias) {
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kpad; k += 2) {
    __m512bh bv[V];
    for (int v = 0; v < V; ++v)
      bv[v] = asBf16Pairs(_mm512_loadu_si512(b + k * kBf16SliverColumns + 2 * 16 * v));
    // B's lines kPrefetchBytes ahead, past this sliver's end into the next one
    // (the next strip's, when a thread runs slivers in order): formed as an
    // integer, since pointer arithmetic past B would be undefined.
    for (int v = 0; v < 2; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(b + k * kBf16SliverColumns + 2 * 16 * v) +
                                                 kPrefetchBytes),
                   _MM_HINT_T0);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512bh ai = broadcastPair(a + i * kpad + k);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
  storeTileAvx512<R, V>(acc, c, ldc, alpha, accumulate, cols, bias);
}

using TileFn = void (*)(int64_t, const uint16_t*, const uint16_t*, float*, int64_t, float, bool, int, const float*);

template <int V>
TileFn tileFor(int64_t rows) {
  switch (rows) {
    case 1: return tile<1, V>;
    case 2: return tile<2, V>;
    case 3: return tile<3, V>;
    case 4: return tile<4, V>;
    case 5: return tile<5, V>;
    case 6: return tile<6, V>;
    case 7: return tile<7, V>;
    case 8: return tile<8, V>;
    case 9: return tile<9, V>;
    case 10: return tile<10, V>;
    case 11: return tile<11, V>;
    default: return tile<12, V>;
  }
}

void strip(int64_t kpad, const uint16_t* a, int64_t rows, const uint16_t* b, float* c, int64_t ldc, float alpha,
           bool accumulate, int cols, const float* bias) {
  for (int64_t i = 0; i < rows; i += kRows) {
    const int64_t r = rows - i < kRows ? rows - i : kRows;
    const TileFn fn = cols > 16 ? tileFor<2>(r) : tileFor<1>(r);
    fn(kpad, a + i * kpad, b, c + i * ldc, ldc, alpha, accumulate, cols, bias);
  }
}

void nothing() {}

// 16 independent accumulators, as the float FMA peak's loop (calibrate.cc).
double peakLoop(int64_t iterations) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh x = asBf16Pairs(_mm512_set1_epi32(0x3F803F80)), y = asBf16Pairs(_mm512_set1_epi32(0x33D633D6));
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iterations) * 16 * 16 * 2 * 2;  // 16 vectors x 16 lanes x 2 products x 2 flops
}

const Bf16Kernels kKernels = {"avx512bf16", strip, nothing, nothing, convertRowsToBf16Avx512, peakLoop};

}  // namespace

const Bf16Kernels& avx512Bf16Kernels() { return kKernels; }

}  // namespace mhsa
