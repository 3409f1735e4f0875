#pragma once
#include <cstdint>
namespace mhsa {
// See microkernel_avx2.cc.
void microKernel6x16Avx2(int64_t kc, const float* ap, int64_t aStep, const float* bp, float* c, int64_t ldc,
                         float alpha, bool accumulate, int mr, int nr);
}
