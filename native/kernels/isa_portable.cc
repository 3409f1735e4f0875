// The portable kernels compiled for the baseline target (SSE2 on x86-64, NEON on arm64, SIMD128 on wasm32).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "bf16.h"
#include "exp2_poly.h"
#include "gemm_bf16.h"
#include "exp_poly.h"
#include "kernel_table.h"

// On arm64 the baseline includes NEON: the GEMM micro-kernels are hand-written
// for it (microkernel_neon.cc) and GCC/Clang vectorize the other loops with it,
// so that is the name info() reports there.
#if defined(__aarch64__)
#include "microkernel_neon.h"
#define MHSA_KERNEL_TABLE_NAME "neon"
#define MHSA_MICRO_KERNEL ::mhsa::microKernel12x8Neon
#define MHSA_MICRO_KERNEL_DIRECT ::mhsa::microKernelDirect12x8Neon
#define MHSA_MR 12
#define MHSA_NR 8
#elif defined(__wasm_simd128__)
// The WebAssembly build: SIMD128 micro-kernels (microkernel_wasm.cc); clang
// vectorizes the other loops with SIMD128 too.
#include "microkernel_wasm.h"
#define MHSA_KERNEL_TABLE_NAME "wasm-simd128"
#define MHSA_MICRO_KERNEL ::mhsa::microKernel4x8WasmSimd
#define MHSA_MICRO_KERNEL_DIRECT ::mhsa::microKernelDirect4x8WasmSimd
#define MHSA_MR 4
#define MHSA_NR 8
#else
#define MHSA_KERNEL_TABLE_NAME "portable"
#endif

namespace mhsa {
namespace portable {
#include "portable_kernels.inc"
}  // namespace portable

const KernelTable& portableKernels() { return portable::kTable; }
}  // namespace mhsa
