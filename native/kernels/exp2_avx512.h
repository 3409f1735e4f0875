// 2^x with AVX-512 for attention's column softmax, shared by the separate
// column pass (softmax_avx512.cc) and the scores tile that applies it in its
// epilogue (scores_avx512.cc). Include only from files compiled with the
// AVX-512 flags.
#pragma once

#include <immintrin.h>

#include "exp2_poly.h"

namespace mhsa {

// 2^(x - Drop), for attention's softmax: its logits arrive already scaled by
// log2(e) (folded into the Q·Kᵀ alpha), so there is no multiply by log2(e)
// and no two-part ln2 reduction. n = round(x) and r = x - n (vreduceps,
// exact) come from x independently; 2^r on [-1/2, 1/2] by kExp2Poly
// (exp2_poly.h), then vscalefps applies 2^n, and its zero-masked form gives
// 0 below 2^-126 (a denormal result, as exp512 does), which also covers -inf.
// No clamp: vreduceps gives r = 0 for ±inf (so +inf gives 2^+inf = +inf, not
// the NaN of inf - round(inf)), and vscalefps saturates to +inf past 2^127;
// a NaN passes through every step. (A min against 128 before round and
// subtract cost ~10 % of the column pass in L1.)
// Drop, a whole number: where x - Drop would round at the precision of Drop,
// the polynomial's coefficients carry 2^-Drop instead (a power of two scales
// every Horner step exactly), so the result has the bits of 2^x's, scaled.
template <int Drop = 0>
inline __m512 exp2Avx512(__m512 x) {
  constexpr float scale = exp2Negative(Drop);
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(Drop - 126.0f), _CMP_NLT_UQ);  // true for NaN
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 p = _mm512_set1_ps(kExp2Poly[0] * scale);
  for (int t = 1; t < kExp2PolyTerms; ++t) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExp2Poly[t] * scale));
  return _mm512_maskz_scalef_ps(normal, p, n);
}

// The same on 8 lanes (AVX-512VL), for a tile of at most 8 queries.
template <int Drop = 0>
inline __m256 exp2Avx512(__m256 x) {
  constexpr float scale = exp2Negative(Drop);
  const __mmask8 normal = _mm256_cmp_ps_mask(x, _mm256_set1_ps(Drop - 126.0f), _CMP_NLT_UQ);
  const __m256 n = _mm256_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 p = _mm256_set1_ps(kExp2Poly[0] * scale);
  for (int t = 1; t < kExp2PolyTerms; ++t) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2Poly[t] * scale));
  return _mm256_maskz_scalef_ps(normal, p, n);
}

}  // namespace mhsa
