#pragma once

#include <cstdint>

namespace mhsa {

// y = softmax(x * scale) over n elements, max-subtracted so no exp overflows.
// A row whose scaled elements are all -Infinity (or n == 0) gives zeros.
// y may equal x.
void softmaxRow(const float* x, float* y, int64_t n, float scale);

// Outputs of at least this many elements (16 MiB) are written with
// cache-bypassing stores, when rows are at most kSoftmaxStreamMaxCols long
// (their exps wait in a per-thread scratch row meanwhile).
constexpr int64_t kSoftmaxStreamMinElements = int64_t{1} << 22;
constexpr int64_t kSoftmaxStreamMaxCols = int64_t{1} << 16;

// softmaxRow over rows [0, rows) of contiguous row-major data, spread over the pool.
void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols, float scale);

}  // namespace mhsa
