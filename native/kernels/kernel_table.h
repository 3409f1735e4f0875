// The primitives that differ per instruction set. Everything else (blocking,
// packing, threading, masking) is ISA-independent and calls through this table.
#pragma once

#include <cstdint>

#include "activation.h"

namespace mhsa {

// Attention's fused exp (KernelTable::scoresExp2Tile) gives each score
// 2^(score - shift - kScoresExp2ShiftMargin), where a query's shift is not
// its running max, so that it need not be rescaled at every tile: the first
// tile of a query's scores sets it to their max, and a later tile raises it
// (rescaling what was summed so far, attention.cc raiseShift) only when one
// of its scores passes it by more than margin + headroom, 56 (base 2, ~39 in
// natural-log units).
//  - Headroom 8: the terms are at most 2^8, so the weighted sum of V's rows
//    may reach 256 times a softmax's (an output overflows only when
//    |v| * keys * 256 passes FLT_MAX): 8 bits of the float range.
//  - Margin 48: the largest term may be as small as 2^-48, and the exp
//    flushes terms below 2^-126 to 0, so a term is lost only where its
//    weight in the softmax is below 2^-78 (float's epsilon is 2^-23). The
//    margin is carried exactly by the polynomial's coefficients (scaled by
//    2^-48), not subtracted from the argument: an argument 48 below zero
//    would have rounded at 2^-19, a relative error of ~1e-6 in every weight.
// With no margin, rows as peaked as a trained model's rose so often that the
// kernel ran 1.06-1.33x slower.
constexpr float kScoresExp2Headroom = 8.0f;
constexpr int kScoresExp2ShiftMargin = 48;
// The terms' scale, between 2^-48 and 2^8 for a query's largest where a
// softmax's is 1, moves P·V's sums by the same factor. So the fused exp is
// used only where V's largest |v| keeps them clear of both ends of the float
// range as the column passes keep them: at least 2^-52 (the sums then stay
// above 2^-100, 26 bits over the smallest normal float) and at most
// 2^119 / keys (below 2^127 with every term at 2^8). Other V, extreme as it
// is (all zeros included), takes the column passes.
constexpr float kScoresExp2MinV = 0x1p-52f;
constexpr float kScoresExp2MaxVTimesKeys = 0x1p119f;

struct KernelTable {
  const char* name;

  // GEMM register tile: the micro-kernel computes an mr x nr block of C from
  // an A sliver stored k-major (ap[k * aStep + i], aStep = mr when packed) and
  // a B sliver stored k-major (bp[k * bStride + j], bStride = nr when packed;
  // attention passes V's rows in place), both holding full mr / nr values per
  // k (rows beyond `rows` may hold anything; they are not stored):
  //   c[i * ldc + j] = alpha * sum_k ap[k][i] * bp[k][j]  (+ c[...] if accumulate)  (+ bias[j] if bias)
  // for i < rows, j < cols (the valid part of an edge tile), rounded as those
  // separate steps in that order (no fused multiply-add in the epilogue, so
  // every path that adds a bias gives the same bits).
  // prefetch, when not null, names ceil(kc / 8) cache lines (prefetch + 16 t)
  // to request into L2 while the tile computes, one per 8 k steps: the
  // macro-kernel spreads the fetch of the next B block over the current
  // block's tiles (gemmMacroKernel). Never dereferenced; a kernel may ignore it.
  int mr;
  int nr;
  void (*microKernel)(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                      int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias,
                      const float* prefetch);

  // The same tile read straight from row-major operands, for products too
  // small for packing to pay (see gemmDirect): A as a[i * lda + k], B as
  // b[k * ldb + j]; only rows <= mr rows of A and cols <= nr columns of B are
  // read, so an edge tile never touches memory past the operands. The bias, as
  // microKernel's: added last, in the tile's own epilogue (a pass over the
  // stored tile cost ~0.5 % of the ViT block on Zen 4: docs/design/gemm-blocking.md).
  void (*microKernelDirect)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                            int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias);

