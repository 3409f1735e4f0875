// The attention kernel's column softmax step with AVX-512 intrinsics: the
// portable loop spent 16 % of a ViT attention profile in exp, because the
// compiler's vectorization of expApprox keeps its int conversions and blends.
// Same algorithm and constants as expApprox (portable_kernels.inc): x = n·ln2 + r,
// a degree-6 polynomial for exp(r), and 2^n applied with vscalefps, which needs
// no trip through the exponent bits. Compiled with the AVX-512 flags only.
#include "softmax_avx512.h"

#include <immintrin.h>

// GCC 12's _mm512_min_ps/_mm512_max_ps pass an _mm512_undefined_ps() through
// an inlined mask form, which -Wmaybe-uninitialized reports (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mhsa {

namespace {

inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654475f);  // below: exp(x) is denormal, return 0
  const __m512 hi = _mm512_set1_ps(88.3762626647949f);
  const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);  // a NaN lane becomes lo; fixed below
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  __m512 y = _mm512_scalef_ps(p, n);
  y = _mm512_mask_mov_ps(y, below, _mm512_setzero_ps());
  return _mm512_mask_mov_ps(y, nan, x);
}

}  // namespace

// s[j][i] = exp(s[j][i] - shift[i]); sum[i] += s[j][i], for j < rows, i < cols.
// Sixteen columns at a time, down all rows, so each column's shift and sum
// stay in registers and every lane adds its terms in row order.
void expSubColumnsAvx512(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum) {
  for (int64_t i = 0; i < cols; i += 16) {
    const __mmask16 m = cols - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - i)) - 1);
    const __m512 sh = _mm512_maskz_loadu_ps(m, shift + i);
    __m512 acc = _mm512_maskz_loadu_ps(m, sum + i);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + i;
      const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row), sh));
      _mm512_mask_storeu_ps(row, m, e);
      acc = _mm512_mask_add_ps(acc, m, acc, e);
    }
    _mm512_mask_storeu_ps(sum + i, m, acc);
  }
}

}  // namespace mhsa
