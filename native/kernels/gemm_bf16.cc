#include "gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "../runtime/cpu_features.h"
#include "../runtime/thread_pool.h"
#include "bf16.h"
#include "kernel_math.h"
#include "kernel_table.h"
#include "layernorm.h"
#include "scratch.h"

namespace mhsa {
namespace {

// Rows of A converted at once: 512 x 768 in bf16 is 768 KiB, which stays in
// L2 beside the B sliver while every sliver of the thread meets it.
constexpr int64_t kBf16RowBlock = 512;

int64_t paddedDepth(int64_t kc) { return roundUp(kc, kBf16DepthStep); }

// Offset (uint16) of element (k, j) within a packed depth block of depth kpad.
inline int64_t packedOffset(int64_t kpad, int64_t k, int64_t j) {
  return (j / kBf16SliverColumns) * kpad * kBf16SliverColumns + (k / 2) * 2 * kBf16SliverColumns +
         (j % kBf16SliverColumns) * 2 + (k & 1);
}

template <class Matrix, class Convert>
void packBlocks(const Matrix& b, int64_t k, int64_t n, uint16_t* packed, Convert convert) {
  if (k == 0 || n == 0) return;
  const int64_t width = roundUp(n, kBf16SliverColumns);
  const int64_t kcb = gemmDepthBlock(k);
  parallelFor(ceilDiv(k, kcb), [&](int64_t t) {
    const int64_t pc = t * kcb, kc = std::min(kcb, k - pc), kpad = paddedDepth(kc);
    uint16_t* block = packed + width * pc;
    std::fill(block, block + width * kpad, uint16_t{0});
    for (int64_t kk = 0; kk < kc; ++kk) {
      const auto* row = b.data + (pc + kk) * b.rowStride;
      for (int64_t j = 0; j < n; ++j) block[packedOffset(kpad, kk, j)] = convert(row[j * b.colStride]);
    }
  });
}

}  // namespace

int64_t packedBf16Size(int64_t k, int64_t n) {
  if (k == 0 || n == 0) return 0;
  const int64_t kcb = gemmDepthBlock(k);
  const int64_t last = (k - 1) / kcb * kcb;  // every block before the last is kGemmKC deep, a multiple of 32
  return roundUp(n, kBf16SliverColumns) * (last + paddedDepth(k - last));
}

void packWholeBBf16(const StridedMatrix& b, int64_t k, int64_t n, uint16_t* packed) {
  packBlocks(b, k, n, packed, [](float x) { return floatToBf16(x); });
}

void packWholeBBf16(const StridedBf16Matrix& b, int64_t k, int64_t n, uint16_t* packed) {
  packBlocks(b, k, n, packed, [](uint16_t x) { return x; });
}

namespace {

static_assert(kGemmKC % kBf16DepthStep == 0, "every depth block but the last must need no padding (packedBf16Size)");

// The best path this CPU runs, lowered by MHSA_BF16: 2 AMX, 1 AVX512_BF16,
// 0 widening. AMX needs AVX512_BF16 too (its strips of 1-2 rows run on
// VDPBF16PS). requestTiles false: what AMX would need is checked without
// asking Linux for the tile state (info() reports the path that way).
int bestBf16Path(bool requestTiles) {
#if defined(MHSA_HAVE_X86_KERNELS)
  if (selectedIsa() != Isa::Avx512 || !cpuHasAvx512Bf16()) return 0;
  int want = 2;
  if (const char* env = std::getenv("MHSA_BF16")) {
    if (std::strcmp(env, "avx512bf16") == 0) want = 1;
    if (std::strcmp(env, "widen") == 0) want = 0;
  }
  if (want >= 2 && (requestTiles ? amxTilesUsable() : cpuHasAmxBf16())) return 2;
  return want >= 1 ? 1 : 0;
#else
  (void)requestTiles;
  return 0;
#endif
}

const Bf16Kernels* kernelsOfPath(int path) {
#if defined(MHSA_HAVE_X86_KERNELS)
  if (path == 2) return &amxBf16Kernels();
  if (path == 1) return &avx512Bf16Kernels();
#else
  (void)path;
#endif
  return nullptr;
}

std::atomic<bool> bf16PathChosen{false};

// Row i of op(A) block as contiguous floats: A's own row when it is
// row-major and not normalized, else gathered (and LayerNorm'd) into tmp.
const float* aRow(const GemmProblem& p, int64_t i, int64_t p0, int64_t kc, float* tmp) {
  const float* src = p.a.data + i * p.a.rowStride + p0 * p.a.colStride;
  if (p.aLayerNorm) {
    layerNormRow(kernels(), src, tmp, kc, p.aLayerNorm->weight, p.aLayerNorm->bias, p.aLayerNorm->eps);
    return tmp;
  }
  if (p.a.colStride == 1) return src;
  for (int64_t k = 0; k < kc; ++k) tmp[k] = src[k * p.a.colStride];
  return tmp;
}

// Rows [r0, r1) of the A block at (ic, pc) into dst (row r at dst + r * kpad).
void convertABlock(const Bf16Kernels& kk, const GemmProblem& p, int64_t ic, int64_t r0, int64_t r1, int64_t pc,
                   int64_t kc, int64_t kpad, uint16_t* dst) {
  const bool direct = p.a.colStride == 1 && !p.aLayerNorm;
  if (direct) {
    kk.convertRows(p.a.data + (ic + r0) * p.a.rowStride + pc, p.a.rowStride, r1 - r0, kc, kpad, dst + r0 * kpad);
    return;
  }
  float* tmp = scratchFloats(ScratchSlot::Bf16ARow, static_cast<size_t>(kc));
  for (int64_t r = r0; r < r1; ++r) kk.convertRows(aRow(p, ic + r, pc, kc, tmp), 0, 1, kc, kpad, dst + r * kpad);
}

// A product of at most one 32-row group (a decode step's projections):
// memory-bound, it streams B once. A is converted for every depth block
// first, then each thread runs its slivers through all the depth blocks in
// one parallel region, rather than one region per depth block (a product of
// depth 4096 met 16 barriers, each one a pause in the stream of B).
void gemmBf16Narrow(const GemmProblem& p, const Bf16Kernels& kk, int threads) {
  const int64_t kcb = gemmDepthBlock(p.k);
  const int64_t width = roundUp(p.n, kBf16SliverColumns), slivers = width / kBf16SliverColumns;
  const int64_t blocks = ceilDiv(p.k, kcb);
  // Depth block t's 32 rows of A at t * blockSize (no block is deeper than kcb padded).
  const int64_t blockSize = kBf16DepthStep * paddedDepth(kcb);
  auto* a = reinterpret_cast<uint16_t*>(
      scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(ceilDiv(blocks * blockSize, 2))));
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t pc = t * kcb, kc = std::min(kcb, p.k - pc), kpad = paddedDepth(kc);
    uint16_t* at = a + t * blockSize;
    convertABlock(kk, p, 0, 0, p.m, pc, kc, kpad, at);
    std::fill(at + p.m * kpad, at + kBf16DepthStep * kpad, uint16_t{0});
  }
  auto run = [&](int64_t t) {
    const int64_t s0 = slivers * t / threads, s1 = slivers * (t + 1) / threads;
    if (s0 >= s1) return;
    kk.enter();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t pc = b * kcb, kpad = paddedDepth(std::min(kcb, p.k - pc));
      const uint16_t* block = p.packedBBf16 + width * pc;
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t j0 = s * kBf16SliverColumns;
        kk.strip(kpad, a + b * blockSize, p.m, block + s * kpad * kBf16SliverColumns, p.out + j0,
                 p.outRowStride, p.alpha, p.accumulate || pc > 0, static_cast<int>(std::min(kBf16SliverColumns, p.n - j0)),
                 pc == 0 && p.bias ? p.bias + j0 : nullptr);
        if (b == blocks - 1) finishTile(kernels(), p, 0, p.m, j0, std::min(kBf16SliverColumns, p.n - j0));
      }
    }
    kk.leave();
  };
  parallelFor(threads, run);  // one task runs inline
}

