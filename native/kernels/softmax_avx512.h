#pragma once
#include <cstdint>
namespace mhsa {
// See softmax_avx512.cc.
void expSubColumnsAvx512(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum);
}
