// arm64 NEON GEMM micro-kernels: a 12 x 8 tile of C in 24 of the 32 128-bit
// registers (12 rows x 2 vectors of 4 columns), 3 registers for the 12 values
// of A at one k and 2 for the 8 values of B. Each A value multiplies a whole B
// vector through the by-lane form of FMA (vfmaq_laneq_f32), so no broadcasts
// are needed: 5 loads feed 24 FMAs per k. NR = 8 divides the GEMM's column
// blocks (kGemmNC = 512), so prepacked B slivers never straddle a block.
// On other targets this file compiles to nothing.
#if defined(__aarch64__)
#include "microkernel_neon.h"

#include <arm_neon.h>

namespace mhsa {
namespace {

constexpr int kMR = 12;
constexpr int kNR = 8;

// acc[i][v] * alpha (+ c) (+ bias) into rows < rows, columns < cols of c.
inline void storeTile(const float32x4_t (&acc)[kMR][2], float* c, int64_t ldc, float alpha, bool accumulate,
                      int rows, int cols, const float* bias = nullptr) {
  const float32x4_t va = vdupq_n_f32(alpha);
  if (cols == kNR) {
    const float32x4_t bias0 = bias ? vld1q_f32(bias) : vdupq_n_f32(0.0f);
    const float32x4_t bias1 = bias ? vld1q_f32(bias + 4) : vdupq_n_f32(0.0f);
    for (int i = 0; i < rows; ++i) {
      float* row = c + i * ldc;
      float32x4_t r0 = vmulq_f32(acc[i][0], va), r1 = vmulq_f32(acc[i][1], va);
      if (accumulate) {
        r0 = vaddq_f32(r0, vld1q_f32(row));
        r1 = vaddq_f32(r1, vld1q_f32(row + 4));
      }
      if (bias) {
        r0 = vaddq_f32(r0, bias0);
        r1 = vaddq_f32(r1, bias1);
      }
      vst1q_f32(row, r0);
      vst1q_f32(row + 4, r1);
    }
    return;
  }
  for (int i = 0; i < rows; ++i) {
    float tile[kNR];
    vst1q_f32(tile, vmulq_f32(acc[i][0], va));
    vst1q_f32(tile + 4, vmulq_f32(acc[i][1], va));
    float* row = c + i * ldc;
    for (int j = 0; j < cols; ++j) {
      float v = accumulate ? row[j] + tile[j] : tile[j];
      if (bias) v += bias[j];
      row[j] = v;
    }
  }
}

// R rows of A read in place (a[i * lda + k]); B row k read in place when the
// tile is 8 wide, else copied into a zero-padded 8-float row so no column
// past the operand is read.
template <int R>
void directTile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias) {
  float32x4_t acc[kMR][2];
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
  float edge[kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* brow = b + k * ldb;
    if (cols < kNR) {
      for (int j = 0; j < cols; ++j) edge[j] = brow[j];
      brow = edge;
    }
    const float32x4_t b0 = vld1q_f32(brow), b1 = vld1q_f32(brow + 4);
    for (int i = 0; i < R; ++i) {
      const float x = a[i * lda + k];
      acc[i][0] = vfmaq_n_f32(acc[i][0], b0, x);
      acc[i][1] = vfmaq_n_f32(acc[i][1], b1, x);
    }
  }
  storeTile(acc, c, ldc, alpha, accumulate, R, cols, bias);
}

}  // namespace

void microKernel12x8Neon(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                         int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias,
                         const float* prefetch) {
  float32x4_t acc[kMR][2];
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
  // With no prefetch, harmless requests for lines of this B sliver (offsets up to 2 (kc - 1) floats).
  const float* const fetchBase = prefetch ? prefetch : bp;
  for (int64_t k = 0; k < kc; ++k) {
    if ((k & 7) == 0) {
      __builtin_prefetch(fetchBase + 16 * (k >> 3), 0, 2);  // PRFM PLDL2KEEP
    }
    const float32x4_t a0 = vld1q_f32(ap), a1 = vld1q_f32(ap + 4), a2 = vld1q_f32(ap + 8);
    const float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4);
#define MHSA_NEON_ROW(i, av, lane)                            \
  acc[i][0] = vfmaq_laneq_f32(acc[i][0], b0, av, lane);       \
  acc[i][1] = vfmaq_laneq_f32(acc[i][1], b1, av, lane);
    MHSA_NEON_ROW(0, a0, 0) MHSA_NEON_ROW(1, a0, 1) MHSA_NEON_ROW(2, a0, 2) MHSA_NEON_ROW(3, a0, 3)
    MHSA_NEON_ROW(4, a1, 0) MHSA_NEON_ROW(5, a1, 1) MHSA_NEON_ROW(6, a1, 2) MHSA_NEON_ROW(7, a1, 3)
    MHSA_NEON_ROW(8, a2, 0) MHSA_NEON_ROW(9, a2, 1) MHSA_NEON_ROW(10, a2, 2) MHSA_NEON_ROW(11, a2, 3)
#undef MHSA_NEON_ROW
    ap += aStep;
    bp += bStride;
  }
  storeTile(acc, c, ldc, alpha, accumulate, rows, cols, bias);
}

void microKernelDirect12x8Neon(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias) {
  switch (rows) {
#define MHSA_DIRECT_CASE(R) \
  case R: return directTile<R>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    MHSA_DIRECT_CASE(1) MHSA_DIRECT_CASE(2) MHSA_DIRECT_CASE(3) MHSA_DIRECT_CASE(4)
    MHSA_DIRECT_CASE(5) MHSA_DIRECT_CASE(6) MHSA_DIRECT_CASE(7) MHSA_DIRECT_CASE(8)
    MHSA_DIRECT_CASE(9) MHSA_DIRECT_CASE(10) MHSA_DIRECT_CASE(11) MHSA_DIRECT_CASE(12)
#undef MHSA_DIRECT_CASE
    default: return;
  }
}

}  // namespace mhsa
#endif  // __aarch64__
