#pragma once
#include <cstdint>
namespace mhsa {
// See layernorm_avx2.cc (KernelTable::layerNormRow).
bool layerNormRowAvx2(const float* x, float* y, int64_t n, const float* weight, const float* bias, float eps);
}
