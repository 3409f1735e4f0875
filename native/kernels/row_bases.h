// R rows of a matrix read in place by a register tile (the broadcast operand
// of attention's scores tile and of the direct GEMM micro-kernel), `stride`
// floats apart. Addressed as a[i * stride], GCC kept up to eleven multiples
// of a run-time stride and spilled them around the k loop (503 against 485 ns
// per scores tile on Zen 4: docs/design/attention-tiles.md); from four bases
// of three rows each, row 3j + r is base[j] + r * stride, one base plus the
// stride scaled by 4 or 8 bytes, and the loop keeps everything in registers.
#pragma once

#include <cstdint>

namespace mhsa {

template <int R>
struct RowBases {
  static_assert(R >= 1 && R <= 12, "four bases of three rows");
  const float* base[4];
  // Only the bases of rows the tile has: a pointer past the rows would be undefined.
  RowBases(const float* a, int64_t stride) {
    for (int j = 0; j < 4; ++j) base[j] = 3 * j < R ? a + 3 * j * stride : a;
  }
  float at(int i, int64_t stride) const { return base[i / 3][(i % 3) * stride]; }
  void advance(int64_t step) {
    for (int j = 0; j < (R + 2) / 3; ++j) base[j] += step;
  }
};

}  // namespace mhsa
