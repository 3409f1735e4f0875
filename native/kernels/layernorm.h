#pragma once

#include <cstdint>

namespace mhsa {

// y[r] = (x[r] - mean(x[r])) / sqrt(var(x[r]) + eps) * weight + bias for each
// row r of `dim` contiguous values (biased variance, as PyTorch's LayerNorm).
// weight and bias may be null (1 and 0). y may equal x. Spread over the pool.
void layerNormRows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight, const float* bias,
                   float eps);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight + bias (RMSNorm, as LLaMA's,
// which has no bias), the mean of squares in float64. y may equal x.
void rmsNormRows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight, const float* bias,
                 float eps);

struct KernelTable;

// One row of layerNormRows on the calling thread (the ISA's kernel, float64
// where its float moments overflow): the same bits as layerNormRows.
void layerNormRow(const KernelTable& kt, const float* x, float* y, int64_t dim, const float* weight, const float* bias,
                  float eps);

}  // namespace mhsa
