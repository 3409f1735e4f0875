// The primitives that differ per instruction set. Everything else (blocking,
// packing, threading, masking) is ISA-independent and calls through this table.
#pragma once

#include <cstdint>

namespace mhsa {

struct KernelTable {
  const char* name;

  // GEMM register tile: the micro-kernel computes an mr x nr block of C from
  // an A sliver packed k-major (ap[k * mr + i]) and a B sliver packed k-major
  // (bp[k * nr + j]), both zero-padded to full mr / nr:
  //   c[i * ldc + j] = alpha * sum_k ap[k][i] * bp[k][j]  (+ c[...] if accumulate)
  // for i < rows, j < cols (the valid part of an edge tile).
  int mr;
  int nr;
  void (*microKernel)(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, float alpha,
                      bool accumulate, int rows, int cols);

  // Largest element of x[0..n), -Infinity for n == 0. NaN-propagation is not guaranteed.
  float (*rowMax)(const float* x, int64_t n);

  // y[i] = exp(x[i] * scale - shift) for i < n; returns the sum of the y[i].
  // y may equal x.
  float (*expScaledSum)(const float* x, float* y, int64_t n, float scale, float shift);

  // y[i] *= s for i < n.
  void (*scaleInPlace)(float* y, int64_t n, float s);
};

const KernelTable& kernels();

// Per-ISA tables, each defined in its own translation unit compiled with that
// ISA's flags (only the x86 ones exist on x86 builds).
const KernelTable& genericKernels();
const KernelTable& avx2Kernels();
const KernelTable& avx512Kernels();

}  // namespace mhsa
