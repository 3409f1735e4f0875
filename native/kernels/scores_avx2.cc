// KernelTable::scoresExp2Tile with AVX2 (the tile itself: scores_tile.h):
// 6 keys x 16 queries, 12 ymm accumulators, and absMaxRows. Before it the
// AVX2 table ran attention's column passes, whose exp (with no vscalefps the
// scale goes through the exponent bits twice, to cover the whole float
// range) was 11 % of an N = 197 profile. Compiled with -mavx2 -mfma only.
#include "scores_avx2.h"

#include <immintrin.h>

#include "avx2_lanes.h"
#include "exp2_poly.h"
#include "kernel_table.h"
#include "scores_tile.h"

namespace mhsa {
namespace {

constexpr int kNR = kScoresTileNrAvx2;
constexpr int kMR = kScoresTileMrAvx2;

struct Ymm {
  using Vec = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static Mask low(int n) { return avx2lanes::laneMask(n); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec loadz(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
  static void store(float* p, Mask m, Vec x) { _mm256_maskstore_ps(p, m, x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  // Lanes of m where a > b or either is NaN.
  static unsigned over(Mask m, Vec a, Vec b) {
    const Vec lanes = _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_NLE_UQ), _mm256_castsi256_ps(m));
    return static_cast<unsigned>(_mm256_movemask_ps(lanes));
  }
  // 2^(x - 48) for x <= 56 (the tile's headroom): n = round(x), r = x - n
  // (exact), 2^r by kExp2Poly with 2^-48 carried in its coefficients, then n
  // added to the exponent bits. The result lies in [2^-126, 2^8] wherever it
  // is not flushed (x >= -78), so one integer add scales it exactly, where
  // the column pass's exp (any argument) needs two exact powers of two;
  // the same bits as the AVX-512 tile's vscalefps. Below, 0 (-inf too);
  // NaN lanes stay NaN.
  static Vec exp2Margin(Vec x) {
    constexpr float scale = exp2Negative(kScoresExp2ShiftMargin);
    const Vec normal = _mm256_cmp_ps(x, _mm256_set1_ps(kScoresExp2ShiftMargin - 126.0f), _CMP_NLT_UQ);
    const Vec n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const Vec r = _mm256_sub_ps(x, n);
    Vec p = _mm256_set1_ps(kExp2Poly[0] * scale);
    for (int t = 1; t < kExp2PolyTerms; ++t) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2Poly[t] * scale));
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_and_ps(normal, _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e)));
  }
  static Vec abs(Vec x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  static Vec withSignOf(Vec m, Vec x) { return _mm256_or_ps(m, _mm256_and_ps(x, _mm256_set1_ps(-0.0f))); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec selectBelow(Vec a, Vec t, Vec x, Vec y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, t, _CMP_LT_OQ)); }
};

}  // namespace

bool scoresExp2Tile6x16Avx2(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b,
                            float* c, int64_t ldc, float alpha, float cap, int rows, int cols, float* shift, bool setShift,
                            float* sum) {
  auto run = [&](auto tile) {
    return tile(rows, kc, a, aRowStep, aDepthStep, b, c, ldc, alpha, cap, cols, shift, setShift, sum);
  };
  if (cols > 8) return run(scores::rows<Ymm, kNR, kMR, 2>);
  return run(scores::rows<Ymm, kNR, kMR, 1>);
}

float absMaxRowsAvx2(const float* x, int64_t rows, int64_t cols, int64_t ld) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * ld;
    int64_t j = 0;
    // vmaxps returns its second operand when either is NaN: m, so NaN is ignored.
    for (; j + 8 <= cols; j += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(row + j), absMask), m);
    if (j < cols)  // masked-off lanes load 0
      m = _mm256_max_ps(_mm256_and_ps(_mm256_maskload_ps(row + j, avx2lanes::laneMask(cols - j)), absMask), m);
  }
  return avx2lanes::horizontalMax(m);
}

}  // namespace mhsa
