#include "layernorm.h"

#include <algorithm>
#include <cmath>

#include "../runtime/thread_pool.h"
#include "kernel_table.h"

namespace mhsa {
namespace {

// The float64 row, for the rows whose float moments overflow (|x| near
// FLT_MAX) in the ISA kernel (KernelTable::layerNormRow).
void layerNormRowDouble(const float* x, float* y, int64_t dim, const float* weight, const float* bias, float eps) {
  // Two passes: the mean first, then the spread around it, so a large common
  // offset does not cancel away the variance.
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(dim);
  double sq = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) {
    // Centered in double: a float mean would shift every output by up to half
    // an ulp of the mean, which dominates when the mean is large.
    float v = static_cast<float>((x[i] - mean) * inv);
    if (weight) v *= weight[i];
    if (bias) v += bias[i];
    y[i] = v;
  }
}

}  // namespace

void layerNormRow(const KernelTable& kt, const float* x, float* y, int64_t dim, const float* weight, const float* bias,
                  float eps) {
  if (!kt.layerNormRow(x, y, dim, weight, bias, eps)) layerNormRowDouble(x, y, dim, weight, bias, eps);
}

void rmsNormRows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight, const float* bias,
                 float eps) {
  if (dim == 0) return;
  const int64_t rowsPerTask = std::max<int64_t>(1, (int64_t{1} << 15) / dim);
  const int64_t tasks = (rows + rowsPerTask - 1) / rowsPerTask;
  parallelFor(tasks, [&](int64_t t) {
    const int64_t r1 = std::min(rows, (t + 1) * rowsPerTask);
    for (int64_t r = t * rowsPerTask; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      // Four partial sums so the loop is not one chain of dependent adds.
      double sq[4] = {0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 4 <= dim; i += 4)
        for (int l = 0; l < 4; ++l) sq[l] += static_cast<double>(xr[i + l]) * xr[i + l];
      for (; i < dim; ++i) sq[0] += static_cast<double>(xr[i]) * xr[i];
      const double mean = ((sq[0] + sq[1]) + (sq[2] + sq[3])) / static_cast<double>(dim);
      const float inv = static_cast<float>(1.0 / std::sqrt(mean + eps));
      for (i = 0; i < dim; ++i) {
        float v = xr[i] * inv;
        if (weight) v *= weight[i];
        if (bias) v += bias[i];
        yr[i] = v;
      }
    }
  });
}

void layerNormRows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight, const float* bias,
                   float eps) {
  if (dim == 0) return;
  const KernelTable& kt = kernels();
  const int64_t rowsPerTask = std::max<int64_t>(1, (int64_t{1} << 15) / dim);
  const int64_t tasks = (rows + rowsPerTask - 1) / rowsPerTask;
  parallelFor(tasks, [&](int64_t t) {
    const int64_t r1 = std::min(rows, (t + 1) * rowsPerTask);
    for (int64_t r = t * rowsPerTask; r < r1; ++r) layerNormRow(kt, x + r * dim, y + r * dim, dim, weight, bias, eps);
  });
}

}  // namespace mhsa
