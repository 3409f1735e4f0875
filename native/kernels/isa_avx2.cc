// The portable kernels compiled for avx2 (see the build files for its flags).
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel_table.h"

#define MHSA_KERNEL_TABLE_NAME "avx2"

namespace mhsa {
namespace avx2 {
#include "portable_kernels.inc"
}  // namespace avx2

const KernelTable& avx2Kernels() { return avx2::kTable; }
}  // namespace mhsa
