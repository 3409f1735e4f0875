// The AVX2+FMA GEMM micro-kernel: a 6 x 16 tile of C in 12 ymm registers
// (two 8-float vectors per row), leaving 4 of the 16 registers for the two B
// vectors and the A broadcast. 12 accumulators cover FMA latency x ports
// (4 cycles x 2 ports = 8 in flight needed).
//
// The tile must stay in registers for the whole K loop. GCC keeps an array of
// __m256 in registers only when every index into it is a compile-time
// constant, so the row count is a template parameter and every loop over rows
// is fully unrolled, the epilogue included. (With a runtime row count in the
// epilogue, GCC put all 12 accumulators on the stack and every FMA went
// through a store and a reload: 28 % of peak, a third of OpenBLAS.)
// Compiled with -mavx2 -mfma only.
//
// The full 6-row tiles against a packed B sliver run their K loops from
// inline assembly (avx2_asm_tile.h); the other tiles keep the intrinsics.
#include "microkernel_avx2.h"

#include <immintrin.h>

#include "avx2_asm_tile.h"
#include "avx2_lanes.h"
#include "few_rows_shape.h"

namespace mhsa {

namespace {
constexpr int kNR = 16;

using avx2lanes::laneMask;

// The epilogue shared by both kernels: row i of c = alpha * acc[i]
// (+ c when accumulate) (+ bias), over `cols` columns (plain loads and stores
// for a whole 16-column row, lane masks at a ragged edge). Inlined into each
// tile so acc stays in registers.
template <int R>
inline void storeTile(__m256 (&acc)[R][2], float* c, int64_t ldc, float alpha, bool accumulate, int cols,
                      const float* bias) {
  const __m256 va = _mm256_set1_ps(alpha);
  const bool whole = cols >= kNR;
  const __m256i m0 = laneMask(cols);
  const __m256i m1 = laneMask(cols - 8);
  auto load = [&](const float* p, __m256i m) { return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); };
  const __m256 bias0 = bias ? load(bias, m0) : _mm256_setzero_ps();
  const __m256 bias1 = bias ? load(bias + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(acc[i][0], va);
    __m256 r1 = _mm256_mul_ps(acc[i][1], va);
    if (accumulate) {
      r0 = _mm256_add_ps(r0, load(row, m0));
      r1 = _mm256_add_ps(r1, load(row + 8, m1));
    }
    if (bias) {
      r0 = _mm256_add_ps(r0, bias0);
      r1 = _mm256_add_ps(r1, bias1);
    }
    if (whole) {
      _mm256_storeu_ps(row, r0);
      _mm256_storeu_ps(row + 8, r1);
    } else {
      _mm256_maskstore_ps(row, m0, r0);
      _mm256_maskstore_ps(row + 8, m1, r1);
    }
  }
}

// R rows of the packed tile (R = 6 but for the last row tile of an M that is
// not a multiple of 6, which then runs only its own rows' FMAs).
template <int R>
void packedTile(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias, const float* prefetch) {
  // Fetch the C tile now so it has arrived by the time the K loop ends.
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  // With no prefetch, harmless requests for lines of this B sliver (offsets up to 2 (kc - 1) floats).
  const float* const fetchBase = prefetch ? prefetch : bp;
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
    if ((k & 7) == 0) _mm_prefetch(reinterpret_cast<const char*>(fetchBase + 16 * (k >> 3)), _MM_HINT_T1);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 a = _mm256_broadcast_ss(ap + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    ap += aStep;
    bp += bStride;
  }
  storeTile<R>(acc, c, ldc, alpha, accumulate, cols, bias);
}

#ifdef MHSA_AVX2_ASM_TILE
// The epilogue of the assembly tiles: the sums from tile[] through storeTile.
inline void storeAsmTile(const float* tile, float* c, int64_t ldc, float alpha, bool accumulate, int cols,
                         const float* bias) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = _mm256_loadu_ps(tile + kNR * i);
    acc[i][1] = _mm256_loadu_ps(tile + kNR * i + 8);
  }
  storeTile<6>(acc, c, ldc, alpha, accumulate, cols, bias);
}

// packedTile<6> with A and B packed (aStep 6, bStride 16): avx2_asm_tile.h.
void packedTile6x16Asm(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, float alpha,
                       bool accumulate, int cols, const float* bias, const float* prefetch) {
  alignas(32) float tile[6 * kNR];
  // One line of the next B block per 8 k steps, as packedTile requests them
  // (with none, lines of this sliver: harmless).
  avx2asm::packedProduct(kc, ap, bp, prefetch ? prefetch : bp, avx2asm::CTileRows(c, ldc), tile);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}

// packedTile<6> with B packed and A's k steps aStep floats apart: attention's
// P·V reads its transposed scores in place, a query tile's width apart.
void stridedTile6x16Asm(int64_t kc, const float* ap, int64_t aStep, const float* bp, float* c, int64_t ldc,
                        float alpha, bool accumulate, int cols, const float* bias) {
  alignas(32) float tile[6 * kNR];
  avx2asm::stridedProduct(kc, ap, aStep, bp, avx2asm::CTileRows(c, ldc), tile);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}

