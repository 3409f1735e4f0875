#include "gemm.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../runtime/thread_pool.h"
#include "kernel_math.h"
#include "kernel_table.h"
#include "layernorm.h"
#include "scratch.h"

namespace mhsa {
namespace {

// Interleaves 4 source lines, each contiguous over k (line l starts at
// src + l * lineStride), into dst k-major: dst[k * ld + l] = line_l[k] for
// k < kc. Packing a row-major A or a transposed B is this transpose; 4 x 4
// blocks go through registers (2-3x faster than element by element).
void interleave4(const float* src, int64_t lineStride, int64_t kc, float* dst, int64_t ld) {
  const float* l0 = src;
  const float* l1 = l0 + lineStride;
  const float* l2 = l1 + lineStride;
  const float* l3 = l2 + lineStride;
  // Callers go 4 lines at a time down a strided source (the heads of a
  // [tokens, heads * dim] tensor are 3 KiB apart for ViT-B), a pattern the
  // hardware prefetchers barely follow: attention's K and Q transposes ran at
  // ~5 GB/s from L3. Request the lines of the call after next: never
  // dereferenced, so reaching past the source is harmless, and formed as
  // integers, since pointer arithmetic past the source would be undefined.
  constexpr int64_t kLinesAhead = 8;
  const uintptr_t base = reinterpret_cast<uintptr_t>(l0);
  for (int64_t l = kLinesAhead; l < kLinesAhead + 4; ++l)
    for (int64_t k = 0; k < kc; k += 16)
      __builtin_prefetch(reinterpret_cast<const void*>(base + static_cast<uintptr_t>((l * lineStride + k) * 4)));
  int64_t k = 0;
#if defined(__SSE2__)
  for (; k + 4 <= kc; k += 4) {
    __m128 x0 = _mm_loadu_ps(l0 + k), x1 = _mm_loadu_ps(l1 + k);
    __m128 x2 = _mm_loadu_ps(l2 + k), x3 = _mm_loadu_ps(l3 + k);
    _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
    float* dk = dst + k * ld;
    _mm_storeu_ps(dk, x0);
    _mm_storeu_ps(dk + ld, x1);
    _mm_storeu_ps(dk + 2 * ld, x2);
    _mm_storeu_ps(dk + 3 * ld, x3);
  }
#endif
  for (; k < kc; ++k) {
    float* dk = dst + k * ld;
    dk[0] = l0[k];
    dk[1] = l1[k];
    dk[2] = l2[k];
    dk[3] = l3[k];
  }
}

// interleave4 for 2 lines (dst[k * ld + l] = line_l[k], l < 2): the last two
// rows of a 6-row AVX2 sliver, which went element by element.
void interleave2(const float* src, int64_t lineStride, int64_t kc, float* dst, int64_t ld) {
  const float* l0 = src;
  const float* l1 = l0 + lineStride;
  int64_t k = 0;
#if defined(__SSE2__)
  for (; k + 4 <= kc; k += 4) {
    const __m128 x0 = _mm_loadu_ps(l0 + k), x1 = _mm_loadu_ps(l1 + k);
    const __m128i lo = _mm_castps_si128(_mm_unpacklo_ps(x0, x1));  // l0[k], l1[k], l0[k+1], l1[k+1]
    const __m128i hi = _mm_castps_si128(_mm_unpackhi_ps(x0, x1));
    float* dk = dst + k * ld;
    _mm_storeu_si64(dk, lo);
    _mm_storeu_si64(dk + ld, _mm_unpackhi_epi64(lo, lo));
    _mm_storeu_si64(dk + 2 * ld, hi);
    _mm_storeu_si64(dk + 3 * ld, _mm_unpackhi_epi64(hi, hi));
  }
#endif
  for (; k < kc; ++k) {
    dst[k * ld] = l0[k];
    dst[k * ld + 1] = l1[k];
  }
}

// Transposes `lines` source lines (contiguous over k, lineStride apart) into
// dst k-major (dst[k * ld + l] = line_l[k]): four at a time, then two, then one.
void transposeLines(const float* src, int64_t lineStride, int64_t lines, int64_t kc, float* dst, int64_t ld) {
  int64_t l = 0;
  for (; l + 4 <= lines; l += 4) interleave4(src + l * lineStride, lineStride, kc, dst + l, ld);
  if (l + 2 <= lines) {
    interleave2(src + l * lineStride, lineStride, kc, dst + l, ld);
    l += 2;
  }
  for (; l < lines; ++l)
    for (int64_t k = 0; k < kc; ++k) dst[k * ld + l] = src[l * lineStride + k];
}

// packB for a row-major B, row by row: each row's nc floats are one
// contiguous read, dealt out to the slivers. Sliver by sliver instead, every
// 32-float piece would start a new stream rows apart (9 KiB for a 768 x 2304
// weight), which no hardware prefetcher follows: copying a cold B that way took
// a fifth of a 197 x 768 x 2304 product. The row kPackBRowsAhead below is
// requested as each row is copied.
void packRowMajorB(const StridedMatrix& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
  constexpr int64_t kPackBRowsAhead = 4;
  const int64_t whole = nc / nr * nr;
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = b.data + (p0 + k) * b.rowStride + j0;
    if (k + kPackBRowsAhead < kc)
      for (int64_t j = 0; j < nc; j += 16) __builtin_prefetch(row + kPackBRowsAhead * b.rowStride + j);
    float* d = dst + k * nr;
    int64_t t = 0;
    // A constant size lets the compiler inline the copy (a call to memcpy for
    // every 128 bytes was 1.6 % of a ViT attention profile).
    if (nr == 32)
      for (; t < whole; t += 32) std::memcpy(d + t * kc, row + t, 32 * sizeof(float));
    else if (nr == 16)
      for (; t < whole; t += 16) std::memcpy(d + t * kc, row + t, 16 * sizeof(float));
    for (; t < whole; t += nr) std::memcpy(d + t * kc, row + t, static_cast<size_t>(nr) * sizeof(float));
    if (t < nc) {  // the last, partial sliver: zero-padded to nr columns
      float* dt = d + t * kc;
      std::memcpy(dt, row + t, static_cast<size_t>(nc - t) * sizeof(float));
      std::fill(dt + (nc - t), dt + nr, 0.0f);
    }
  }
}

// packA of a row-major A whose rows are LayerNorm'd first (p0 = 0 and kc =
// all of k <= kGemmMaxLayerNormK): four rows at a time into rows[], which
// stays in L1, then transposed from there (transposeLines).
void packANormalized(const StridedMatrix& a, int64_t i0, int64_t mc, int64_t kc, int mr, float* dst,
                     const RowLayerNorm& norm) {
  assert(a.colStride == 1 && kc <= kGemmMaxLayerNormK);
  const KernelTable& kt = kernels();
  float rows[4 * kGemmMaxLayerNormK];
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t count = std::min<int64_t>(mr, mc - s);
    float* d = dst + s * kc;
    for (int64_t done = 0; done < count; done += 4) {
      const int64_t n = std::min<int64_t>(4, count - done);
      for (int64_t r = 0; r < n; ++r)
        layerNormRow(kt, a.data + (i0 + s + done + r) * a.rowStride, rows + r * kc, kc, norm.weight, norm.bias, norm.eps);
      transposeLines(rows, kc, n, kc, d + done, mr);
    }
    for (int64_t i = count; i < mr; ++i)
      for (int64_t k = 0; k < kc; ++k) d[k * mr + i] = 0.0f;
  }
}

}  // namespace

