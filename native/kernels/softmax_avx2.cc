// Softmax and attention's exp passes with AVX2 intrinsics. GCC 12 leaves the
// portable loops (portable_kernels.inc) scalar under -mavx2: expApprox's
// float-to-int conversion and selects, and the max reductions written with
// `?:`, defeat its vectorizer, so softmax ran at 2 GB/s (a tenth of what two
// Zen 3 cores read: docs/design/softmax-exp.md) and attention's exp dominated
// its tiles.
//
// The row exp has the algorithm of expApprox and the AVX-512 row exp, with
// exp_poly.h's constants: x = n·ln2 + r with |r| <= ln2/2, a degree-6 polynomial for exp(r),
// then the result scaled by 2^n, which AVX2 (no vscalefps) builds in the
// exponent bits. Compiled with -mavx2 -mfma only.
#include "softmax_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "avx2_lanes.h"
#include "exp2_poly.h"
#include "exp_poly.h"

namespace mhsa {

namespace {

using avx2lanes::horizontalMax;
using avx2lanes::horizontalSum;
using avx2lanes::laneMask;

// 2^e for integer lanes e in [-126, 127], built in the exponent bits.
inline __m256 powerOfTwo(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

// exp(x) for x <= 0, the only arguments a row softmax makes (x - max). No
// clamp: a lane below -87.34 (a denormal result, or -inf) is zeroed at the
// end whatever its n made of the scale, NaN passes through, and +inf cannot
// arrive. Elsewhere n is in [-126, 0], so 2^n is one normal float and one
// multiply applies it. Over [-87.34, 0] the bits are those of the clamped,
// two-step form this replaced (its first step was exact).
inline __m256 expNonPositive256(__m256 x) {
  const __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMinArg), _CMP_LT_OQ);  // false for NaN
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPolyQ[0]);
  for (int t = 1; t < kExpPolyQTerms; ++t) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPolyQ[t]));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  return _mm256_andnot_ps(below, _mm256_mul_ps(p, powerOfTwo(_mm256_cvtps_epi32(n))));
}

// 2^x for attention's column softmax (logits pre-scaled by log2(e); the
// polynomial is kExp2Poly, exp2_poly.h): r = x - round(x) is exact, and 2^n
// for n in [-126, 128] is applied as two powers of two, 2^(n>>1) then
// 2^(n - (n>>1)): the first product is exact and the second rounds once, as
// vscalefps would, near the denormal range and near FLT_MAX alike. Below -126
// the result is 0 (-inf too); the clamp keeps n in [-126, 128], and NaN
// passes through.
inline __m256 exp2Avx2(__m256 x) {
  const __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_LT_OQ);  // false for NaN
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(128.0f), _mm256_max_ps(_mm256_set1_ps(-126.0f), x));
  const __m256 n = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(xc, n);
  __m256 p = _mm256_set1_ps(kExp2Poly[0]);
  for (int t = 1; t < kExp2PolyTerms; ++t) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2Poly[t]));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, powerOfTwo(half)), powerOfTwo(_mm256_sub_epi32(ni, half)));
  return _mm256_andnot_ps(below, y);
}

}  // namespace

// s[j][i] = 2^(s[j][i] - shift[i]); sum[i] += s[j][i], for j < rows, i < cols.
// Eight columns at a time, down all rows, so each column's shift and sum stay
// in registers and every lane adds its terms in row order.
void exp2SubColumnsAvx2(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum) {
  for (int64_t i = 0; i < cols; i += 8) {
    // A last, partial group goes through lane masks: lanes past cols are
    // neither read nor written (their acc lanes stay 0 and are not stored).
    // Whole groups use plain loads and stores (a masked store is slow on AMD).
    const bool whole = cols - i >= 8;
    const __m256i m = laneMask(cols - i);
    auto load = [&](const float* p) { return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); };
    auto store = [&](float* p, __m256 v) {
      if (whole)
        _mm256_storeu_ps(p, v);
      else
        _mm256_maskstore_ps(p, m, v);
    };
    const __m256 sh = load(shift + i);
    __m256 acc = load(sum + i);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + i;
      const __m256 e = exp2Avx2(_mm256_sub_ps(load(row), sh));
      store(row, e);
      acc = _mm256_add_ps(acc, e);
    }
    store(sum + i, acc);
  }
}

// Largest of x[0..n): four independent maxima so the loop is not bound by
// the latency of one chain; the tail's missing lanes read as -inf.
float rowMaxAvx2(const float* x, int64_t n) {
  const __m256 negInf = _mm256_set1_ps(-__builtin_inff());
  __m256 m0 = negInf, m1 = negInf, m2 = negInf, m3 = negInf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i < n; i += 8) {
    const __m256i m = laneMask(n - i);
    m0 = _mm256_max_ps(m0, _mm256_blendv_ps(negInf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  return horizontalMax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
}

// y[i] = exp(x[i] - shift) for shift >= every x[i]; returns the sum of the
// y[i]. Two sums (even and odd vectors) halve the add chain; y may equal x.
float expSubSumAvx2(const float* x, float* y, int64_t n, float shift) {
  const __m256 vshift = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = expNonPositive256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift));
    const __m256 e1 = expNonPositive256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vshift));
    _mm256_storeu_ps(y + i, e0);
    _mm256_storeu_ps(y + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i < n; i += 8) {
    const __m256i m = laneMask(n - i);
    // Masked-off lanes load 0 and give exp(-shift), which may be anything
    // when shift < 0: they are not stored, and the and-mask keeps them out
    // of the sum.
    const __m256 e = expNonPositive256(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vshift));
    _mm256_maskstore_ps(y + i, m, e);
    s0 = _mm256_add_ps(s0, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
  }
  return horizontalSum(_mm256_add_ps(s0, s1));
}

// y[i] = x[i] * s with non-temporal stores for the 32-byte-aligned body (see
// scaleStreamAvx512: a large softmax's output is not read again soon, and
// streaming it skips the read-for-ownership of each cold line). Ends with
// sfence so the stores are visible before the pool reports the task done.
void scaleStreamAvx2(const float* x, float* y, int64_t n, float s) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  const int64_t head = static_cast<int64_t>((32 - reinterpret_cast<uintptr_t>(y) % 32) % 32);
  if (head % 4 != 0) {  // y not even float-aligned: plain stores throughout
    for (; i < n; ++i) y[i] = x[i] * s;
    return;
  }
  for (; i < std::min<int64_t>(n, head / 4); ++i) y[i] = x[i] * s;
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) y[i] = x[i] * s;
  _mm_sfence();
}

}  // namespace mhsa
