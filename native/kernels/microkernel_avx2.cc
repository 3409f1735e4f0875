// The AVX2+FMA GEMM micro-kernel: a 6 x 16 tile of C in 12 ymm registers
// (two 8-float vectors per row), leaving 4 of the 16 registers for the two B
// vectors and the A broadcast. 12 accumulators cover FMA latency x ports.
// Compiled with -mavx2 -mfma only.
#include "microkernel_avx2.h"

#include <immintrin.h>

namespace mhsa {

namespace {
constexpr int kMR = 6;
constexpr int kNR = 16;

inline __m256i laneMask(int n) {
  // Lanes [0, n) set, for n in [0, 8].
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}
}  // namespace

void microKernel6x16Avx2(int64_t kc, const float* ap, int64_t aStep, const float* bp, float* c, int64_t ldc,
                         float alpha, bool accumulate, int mr, int nr) {
  // Fetch the C tile now so it has arrived by the time the K loop ends.
  for (int i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  __m256 acc[kMR][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const __m256 a = _mm256_broadcast_ss(ap + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    ap += aStep;
    bp += kNR;
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const bool full = nr == kNR;
  const __m256i m0 = laneMask(nr < 8 ? nr : 8);
  const __m256i m1 = laneMask(nr > 8 ? nr - 8 : 0);
  for (int i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(acc[i][0], va);
    __m256 r1 = _mm256_mul_ps(acc[i][1], va);
    if (full) {
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(row));
        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(row + 8));
      }
      _mm256_storeu_ps(row, r0);
      _mm256_storeu_ps(row + 8, r1);
    } else {
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_maskload_ps(row, m0));
        r1 = _mm256_add_ps(r1, _mm256_maskload_ps(row + 8, m1));
      }
      _mm256_maskstore_ps(row, m0, r0);
      _mm256_maskstore_ps(row + 8, m1, r1);
    }
  }
}

}  // namespace mhsa