// The whole product with bf16 kernels: per block of A rows and depth, A is
// converted once into a shared buffer, then each thread runs its share of
// (sliver, row part) units, sliver by sliver, so a B sliver (kpad x 32 bf16,
// 48 KiB at depth 768) is read from memory once and reused from L1/L2 by
// every row of the block.
void gemmBf16Tiled(const GemmProblem& p, const Bf16Kernels& kk) {
  const int64_t kcb = gemmDepthBlock(p.k);
  const int64_t width = roundUp(p.n, kBf16SliverColumns), slivers = width / kBf16SliverColumns;
  const int threads = gemmWorthSplitting(p.m, p.n, p.k, 2) ? numThreads() : 1;
  if (p.m <= kBf16DepthStep && slivers >= threads) {
    gemmBf16Narrow(p, kk, threads);
    return;
  }
  for (int64_t ic = 0; ic < p.m; ic += kBf16RowBlock) {
    const int64_t mc = std::min(kBf16RowBlock, p.m - ic), mcPad = roundUp(mc, kBf16DepthStep);
    const int64_t groups = mcPad / kBf16DepthStep;  // 32-row groups
    // Few slivers for the threads: each sliver's rows split in parts too.
    const int64_t rowParts = std::min<int64_t>(groups, ceilDiv(threads, slivers));
    const int64_t units = slivers * rowParts;
    for (int64_t pc = 0; pc < p.k; pc += kcb) {
      const int64_t kc = std::min(kcb, p.k - pc), kpad = paddedDepth(kc);
      auto* a = reinterpret_cast<uint16_t*>(
          scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(ceilDiv(mcPad * kpad, 2))));
      const int64_t convertTasks = std::min<int64_t>(groups, threads * 4);
      auto convert = [&](int64_t t) {
        const int64_t r0 = t * groups / convertTasks * kBf16DepthStep;
        const int64_t r1 = (t + 1) * groups / convertTasks * kBf16DepthStep;
        convertABlock(kk, p, ic, std::min(r0, mc), std::min(r1, mc), pc, kc, kpad, a);
        if (r1 > mc) std::fill(a + std::max(r0, mc) * kpad, a + r1 * kpad, uint16_t{0});
      };
      const uint16_t* block = p.packedBBf16 + width * pc;
      const bool accumulate = p.accumulate || pc > 0;
      const float* bias = pc == 0 ? p.bias : nullptr;
      auto run = [&](int64_t t) {
        const int64_t u0 = units * t / threads, u1 = units * (t + 1) / threads;
        if (u0 >= u1) return;
        kk.enter();
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t s = u / rowParts, part = u % rowParts;
          const int64_t r0 = part * groups / rowParts * kBf16DepthStep;
          const int64_t r1 = std::min(mc, (part + 1) * groups / rowParts * kBf16DepthStep);
          const int64_t j0 = s * kBf16SliverColumns;
          kk.strip(kpad, a + r0 * kpad, r1 - r0, block + s * kpad * kBf16SliverColumns,
                   p.out + (ic + r0) * p.outRowStride + j0, p.outRowStride, p.alpha, accumulate,
                   static_cast<int>(std::min(kBf16SliverColumns, p.n - j0)), bias ? bias + j0 : nullptr);
          if (pc + kc == p.k) finishTile(kernels(), p, ic + r0, r1 - r0, j0, std::min(kBf16SliverColumns, p.n - j0));
        }
        kk.leave();
      };
      if (threads == 1) {
        for (int64_t t = 0; t < convertTasks; ++t) convert(t);
        run(0);
      } else {
        parallelFor(convertTasks, convert);
        parallelFor(threads, run);
      }
    }
  }
}

