// The optional system BLAS backend (CMake -DMHSA_WITH_BLAS=ON with OpenBLAS
// found). When built in, the matmul op hands plain products to cblas_sgemm;
// prepacked operands and the attention kernel's internal products always use
// the built-in kernels.
#pragma once

#include "gemm.h"

namespace mhsa {

// "openblas" when built with it, else nullptr.
const char* systemBlasName();

// Computes p with the system BLAS and returns true, or returns false (doing
// nothing) when there is none or p cannot be expressed as one sgemm call
// (a prepacked B, strides that are neither row- nor column-major, sizes
// beyond int). Uses setNumThreads' count for BLAS's own threads.
bool systemBlasGemm(const GemmProblem& p);

}  // namespace mhsa
