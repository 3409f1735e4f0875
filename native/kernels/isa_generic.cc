// The portable kernels compiled for the baseline target (SSE2 on x86-64, NEON on arm64).
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel_table.h"

#define MHSA_KERNEL_TABLE_NAME "scalar"

namespace mhsa {
namespace generic {
#include "portable_kernels.inc"
}  // namespace generic

const KernelTable& genericKernels() { return generic::kTable; }
}  // namespace mhsa