// Packs rows [i0, i0+mc) x depth [p0, p0+kc) of A into mr-row slivers, each
// k-major (sliver[k * mr + i]) and zero-padded to mr rows, so the micro-kernel
// reads A with unit stride whatever A's strides were.
void packA(const StridedMatrix& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr, float* dst,
           const RowLayerNorm* norm) {
  if (norm) {
    assert(p0 == 0);  // kc is then all of k (gemmDepthBlock: one block up to kGemmKCSingleMax)
    packANormalized(a, i0, mc, kc, mr, dst, *norm);
    return;
  }
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - s);
    float* d = dst + s * kc;
    const float* src = a.data + (i0 + s) * a.rowStride + p0 * a.colStride;
    if (a.rowStride == 1 && rows == mr) {
      // Transposed A: the mr values of one k are contiguous (a loop, not a
      // memcpy call, for 16-48 bytes).
      for (int64_t k = 0; k < kc; ++k) {
        const float* column = src + k * a.colStride;
        float* dk = d + k * mr;
        for (int i = 0; i < mr; ++i) dk[i] = column[i];
      }
      continue;
    }
    if (a.colStride == 1) {  // row-major A: a transpose
      transposeLines(src, a.rowStride, rows, kc, d, mr);
    } else {
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = src + i * a.rowStride;
        for (int64_t k = 0; k < kc; ++k) d[k * mr + i] = row[k * a.colStride];
      }
    }
    for (int64_t i = rows; i < mr; ++i)
      for (int64_t k = 0; k < kc; ++k) d[k * mr + i] = 0.0f;
  }
}

// Packs depth [p0, p0+kc) x columns [j0, j0+nc) of B into nr-column slivers,
// each k-major (sliver[k * nr + j]) and zero-padded to nr columns.
void packB(const StridedMatrix& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
  if (b.colStride == 1) {
    packRowMajorB(b, p0, kc, j0, nc, nr, dst);
    return;
  }
  for (int64_t t = 0; t < nc; t += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - t);
    float* d = dst + t * kc;
    const float* src = b.data + p0 * b.rowStride + (j0 + t) * b.colStride;
    int64_t done = 0;
    if (b.rowStride == 1)  // transposed B (a weight [n, k] read as k x n): 4 columns at a time
      for (; done + 4 <= cols; done += 4) interleave4(src + done * b.colStride, b.colStride, kc, d + done, nr);
    for (int64_t k = 0; k < kc; ++k) {
      const float* row = src + k * b.rowStride;
      float* dk = d + k * nr;
      for (int64_t j = done; j < cols; ++j) dk[j] = row[j * b.colStride];
      for (int64_t j = cols; j < nr; ++j) dk[j] = 0.0f;
    }
  }
}

namespace {

// c[i][j] += bias[j] over a rows x cols tile of a strided output, just
// written from the micro-kernel's temporary tile. Outputs with unit column
// stride get the bias inside the micro-kernels' epilogues.
inline void addBiasTile(float* c, int64_t ldc, int64_t colStride, int rows, int cols, const float* bias) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) c[i * ldc + j * colStride] += bias[j];
}

