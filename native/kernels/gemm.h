// Single-precision GEMM on strided operands, BLIS-style:
//   out = alpha * A * B            (accumulate == false)
//   out = alpha * A * B + out      (accumulate == true)
// A is m x k, B is k x n, out m x n. Every operand is addressed as
// data[i * rowStride + j * colStride], so transposes, head-split layouts and
// tokens-as-columns views need no copies: the packing routines absorb them.
#pragma once

#include <cstdint>

namespace mhsa {

struct StridedMatrix {
  const float* data;
  int64_t rowStride;
  int64_t colStride;
};

struct GemmProblem {
  int64_t m, n, k;
  float alpha;
  StridedMatrix a;
  StridedMatrix b;
  float* out;
  int64_t outRowStride;
  int64_t outColStride;
  bool accumulate;
};

// Cache blocking (the BLIS loop nest jc -> pc -> ic -> jr -> ir):
//  kGemmKC: depth of one rank-kc update. A 32-wide B sliver of KC rows is
//           32 KiB, so it stays in a 48 KiB L1d beside a 12 x KC A sliver (12 KiB).
//  kGemmMC: rows of A packed at once: MC x KC = 144 KiB, resident in L2 (2 MiB)
//           while every B sliver of the block streams past it. A multiple of
//           every micro-kernel's MR (4, 6, 12).
//  kGemmNC: columns of B packed at once: KC x NC = 4 MiB, in the shared L3.
constexpr int64_t kGemmKC = 256;
constexpr int64_t kGemmMC = 144;
constexpr int64_t kGemmNC = 4096;

// The whole product on the calling thread.
void gemmSerial(const GemmProblem& p);

// The product spread over the thread pool (serial when it is too small to gain).
void gemmParallel(const GemmProblem& p);

// Floating-point operations below which gemmParallel stays on one thread:
// a fork/join costs a few microseconds, about what 64^3 takes to compute.
constexpr double kGemmParallelMinFlops = 4.0 * 1024 * 1024;

}  // namespace mhsa
