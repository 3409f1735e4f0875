// The portable kernels compiled for the baseline target (SSE2 on x86-64, NEON on arm64).
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel_table.h"

// On arm64 the baseline includes NEON and GCC/Clang vectorize these loops
// with it, so that is the name info() reports there.
#if defined(__aarch64__)
#define MHSA_KERNEL_TABLE_NAME "neon"
#else
#define MHSA_KERNEL_TABLE_NAME "scalar"
#endif

namespace mhsa {
namespace generic {
#include "portable_kernels.inc"
}  // namespace generic

const KernelTable& genericKernels() { return generic::kTable; }
}  // namespace mhsa
