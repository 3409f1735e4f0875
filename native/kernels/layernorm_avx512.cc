// One LayerNorm row with AVX-512 (KernelTable::layerNormRow), the same
// centering as the portable kernel (portable_kernels.inc): m0, a first
// estimate of the mean; the deviations d = x - m0, exact for x within a factor
// 2 of m0; their mean c corrects m0, and var = mean(d^2) - c^2. The portable
// kernel, vectorized by the compiler, sums each moment in one chain of
// 16-lane adds, four passes over the row, so a 768-wide row waited on ~150
// dependent adds of 3-4 cycles over its three sums (~250 ns a row). Here each
// sum runs in independent chains (four for the mean, two each for d and d^2,
// which share one pass), so a pass is bound by the FP pipes' throughput
// instead: three passes.
// Compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma only.
#include "layernorm_avx512.h"

#include <algorithm>
#include <cmath>

#include "avx512_intrinsics.h"

namespace mhsa {

bool layerNormRowAvx512(const float* x, float* y, int64_t n, const float* weight, const float* bias, float eps) {
  if (n <= 0) return true;
  const float invN = 1.0f / static_cast<float>(n);
  const __m512 vInvN = _mm512_set1_ps(invN);
  const int64_t whole = n / 16 * 16;
  const __mmask16 tail = lowLanes(n - whole);

  // The mean, scaled as it is summed (as the portable kernel does), so a row of
  // large values overflows only where its moments would anyway.
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vInvN, s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), vInvN, s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), vInvN, s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), vInvN, s3);
  }
  for (; i < whole; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vInvN, s0);
  if (tail) s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + i), vInvN, s0);
  const float m0 = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));

  // The deviations' sum and sum of squares in one pass. In the tail, the
  // masked-off lanes' deviations are set to 0 (maskz_sub), not 0 - m0, so
  // they add nothing to either sum.
  const __m512 vm0 = _mm512_set1_ps(m0);
  __m512 d0 = _mm512_setzero_ps(), d1 = d0, q0 = d0, q1 = d0;
  for (i = 0; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm0);
    const __m512 b = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm0);
    d0 = _mm512_add_ps(d0, a);
    d1 = _mm512_add_ps(d1, b);
    q0 = _mm512_fmadd_ps(a, a, q0);
    q1 = _mm512_fmadd_ps(b, b, q1);
  }
  for (; i < whole; i += 16) {
    const __m512 a = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm0);
    d0 = _mm512_add_ps(d0, a);
    q0 = _mm512_fmadd_ps(a, a, q0);
  }
  if (tail) {
    const __m512 a = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + i), vm0);
    d0 = _mm512_add_ps(d0, a);
    q0 = _mm512_fmadd_ps(a, a, q0);
  }
  const float c = _mm512_reduce_add_ps(_mm512_add_ps(d0, d1)) * invN;
  const float var = std::max(_mm512_reduce_add_ps(_mm512_add_ps(q0, q1)) * invN - c * c, 0.0f);
  const float inv = 1.0f / std::sqrt(var + eps);
  if (!(std::isfinite(m0) && std::isfinite(var) && std::isfinite(inv))) return false;

  const __m512 vc = _mm512_set1_ps(c), vInv = _mm512_set1_ps(inv);
  auto out = [&](int64_t at, __mmask16 lanes) {
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + at), vm0), vc), vInv);
    if (weight) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(lanes, weight + at));
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, bias + at));
    _mm512_mask_storeu_ps(y + at, lanes, v);
  };
  for (i = 0; i < whole; i += 16) out(i, 0xFFFF);
  if (tail) out(i, tail);
  return true;
}

}  // namespace mhsa