// Columns [jc, jc + nc) of depth block pc (kpad deep) widened to float
// slivers of nr columns (packB's layout), pair row by pair row of each
// source sliver, both reads and writes running along memory. A pair row is
// 32 words, each depth k's bf16 in its low half and k + 1's in its high half
// (little-endian): as floats, k's is the word shifted up 16 bits and k + 1's
// the word with its low half cleared, so a row widens in whole vectors (a
// value at a time, this was most of a narrow product's time: 0.4-0.5x of the
// float product at 1 x 4096 x 6144).
void widenBlock(const uint16_t* block, int64_t kpad, int64_t kc, int64_t jc, int64_t nc, int nr, float* dst) {
  const int64_t cols = roundUp(nc, nr);  // within the zero-padded slivers: nr divides 32
  for (int64_t j0 = 0; j0 < cols; j0 += kBf16SliverColumns) {
    const uint16_t* sliver = block + (jc + j0) / kBf16SliverColumns * kpad * kBf16SliverColumns;
    const int64_t width = std::min(kBf16SliverColumns, cols - j0);
    for (int64_t k = 0; k < kc; k += 2) {
      uint32_t pairs[kBf16SliverColumns], even[kBf16SliverColumns], odd[kBf16SliverColumns];
      std::memcpy(pairs, sliver + k * kBf16SliverColumns, sizeof pairs);
      for (int64_t j = 0; j < kBf16SliverColumns; ++j) {
        even[j] = pairs[j] << 16;
        odd[j] = pairs[j] & 0xFFFF0000u;
      }
      for (int64_t t = 0; t < width; t += nr) {
        float* d = dst + (j0 + t) / nr * nr * kc + k * nr;
        std::memcpy(d, even + t, static_cast<size_t>(nr) * sizeof(float));
        if (k + 1 < kc) std::memcpy(d + nr, odd + t, static_cast<size_t>(nr) * sizeof(float));
      }
    }
  }
}

