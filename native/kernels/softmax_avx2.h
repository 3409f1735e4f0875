#pragma once
#include <cstdint>
namespace mhsa {
// See softmax_avx2.cc.
void exp2SubColumnsAvx2(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum);
float rowMaxAvx2(const float* x, int64_t n);
float expSubSumAvx2(const float* x, float* y, int64_t n, float shift);
void scaleStreamAvx2(const float* x, float* y, int64_t n, float s);
}
