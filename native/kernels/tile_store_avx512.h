// The epilogue of the AVX-512 register tiles (the float micro-kernel and the
// bf16 one): R rows x V vectors of 16 accumulated sums into C,
//   c[i * ldc + j] = alpha * acc  (+ c if accumulate)  (+ bias[j] if bias)
// rounded as those separate steps (KernelTable::microKernel), for columns j < cols.
#pragma once

#include <cstdint>

#include "avx512_intrinsics.h"

namespace mhsa {

template <int R, int V>
inline void storeTileAvx512(const __m512 (&acc)[R][V], float* c, int64_t ldc, float alpha, bool accumulate, int cols,
                            const float* bias) {
  const __m512 va = _mm512_set1_ps(alpha);
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) mask[v] = lowLanes(cols - 16 * v);
  __m512 biasv[V];
  for (int v = 0; v < V; ++v) biasv[v] = bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    for (int v = 0; v < V; ++v) {
      __m512 r = _mm512_mul_ps(acc[i][v], va);
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask[v], row + 16 * v));
      if (bias) r = _mm512_add_ps(r, biasv[v]);
      _mm512_mask_storeu_ps(row + 16 * v, mask[v], r);
    }
  }
}

}  // namespace mhsa
