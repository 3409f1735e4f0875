// The portable kernels compiled for avx512 (see the build files for its flags).
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel_table.h"

#define MHSA_KERNEL_TABLE_NAME "avx512"

namespace mhsa {
namespace avx512 {
#include "portable_kernels.inc"
}  // namespace avx512

const KernelTable& avx512Kernels() { return avx512::kTable; }
}  // namespace mhsa
