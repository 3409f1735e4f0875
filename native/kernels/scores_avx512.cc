// Attention's transposed scores tile with the column softmax's exp applied in
// the micro-kernel's epilogue (KernelTable::scoresExp2Tile): the 12 x 32 tile
// of S^T = K · Q^T leaves the registers as 2^(s - shift), and its column sums
// are added on the way out. The separate passes it replaces (a column max,
// then the exp) each read the block of scores back from L2.
// Compiled with the AVX-512 flags only.
#include "scores_avx512.h"

#include <cassert>

#include "avx512_intrinsics.h"
#include "exp2_avx512.h"
#include "kernel_table.h"

namespace mhsa {
namespace {

constexpr int kNR = 32;

inline __mmask16 lowLanes(int n) {  // lanes [0, n) for n in [0, 16]
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// R keys x V vectors of 16 queries. UnitRowStep: A is a packed sliver (the R
// values of one k are adjacent); otherwise A is R rows of K read in place.
template <int R, int V, bool UnitRowStep>
bool scoresTile(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
                int64_t ldc, float alpha, int cols, float* shift, bool setShift, float* sum) {
  __m512 t[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[V];
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(UnitRowStep ? a[i] : a[i * aRowStep]);
      for (int v = 0; v < V; ++v) t[i][v] = _mm512_fmadd_ps(av, bv[v], t[i][v]);
    }
    a += aDepthStep;
    b += kNR;
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = _mm512_mul_ps(t[i][v], va);

  const bool whole = cols == 16 * V;
  const __mmask16 mask[2] = {lowLanes(cols), lowLanes(cols - 16)};
  auto store = [&](float* p, int v, __m512 x) {
    if (whole)
      _mm512_storeu_ps(p, x);
    else
      _mm512_mask_storeu_ps(p, mask[v], x);
  };
  __m512 sh[V];
  for (int v = 0; v < V; ++v) {
    if (setShift) {
      sh[v] = t[0][v];
      for (int i = 1; i < R; ++i) sh[v] = _mm512_max_ps(sh[v], t[i][v]);
      sh[v] = _mm512_add_ps(sh[v], _mm512_set1_ps(kScoresExp2ShiftMargin));
    } else {
      sh[v] = _mm512_maskz_loadu_ps(mask[v], shift + 16 * v);
    }
  }
  // Not less or equal, unordered: a NaN argument (a NaN score, or a column
  // whose shift is -inf) also takes the caller's general path.
  const __m512 headroom = _mm512_set1_ps(kScoresExp2Headroom);
  __mmask16 over = 0;
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v)
      over |= _mm512_mask_cmp_ps_mask(mask[v], _mm512_sub_ps(t[i][v], sh[v]), headroom, _CMP_NLE_UQ);
  if (over) {
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) store(c + i * ldc + 16 * v, v, t[i][v]);
    return false;
  }
  __m512 s[V];
  for (int v = 0; v < V; ++v) {
    if (setShift) store(shift + 16 * v, v, sh[v]);
    s[v] = _mm512_maskz_loadu_ps(mask[v], sum + 16 * v);
  }
  // Row by row, as the column pass adds them, so the sums keep its order.
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      const __m512 e = exp2Avx512(_mm512_sub_ps(t[i][v], sh[v]));
      store(c + i * ldc + 16 * v, v, e);
      s[v] = _mm512_add_ps(s[v], e);
    }
  for (int v = 0; v < V; ++v) store(sum + 16 * v, v, s[v]);
  return true;
}

template <int V, bool UnitRowStep>
bool scoresRows(int rows, int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
                int64_t ldc, float alpha, int cols, float* shift, bool setShift, float* sum) {
  switch (rows) {
#define MHSA_SCORES_CASE(R) \
  case R:                   \
    return scoresTile<R, V, UnitRowStep>(kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cols, shift, setShift, sum);
    MHSA_SCORES_CASE(1) MHSA_SCORES_CASE(2) MHSA_SCORES_CASE(3) MHSA_SCORES_CASE(4)
    MHSA_SCORES_CASE(5) MHSA_SCORES_CASE(6) MHSA_SCORES_CASE(7) MHSA_SCORES_CASE(8)
    MHSA_SCORES_CASE(9) MHSA_SCORES_CASE(10) MHSA_SCORES_CASE(11) MHSA_SCORES_CASE(12)
#undef MHSA_SCORES_CASE
    default: assert(false && "rows in [1, 12]"); return false;
  }
}

}  // namespace

bool scoresExp2Tile12x32Avx512(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b,
                               float* c, int64_t ldc, float alpha, int rows, int cols, float* shift, bool setShift,
                               float* sum) {
  auto run = [&](auto tile) {
    return tile(rows, kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cols, shift, setShift, sum);
  };
  const bool packed = aRowStep == 1;
  if (cols > 16) return packed ? run(scoresRows<2, true>) : run(scoresRows<2, false>);
  return packed ? run(scoresRows<1, true>) : run(scoresRows<1, false>);
}

}  // namespace mhsa
