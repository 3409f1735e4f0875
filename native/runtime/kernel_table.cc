#include "../kernels/kernel_table.h"

#include "cpu_features.h"

namespace mhsa {

const KernelTable& kernels() {
  static const KernelTable& table = []() -> const KernelTable& {
    switch (selectedIsa()) {
#if defined(MHSA_HAVE_X86_KERNELS)
      case Isa::Avx512: return avx512Kernels();
      case Isa::Avx2: return avx2Kernels();
#endif
      default: return portableKernels();
    }
  }();
  return table;
}

}  // namespace mhsa