// Rows of A that the widening path multiplies in registers (gemmBf16RowsWidened).
constexpr int64_t kBf16WidenedRowsMax = 2;

// The product of at most kBf16WidenedRowsMax rows (a decode step's
// projections) where the CPU has no bf16 arithmetic: memory-bound, so B's
// pair rows are widened in registers as they are read (KernelTable::
// bf16SliverRows, vectorized for each ISA) and multiplied at once, with no
// float copy of B written and read back (which kept such products at 0.6x of
// the float product). A's rows are rounded to bf16 first, as every path
// rounds them. Each thread takes a run of slivers.
void gemmBf16RowsWidened(const GemmProblem& p) {
  const KernelTable& kt = kernels();
  const int64_t kcb = gemmDepthBlock(p.k), m = p.m;
  const int64_t width = roundUp(p.n, kBf16SliverColumns), slivers = width / kBf16SliverColumns;
  // A's rows, rounded, each padded with a zero to an even depth (a pair row's
  // second value past an odd k meets it).
  const int64_t kEven = roundUp(p.k, 2);
  float* a = scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(m * kEven));
  float* tmp = scratchFloats(ScratchSlot::Bf16ARow, static_cast<size_t>(p.k));
  for (int64_t i = 0; i < m; ++i) {
    const float* row = aRow(p, i, 0, p.k, tmp);
    for (int64_t k = 0; k < p.k; ++k) a[i * kEven + k] = roundToBf16(row[k]);
    if (kEven > p.k) a[i * kEven + p.k] = 0.0f;
  }
  const int threads = gemmWorthSplitting(m, p.n, p.k, 2) ? numThreads() : 1;
  auto run = [&](int64_t t) {
    for (int64_t sl = slivers * t / threads; sl < slivers * (t + 1) / threads; ++sl) {
      float acc[kBf16WidenedRowsMax][kBf16SliverColumns] = {};
      for (int64_t pc = 0; pc < p.k; pc += kcb) {
        const int64_t kc = std::min(kcb, p.k - pc), kpad = paddedDepth(kc);
        const uint16_t* sliver = p.packedBBf16 + width * pc + sl * kpad * kBf16SliverColumns;
        kt.bf16SliverRows(a + pc, kEven, static_cast<int>(m), sliver, kc, &acc[0][0]);
      }
      const int64_t j0 = sl * kBf16SliverColumns, cols = std::min(kBf16SliverColumns, p.n - j0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          float* o = p.out + i * p.outRowStride + (j0 + j) * p.outColStride;
          float v = p.alpha * acc[i][j];
          if (p.accumulate) v += *o;
          if (p.bias) v += p.bias[j0 + j];
          *o = v;
        }
      finishTile(kt, p, 0, m, j0, cols);
    }
  };
  parallelFor(threads, run);  // one task runs inline
}

