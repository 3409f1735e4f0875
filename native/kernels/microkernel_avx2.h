#pragma once
#include <cstdint>
namespace mhsa {
// See microkernel_avx2.cc.
void microKernel6x16Avx2(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                         int64_t ldc, float alpha, bool accumulate, int mr, int nr, const float* bias,
                         const float* prefetch);
void microKernelDirect6x16Avx2(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias);
void fewRowsPacked2x64Avx2(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride, float* c,
                           int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias);
}