// The next B block [next, next + floats), requested into L2 a share per tile
// of the current block: ceil(kc / 8) lines each (see KernelTable::microKernel),
// while a whole share lies inside it (a partial last share is left to demand).
class NextBlockShares {
 public:
  NextBlockShares(const float* next, int64_t floats, int64_t kc)
      : next_(next), floats_(next ? floats : 0), perTile_(ceilDiv(kc, 8) * 16) {}
  int64_t floatsPerShare() const { return perTile_; }
  // The next tile's share, or null.
  const float* take() {
    const float* share = done_ + perTile_ <= floats_ ? next_ + done_ : nullptr;
    done_ += perTile_;
    return share;
  }

 private:
  const float* next_;
  int64_t floats_, perTile_, done_ = 0;
};

}  // namespace

void finishTile(const KernelTable& kt, const GemmProblem& p, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  if (p.activation == Activation::kNone && p.residual == nullptr) return;
  for (int64_t i = i0; i < i0 + rows; ++i) {
    float* o = p.out + i * p.outRowStride + j0 * p.outColStride;
    const float* r = p.residual ? p.residual + i * p.residualRowStride + j0 : nullptr;
    if (p.outColStride == 1) {
      kt.activate(o, cols, p.activation);
      if (r)
        for (int64_t j = 0; j < cols; ++j) o[j] += r[j];
      continue;
    }
    float row[64];  // a strided output goes through a contiguous row
    for (int64_t from = 0; from < cols; from += 64) {
      const int64_t w = std::min<int64_t>(64, cols - from);
      for (int64_t j = 0; j < w; ++j) row[j] = o[(from + j) * p.outColStride];
      kt.activate(row, w, p.activation);
      for (int64_t j = 0; j < w; ++j) o[(from + j) * p.outColStride] = r ? row[j] + r[from + j] : row[j];
    }
  }
}

// Runs the micro-kernel over an mc x [n0, n1) block of packed A against the
// packed B block (whose sliver t starts at column t * nr of the block).
void gemmMacroKernel(const KernelTable& kt, const GemmProblem& p, int64_t ic, int64_t mc, int64_t jc, int64_t n0,
                     int64_t n1, int64_t kc, const float* ap, int64_t aDepth, int64_t aStep, const float* bp,
                     int64_t bDepth, bool accumulate, bool firstStep, const float* next, int64_t nextFloats,
                     bool lastStep) {
  const float* bias = firstStep ? p.bias : nullptr;
  const int mr = kt.mr, nr = kt.nr;
  NextBlockShares shares(next, nextFloats, kc);
  float tmp[32 * 32];  // a tile for strided outputs; mr * nr <= 32 * 32 for every table
  // The A sliver (mr x kc, the broadcast operand) stays in L1 while the B
  // slivers of the block (nr x kc each, the vector operand) stream from L2.
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int rows = static_cast<int>(std::min<int64_t>(mr, mc - ir));
    const float* as = ap + ir * aDepth;
    for (int64_t jr = n0; jr < n1; jr += nr) {
      const int cols = static_cast<int>(std::min<int64_t>(nr, n1 - jr));
      const float* bs = bp + jr * bDepth;
      float* c = p.out + (ic + ir) * p.outRowStride + (jc + jr) * p.outColStride;
      if (p.outColStride == 1) {
        kt.microKernel(kc, as, aStep, bs, nr, c, p.outRowStride, p.alpha, accumulate, rows, cols,
                       bias ? bias + jc + jr : nullptr, shares.take());
        if (lastStep) finishTile(kt, p, ic + ir, rows, jc + jr, cols);
        continue;
      }
      // A strided output: the tile goes through tmp, the bias after it.
      kt.microKernel(kc, as, aStep, bs, nr, tmp, nr, p.alpha, false, rows, cols, nullptr, shares.take());
      for (int i = 0; i < rows; ++i) {
        float* o = c + i * p.outRowStride;
        for (int j = 0; j < cols; ++j) {
          float& dst = o[j * p.outColStride];
          dst = accumulate ? dst + tmp[i * nr + j] : tmp[i * nr + j];
        }
      }
      if (bias) addBiasTile(c, p.outRowStride, p.outColStride, rows, cols, bias + jc + jr);
      if (lastStep) finishTile(kt, p, ic + ir, rows, jc + jr, cols);
    }
  }
}

namespace {


// How to split an m x n product over `threads`: a grid of tm x tn regions
// (whole micro-tiles, but the last of each dim holds only what is left) whose
// first, largest region has the fewest elements. (Counting whole tiles, 17 x
// 300 tied, and its row split, 12 rows against 5, took 67.5 us where the
// column split takes 49.6.) A tie goes to the most row regions when tieToRows
// (unpacked regions: two threads then store into different rows, gemm.h at
// kGemmSplitRowsMinSlivers), else to the most column regions (a shared A
// block: with rows split, each thread would pack all of B for few rows; 24 x
// 768 x 768 on AVX2 took 0.46 ms split so, against 0.18-0.33).
void chooseGrid(int64_t m, int64_t n, int mr, int nr, int threads, bool tieToRows, int* tm, int* tn) {
  const int64_t mUnits = ceilDiv(m, mr), nUnits = ceilDiv(n, nr);
  int64_t best = -1;
  for (int a = 1; a <= threads; ++a) {
    if (threads % a) continue;
    const int b = threads / a;
    const int64_t cost = std::min(m, ceilDiv(mUnits, a) * mr) * std::min(n, ceilDiv(nUnits, b) * nr);
    if (best < 0 || cost < best || (tieToRows && cost == best)) {
      best = cost;
      *tm = a;
      *tn = b;
    }
  }
}

}  // namespace

