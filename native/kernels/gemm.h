// Single-precision GEMM on strided operands, BLIS-style:
//   out = alpha * A * B            (accumulate == false)
//   out = alpha * A * B + out      (accumulate == true)
// then optionally out = activation(out) + residual (GemmProblem::activation).
// A is m x k, B is k x n, out m x n. Every operand is addressed as
// data[i * rowStride + j * colStride], so transposes, head-split layouts and
// tokens-as-columns views need no copies: the packing routines absorb them.
#pragma once

#include <cstdint>

#include "activation.h"

namespace mhsa {

// A matrix of T addressed as data[i * rowStride + j * colStride].
template <typename T>
struct Strided {
  const T* data;
  int64_t rowStride;
  int64_t colStride;
};
using StridedMatrix = Strided<float>;

// A LayerNorm over each row of A (PyTorch's: biased variance, eps inside the
// root; weight and bias over k, either may be null).
struct RowLayerNorm {
  const float* weight;
  const float* bias;
  float eps;
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
  // B already packed by packWholeB (then b is not read): a constant operand
  // such as a weight matrix is packed once and reused by every product.
  const float* packedB = nullptr;
  // B packed in bf16 by packWholeBBf16 (gemm_bf16.h): only gemmBf16 reads it.
  const uint16_t* packedBBf16 = nullptr;
  // B quantized and packed by packWholeBInt8 (gemm_int8.h): only gemmInt8
  // reads it, and it takes neither outColStride nor aLayerNorm.
  const int8_t* packedBInt8 = nullptr;
  // A row of n values added to every row of out (a projection's bias), in the
  // step that first writes each tile, while the tile is still in L1: a
  // separate pass filling out with the bias would cost a write of all of out
  // (and, as out is then read back by the first step, a read). Null: none.
  const float* bias = nullptr;
  // When set, A's rows go through this LayerNorm as they are packed (four
  // rows at a time into a small buffer, then packed from L1), so the
  // normalized A is never written to memory and read back: a LayerNorm before
  // a projection costs no pass of its own. The bits are those of
  // layerNormRows followed by the product. Needs a row-major A, k at most
  // kGemmMaxLayerNormK (whole rows in one depth block) and packedB (the
  // unpacked paths read A in place).
  const RowLayerNorm* aLayerNorm = nullptr;
  // A transformer MLP's epilogue, in the step that last writes each tile
  // (the last depth block), while the tile is still in L1: out =
  // activation(the product, with alpha, c and the bias), then out +=
  // residual (row-major, residualRowStride apart; null: none). Not with
  // accumulate. Every driver applies it (finishTile): float, bf16 and int8.
  Activation activation = Activation::kNone;
  const float* residual = nullptr;
  int64_t residualRowStride = 0;
};

struct KernelTable;

// The epilogue (GemmProblem::activation, residual) of rows [i0, i0 + rows) x
// columns [j0, j0 + cols) of out, once every depth step has written them.
void finishTile(const KernelTable& kt, const GemmProblem& p, int64_t i0, int64_t rows, int64_t j0, int64_t cols);

// Widest row a fused LayerNorm takes (GemmProblem::aLayerNorm): whole rows in
// one rank-k update (kGemmKCSingleMax), within packA's row buffer.
constexpr int64_t kGemmMaxLayerNormK = 1024;

// Cache blocking (loop nest ic -> pc -> jc -> ir -> jr, see gemmSerial). The vector
// operand of the micro-kernel is B (nr columns wide) and the broadcast operand
// is A (mr rows), so, compared with BLIS's column-major description, the roles
// of the two packed blocks swap:
//  kGemmKC: depth of one rank-kc update. An A sliver (12 x KC = 18 KiB) stays
//           in L1 while it meets every B sliver of the block; a deeper update
//           means fewer trips of the C tile through the caches (384 measured
//           5-25 % faster than 256 on the 768-deep projections, which now run
//           as a single update: see kGemmKCSingleMax).
//  kGemmNC: columns of B packed at once: KC x NC = 768 KiB, resident in L2
//           (1 MiB per core on Zen 4; lscpu's "2 MiB" is the total of two)
//           while every A sliver of the block streams past it.
//  kGemmMC: rows of A packed at once: MC x KC = 1.7 MiB (4.5 MiB for a single
//           update of depth 1024), read once per B block (one sliver at a
//           time), so L3 (32 MiB) holds it comfortably. B is re-packed
//           once per A block, so a large MC keeps that copy rare (576 -> 1152
//           halved packing's share of a 1024^3 profile). A multiple of every
//           micro-kernel's MR (4, 6, 12).
constexpr int64_t kGemmKC = 384;
constexpr int64_t kGemmMC = 1152;
constexpr int64_t kGemmNC = 512;

// Depth up to which a product runs as one rank-k update instead of kGemmKC
// steps: 1024 (768 is the width of ViT-B and BERT-base). With one update
// every output tile is written once; with two, the second reads back and
// rewrites all of out, and in the ViT block an output the size of a
// projection's (1.8 MB) has left the caches by then, so that costs a round trip
// to memory. The A sliver (12 x 1024, 48 KiB) then overflows L1 and streams
// from L2 with B; one core's speed did not change (1024^3), and two cores
// gained 4-9 % at 1024^3 (Zen 4; docs/design/gemm-blocking.md).
constexpr int64_t kGemmKCSingleMax = 1024;
static_assert(kGemmMaxLayerNormK <= kGemmKCSingleMax, "a fused LayerNorm needs whole rows in one depth block");

// The depth of each rank-kc update of a product of depth k (the last may be
// shorter). Packing (packWholeB included) and every driver use it, so the
// layout of a prepacked B and the order of the sums match everywhere.
inline int64_t gemmDepthBlock(int64_t k) { return k <= kGemmKCSingleMax ? (k > 0 ? k : 1) : kGemmKC; }

// Columns of B packed at once for updates of depth kc: kGemmNC at kGemmKC, and
// fewer for deeper updates so the packed B block keeps its L2 footprint
// (768 KiB); a multiple of 32, so of every micro-kernel's NR.
inline int64_t gemmColumnBlock(int64_t kc) {
  const int64_t nc = kGemmKC * kGemmNC / (kc > kGemmKC ? kc : kGemmKC) / 32 * 32;
  return nc < 32 ? 32 : nc;
}

// Columns per block of a prepacked B (a weight). A weight is cold at every
// call in the block, and with nothing fetching ahead the first row tile of
// each block waited for its lines: the block's 768 KiB took longer to arrive
// than the tile took to compute. So the micro-kernels of each block request
// the next block into L2, spread over all the block's tiles (gemmMacroKernel),
// and two blocks must fit in L2 beside the packed A block (605 KiB for 197
// tokens x 768): 384 KiB each, 128 columns at depth 768 (ViT block, batch 1,
// Sapphire Rapids: 0.93x the time of 256-column blocks without it). Sized for
// its 2 MiB L2; blocks sized for 1 MiB measured 0.978 on Zen 3 and 1.001 on
// Zen 4, so they stand (docs/design/gemm-blocking.md).
constexpr int64_t kGemmPrefetchedBlockBytes = 384 * 1024;
// The largest packed A block (bytes) beside which B blocks are fetched ahead:
// with two B blocks it would fit a 2 MiB L2 (341 rows at depth 768); see above.
constexpr int64_t kGemmFetchAheadMaxABytes = 1024 * 1024;
inline int64_t gemmPrepackedColumnBlock(int64_t kc) {
  const int64_t nc = kGemmPrefetchedBlockBytes / 4 / (kc > 0 ? kc : 1) / 32 * 32;
  return nc < 32 ? 32 : nc;
}

inline int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Building blocks of the driver, also used by the attention kernel to pack an
// operand once and reuse it across many products.
//
// packA: rows [i0, i0+mc) x depth [p0, p0+kc) of A into mr-row slivers, each
// k-major (sliver[k * mr + i]), zero-padded to whole slivers. Writes
// roundUp(mc, mr) * kc floats.
// With norm (p0 == 0, kc == all of k, a row-major A), each row is first
// LayerNorm'd into a buffer (see GemmProblem::aLayerNorm).
void packA(const StridedMatrix& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr, float* dst,
           const RowLayerNorm* norm = nullptr);
// packB: depth [p0, p0+kc) x columns [j0, j0+nc) of B into nr-column slivers,
// each k-major (sliver[k * nr + j]). Writes roundUp(nc, nr) * kc floats.
void packB(const StridedMatrix& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst);
// Rows [ic, ic+mc) x columns jc + [n0, n1) of p.out from packed panels (ap
// holds the mc rows, bp the block whose sliver t starts at column t*nr),
// using the first kc steps of each sliver. A's sliver for rows ir.. starts at
// ap + ir * aDepth and steps aStep floats per k (packed: aDepth = kc, aStep = mr;
// an A already k-major with row stride 1 needs no packing: aDepth = 1,
// aStep = its column stride). B's slivers were packed with depth bDepth >= kc.
// Honors p.alpha and p.out's strides; accumulate adds to what out holds;
// firstStep (the block at depth 0) adds p.bias, if any; lastStep (the block
// that ends the depth) applies the epilogue, finishTile. The micro-kernels
// request [next, next + nextFloats) into L2 as they go, one whole share of
// ceil(kc / 8) lines per tile while whole shares fit: all of it when the
// block has enough row tiles (64 at depth 768 for a 128-column block), the
// front of it otherwise.
void gemmMacroKernel(const KernelTable& kt, const GemmProblem& p, int64_t ic, int64_t mc, int64_t jc, int64_t n0,
                     int64_t n1, int64_t kc, const float* ap, int64_t aDepth, int64_t aStep, const float* bp,
                     int64_t bDepth, bool accumulate, bool firstStep = false, const float* next = nullptr,
                     int64_t nextFloats = 0, bool lastStep = false);

// Packs all of a k x n matrix B for the current kernel table: for each
// gemmDepthBlock(k) block of depth starting at pc, the nr-column slivers of every column
// at packed + roundUp(n, nr) * pc (the layout gemmSerial/gemmParallel read
// through GemmProblem::packedB). Writes packedBSize(k, n) floats.
int64_t packedBSize(int64_t k, int64_t n);
void packWholeB(const StridedMatrix& b, int64_t k, int64_t n, float* packed);

// The product of an empty depth (k = 0): out = bias (or 0), or out += bias when accumulating.
void gemmEmptyDepth(const GemmProblem& p);

// The whole product on the calling thread.
void gemmSerial(const GemmProblem& p);

// The product spread over the thread pool (serial when it is too small to gain).
void gemmParallel(const GemmProblem& p);

// Floating-point operations below which gemmParallel stays on one thread.
// Calls in a row find the helpers still spinning (they spin up to 2 ms before
// they sleep), so a fork/join costs ~1 us there: 64^3 (5 us on one core) split
// in two measured 0.92x, 96^3 0.78x; 32 x 64 x 64 (half of it) 1.08x, a loss
// (Zen 4; docs/design/gemm-blocking.md).
constexpr double kGemmParallelMinFlops = 512.0 * 1024;

// Bytes of B from which a product is split even below kGemmParallelMinFlops:
// a product of one to three rows reads B once and is bound by where B lies.
// Split by columns, each core reads its own half, and keeps it in its own L2
// from one call to the next (a decode step's weights).
constexpr double kGemmParallelMinBBytes = 256.0 * 1024;

// Whether a product of m x n x k, with B's elements of `bBytes` bytes, is worth
// a fork/join.
inline bool gemmWorthSplitting(int64_t m, int64_t n, int64_t k, int bBytes) {
  return 2.0 * m * n * k >= kGemmParallelMinFlops || static_cast<double>(k) * n * bBytes >= kGemmParallelMinBBytes;
}

// Row slivers per thread from which gemmParallel gives each thread its own
// rows of a product against a prepacked B (each packs its own A; see there):
// 32 x 12 = 384 rows. Measured against the shared A block at depth 768, 2
// threads: 1576 rows 0.90-0.98x the time, 1024 rows 0.97x, 788 rows 0.997x,
// 394 rows 1.01x (a thread's share of B re-read per A block then costs more
// than the barrier it saves).
constexpr int64_t kGemmOwnRowsMinSlivers = 32;

// Parts into which gemmParallel's column runs split the rows of their last
// slivers (SliverRun), so two threads finish a product about a quarter of a
// sliver apart: at M = 197 and depth 768 a whole 32-column sliver is ~85 us
// of one Zen 4 core (docs/design/gemm-blocking.md).
constexpr int64_t kGemmSliverRowParts = 4;

// When B is packed per call, each thread takes its own rows (packing its A
// rows and all of B itself, one fork/join) if it gets at least
// kGemmSplitRowsMinSlivers row slivers and either the shares differ by at
// most kGemmSplitRowsMaxImbalancePercent or the depth is at most
// kGemmSplitRowsAnyBalanceMaxK. Otherwise the threads split the columns and share
// one packed A. Split by columns, both threads store into the same rows of
// out, and on Zen 4 that costs far more than it should: 512 x 64 x 512 (m k n)
// took 205 us with two column halves of one out and 163 us with the same
// halves written to two separate buffers; 1024 x 64 x 768, 590 against 477.
// Each core's prefetchers appear to pull lines of the other core's half of a
// page into its cache, so the other's next store to them must take them
// back. The shallower the product, the more stores per flop, the worse it is
// (197 rows, n 768: 1.2-2.3x at k 64, 1.09x at 128, 1.04x at 256, 1.01x at 512).
// Own rows measured (2 threads, us, against the column split): 512 x 64 x
// 512 167 / 208, 512^3 1294 / 1586, 1024^3 9845 / 10788, 256^3 160 / 177,
// 197 x 64 x 768 107 / 229. With 17 slivers (197 rows) the 9 / 8 split
// leaves a thread 6 % more rows and both pack all of B, so at depth >= 256
// the column split stays ahead (197 x 768 x 2304: 3181 / 3558); with few
// rows per thread repacking all of B dominates (48 x 64 x 4096: 161 / 146).
constexpr int64_t kGemmSplitRowsMinSlivers = 4;
constexpr int64_t kGemmSplitRowsMaxImbalancePercent = 3;
constexpr int64_t kGemmSplitRowsAnyBalanceMaxK = 128;

// Flops of one product below which a batch of at least `threads` products
// runs one whole product per task (matmul_op.cc) instead of each product
// split over the pool.
constexpr double kGemmBatchPerTaskMaxFlops = 256.0 * 1024 * 1024;

// m * n * k up to which a product of row-major operands skips packing
// (gemmDirect). Measured on one Sapphire Rapids core (benchmarks/native;
// docs/design/gemm-blocking.md):
// unpacked is 1.2-1.5x faster at 128^3 and 197 x 197 x 64 (2.1-2.5 M), level
// at 512 x 64 x 512, 10 % slower at 256^3 (16.8 M), where B no longer stays
// in L1/L2 between row tiles and packing pays for itself.
constexpr int64_t kGemmDirectMaxVolume = int64_t{1} << 22;

// Largest B (k * n floats: 1 MiB, half an L2) for which a product at most two
// column slivers wide skips packing whatever its size (gemm.cc, isNarrowDirect):
// every row tile re-reads B, which must stay in L2 for that to be cheap.
constexpr int64_t kGemmNarrowMaxBFloats = int64_t{1} << 18;

}  // namespace mhsa
