// KernelTable::scoresExp2Tile with AVX-512 (the tile itself: scores_tile.h):
// 12 keys x 32 queries, and absMaxRows. Compiled with the AVX-512 flags only.
#include "scores_avx512.h"

#include "avx512_intrinsics.h"
#include "exp2_avx512.h"
#include "kernel_table.h"
#include "scores_tile.h"

namespace mhsa {
namespace {

constexpr int kNR = kScoresTileNrAvx512;
constexpr int kMR = kScoresTileMrAvx512;

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
  static unsigned over(Mask m, Vec a, Vec b) { return _mm512_mask_cmp_ps_mask(m, a, b, _CMP_NLE_UQ); }
  static Vec exp2Margin(Vec x) { return exp2Avx512<kScoresExp2ShiftMargin>(x); }
  static Vec abs(Vec x) { return _mm512_abs_ps(x); }
  static Vec withSignOf(Vec m, Vec x) {
    return _mm512_or_ps(m, _mm512_and_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32(INT32_MIN))));
  }
  static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec selectBelow(Vec a, Vec t, Vec x, Vec y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, t, _CMP_LT_OQ), y, x);
  }
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
  static unsigned over(Mask m, Vec a, Vec b) { return _mm256_mask_cmp_ps_mask(m, a, b, _CMP_NLE_UQ); }
  static Vec exp2Margin(Vec x) { return exp2Avx512<kScoresExp2ShiftMargin>(x); }
  static Vec abs(Vec x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  static Vec withSignOf(Vec m, Vec x) { return _mm256_or_ps(m, _mm256_and_ps(x, _mm256_set1_ps(-0.0f))); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec selectBelow(Vec a, Vec t, Vec x, Vec y) {
    return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(a, t, _CMP_LT_OQ), y, x);
  }
};

}  // namespace

bool scoresExp2Tile12x32Avx512(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b,
                               float* c, int64_t ldc, float alpha, float cap, int rows, int cols, float* shift, bool setShift,
                               float* sum) {
  auto run = [&](auto tile) {
    return tile(rows, kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cap, cols, shift, setShift, sum);
  };
  if (cols > 16) return run(scores::rows<Zmm, kNR, kMR, 2>);
  if (cols > 8) return run(scores::rows<Zmm, kNR, kMR, 1>);
  return run(scores::rows<Ymm, kNR, kMR, 1>);
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