// The product of an empty depth: out = bias (or 0), or out += bias when accumulating.
void gemmEmptyDepth(const GemmProblem& p) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float& o = p.out[i * p.outRowStride + j * p.outColStride];
      const float b = p.bias ? p.bias[j] : 0.0f;
      o = p.accumulate ? o + b : b;
    }
  finishTile(kernels(), p, 0, p.m, 0, p.n);
}

int64_t packedBSize(int64_t k, int64_t n) { return roundUp(n, kernels().nr) * k; }

void packWholeB(const StridedMatrix& b, int64_t k, int64_t n, float* packed) {
  // An empty matrix may still have one huge dim ([2^53 - 1, 0] holds no
  // elements): nothing to write, and no loop over the other dim.
  if (k == 0 || n == 0) return;
  const int nr = kernels().nr;
  const int64_t width = roundUp(n, nr);
  const int64_t kcb = gemmDepthBlock(k);
  parallelFor(ceilDiv(k, kcb), [&](int64_t t) {
    const int64_t pc = t * kcb;
    packB(b, pc, std::min(kcb, k - pc), 0, n, nr, packed + width * pc);
  });
}

namespace {

// Whether the blocks of a prepacked B are fetched ahead into L2 beside an A block of mc x kc (see updateRegion).
bool fetchesAhead(const KernelTable& kt, const GemmProblem& p, int64_t mc, int64_t kc) {
  return p.packedB && roundUp(mc, kt.mr) * kc * 4 <= kGemmFetchAheadMaxABytes;
}

// Columns per block of updateRegion's walk (and of the blocks gemmParallel's threads claim).
int64_t updateBlockColumns(const KernelTable& kt, const GemmProblem& p, int64_t mc, int64_t kc, int64_t ncb) {
  return fetchesAhead(kt, p, mc, kc) ? gemmPrepackedColumnBlock(kc) : ncb;
}

// Whether gemmParallel's shared-A path reads A's rows where they lie instead
// of packing them (directMacroKernel): a prepacked B, a row-major A whose rows
// are about as far apart as they are long, and the whole depth in one update,
// or one or two rows (fewRowsMax) at any depth. A decode step's projections
// (depth 4096) then stream B through fewRowsPacked, 4 slivers at once, instead
// of one sliver per 12-row tile of which one row is real: 1 x 4096 x 6144 took
// 0.73x the time on one thread, 0.80x on two (Zen 4; docs/design/gemm-blocking.md).
// The direct micro-kernel then sums in the packed one's order and rounds its
// epilogue alike (no contraction: -ffp-contract=off), so the bits are the
// same. Packing copies all of A once more and needs a region of its own before
// the product can start; the ViT block's output projection took 2-13 % less
// time without it (Zen 4, AVX-512 and AVX2; docs/design/gemm-blocking.md). Only
// where the table says the direct kernel keeps up with the packed one
// (KernelTable::gemmAInPlace).
bool readsAInPlace(const KernelTable& kt, const GemmProblem& p) {
  return kt.gemmAInPlace && p.packedB && !p.aLayerNorm && p.a.colStride == 1 && p.outColStride == 1 &&
         (p.k <= kGemmKCSingleMax || p.m <= kt.fewRowsMax) && p.a.rowStride <= 2 * p.k;
}

// gemmMacroKernel for rows [ic, ic + mc) of an A read in place (readsAInPlace)
// against the B block bBlock, columns jc + [0, nc), depth [pc, pc + kc): the
// direct micro-kernel with B's packed slivers as its row-major B (kc x nr),
// the bias added to each tile as the packed kernel adds it (last), and the
// next B block requested into L2 a share per tile, as gemmMacroKernel does.
void directMacroKernel(const KernelTable& kt, const GemmProblem& p, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                       int64_t jc, int64_t nc, const float* bBlock, bool accumulate, const float* next,
                       int64_t nextFloats) {
  const int mr = kt.mr, nr = kt.nr;
  const float* bias = pc == 0 ? p.bias : nullptr;
  const bool lastStep = pc + kc == p.k;
  NextBlockShares shares(next, nextFloats, kc);
  if (mc <= kt.fewRowsMax) {
    const float* a = p.a.data + ic * p.a.rowStride + pc;
    const int64_t step = int64_t{kt.fewRowsSlivers} * nr;
    for (int64_t jr = 0; jr < nc; jr += step) {
      const int cols = static_cast<int>(std::min<int64_t>(step, nc - jr));
      for (int64_t s = 0; s < ceilDiv(cols, nr); ++s)
        if (const float* share = shares.take())
          for (int64_t o = 0; o < shares.floatsPerShare(); o += 16) __builtin_prefetch(share + o, 0, 2);
      kt.fewRowsPacked(kc, a, p.a.rowStride, bBlock + jr * kc, nr * kc, p.out + ic * p.outRowStride + jc + jr,
                       p.outRowStride, p.alpha, accumulate, static_cast<int>(mc), cols,
                       bias ? bias + jc + jr : nullptr);
      if (lastStep) finishTile(kt, p, ic, mc, jc + jr, cols);
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int rows = static_cast<int>(std::min<int64_t>(mr, mc - ir));
    const float* a = p.a.data + (ic + ir) * p.a.rowStride + pc;
    for (int64_t jr = 0; jr < nc; jr += nr) {
      const int cols = static_cast<int>(std::min<int64_t>(nr, nc - jr));
      // The direct kernel takes no prefetch argument: the share is requested before the tile.
      if (const float* share = shares.take())
        for (int64_t o = 0; o < shares.floatsPerShare(); o += 16) __builtin_prefetch(share + o, 0, 2);
      float* c = p.out + (ic + ir) * p.outRowStride + jc + jr;
      kt.microKernelDirect(kc, a, p.a.rowStride, bBlock + jr * kc, nr, c, p.outRowStride, p.alpha, accumulate, rows,
                           cols, bias ? bias + jc + jr : nullptr);
      if (lastStep) finishTile(kt, p, ic + ir, rows, jc + jr, cols);
    }
  }
}

// Columns [jc, jc + nc) of one rank-kc update (one block of updateRegion's
// walk); a prepacked B's block at nextJc (< 0: none) is requested into L2
// meanwhile. ap is the packed A block, or null for A read in place (readsAInPlace).
void updateBlock(const KernelTable& kt, const GemmProblem& p, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                 int64_t jc, int64_t nc, int64_t nextJc, int64_t nextNc, const float* ap, float* bScratch,
                 bool accumulate) {
  const float* bBlock = bScratch;
  const float* next = nullptr;
  int64_t nextFloats = 0;
  if (p.packedB) {
    const float* depthBlock = p.packedB + roundUp(p.n, kt.nr) * pc;
    bBlock = depthBlock + jc * kc;
    if (nextJc >= 0 && fetchesAhead(kt, p, mc, kc)) {
      next = depthBlock + nextJc * kc;
      nextFloats = roundUp(nextNc, kt.nr) * kc;
    }
  } else {
    packB(p.b, pc, kc, jc, nc, kt.nr, bScratch);
  }
  if (ap == nullptr) {
    directMacroKernel(kt, p, ic, mc, pc, kc, jc, nc, bBlock, accumulate, next, nextFloats);
    return;
  }
  gemmMacroKernel(kt, p, ic, mc, jc, 0, nc, kc, ap, kc, kt.mr, bBlock, kc, accumulate, pc == 0, next, nextFloats,
                  pc + kc == p.k);
}

// One rank-kc update of rows [ic, ic+mc) x columns [n0, n1) against the packed
// A block ap: packs B in ncb-column blocks (bScratch holds one) and runs the
// macro-kernel on each. A prepacked B next to an A block small enough for L2
// goes in gemmPrepackedColumnBlock blocks instead, each fetching the next into
// L2 while it computes (the blocks of a region lie end to end in the packed
// layout). With a taller A block a B block serves more rows, its cold start
// matters less, and the fetch-ahead measured 2 % slower (ViT block, batch 8).
void updateRegion(const KernelTable& kt, const GemmProblem& p, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                  int64_t ncb, int64_t n0, int64_t n1, const float* ap, float* bScratch, bool accumulate) {
  ncb = updateBlockColumns(kt, p, mc, kc, ncb);
  for (int64_t jc = n0; jc < n1; jc += ncb) {
    const int64_t nc = std::min(ncb, n1 - jc), nextJc = jc + nc;
    updateBlock(kt, p, ic, mc, pc, kc, jc, nc, nextJc < n1 ? nextJc : -1, std::min(ncb, n1 - nextJc), ap, bScratch,
                accumulate);
  }
}

// A run of column slivers [front, back) that its owner takes from the front
// and other threads, once their own run is done, from the back (one atomic
// word, so each piece is taken exactly once), a piece at a time: a whole
// block of `block` slivers; near the end of the run, the remaining slivers
// over the threads; and once fewer slivers than threads are left, one of
// `parts` parts of one sliver's rows (so at 2 threads and 4 parts a run of
// 36 ends 4, 4, 2, 1 sliver and four quarter slivers). The threads then
// finish a region about a part of a sliver apart rather than up to a whole
// block: 128 columns of a prepacked weight are 0.34 ms of one core at
// M = 197, and the ViT block's two projections lost 40-190 us per call at
// their joins; one sliver is still ~85 us (Zen 4; docs/design/gemm-blocking.md).
// Positions count units of a part of a sliver: unit u is part u % parts of
// sliver u / parts, and every piece but those last ones is whole slivers.
class SliverRun {
 public:
  struct Piece {
    int64_t first, count;          // units [first, first + count)
    int64_t nextFirst, nextCount;  // the piece its taker will likely take next (count 0: none), for the fetch-ahead
  };
  void reset(int64_t slivers, int64_t block, int threads, int64_t parts) {
    block_ = std::max<int64_t>(1, block);
    threads_ = std::max(1, threads);
    parts_ = std::max<int64_t>(1, parts);
    fb_.store(static_cast<uint64_t>(slivers * parts_) << 32, std::memory_order_relaxed);
  }
  int64_t parts() const { return parts_; }
  bool take(bool fromFront, Piece* piece) {
    uint64_t v = fb_.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t front = static_cast<int64_t>(v & 0xFFFFFFFFu), back = static_cast<int64_t>(v >> 32);
      if (front >= back) return false;
      const int64_t count = size(back - front), rest = back - front - count, nextCount = rest > 0 ? size(rest) : 0;
      const uint64_t next = fromFront ? (static_cast<uint64_t>(back) << 32 | static_cast<uint64_t>(front + count))
                                      : (static_cast<uint64_t>(back - count) << 32 | static_cast<uint64_t>(front));
      if (fb_.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
        piece->first = fromFront ? front : back - count;
        piece->count = count;
        piece->nextFirst = fromFront ? front + count : back - count - nextCount;
        piece->nextCount = nextCount;
        return true;
      }
    }
  }

 private:
  // While whole pieces are taken, front and back stay on sliver boundaries
  // (every count is a multiple of parts_), so `remaining` is whole slivers too.
  int64_t size(int64_t remaining) const {
    if (remaining < threads_ * parts_) return 1;
    return parts_ * std::min(block_, (remaining / parts_ + threads_ - 1) / threads_);
  }
  alignas(64) std::atomic<uint64_t> fb_{0};  // a line of its own: both threads update it
  int64_t block_ = 1, parts_ = 1;
  int threads_ = 1;
};


// At most two column slivers wide, with B small enough to stay in L2: packing A
// would copy each element of A to use it in at most two tiles, so A is read in
// place, row tile by row tile, and B is re-read from L2 by each row tile
// (512 x 64 x 512: 0.93-0.98x OpenBLAS packed, 1.36-1.39x so, 2 threads).
bool isNarrowDirect(const KernelTable& kt, const GemmProblem& p) {
  return p.n <= 2 * kt.nr && p.k * p.n <= kGemmNarrowMaxBFloats;
}

// Small or one-tile-high products: the micro-kernel reads row-major A and B
// where they lie. Packing copies both operands once to save strided reads
// later; when every operand fits in L1/L2 there is no later to save for (a
// 64^3 product spent a third of its time packing), and when A is at most one
// tile high B is read once either way.
//
// directRegion: the same test for an m x n region of the product, which is
// what one thread of gemmParallel computes.
bool directRegion(const KernelTable& kt, const GemmProblem& p, int64_t m, int64_t n) {
  if (p.packedB || p.aLayerNorm || p.a.colStride != 1 || p.b.colStride != 1 || p.outColStride != 1) return false;
  return m <= kt.mr || isNarrowDirect(kt, p) || static_cast<double>(m) * n * p.k <= kGemmDirectMaxVolume;
}
bool gemmDirectApplies(const KernelTable& kt, const GemmProblem& p) { return directRegion(kt, p, p.m, p.n); }

// One mr x nr tile of the product at (ir, jr), unpacked. Depth goes in
// gemmDepthBlock steps added into out, exactly as the packed path does, so both
// paths give the same bits (whichever a shape, a thread count or a prepacked
// weight selects).
inline void directTile(const KernelTable& kt, const GemmProblem& p, int64_t ir, int rows, int64_t jr, int cols) {
  const int64_t kcb = gemmDepthBlock(p.k);
  for (int64_t pc = 0; pc < p.k; pc += kcb) {
    kt.microKernelDirect(std::min(kcb, p.k - pc), p.a.data + ir * p.a.rowStride + pc, p.a.rowStride,
                         p.b.data + pc * p.b.rowStride + jr, p.b.rowStride, p.out + ir * p.outRowStride + jr,
                         p.outRowStride, p.alpha, p.accumulate || pc > 0, rows, cols,
                         pc == 0 && p.bias ? p.bias + jr : nullptr);
  }
  finishTile(kt, p, ir, rows, jr, cols);
}

// Rows [m0, m1) x columns [n0, n1) of the product, unpacked. Column slivers
// outside, so one B sliver (k x nr) is reused by every row tile while it is
// hot in L1; for a narrow product (isNarrowDirect) row tiles outside instead,
// so A, the large operand, streams through once.
void gemmDirect(const KernelTable& kt, const GemmProblem& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int mr = kt.mr, nr = kt.nr;
  auto tile = [&](int64_t ir, int64_t jr) {
    directTile(kt, p, ir, static_cast<int>(std::min<int64_t>(mr, m1 - ir)), jr,
               static_cast<int>(std::min<int64_t>(nr, n1 - jr)));
  };
  if (isNarrowDirect(kt, p)) {
    for (int64_t ir = m0; ir < m1; ir += mr)
      for (int64_t jr = n0; jr < n1; jr += nr) tile(ir, jr);
  } else {
    for (int64_t jr = n0; jr < n1; jr += nr)
      for (int64_t ir = m0; ir < m1; ir += mr) tile(ir, jr);
  }
}

// Rows [r0, r1) of the product against all of B on the calling thread, with
// its own scratch. Loop nest: ic (A block, packed once, L3) -> pc -> jc (B block, L2) -> ir -> jr.
// A is the costlier operand to pack (a transpose into mr-row slivers when it
// is row-major), so it is packed once per (ic, pc); B blocks (plain copies for
// row-major B, or prepacked) are cheap to repack per A block.
void rowsAgainstAllOfB(const KernelTable& kt, const GemmProblem& p, int64_t r0, int64_t r1) {
  const int64_t kcb = gemmDepthBlock(p.k), ncb = gemmColumnBlock(kcb);
  const int64_t kcMax = std::min(kcb, p.k);
  const int64_t mcMax = std::min(kGemmMC, roundUp(r1 - r0, kt.mr));
  const int64_t ncMax = std::min(ncb, roundUp(p.n, kt.nr));
  float* bp = p.packedB ? nullptr : scratchFloats(ScratchSlot::GemmPackB, static_cast<size_t>(ncMax * kcMax));
  // A read in place needs no copy (readsAInPlace); measured against packing
  // (prepacked B, median of 20 loops): 1576 x 768 x 768 (the output
  // projection of the ViT block at batch 8) 0.95-0.97 at 2 threads and 0.97
  // at one, 1576 x 768 x 2304 0.98-1.00, 197 x 768 x 2304 on one thread 1.00-1.015.
  const bool aInPlace = readsAInPlace(kt, p);
  float* ap = aInPlace ? nullptr : scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(mcMax * kcMax));
  for (int64_t ic = r0; ic < r1; ic += kGemmMC) {
    const int64_t mc = std::min(kGemmMC, r1 - ic);
    for (int64_t pc = 0; pc < p.k; pc += kcb) {
      const int64_t kc = std::min(kcb, p.k - pc);
      if (!aInPlace) packA(p.a, ic, mc, pc, kc, kt.mr, ap, p.aLayerNorm);
      updateRegion(kt, p, ic, mc, pc, kc, ncb, 0, p.n, ap, bp, p.accumulate || pc > 0);
    }
  }
}

