// Single-precision GEMM on strided operands:
//   out = alpha * A * B + beta * C
// A is m x k, B is k x n, C and out m x n; every operand is addressed as
// data[i * rowStride + j * colStride], so transposes, head-split layouts and
// tokens-as-columns views need no copies. A broadcast C has stride 0.
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
  float beta;       // applied only when c.data is non-null and beta != 0 (C is then never read)
  StridedMatrix c;  // c.data may equal out.data with the same strides (accumulate in place)
  float* out;
  int64_t outRowStride;
  int64_t outColStride;
};

// Blocking of the portable GEMM. A task owns an output tile of kGemmMC x kGemmNC;
// the K loop runs in chunks of kGemmKC so that the packed B chunk (KC x NC floats,
// 128 KiB) stays in L2 and four rows of the tile (4 KiB) stay in L1.
constexpr int64_t kGemmMC = 64;
constexpr int64_t kGemmNC = 128;
constexpr int64_t kGemmKC = 256;

// Computes rows [i0, i1) x columns [j0, j1) of out on the calling thread.
void gemmRegion(const GemmProblem& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

// The whole product on the calling thread.
void gemmSerial(const GemmProblem& p);

// Number of kGemmMC x kGemmNC tiles, and the tile with a given index, for
// callers that spread tiles of many products over the thread pool.
int64_t gemmTileCount(int64_t m, int64_t n);
void gemmTile(const GemmProblem& p, int64_t tile);

}  // namespace mhsa
