// Attention's transposed scores tile with the column softmax's exp applied in
// the micro-kernel's epilogue (KernelTable::scoresExp2Tile): the 12 x 32 tile
// of S^T = K · Q^T leaves the registers as 2^(s - shift - 48), and its column sums
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

// One register of query lanes: 16 in a zmm, or 8 in a ymm for a last sliver
// of at most 8 queries (N = 197 leaves 5). Zen 4 issues two 256-bit FMAs per
// cycle where it issues one 512-bit FMA, so the narrow tile costs half.
struct Zmm {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static Mask low(int n) { return n >= 16 ? Mask(0xFFFF) : n <= 0 ? Mask(0) : Mask((1u << n) - 1); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec loadz(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
  static void store(float* p, Mask m, Vec x) { _mm512_mask_storeu_ps(p, m, x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  // Lanes of m where a > b or either is NaN.
  static Mask notLessEqual(Mask m, Vec a, Vec b) { return _mm512_mask_cmp_ps_mask(m, a, b, _CMP_NLE_UQ); }
};

struct Ymm {
  using Vec = __m256;
  using Mask = __mmask8;
  static constexpr int kLanes = 8;
  static Mask low(int n) { return n >= 8 ? Mask(0xFF) : n <= 0 ? Mask(0) : Mask((1u << n) - 1); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec loadz(Mask m, const float* p) { return _mm256_maskz_loadu_ps(m, p); }
  static void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
  static void store(float* p, Mask m, Vec x) { _mm256_mask_storeu_ps(p, m, x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Mask notLessEqual(Mask m, Vec a, Vec b) { return _mm256_mask_cmp_ps_mask(m, a, b, _CMP_NLE_UQ); }
};

// R keys x V registers of queries. UnitRowStep: A is a packed sliver (the R
// values of one k are adjacent); otherwise A is R rows of K read in place.
template <class X, int R, int V, bool UnitRowStep>
bool scoresTile(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
                int64_t ldc, float alpha, int cols, float* shift, bool setShift, float* sum) {
  using Vec = typename X::Vec;
  constexpr int L = X::kLanes;
  Vec t[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = X::zero();
  for (int64_t k = 0; k < kc; ++k) {
    Vec bv[V];
    for (int v = 0; v < V; ++v) bv[v] = X::load(b + L * v);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const Vec av = X::set1(UnitRowStep ? a[i] : a[i * aRowStep]);
      for (int v = 0; v < V; ++v) t[i][v] = X::fmadd(av, bv[v], t[i][v]);
    }
    a += aDepthStep;
    b += kNR;
  }
  const Vec va = X::set1(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) t[i][v] = X::mul(t[i][v], va);

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
  typename X::Mask over = 0;
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) over |= X::notLessEqual(mask[v], X::sub(t[i][v], sh[v]), headroom);
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
      const Vec e = exp2Avx512<kScoresExp2ShiftMargin>(X::sub(t[i][v], sh[v]));
      store(c + i * ldc + L * v, v, e);
      s[v] = X::add(s[v], e);
    }
  for (int v = 0; v < V; ++v) store(sum + L * v, v, X::add(X::loadz(mask[v], sum + L * v), s[v]));
  return true;
}

template <class X, int V, bool UnitRowStep>
bool scoresRows(int rows, int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
                int64_t ldc, float alpha, int cols, float* shift, bool setShift, float* sum) {
  switch (rows) {
#define MHSA_SCORES_CASE(R) \
  case R:                   \
    return scoresTile<X, R, V, UnitRowStep>(kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cols, shift, setShift, sum);
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
  if (cols > 16) return packed ? run(scoresRows<Zmm, 2, true>) : run(scoresRows<Zmm, 2, false>);
  if (cols > 8) return packed ? run(scoresRows<Zmm, 1, true>) : run(scoresRows<Zmm, 1, false>);
  return packed ? run(scoresRows<Ymm, 1, true>) : run(scoresRows<Ymm, 1, false>);
}

float absMaxRowsAvx512(const float* x, int64_t rows, int64_t cols, int64_t ld) {
  const __m512 absMask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * ld;
    int64_t j = 0;
    // vmaxps returns its second operand when either is NaN: m, so NaN is ignored.
    for (; j + 16 <= cols; j += 16) m = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(row + j), absMask), m);
    if (j < cols) {
      const __mmask16 tail = static_cast<__mmask16>((1u << (cols - j)) - 1);
      m = _mm512_max_ps(_mm512_and_ps(_mm512_maskz_loadu_ps(tail, row + j), absMask), m);
    }
  }
  return _mm512_reduce_max_ps(m);
}

}  // namespace mhsa
