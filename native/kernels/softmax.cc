#include "softmax.h"

#include <algorithm>
#include <limits>

#include "../runtime/thread_pool.h"
#include "kernel_math.h"
#include "kernel_table.h"
#include "scratch.h"

namespace mhsa {
namespace {

// The unnormalized softmax of row x into `work` (n floats; may be x itself):
// work = exp(x * scale - max), returning the sum, or 0 for a row whose scaled
// logits are all -inf (work then holds nothing useful). The logits are scaled
// and rounded first and the max is taken over them: the shift must be the max
// of the *scaled* logits (scale * min(x) for a negative scale), and only then
// is the largest term exactly exp(0). Scaling inside the exp pass would save a
// pass over L1, but where x * scale - shift fuses into one FMA,
// |scale * max| >= 2^31 leaves a rounding error that underflows or overflows
// every term of the row.
float expRow(const KernelTable& kt, const float* x, float* work, int64_t n, float scale) {
  const float* src = x;
  if (scale != 1.0f) {
    for (int64_t i = 0; i < n; ++i) work[i] = x[i] * scale;
    src = work;
  }
  const float shift = kt.rowMax(src, n);
  if (shift == kNegInf) return 0.0f;
  return kt.expSubSum(src, work, n, shift);
}

}  // namespace

void softmaxRow(const float* x, float* y, int64_t n, float scale) {
  const KernelTable& kt = kernels();
  const float sum = expRow(kt, x, y, n, scale);
  if (sum == 0.0f)
    std::fill(y, y + n, 0.0f);
  else
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
      // x is read from memory once, every intermediate lives in a row-sized
      // scratch that stays in L1/L2, and y is written once with cache-bypassing
      // stores: the same steps as softmaxRow, so the same bits.
      const KernelTable& kt = kernels();
      float* tmp = scratchFloats(ScratchSlot::SoftmaxRow, static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        float* yr = y + r * cols;
        const float sum = expRow(kt, x + r * cols, tmp, cols, scale);
        if (sum == 0.0f)
          std::fill(yr, yr + cols, 0.0f);
        else
          kt.scaleStream(tmp, yr, cols, 1.0f / sum);
      }
    } else {
      for (int64_t r = r0; r < r1; ++r) softmaxRow(x + r * cols, y + r * cols, cols, scale);
    }
  });
}

}  // namespace mhsa