// Whether gemmParallel splits the rows (each thread its own, see there) rather
// than the columns (one A block packed together and shared): the constants'
// comments give the measurements behind the choice.
bool ownRowsPerThread(const GemmProblem& p, int64_t slivers, int threads) {
  if (p.packedB) return slivers >= kGemmOwnRowsMinSlivers * threads;
  if (slivers < kGemmSplitRowsMinSlivers * threads) return false;
  const int64_t most = ceilDiv(slivers, threads);  // slivers of the largest share
  const bool balanced = most * threads * 100 <= slivers * (100 + kGemmSplitRowsMaxImbalancePercent);
  return balanced || p.k <= kGemmSplitRowsAnyBalanceMaxK;
}

}  // namespace

void gemmSerial(const GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0) return;
  if (p.k <= 0) {
    gemmEmptyDepth(p);
    return;
  }
  const KernelTable& kt = kernels();
  if (gemmDirectApplies(kt, p)) {
    gemmDirect(kt, p, 0, p.m, 0, p.n);
    return;
  }
  rowsAgainstAllOfB(kt, p, 0, p.m);
}

void gemmParallel(const GemmProblem& p) {
  const int threads = numThreads();
  if (threads <= 1 || !gemmWorthSplitting(p.m, p.n, p.k, sizeof(float)) || p.k <= 0 || p.m <= 0 || p.n <= 0) {
    gemmSerial(p);
    return;
  }
  const KernelTable& kt = kernels();
  const int mr = kt.mr, nr = kt.nr;
  // One region per thread, in whole tiles, split along whichever dims give
  // the most even shares (2048 x 32 splits rows, 1 x 2304 columns). Each
  // region runs unpacked when a product its size would (a region one tile
  // high, or of small volume: 24 x 768 x 768 in two 12-row regions took
  // 132 us against 180 packed, 36 x 64 x 2304 in two column halves 56 against 82).
  int tm = 1, tn = 1;
  chooseGrid(p.m, p.n, mr, nr, threads, true, &tm, &tn);
  if (isNarrowDirect(kt, p) && p.m >= threads * mr) {
    // Split rows: each thread streams its own part of A (split columns, both would read all of it).
    tm = threads;
    tn = 1;
  }
  const int64_t mPer = ceilDiv(ceilDiv(p.m, mr), tm) * mr, nPer = ceilDiv(ceilDiv(p.n, nr), tn) * nr;
  if (directRegion(kt, p, std::min(p.m, mPer), std::min(p.n, nPer))) {
    parallelFor(static_cast<int64_t>(tm) * tn, [&](int64_t r) {
      const int64_t m0 = (r / tn) * mPer, n0 = (r % tn) * nPer;
      if (m0 < p.m && n0 < p.n) gemmDirect(kt, p, m0, std::min(p.m, m0 + mPer), n0, std::min(p.n, n0 + nPer));
    });
    return;
  }
  const int64_t slivers = ceilDiv(p.m, mr);
  if (ownRowsPerThread(p, slivers, threads)) {
    // Each thread takes its own rows, packs their A itself and runs them
    // against all of B. There is nothing to share, so one fork/join serves
    // the whole product: no barrier between packing A and using it, no thread
    // reads slivers the other packed, and no two threads store into one row.
    parallelFor(threads, [&](int64_t t) {
      const int64_t r0 = slivers * t / threads * mr, r1 = std::min(p.m, slivers * (t + 1) / threads * mr);
      if (r0 < r1) rowsAgainstAllOfB(kt, p, r0, r1);
    });
    return;
  }
  const int64_t kcb = gemmDepthBlock(p.k), ncb = gemmColumnBlock(kcb);
  const int64_t kcMax = std::min(kcb, p.k);
  const int64_t mcMax = std::min(kGemmMC, roundUp(p.m, mr));
  // The A block is packed by all threads together and shared (read from L3),
  // unless it is read in place; each thread packs its own B blocks into its
  // own scratch (its own L2).
  const bool aInPlace = readsAInPlace(kt, p);
  float* ap = aInPlace ? nullptr : scratchFloats(ScratchSlot::GemmPackA, static_cast<size_t>(mcMax * kcMax));
  for (int64_t ic = 0; ic < p.m; ic += kGemmMC) {
    const int64_t mc = std::min(kGemmMC, p.m - ic);
    int tm = 1, tn = 1;
    chooseGrid(mc, p.n, mr, nr, threads, false, &tm, &tn);
    const int64_t mPer = ceilDiv(ceilDiv(mc, mr), tm) * mr;  // rows per region (whole slivers)
    const int64_t nPer = ceilDiv(ceilDiv(p.n, nr), tn) * nr;  // columns per region
    const int64_t mcSlivers = ceilDiv(mc, mr);
    for (int64_t pc = 0; pc < p.k; pc += kcb) {
      const int64_t kc = std::min(kcb, p.k - pc);
      if (!aInPlace) {
        const int64_t packTasks = std::min<int64_t>(mcSlivers, threads * 4);
        const int64_t perTask = ceilDiv(mcSlivers, packTasks);
        parallelFor(packTasks, [&](int64_t t) {
          const int64_t s0 = t * perTask, s1 = std::min(mcSlivers, s0 + perTask);
          if (s0 >= s1) return;
          const int64_t r0 = s0 * mr, r1 = std::min(mc, s1 * mr);
          packA(p.a, ic + r0, r1 - r0, pc, kc, mr, ap + r0 * kc, p.aLayerNorm);
        });
      }
      // Each thread walks the column blocks of its own region from the front,
      // then takes what is left of the other regions' runs from the back, so a
      // thread the host slows down no longer holds the other at the join for
      // the rest of its share (the ViT block, batch 1, Zen 4, with a process busy
      // 25 % of the time on one core: 0.87-0.89x the time; on a quiet host 1.004x).
      // Whole blocks but at the ends of the runs (SliverRun), so A is read as
      // often as before (finer column regions throughout cost 4 % on Zen 4:
      // docs/design/gemm-blocking.md).
      const int regions = tm * tn;
      auto bounds = [&](int64_t r, int64_t* m0, int64_t* m1, int64_t* n0, int64_t* n1) {
        *m0 = (r / tn) * mPer, *m1 = std::min(mc, *m0 + mPer);
        *n0 = (r % tn) * nPer, *n1 = std::min(p.n, *n0 + nPer);
        return *m0 < *m1 && *n0 < *n1;
      };
      std::vector<SliverRun> runs(static_cast<size_t>(regions));
      for (int r = 0; r < regions; ++r) {
        int64_t m0, m1, n0, n1;
        if (bounds(r, &m0, &m1, &n0, &n1))
          runs[static_cast<size_t>(r)].reset(ceilDiv(n1 - n0, nr), updateBlockColumns(kt, p, m1 - m0, kc, ncb) / nr,
                                             threads, std::min<int64_t>(kGemmSliverRowParts, ceilDiv(m1 - m0, mr)));
      }
      parallelFor(regions, [&](int64_t r) {
        float* bp = p.packedB ? nullptr
                              : scratchFloats(ScratchSlot::GemmPackB,
                                              static_cast<size_t>(std::min(ncb, roundUp(nPer, nr)) * kcMax));
        for (int64_t o = 0; o < regions; ++o) {
          const int64_t owner = (r + o) % regions;
          int64_t m0, m1, n0, n1;
          if (!bounds(owner, &m0, &m1, &n0, &n1)) continue;
          SliverRun& run = runs[static_cast<size_t>(owner)];
          const int64_t parts = run.parts();
          const int64_t rowSlivers = ceilDiv(m1 - m0, mr);  // parts <= rowSlivers: no part is empty
          SliverRun::Piece piece{};
          while (run.take(o == 0, &piece)) {
            const int64_t jc = n0 + piece.first / parts * nr;
            const int64_t nextJc = piece.nextCount > 0 ? n0 + piece.nextFirst / parts * nr : -1;
            const int64_t nextNc =
                nextJc >= 0 ? std::min(std::max<int64_t>(1, piece.nextCount / parts) * nr, n1 - nextJc) : 0;
            int64_t r0 = 0, r1 = m1 - m0, slivers = piece.count / parts;
            if (piece.count % parts != 0) {  // one part of one sliver's rows, in whole mr-row slivers of A
              const int64_t part = piece.first % parts;
              r0 = part * rowSlivers / parts * mr;
              r1 = std::min(m1 - m0, (part + 1) * rowSlivers / parts * mr);
              slivers = 1;
            }
            updateBlock(kt, p, ic + m0 + r0, r1 - r0, pc, kc, jc, std::min(slivers * nr, n1 - jc), nextJc, nextNc,
                        aInPlace ? nullptr : ap + (m0 + r0) * kc, bp, p.accumulate || pc > 0);
          }
        }
      });
    }
  }
}

}  // namespace mhsa
