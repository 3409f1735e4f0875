#pragma once
#include <cstdint>
namespace mhsa {
// See softmax_avx512.cc.
void exp2SubColumnsAvx512(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum);
float rowMaxAvx512(const float* x, int64_t n);
float expSubSumAvx512(const float* x, float* y, int64_t n, float shift);
void scaleStreamAvx512(const float* x, float* y, int64_t n, float s);
}