  // One or two rows of a row-major A (rows <= fewRowsMax) against up to
  // fewRowsSlivers packed B slivers side by side (kc x nr each, sliverStride
  // floats apart; cols <= fewRowsSlivers * nr): the same sums and epilogue as
  // microKernelDirect on each sliver, with more independent accumulators. Null
  // where the table has none (gemm.cc, directMacroKernel).
  void (*fewRowsPacked)(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t sliverStride, float* c,
                        int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias);
  int fewRowsMax;
  int fewRowsSlivers;

  // Largest element of x[0..n), -Infinity for n == 0. NaN-propagation is not guaranteed.
  float (*rowMax)(const float* x, int64_t n);

  // y[i] = exp(x[i] - shift) for i < n; returns the sum of the y[i]. shift
  // must be at least every x[i] (a row's max: the exp then needs no clamp
  // above); y may equal x.
  float (*expSubSum)(const float* x, float* y, int64_t n, float shift);

  // y[i] *= s for i < n.
  void (*scaleInPlace)(float* y, int64_t n, float s);

  // y[i] = x[i] * s for i < n, x and y distinct, with stores that bypass the
  // caches where the ISA has them (the output of a large softmax).
  void (*scaleStream)(const float* x, float* y, int64_t n, float s);

  // Column-wise softmax pieces for a rows x cols block s (row stride ld), one
  // column per query: vectorized across columns.
  //   colMax:        m[i] = max(m[i], s[j][i]) over rows j
  //   exp2SubColumns: s[j][i] = 2^(s[j][i] - shift[i]); sum[i] += s[j][i]
  //                   (base 2: attention folds log2(e) into its logits' scale),
  //                   0 where the argument is below -126 or -inf
  //   scaleColumns:  s[j][i] *= f[i]
  void (*colMax)(const float* s, int64_t rows, int64_t ld, int64_t cols, float* m);
  void (*exp2SubColumns)(float* s, int64_t rows, int64_t ld, int64_t cols, const float* shift, float* sum);
  void (*scaleColumns)(float* s, int64_t rows, int64_t ld, int64_t cols, const float* f);

  // Attention's S^T tile with the column softmax's exp in its epilogue
  // (attention.cc, scoresExp2Block), or null where the ISA has none (the
  // column passes above then do it). The tile, for i < rows <= mr, j < cols <= nr,
  //   t[i][j] = alpha * sum_k a[i * aRowStep + k * aDepthStep] * b[k * nr + j]
  // (b a packed sliver; a K sliver when aRowStep == 1, else K's rows in
  // place). With setShift, shift[j] = max_i t[i][j] first. Then, if every
  // t[i][j] - shift[j] <= kScoresExp2ShiftMargin + kScoresExp2Headroom:
  // c[i * ldc + j] = 2^(t[i][j] - shift[j] - kScoresExp2ShiftMargin) (0 below
  // 2^-126), sum[j] += (those added in row order), returns true. Otherwise (a column
  // rose further above its shift, or a NaN argument): c = t, shift and sum
  // untouched, returns false.
  // A cap other than 0 applies the softcap first: t = cap * tanh(t / cap).
  bool (*scoresExp2Tile)(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b, float* c,
                         int64_t ldc, float alpha, float cap, int rows, int cols, float* shift, bool setShift,
                         float* sum);
  // The largest |x[i * ld + j]| over i < rows, j < cols (NaN ignored, 0 when
  // empty): attention's check that V suits scoresExp2Tile's terms (see
  // kScoresExp2MinV). Null exactly where scoresExp2Tile is.
  float (*absMaxRows)(const float* x, int64_t rows, int64_t cols, int64_t ld);

  // x[i] = cap * tanh(x[i] / cap) for i < n, cap > 0: attention's softcap
  // (Gemma 2), to a few ulp of the scores' scale; NaN stays NaN, ±inf gives ±cap.
  void (*softcap)(float* x, int64_t n, float cap);