// directTile<6, false> with B a packed sliver (ldb 16).
void directTile6x16Asm(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, float alpha,
                       bool accumulate, int cols, const float* bias) {
  alignas(32) float tile[6 * kNR];
  avx2asm::rowsProduct(kc, a, lda, b, avx2asm::CTileRows(c, ldc), tile);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}
#endif

}  // namespace

// ap: kc x 6 (k-major, 6 rows interleaved, aStep floats per k); bp: kc x 16
// (bStride floats per k); c: row stride ldc. Writes c[i][j] = alpha*acc
// (+ c[i][j] when accumulate) (+ bias[j]) for i < mr, j < nr.
void microKernel6x16Avx2(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                         int64_t ldc, float alpha, bool accumulate, int mr, int nr, const float* bias,
                         const float* prefetch) {
#ifdef MHSA_AVX2_ASM_TILE
  // Whole tiles only: the assembly requests each C row's 16 floats for
  // writing, past a ragged tile's last column (lines another thread may own).
  if (mr == 6 && nr == kNR && aStep == 6 && bStride == kNR && kc >= avx2asm::kMinDepth)
    return packedTile6x16Asm(kc, ap, bp, c, ldc, alpha, accumulate, nr, bias, prefetch);
  if (mr == 6 && nr == kNR && bStride == kNR && prefetch == nullptr && kc >= avx2asm::kMinDepth)
    return stridedTile6x16Asm(kc, ap, aStep, bp, c, ldc, alpha, accumulate, nr, bias);
#endif
  switch (mr) {
#define MHSA_PACKED_CASE(R) \
  case R: return packedTile<R>(kc, ap, aStep, bp, bStride, c, ldc, alpha, accumulate, nr, bias, prefetch);
    MHSA_PACKED_CASE(6) MHSA_PACKED_CASE(1) MHSA_PACKED_CASE(2) MHSA_PACKED_CASE(3) MHSA_PACKED_CASE(4)
    MHSA_PACKED_CASE(5)
#undef MHSA_PACKED_CASE
    default: return;
  }
}

namespace {

// R rows x 16 columns read in place (see the AVX-512 directTile). A narrow
// edge (Masked) loads B with lane masks so it reads only its columns.
template <int R, bool Masked>
void directTile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias) {
  const __m256i m0 = laneMask(cols);
  const __m256i m1 = laneMask(cols - 8);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = Masked ? _mm256_maskload_ps(b, m0) : _mm256_loadu_ps(b);
    const __m256 b1 = Masked ? _mm256_maskload_ps(b + 8, m1) : _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
    b += ldb;
  }
  storeTile<R>(acc, c, ldc, alpha, accumulate, cols, bias);
}

template <bool Masked>
void directRows(int rows, int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc, float alpha, bool accumulate, int cols, const float* bias) {
  switch (rows) {
#define MHSA_DIRECT_CASE(R) \
  case R: return directTile<R, Masked>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    MHSA_DIRECT_CASE(1) MHSA_DIRECT_CASE(2) MHSA_DIRECT_CASE(3) MHSA_DIRECT_CASE(4) MHSA_DIRECT_CASE(5)
    MHSA_DIRECT_CASE(6)
#undef MHSA_DIRECT_CASE
    default: return;
  }
}

// R rows of A read in place (R <= 2) against S slivers of a packed B at once
// (each kc x 16, sliverStride floats apart): 2S accumulator chains per row
// where one sliver gives two, which leave a one-row product waiting on FMA
// latency. Each sum runs over k in order from zero: the 6 x 16 tile's bits.
template <int R, int S>
void fewRowsTile(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride, float* c,
                 int64_t ldc, float alpha, bool accumulate, int cols, const float* bias) {
  __m256 acc[S][R][2];
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < R; ++i) acc[s][i][0] = acc[s][i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b[S][2];
    for (int s = 0; s < S; ++s) {
      b[s][0] = _mm256_loadu_ps(bp + s * sliverStride + kNR * k);
      b[s][1] = _mm256_loadu_ps(bp + s * sliverStride + kNR * k + 8);
    }
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_set1_ps(a[i * lda + k]);
      for (int s = 0; s < S; ++s) {
        acc[s][i][0] = _mm256_fmadd_ps(av, b[s][0], acc[s][i][0]);
        acc[s][i][1] = _mm256_fmadd_ps(av, b[s][1], acc[s][i][1]);
      }
    }
  }
  for (int s = 0; s < S; ++s)
    storeTile<R>(acc[s], c + kNR * s, ldc, alpha, accumulate, cols - kNR * s, bias ? bias + kNR * s : nullptr);
}

}  // namespace

void fewRowsPacked2x64Avx2(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride, float* c,
                           int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias) {
  withFewRowsShape(rows, (cols + kNR - 1) / kNR, [&](auto r, auto s) {
    fewRowsTile<decltype(r)::value, decltype(s)::value>(kc, a, lda, bp, sliverStride, c, ldc, alpha, accumulate, cols,
                                                        bias);
  });
}

void microKernelDirect6x16Avx2(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias) {
#ifdef MHSA_AVX2_ASM_TILE
  if (rows == 6 && cols >= kNR && ldb == kNR && kc >= avx2asm::kMinDepth)
    return directTile6x16Asm(kc, a, lda, b, c, ldc, alpha, accumulate, cols, bias);
#endif
  if (cols >= kNR)
    directRows<false>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
  else
    directRows<true>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
}

}  // namespace mhsa
