// The body of KernelTable::scoresExp2Tile, shared by the ISAs that have one
// (scores_avx512.cc, scores_avx2.cc): a tile of attention's transposed scores
// S^T = K · Q^T that leaves the registers as 2^(s - shift - 48), its column
// sums added on the way out. The separate passes it replaces (a column max,
// then the exp) each read the block of scores back from L2.
//
// A register-width traits class X supplies the vector operations:
//   Vec, Mask, kLanes; low(n) (lanes [0, n)); zero, set1, load, loadz(mask, p),
//   store(p, x), store(p, mask, x), fmadd, mul, add, sub, max;
//   over(mask, a, b): a bit per lane of mask where a > b or either is NaN;
//   exp2Margin(x): 2^(x - kScoresExp2ShiftMargin), 0 below 2^-126, for
//   x <= kScoresExp2ShiftMargin + kScoresExp2Headroom;
//   abs(x), withSignOf(magnitude, x), div(a, b), and selectBelow(a, t, x, y):
//   x where a < t, else y.
// Include only from a file compiled with the flags of X's ISA.
#pragma once

#include <cassert>
#include <cstdint>

#include "exp_poly.h"
#include "kernel_table.h"
#include "row_bases.h"

namespace mhsa {
namespace scores {

// cap * tanh(t / cap) (attention's softcap, here on base-2 scores with a
// base-2 cap), invCap = 1 / cap. For |z| = |t / cap| >= 1/4,
// tanh|z| = (1 - e) / (1 + e) with e = 2^(-2|z| log2 e) from the tile's own
// exp2 (which carries 2^-48: scaled back exactly); below 1/4, where 1 - e
// would cancel, the odd series to z^9 (truncation below 3e-9 relative).
template <class X>
inline typename X::Vec softcap(typename X::Vec t, typename X::Vec cap, typename X::Vec invCap) {
  using Vec = typename X::Vec;
  const Vec z = X::mul(t, invCap);
  const Vec a = X::abs(z);
  const Vec one = X::set1(1.0f);
  const Vec e = X::mul(X::exp2Margin(X::mul(a, X::set1(-2.0f * kLog2e))), X::set1(0x1p48f));
  const Vec large = X::div(X::sub(one, e), X::add(one, e));
  const Vec a2 = X::mul(a, a);
  Vec p = X::set1(62.0f / 2835.0f);
  p = X::fmadd(p, a2, X::set1(-17.0f / 315.0f));
  p = X::fmadd(p, a2, X::set1(2.0f / 15.0f));
  p = X::fmadd(p, a2, X::set1(-1.0f / 3.0f));
  p = X::fmadd(p, a2, one);
  const Vec small = X::mul(a, p);
  return X::mul(cap, X::withSignOf(X::selectBelow(a, X::set1(0.25f), small, large), z));
}

// R keys x V registers of queries; NR queries per packed Q sliver (the step
// of b per k). UnitRowStep: A is a packed sliver (the R values of one k are
// adjacent); otherwise A is R rows of K read in place.
template <class X, int NR, int R, int V, bool UnitRowStep>
bool tile(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c, int64_t ldc,
          float alpha, float cap, int cols, float* shift, bool setShift, float* sum) {
  using Vec = typename X::Vec;
  constexpr int L = X::kLanes;
  Vec t[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = X::zero();
  RowBases<R> rows(a, UnitRowStep ? 0 : aRowStep);  // K's rows in place (row_bases.h)
  for (int64_t k = 0; k < kc; ++k) {
    Vec bv[V];
    for (int v = 0; v < V; ++v) bv[v] = X::load(b + L * v);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const Vec av = X::set1(UnitRowStep ? a[i] : rows.at(i, aRowStep));
      for (int v = 0; v < V; ++v) t[i][v] = X::fmadd(av, bv[v], t[i][v]);
    }
    if (UnitRowStep)
      a += aDepthStep;
    else
      rows.advance(aDepthStep);
    b += NR;
  }
  const Vec va = X::set1(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = X::mul(t[i][v], va);
  if (cap != 0.0f) {
    const Vec vcap = X::set1(cap), vinv = X::set1(1.0f / cap);
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) t[i][v] = softcap<X>(t[i][v], vcap, vinv);
  }

  const bool whole = cols == L * V;
  const typename X::Mask mask[2] = {X::low(cols), X::low(cols - L)};
  auto store = [&](float* p, int v, Vec x) {
    if (whole)
      X::store(p, x);
    else
      X::store(p, mask[v], x);
  };
  Vec sh[V];
  for (int v = 0; v < V; ++v) {
    if (setShift) {
      sh[v] = t[0][v];
      for (int i = 1; i < R; ++i) sh[v] = X::max(sh[v], t[i][v]);
    } else {
      sh[v] = X::loadz(mask[v], shift + L * v);
    }
  }
  // Not less or equal, unordered: a NaN argument (a NaN score, or a column
  // whose shift is -inf) also takes the caller's general path.
  const Vec headroom = X::set1(kScoresExp2ShiftMargin + kScoresExp2Headroom);
  unsigned over = 0;
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) over |= X::over(mask[v], X::sub(t[i][v], sh[v]), headroom);
  if (over) {
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) store(c + i * ldc + L * v, v, t[i][v]);
    return false;
  }
  Vec s[V];
  for (int v = 0; v < V; ++v) {
    if (setShift) store(shift + L * v, v, sh[v]);
    s[v] = X::zero();
  }
  // The tile's terms in row order, then that into the running sum: chains of
  // R and keys / R adds instead of one of all the keys (N4096's outputs
  // measured 9.9e-7 from float64 with one chain, 4.0e-7 before the fusion).
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      const Vec e = X::exp2Margin(X::sub(t[i][v], sh[v]));
      store(c + i * ldc + L * v, v, e);
      s[v] = X::add(s[v], e);
    }
  for (int v = 0; v < V; ++v) store(sum + L * v, v, X::add(X::loadz(mask[v], sum + L * v), s[v]));
  return true;
}

// tile() for rows in [1, MR] (an edge tile computes only the rows it has),
// with A a packed sliver when aRowStep is 1 and K's rows in place otherwise.
template <class X, int NR, int MR, int V>
bool rows(int rows, int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
          int64_t ldc, float alpha, float cap, int cols, float* shift, bool setShift, float* sum) {
  static_assert(MR >= 1 && MR <= 12, "rows in [1, 12]");
  const bool packed = aRowStep == 1;
  switch (rows) {
#define MHSA_SCORES_CASE(R)                                                                                   \
  case R:                                                                                                     \
    if constexpr (R <= MR)                                                                                    \
      return packed ? tile<X, NR, R, V, true>(kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cap, cols, shift,       \
                                              setShift, sum)                                                  \
                    : tile<X, NR, R, V, false>(kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cap, cols, shift,      \
                                               setShift, sum);                                                \
    break;
    MHSA_SCORES_CASE(1) MHSA_SCORES_CASE(2) MHSA_SCORES_CASE(3) MHSA_SCORES_CASE(4)
    MHSA_SCORES_CASE(5) MHSA_SCORES_CASE(6) MHSA_SCORES_CASE(7) MHSA_SCORES_CASE(8)
    MHSA_SCORES_CASE(9) MHSA_SCORES_CASE(10) MHSA_SCORES_CASE(11) MHSA_SCORES_CASE(12)
#undef MHSA_SCORES_CASE
    default: break;
  }
  assert(false && "rows in [1, MR]");
  return false;
}

}  // namespace scores
}  // namespace mhsa
