// The GEMM against a bf16 weight: out = alpha * bf16(A) * B (+ bias, + out),
// with B prepacked in bf16 (packWholeBBf16) and A rounded to bf16 as it is
// packed. Products of two bf16 are exact in float and the sums are float, so
// the result differs from float64 over the same rounded operands by float
// accumulation only. GemmProblem's fields mean what they do for gemmParallel,
// with packedBBf16 in place of packedB; design note: docs/design/bf16.md.
#pragma once

#include <cstdint>

#include "gemm.h"

namespace mhsa {

// The packed layout, one for every path: for each depth block of
// gemmDepthBlock(k) (pc, kc), its depth padded with zeros to kpad =
// roundUp(kc, kBf16DepthStep), then slivers of 32 columns (the last
// zero-padded), each kpad / 2 rows of 32 column pairs: element (k, j) of the
// block sits at sliver j / 32, offset (k / 2) * 64 + (j % 32) * 2 + k % 2.
// That is the B operand of VDPBF16PS (16 columns x 2 depths per vector) and
// of AMX's TDPBF16PS (rows of pairs, 64 bytes per 16 columns).
constexpr int64_t kBf16SliverColumns = 32;
constexpr int64_t kBf16DepthStep = 32;  // one AMX A tile's row: 32 bf16

// uint16 elements of a packed k x n matrix.
int64_t packedBf16Size(int64_t k, int64_t n);

// Packs op(B), k x n, rounding each float to bf16 (bf16.h).
void packWholeBBf16(const StridedMatrix& b, int64_t k, int64_t n, uint16_t* packed);

// The same from a matrix already in bf16 (a checkpoint's tensor kept as is).
using StridedBf16Matrix = Strided<uint16_t>;
void packWholeBBf16(const StridedBf16Matrix& b, int64_t k, int64_t n, uint16_t* packed);

// The kernels a bf16 product runs on, chosen at run time (bf16Kernels()).
//  strip: rows x cols (cols <= 32) of out from an A block in bf16, row-major
//   (a[i * kpad + k], rows padded with zeros to a multiple of 32, so whole
//   tiles may be read) and one packed B sliver:
//     c[i * ldc + j] = alpha * sum_k a[i][k] * b[k][j]  (+ c if accumulate)  (+ bias[j] if bias)
//   rounded as those separate steps (as KernelTable::microKernel's epilogue).
//  enter / leave: around a thread's run of strips (AMX configures its tiles
//   and releases them, so a thread between products carries no tile state).
//  convertRows: dst[i * kpad + k] = bf16(src row i, column k) for i < rows,
//   k < kc, zero for kc <= k < kpad.
//  peakLoop: `iterations` rounds of independent bf16 products held in
//   registers (no loads), the most the path can do; returns the flops done.
//   The benchmarks' bf16 peak (runtime/calibrate.h).
struct Bf16Kernels {
  const char* name;
  void (*strip)(int64_t kpad, const uint16_t* a, int64_t rows, const uint16_t* b, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias);
  void (*enter)();
  void (*leave)();
  void (*convertRows)(const float* src, int64_t rowStride, int64_t rows, int64_t kc, int64_t kpad, uint16_t* dst);
  double (*peakLoop)(int64_t iterations);
};

// The path products take: "amx", "avx512bf16", or null when the CPU has
// neither (then each block of B widens to float and the float kernels run).
// MHSA_BF16=avx512bf16|widen lowers it, as MHSA_ISA does the float table;
// below the AVX-512 table (MHSA_ISA=avx2) it is always null.
const Bf16Kernels* bf16Kernels();
// "amx", "avx512bf16" or "widen": the path bf16Kernels() took, or before the
// first product the one it will take, found without asking Linux for the AMX
// tile state (info() reports it, and should not change the process).
const char* bf16PathName();

// The kernels of each path this CPU runs, best first (the tests try each).
int availableBf16Kernels(const Bf16Kernels** list, int capacity);

// The product, spread over the thread pool. p.packedBBf16 must be set;
// p.packedB and p.b are not read. kernels null: the widening path.
void gemmBf16(const GemmProblem& p, const Bf16Kernels* kernels);
inline void gemmBf16(const GemmProblem& p) { gemmBf16(p, bf16Kernels()); }

// Per-ISA paths, defined in their own translation units (x86 builds only).
const Bf16Kernels& avx512Bf16Kernels();
const Bf16Kernels& amxBf16Kernels();
// Bf16Kernels::convertRows for both (gemm_bf16_avx512.cc).
void convertRowsToBf16Avx512(const float* src, int64_t rowStride, int64_t rows, int64_t kc, int64_t kpad,
                             uint16_t* dst);

}  // namespace mhsa
