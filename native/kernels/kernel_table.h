// The primitives that differ per instruction set. Everything else (blocking,
// packing, threading, masking) is ISA-independent and calls through this table.
#pragma once

#include <cstdint>

namespace mhsa {

struct KernelTable {
  const char* name;

  // tile[mc x nc] += ap[mc x kc] * bp[kc x nc]; all three row-major and
  // contiguous (tile's row stride is nc). The blocked GEMM driver feeds it
  // packed panels small enough to stay in L1/L2.
  void (*gemmBlock)(int64_t mc, int64_t nc, int64_t kc, const float* ap, const float* bp,
                    float* tile);

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