  // x[i] = a(x[i]) for i < n (activation.h): a GEMM's epilogue, one row of a
  // finished tile at a time. The erf GELU within 1e-6 of float64's
  // (absolute), the others within a few float32 roundings; NaN stays NaN.
  void (*activate)(float* x, int64_t n, Activation a);

  // Attention's decode path, for `queries` query rows (q[u * d ...]) that
  // share one K and V (the query heads of a group): each row of K and of V
  // is read once for all of them, and the row kDecodePrefetchRows ahead is
  // requested as it goes.
  //   decodeScores:     s[u * n + j] = scale * (q_u · k[j * kStride ...]) for j < n
  //   decodeAccumulate: acc[u * accStride + e] += p[u * n + j] * v[j * vStride + e]
  //                     for j < n, e < dv (zero weights skipped)
  void (*decodeScores)(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                       float scale, float* s);
  void (*decodeAccumulate)(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                           float* acc, int64_t accStride);
  // The same over bf16 K and V rows (a bf16 KV cache), each element widened
  // exactly as it is loaded: the sums are those of the float kernels over the
  // widened rows.
  void (*decodeScoresBf16)(const float* q, int64_t queries, int64_t d, const uint16_t* k, int64_t kStride, int64_t n,
                           float scale, float* s);
  void (*decodeAccumulateBf16)(const float* p, int64_t queries, int64_t n, const uint16_t* v, int64_t vStride,
                               int64_t dv, float* acc, int64_t accStride);
  // The same over int8 K and V rows (an int8 KV cache), each element
  // converted exactly: the rows' scales are applied by the caller (to the
  // scores, and to the weights before decodeAccumulateInt8).
  void (*decodeScoresInt8)(const float* q, int64_t queries, int64_t d, const int8_t* k, int64_t kStride, int64_t n,
                           float scale, float* s);
  void (*decodeAccumulateInt8)(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                               int64_t dv, float* acc, int64_t accStride);

  // The bf16 GEMM's widening path for 1-2 rows of A (gemm_bf16.cc,
  // gemmBf16RowsWidened): acc[i * 32 + j] += sum over k < kc of
  // a[i * aStride + k] * B(k, j) for i < rows, j < 32, B one packed bf16
  // sliver (gemm_bf16.h) whose pair rows widen in registers; a[i * aStride + kc]
  // must be readable (0) when kc is odd.
  void (*bf16SliverRows)(const float* a, int64_t aStride, int rows, const uint16_t* sliver, int64_t kc, float* acc);

  // One LayerNorm row (PyTorch's: biased variance, eps inside the root):
  // y = (x - mean) / sqrt(var + eps) * weight + bias, weight and bias may be
  // null, y may equal x. Returns false without writing y when its float
  // moments overflow; the caller then computes the row in float64.
  bool (*layerNormRow)(const float* x, float* y, int64_t n, const float* weight, const float* bias, float eps);

  // Whether attention's tiles may read K and V in place (attention.cc,
  // readsKVInPlace): a measured choice per table. With AVX-512 it saved the
  // packing (N197 0.97); the AVX2 and portable tables measured 1.01-1.07
  // slower, so they keep packing.
  bool attentionKVInPlace;

  // Whether gemmParallel's shared-A path may read a row-major A in place
  // against a prepacked B (gemm.cc, readsAInPlace): a measured choice per
  // table. AVX-512 and AVX2 took 0.97-1.00 the time (bits unchanged); the
  // portable direct kernel measured 1.23-1.27x slower than packing.
  bool gemmAInPlace;
};

const KernelTable& kernels();

// Per-ISA tables, each defined in its own translation unit compiled with that
// ISA's flags (only the x86 ones exist on x86 builds).
const KernelTable& portableKernels();
const KernelTable& avx2Kernels();
const KernelTable& avx512Kernels();

}  // namespace mhsa
