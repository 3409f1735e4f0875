// The AVX-512 GEMM micro-kernel: a 12 x 32 tile of C held in 24 zmm registers
// across the whole K loop (two 16-float vectors per row). Each k step loads two
// vectors of the packed B sliver, broadcasts 12 values of the packed A sliver
// and issues 24 FMAs, so loads never limit the two FMA ports: 24 accumulators
// also cover the FMA latency (4 cycles x 2 ports = 8 in flight needed).
// Compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma only.
#include "microkernel_avx512.h"
#include "row_bases.h"

#include <cstdint>

#include "avx512_intrinsics.h"
#include "few_rows_shape.h"
#include "tile_store_avx512.h"

namespace mhsa {

namespace {
constexpr int kMR = 12;
constexpr int kNR = 32;
}  // namespace

namespace {

// R rows x V vectors of 16 columns of the tile (R = 12 and V = 2 but for the
// last row tile of an M that is not a multiple of 12, or a last column sliver
// of at most 16 columns): an edge tile runs only the FMAs of its rows and
// vectors, where the full kernel would compute and discard the rest (7 of 12
// rows at M = 197, 3.4 % of a ViT projection's FMAs; 16 of 32 query columns of
// the last attention tile at N = 197, 7 % of its Q·Kᵀ FMAs). ap still steps
// by aStep per k and bp by 32.
template <int R, int V>
void packedTile(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c, int64_t ldc,
                float alpha, bool accumulate, int nr, const float* bias, const float* prefetch) {
  // Fetch the C tile now so its lines have arrived (from L3 or memory) by the
  // time the K loop ends and the tile is read and written.
  for (int i = 0; i < R; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    if (V > 1) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  // With no prefetch, harmless requests for lines of this B sliver (offsets up to 2 (kc - 1) floats).
  const float* const fetchBase = prefetch ? prefetch : bp;
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_ps(bp + 16 * v);
    // Row k + 8 of B, which the last 8 steps request past the sliver's end:
    // formed as an integer, since pointer arithmetic past B would be undefined.
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(bp) +
                                               static_cast<uintptr_t>(8 * bStride) * sizeof(float)),
                 _MM_HINT_T0);
    if ((k & 7) == 0) {
      _mm_prefetch(reinterpret_cast<const char*>(fetchBase + 16 * (k >> 3)), _MM_HINT_T1);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 a = _mm512_set1_ps(ap[i]);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
    ap += aStep;
    bp += bStride;
  }
  storeTileAvx512<R, V>(acc, c, ldc, alpha, accumulate, nr, bias);
}

template <int V>
void packedRows(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c, int64_t ldc,
                float alpha, bool accumulate, int mr, int nr, const float* bias, const float* prefetch) {
  switch (mr) {
#define MHSA_PACKED_CASE(R) \
  case R: return packedTile<R, V>(kc, ap, aStep, bp, bStride, c, ldc, alpha, accumulate, nr, bias, prefetch);
    MHSA_PACKED_CASE(12) MHSA_PACKED_CASE(1) MHSA_PACKED_CASE(2) MHSA_PACKED_CASE(3) MHSA_PACKED_CASE(4)
    MHSA_PACKED_CASE(5) MHSA_PACKED_CASE(6) MHSA_PACKED_CASE(7) MHSA_PACKED_CASE(8)
    MHSA_PACKED_CASE(9) MHSA_PACKED_CASE(10) MHSA_PACKED_CASE(11)
#undef MHSA_PACKED_CASE
    default: return;
  }
}

}  // namespace

// ap: kc x 12 (k-major, 12 rows interleaved); bp: kc x 32, bStride floats per
// k; c: row stride ldc. Writes c[i][j] = alpha*acc (+ c[i][j] when accumulate)
// for i < mr, j < nr. A last sliver of at most 16 columns runs one vector per
// row (and reads only its first 16 columns of B).
void microKernel12x32Avx512(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                            int64_t ldc, float alpha, bool accumulate, int mr, int nr, const float* bias,
                            const float* prefetch) {
  if (nr <= 16)
    packedRows<1>(kc, ap, aStep, bp, bStride, c, ldc, alpha, accumulate, mr, nr, bias, prefetch);
  else
    packedRows<2>(kc, ap, aStep, bp, bStride, c, ldc, alpha, accumulate, mr, nr, bias, prefetch);
}

