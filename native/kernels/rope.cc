#include "rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../runtime/thread_pool.h"

namespace mhsa {
namespace {

// Elements a task should cover at least, so that a short call (one decode
// token) stays on one thread.
constexpr int64_t kRopeMinTaskElements = 1 << 15;

// The angles are taken in double, so a float32 result is the rotation at the
// exact position: float32 angles lose ~position · 2^-24 radians (0.001 at
// 16384), which a float64 reference would see.
void rotateRow(const RopeProblem& p, int64_t b, int64_t s, const double* invFreq, float* cosTable, float* sinTable) {
  const int64_t position = p.positions ? p.positions[p.positionsPerBatch ? b * p.seq + s : s] : p.offset + s;
  const int64_t half = p.rotaryDim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * invFreq[i];
    cosTable[i] = static_cast<float>(std::cos(angle));
    sinTable[i] = static_cast<float>(std::sin(angle));
  }
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t at = b * p.batchStride + s * p.seqStride + h * p.headStride;
    const float* x = p.x + at;
    float* out = p.out + at;
    if (p.interleaved) {
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = x[2 * i], x2 = x[2 * i + 1];
        out[2 * i] = x1 * cosTable[i] - x2 * sinTable[i];
        out[2 * i + 1] = x2 * cosTable[i] + x1 * sinTable[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = x[i], x2 = x[i + half];
        out[i] = x1 * cosTable[i] - x2 * sinTable[i];
        out[i + half] = x2 * cosTable[i] + x1 * sinTable[i];
      }
    }
    if (out != x) std::copy(x + p.rotaryDim, x + p.headDim, out + p.rotaryDim);
  }
}

}  // namespace

void ropeForward(const RopeProblem& p) {
  const int64_t rows = p.batch * p.seq;
  if (rows == 0 || p.heads == 0 || p.headDim == 0) return;
  const int64_t half = p.rotaryDim / 2;
  std::vector<double> invFreq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = std::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(p.rotaryDim));
  const int64_t rowElements = p.heads * p.headDim;
  const int64_t rowsPerTask = std::max<int64_t>(1, kRopeMinTaskElements / rowElements);
  const int64_t tasks = (rows + rowsPerTask - 1) / rowsPerTask;
  parallelFor(tasks, [&](int64_t task) {
    std::vector<float> table(static_cast<size_t>(2 * half));
    const int64_t end = std::min(rows, (task + 1) * rowsPerTask);
    for (int64_t row = task * rowsPerTask; row < end; ++row)
      rotateRow(p, row / p.seq, row % p.seq, invFreq.data(), table.data(), table.data() + half);
  });
}

}  // namespace mhsa