// The product where the CPU has no bf16 arithmetic: A packed as for the float
// GEMM and rounded to bf16, each block of B widened to float slivers, the
// float micro-kernel on both. Saves the weight's memory, not time.
void gemmBf16Widened(const GemmProblem& p) {
  const KernelTable& kt = kernels();
  const int64_t kcb = gemmDepthBlock(p.k), ncb = gemmColumnBlock(kcb);
  const int64_t width = roundUp(p.n, kBf16SliverColumns);
  const bool parallel = gemmWorthSplitting(p.m, p.n, p.k, 2);
  for (int64_t ic = 0; ic < p.m; ic += kGemmMC) {
    const int64_t mc = std::min(kGemmMC, p.m - ic);
    for (int64_t pc = 0; pc < p.k; pc += kcb) {
      const int64_t kc = std::min(kcb, p.k - pc), kpad = paddedDepth(kc);
      const int64_t aFloats = roundUp(mc, kt.mr) * kc;
      float* ap = scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(aFloats));
      packA(p.a, ic, mc, pc, kc, kt.mr, ap, p.aLayerNorm);
      for (int64_t i = 0; i < aFloats; ++i) ap[i] = roundToBf16(ap[i]);
      const uint16_t* block = p.packedBBf16 + width * pc;
      auto columns = [&](int64_t t) {
        const int64_t jc = t * ncb, nc = std::min(ncb, p.n - jc);
        float* bp = scratchFloats(ScratchSlot::GemmPackB, static_cast<size_t>(roundUp(nc, kt.nr) * kc));
        widenBlock(block, kpad, kc, jc, nc, kt.nr, bp);
        gemmMacroKernel(kt, p, ic, mc, jc, 0, nc, kc, ap, kc, kt.mr, bp, kc, p.accumulate || pc > 0, pc == 0, nullptr, 0,
                        pc + kc == p.k);
      };
      const int64_t blocks = ceilDiv(p.n, ncb);
      if (parallel) {
        parallelFor(blocks, columns);
      } else {
        for (int64_t t = 0; t < blocks; ++t) columns(t);
      }
    }
  }
}

}  // namespace

const Bf16Kernels* bf16Kernels() {
  static const Bf16Kernels* const selected = [] {
    const Bf16Kernels* k = kernelsOfPath(bestBf16Path(true));
    bf16PathChosen.store(true, std::memory_order_release);
    return k;
  }();
  return selected;
}

const char* bf16PathName() {
  const Bf16Kernels* k =
      bf16PathChosen.load(std::memory_order_acquire) ? bf16Kernels() : kernelsOfPath(bestBf16Path(false));
  return k ? k->name : "widen";
}

int availableBf16Kernels(const Bf16Kernels** list, int capacity) {
  int count = 0;
#if defined(MHSA_HAVE_X86_KERNELS)
  if (selectedIsa() != Isa::Avx512 || !cpuHasAvx512Bf16()) return 0;
  if (count < capacity && amxTilesUsable()) list[count++] = &amxBf16Kernels();
  if (count < capacity) list[count++] = &avx512Bf16Kernels();
#else
  (void)list;
  (void)capacity;
#endif
  return count;
}

void gemmBf16(const GemmProblem& p, const Bf16Kernels* kernels) {
  if (p.m <= 0 || p.n <= 0) return;
  if (p.k <= 0) {
    gemmEmptyDepth(p);
    return;
  }
  // The tiles store rows of out directly; a strided out (never from
  // runMatmul) takes the widening path, whose macro-kernel handles it.
  if (kernels && p.outColStride == 1) {
    gemmBf16Tiled(p, *kernels);
  } else if (p.m <= kBf16WidenedRowsMax) {
    gemmBf16RowsWidened(p);
  } else {
    gemmBf16Widened(p);
  }
}

}  // namespace mhsa
