#include "gemm.h"

#include <algorithm>
#include <cstring>

#include "kernel_table.h"
#include "scratch.h"

namespace mhsa {
namespace {

// Copies rows [i0, i0+mc) x cols [p0, p0+kc) of a strided matrix into a
// contiguous row-major panel.
void packPanel(const StridedMatrix& src, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
               float* dst) {
  for (int64_t i = 0; i < mc; ++i) {
    const float* row = src.data + (i0 + i) * src.rowStride + p0 * src.colStride;
    float* d = dst + i * kc;
    if (src.colStride == 1) {
      std::memcpy(d, row, static_cast<size_t>(kc) * sizeof(float));
    } else {
      for (int64_t p = 0; p < kc; ++p) d[p] = row[p * src.colStride];
    }
  }
}

void storeTile(const GemmProblem& p, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
               const float* tile) {
  const bool useC = p.c.data != nullptr && p.beta != 0.0f;
  for (int64_t i = 0; i < mc; ++i) {
    const float* t = tile + i * nc;
    float* o = p.out + (i0 + i) * p.outRowStride + j0 * p.outColStride;
    if (useC) {
      const float* c = p.c.data + (i0 + i) * p.c.rowStride + j0 * p.c.colStride;
      for (int64_t j = 0; j < nc; ++j)
        o[j * p.outColStride] = p.alpha * t[j] + p.beta * c[j * p.c.colStride];
    } else {
      for (int64_t j = 0; j < nc; ++j) o[j * p.outColStride] = p.alpha * t[j];
    }
  }
}

}  // namespace

void gemmRegion(const GemmProblem& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const KernelTable& kt = kernels();
  float* tile = scratchFloats(ScratchSlot::GemmTile, kGemmMC * kGemmNC);
  float* packA = scratchFloats(ScratchSlot::GemmPackA, kGemmMC * kGemmKC);
  float* packB = scratchFloats(ScratchSlot::GemmPackB, kGemmKC * kGemmNC);
  for (int64_t jc = j0; jc < j1; jc += kGemmNC) {
    const int64_t nc = std::min(kGemmNC, j1 - jc);
    for (int64_t ic = i0; ic < i1; ic += kGemmMC) {
      const int64_t mc = std::min(kGemmMC, i1 - ic);
      std::fill(tile, tile + mc * nc, 0.0f);
      for (int64_t pc = 0; pc < p.k; pc += kGemmKC) {
        const int64_t kc = std::min(kGemmKC, p.k - pc);
        packPanel(p.a, ic, mc, pc, kc, packA);
        // B's panel is k-rows x n-cols: rows of the transposed view are B's columns.
        packPanel(p.b, pc, kc, jc, nc, packB);
        kt.gemmBlock(mc, nc, kc, packA, packB, tile);
      }
      storeTile(p, ic, mc, jc, nc, tile);
    }
  }
}

void gemmSerial(const GemmProblem& p) { gemmRegion(p, 0, p.m, 0, p.n); }

int64_t gemmTileCount(int64_t m, int64_t n) {
  return ((m + kGemmMC - 1) / kGemmMC) * ((n + kGemmNC - 1) / kGemmNC);
}

void gemmTile(const GemmProblem& p, int64_t tile) {
  const int64_t tilesN = (p.n + kGemmNC - 1) / kGemmNC;
  const int64_t ti = tile / tilesN;
  const int64_t tj = tile % tilesN;
  const int64_t i0 = ti * kGemmMC;
  const int64_t j0 = tj * kGemmNC;
  gemmRegion(p, i0, std::min(p.m, i0 + kGemmMC), j0, std::min(p.n, j0 + kGemmNC));
}

}  // namespace mhsa
