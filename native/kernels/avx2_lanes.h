// Lane helpers shared by the AVX2 kernel files (compiled with -mavx2 -mfma).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mhsa {
namespace avx2lanes {

// Lanes [0, n) set, for n in [0, 8] (n outside clamps: <= 0 none, >= 8 all).
inline __m256i laneMask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int clamped = n < 0 ? 0 : n > 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(clamped), idx);
}

// The largest and the sum of the 8 lanes.
inline float horizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline float horizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace avx2lanes
}  // namespace mhsa
