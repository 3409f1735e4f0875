#include "softmax.h"

#include <algorithm>
#include <limits>

#include "../runtime/thread_pool.h"
#include "kernel_table.h"

namespace mhsa {

void softmaxRow(const float* x, float* y, int64_t n, float scale) {
  const KernelTable& kt = kernels();
  // The shift must be the max of the *scaled* logits, which for a negative
  // scale is scale * min(x): scale once into y, then work in place.
  const float* src = x;
  if (scale != 1.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    src = y;
  }
  const float shift = kt.rowMax(src, n);
  if (shift == -std::numeric_limits<float>::infinity()) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  const float sum = kt.expScaledSum(src, y, n, 1.0f, shift);
  kt.scaleInPlace(y, n, 1.0f / sum);
}

void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols, float scale) {
  // About 64 Ki elements per task: enough work to amortize the hand-off,
  // small enough that both cores share even a few hundred rows.
  const int64_t rowsPerTask = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, cols));
  const int64_t tasks = (rows + rowsPerTask - 1) / rowsPerTask;
  parallelFor(tasks, [&](int64_t t) {
    const int64_t r0 = t * rowsPerTask;
    const int64_t r1 = std::min(rows, r0 + rowsPerTask);
    for (int64_t r = r0; r < r1; ++r) softmaxRow(x + r * cols, y + r * cols, cols, scale);
  });
}

}  // namespace mhsa
