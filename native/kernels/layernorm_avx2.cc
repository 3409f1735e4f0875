// One LayerNorm row with AVX2 (KernelTable::layerNormRow): the centering of
// the portable kernel (portable_kernels.inc) in the passes of the AVX-512 one
// (layernorm_avx512.cc). m0 is a first estimate of the mean; the deviations
// d = x - m0 are exact for x within a factor 2 of m0; their mean c corrects
// m0, and var = mean(d^2) - c^2. The portable kernel, vectorized by GCC, sums
// each of its three moments in one chain of dependent adds over four passes;
// here each sum runs in independent chains (four for the mean, two each for
// d and d^2, which share a pass), three passes in all.
// Compiled with -mavx2 -mfma only.
#include "layernorm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "avx2_lanes.h"

namespace mhsa {

bool layerNormRowAvx2(const float* x, float* y, int64_t n, const float* weight, const float* bias, float eps) {
  if (n <= 0) return true;
  using avx2lanes::horizontalSum;
  const float invN = 1.0f / static_cast<float>(n);
  const __m256 vInvN = _mm256_set1_ps(invN);
  const int64_t whole = n / 8 * 8;
  const __m256i tail = avx2lanes::laneMask(n - whole);  // lanes [0, n % 8); masked-off lanes load 0

  // The mean, scaled as it is summed (as the portable kernel does), so a row of
  // large values overflows only where its moments would anyway.
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vInvN, s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), vInvN, s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), vInvN, s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), vInvN, s3);
  }
  for (; i < whole; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vInvN, s0);
  if (i < n) s0 = _mm256_fmadd_ps(_mm256_maskload_ps(x + i, tail), vInvN, s0);
  const float m0 = horizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));

  // The deviations' sum and sum of squares in one pass. In the tail, the
  // masked-off lanes' deviations are set to 0 (and-ed with the lane mask),
  // not 0 - m0, so they add nothing to either sum.
  const __m256 vm0 = _mm256_set1_ps(m0);
  __m256 d0 = _mm256_setzero_ps(), d1 = d0, q0 = d0, q1 = d0;
  for (i = 0; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm0);
    const __m256 b = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm0);
    d0 = _mm256_add_ps(d0, a);
    d1 = _mm256_add_ps(d1, b);
    q0 = _mm256_fmadd_ps(a, a, q0);
    q1 = _mm256_fmadd_ps(b, b, q1);
  }
  for (; i < whole; i += 8) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm0);
    d0 = _mm256_add_ps(d0, a);
    q0 = _mm256_fmadd_ps(a, a, q0);
  }
  if (i < n) {
    const __m256 a = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, tail), vm0), _mm256_castsi256_ps(tail));
    d0 = _mm256_add_ps(d0, a);
    q0 = _mm256_fmadd_ps(a, a, q0);
  }
  const float c = horizontalSum(_mm256_add_ps(d0, d1)) * invN;
  const float var = std::max(horizontalSum(_mm256_add_ps(q0, q1)) * invN - c * c, 0.0f);
  const float inv = 1.0f / std::sqrt(var + eps);
  if (!(std::isfinite(m0) && std::isfinite(var) && std::isfinite(inv))) return false;

  const __m256 vc = _mm256_set1_ps(c), vInv = _mm256_set1_ps(inv);
  auto row = [&](int64_t at, bool whole8) {
    auto load = [&](const float* p) { return whole8 ? _mm256_loadu_ps(p + at) : _mm256_maskload_ps(p + at, tail); };
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(load(x), vm0), vc), vInv);
    if (weight) v = _mm256_mul_ps(v, load(weight));
    if (bias) v = _mm256_add_ps(v, load(bias));
    if (whole8)
      _mm256_storeu_ps(y + at, v);
    else
      _mm256_maskstore_ps(y + at, tail, v);
  };
  for (i = 0; i < whole; i += 8) row(i, true);
  if (i < n) row(i, false);
  return true;
}

}  // namespace mhsa
