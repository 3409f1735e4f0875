// Softmax's row passes (max, exp and sum, streaming scale) and attention's
// column exp with AVX-512 intrinsics; the compiler's vectorization of the
// portable loops keeps expApprox's int conversions and blends. The row exp
// has expApprox's algorithm and exp_poly.h's constants: x = n·ln2 + r, a
// degree-6 polynomial for exp(r), and 2^n applied with vscalefps, which
// needs no trip through the exponent bits. Compiled with the
// AVX-512 flags only.
#include "softmax_avx512.h"

#include "avx512_intrinsics.h"
#include "exp2_avx512.h"
#include "exp_poly.h"

#include <algorithm>
#include <cstdint>

namespace mhsa {

namespace {

// exp(x) for x <= 0, the only arguments a row softmax makes (x - max). No
// clamp: below -87.34 (a denormal result) and for -inf the zero-masked
// vscalefps gives 0, NaN passes through every step, and +inf cannot arrive.
// Over [-87.34, 0] the bits are those of the clamped form this replaced.
inline __m512 expNonPositive512(__m512 x) {
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMinArg), _CMP_NLT_UQ);  // true for NaN
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPolyQ[0]);
  for (int t = 1; t < kExpPolyQTerms; ++t) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPolyQ[t]));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(normal, p, n);
}

}  // namespace

// s[j][i] = 2^(s[j][i] - shift[i]); sum[i] += s[j][i], for j < rows, i < cols.
// Sixteen columns at a time, down all rows, so each column's shift and sum
// stay in registers and every lane adds its terms in row order.
void exp2SubColumnsAvx512(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum) {
  int64_t i = 0;
  // Whole strips unmasked: masked loads, stores and adds made the pass ~25 %
  // slower in L1 even with every lane set.
  for (; i + 16 <= cols; i += 16) {
    const __m512 sh = _mm512_loadu_ps(shift + i);
    __m512 acc = _mm512_loadu_ps(sum + i);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + i;
      const __m512 e = exp2Avx512(_mm512_sub_ps(_mm512_loadu_ps(row), sh));
      _mm512_storeu_ps(row, e);
      acc = _mm512_add_ps(acc, e);
    }
    _mm512_storeu_ps(sum + i, acc);
  }
  if (i == cols) return;
  const __mmask16 m = static_cast<__mmask16>((1u << (cols - i)) - 1);
  const __m512 sh = _mm512_maskz_loadu_ps(m, shift + i);
  __m512 acc = _mm512_maskz_loadu_ps(m, sum + i);
  for (int64_t j = 0; j < rows; ++j) {
    float* row = s + j * ld + i;
    const __m512 e = exp2Avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row), sh));
    _mm512_mask_storeu_ps(row, m, e);
    acc = _mm512_mask_add_ps(acc, m, acc, e);
  }
  _mm512_mask_storeu_ps(sum + i, m, acc);
}

// Largest of x[0..n): four independent maxima so the loop is not bound by
// the latency of one chain; the tail is masked (lanes past n read as -inf).
float rowMaxAvx512(const float* x, int64_t n) {
  const __m512 negInf = _mm512_set1_ps(-__builtin_inff());
  __m512 m0 = negInf, m1 = negInf, m2 = negInf, m3 = negInf;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = lowLanes(n - i);
    m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(negInf, m, x + i));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

// y[i] = exp(x[i] - shift) for shift >= every x[i]; returns the sum of the
// y[i]. Two sums (even and odd vectors) halve the add chain; y may equal x.
float expSubSumAvx512(const float* x, float* y, int64_t n, float shift) {
  const __m512 vshift = _mm512_set1_ps(shift);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = expNonPositive512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vshift));
    const __m512 e1 = expNonPositive512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vshift));
    _mm512_storeu_ps(y + i, e0);
    _mm512_storeu_ps(y + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = lowLanes(n - i);
    const __m512 e = expNonPositive512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vshift));
    _mm512_mask_storeu_ps(y + i, m, e);
    s0 = _mm512_mask_add_ps(s0, m, s0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// y[i] = x[i] * s with non-temporal stores for the 64-byte-aligned body: the
// result of a large softmax is not read again soon, and streaming it skips
// the read-for-ownership that an ordinary store of a cold line costs (a third
// of the memory traffic). Ends with sfence: the stores are visible before the
// pool reports the task done.
void scaleStreamAvx512(const float* x, float* y, int64_t n, float s) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  const int64_t head = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(y) % 64) % 64);
  if (head % 4 != 0) {  // y not even float-aligned: plain stores throughout
    for (; i < n; ++i) y[i] = x[i] * s;
    return;
  }
  for (; i < std::min<int64_t>(n, head / 4); ++i) y[i] = x[i] * s;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  for (; i < n; ++i) y[i] = x[i] * s;
  _mm_sfence();
}

}  // namespace mhsa
