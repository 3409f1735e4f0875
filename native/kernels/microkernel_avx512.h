#pragma once
#include <cstdint>
namespace mhsa {
// See microkernel_avx512.cc.
void microKernel12x32Avx512(int64_t kc, const float* ap, int64_t aStep, const float* bp, float* c, int64_t ldc,
                            float alpha, bool accumulate, int mr, int nr);
}
