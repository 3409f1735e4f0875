// Small helpers the kernels share.
#pragma once

#include <cstdint>
#include <limits>

namespace mhsa {

// A masked score, and the starting maximum of a softmax row.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Blocks of m needed to cover x (x >= 0, m > 0).
constexpr int64_t ceilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

}  // namespace mhsa
