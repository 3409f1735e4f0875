#include "softmax.h"

#include <algorithm>
#include <limits>

#include "../runtime/thread_pool.h"
#include "kernel_table.h"
#include "scratch.h"

namespace mhsa {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The streaming form, for outputs too large to stay in cache: x is read from
// memory once, every intermediate lives in `tmp`, a row-sized scratch that
// stays in L1/L2, and y is written once with cache-bypassing stores. The same
// steps as softmaxRow, so the same bits: the logits are scaled and rounded
// first and the max taken over them, so the largest term is exactly exp(0).
// (Taking shift = scale * max(x) and letting expScaledSum scale instead would
// save a pass over L1, but where the compiler fuses x * scale - shift into one
// FMA, |scale * max| >= 2^31 leaves a rounding error that underflows or
// overflows every term of the row.)
void softmaxRowStreaming(const KernelTable& kt, const float* x, float* y, int64_t n, float scale, float* tmp) {
  const float* src = x;
  if (scale != 1.0f) {
    for (int64_t i = 0; i < n; ++i) tmp[i] = x[i] * scale;
    src = tmp;
  }
  const float shift = kt.rowMax(src, n);
  if (shift == kNegInf) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  const float sum = kt.expScaledSum(src, tmp, n, 1.0f, shift);
  kt.scaleStream(tmp, y, n, 1.0f / sum);
}

}  // namespace

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
  if (shift == kNegInf) {
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
  // Stream once the output outgrows what the caches would keep for a reader
  // anyway (the rows up to kSoftmaxStreamMaxCols fit the L1/L2 scratch).
  const bool stream = rows * cols >= kSoftmaxStreamMinElements && cols <= kSoftmaxStreamMaxCols;
  parallelFor(tasks, [&](int64_t t) {
    const int64_t r0 = t * rowsPerTask;
    const int64_t r1 = std::min(rows, r0 + rowsPerTask);
    if (stream) {
      const KernelTable& kt = kernels();
      float* tmp = scratchFloats(ScratchSlot::SoftmaxRow, static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) softmaxRowStreaming(kt, x + r * cols, y + r * cols, cols, scale, tmp);
    } else {
      for (int64_t r = r0; r < r1; ++r) softmaxRow(x + r * cols, y + r * cols, cols, scale);
    }
  });
}

}  // namespace mhsa