namespace {

// R rows x V vectors of 16 columns, read in place: the same FMA schedule as
// the packed kernel, but the V B vectors of step k come from row k of B
// (masked, Masked, so a narrow edge reads only its columns) and the R
// broadcasts from R rows of A. Rows are a template parameter so an edge tile
// computes only the rows it has and never reads a row of A that does not
// exist. A's rows are reached through RowBases (row_bases.h).
template <int R, int V, bool Masked>
void directTile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias) {
  const __mmask16 m0 = lowLanes(cols), m1 = lowLanes(cols - 16);
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  RowBases<R> rows(a, lda);
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[V];
    if (!Masked) {  // a whole tile: plain loads (a masked load also takes an ALU port)
      bv[0] = _mm512_loadu_ps(b);
      if (V > 1) bv[V - 1] = _mm512_loadu_ps(b + 16);
    } else {
      bv[0] = _mm512_maskz_loadu_ps(m0, b);
      if (V > 1) bv[V - 1] = _mm512_maskz_loadu_ps(m1, b + 16);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(rows.at(i, lda));
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    rows.advance(1);
    b += ldb;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  // The bias row, added last as the packed kernel adds it (the same bits).
  __m512 biasv[V];
  for (int v = 0; v < V; ++v)
    biasv[v] = bias ? _mm512_maskz_loadu_ps(v == 0 ? m0 : m1, bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v == 0 ? m0 : m1;
      __m512 r = _mm512_mul_ps(acc[i][v], va);
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, row + 16 * v));
      if (bias) r = _mm512_add_ps(r, biasv[v]);
      _mm512_mask_storeu_ps(row + 16 * v, m, r);
    }
  }
}

template <int V, bool Masked>
void directRows(int rows, int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc, float alpha, bool accumulate, int cols, const float* bias) {
  switch (rows) {
#define MHSA_DIRECT_CASE(R) \
  case R: return directTile<R, V, Masked>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    MHSA_DIRECT_CASE(1) MHSA_DIRECT_CASE(2) MHSA_DIRECT_CASE(3) MHSA_DIRECT_CASE(4)
    MHSA_DIRECT_CASE(5) MHSA_DIRECT_CASE(6) MHSA_DIRECT_CASE(7) MHSA_DIRECT_CASE(8)
    MHSA_DIRECT_CASE(9) MHSA_DIRECT_CASE(10) MHSA_DIRECT_CASE(11) MHSA_DIRECT_CASE(12)
#undef MHSA_DIRECT_CASE
    default: return;
  }
}

// R rows of A read in place (R <= 2) against S slivers of a packed B at once
// (each kc x 32, sliverStride floats apart). One sliver gives a row only two
// accumulator chains, so a one-row product waits on FMA latency (4 cycles a k
// step); S slivers give it 2S chains. Each sum still runs over k in order from
// zero, so every element gets the bits the 12 x 32 tile gives it.
template <int R, int S>
void fewRowsTile(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride, float* c,
                 int64_t ldc, float alpha, bool accumulate, int cols, const float* bias) {
  __m512 acc[R][2 * S];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 2 * S; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[2 * S];
    for (int s = 0; s < S; ++s) {
      b[2 * s] = _mm512_loadu_ps(bp + s * sliverStride + 32 * k);
      b[2 * s + 1] = _mm512_loadu_ps(bp + s * sliverStride + 32 * k + 16);
    }
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + k]);
      for (int v = 0; v < 2 * S; ++v) acc[i][v] = _mm512_fmadd_ps(av, b[v], acc[i][v]);
    }
  }
  storeTileAvx512<R, 2 * S>(acc, c, ldc, alpha, accumulate, cols, bias);
}

}  // namespace

void fewRowsPacked2x128Avx512(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride,
                             float* c, int64_t ldc, float alpha, bool accumulate, int rows, int cols,
                             const float* bias) {
  withFewRowsShape(rows, (cols + 32 - 1) / 32, [&](auto r, auto s) {
    fewRowsTile<decltype(r)::value, decltype(s)::value>(kc, a, lda, bp, sliverStride, c, ldc, alpha, accumulate, cols,
                                                        bias);
  });
}

void microKernelDirect12x32Avx512(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, float alpha, bool accumulate, int rows, int cols,
                                  const float* bias) {
  if (cols == 32)
    directRows<2, false>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
  else if (cols > 16)
    directRows<2, true>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
  else if (cols == 16)
    directRows<1, false>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
  else
    directRows<1, true>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
}

}  // namespace mhsa
