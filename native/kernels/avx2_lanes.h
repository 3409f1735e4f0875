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

}  // namespace avx2lanes
}  // namespace mhsa
