#include "attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <limits>
#include <vector>

#include "../runtime/thread_pool.h"
#include "bf16.h"
#include "exp_poly.h"
#include "gemm_int8.h"
#include "gemm.h"
#include "kernel_math.h"
#include "kernel_table.h"
#include "scratch.h"

// The tiled path computes, per tile of queries and block of keys, the TRANSPOSED scores
//   S^T (keys x queries) = K · Q^T
// with K packed once per (batch, kv head) as the GEMM's A operand and the
// query tile packed as B. Transposed, the softmax over keys runs down columns,
// vectorized across queries, and P = (S^T)^T is then read by the A-packing of
//   O = P · V
// with unit stride (the fast path), against V packed once per (batch, kv head).
// No score row is ever gathered element by element, and K and V are packed
// once for all the query tiles and query heads that use them.

namespace mhsa {
namespace {

// The tiled path works in base 2: log2(e) is folded into the scale of S^T
// (and into an additive mask as it is added), so the column softmax computes
// 2^(s - max), the same value as exp of the unscaled logits, without a
// multiply and a two-part ln2 reduction per score (kt.exp2SubColumns; kLog2e
// from exp_poly.h).

// V is packed in kGemmKC-key blocks and a key block must start on one.
static_assert(kAttentionKeyBlock % kGemmKC == 0, "key blocks must align with V's packed blocks");
static_assert(kAttentionKeyBlock % 12 == 0 && kAttentionKeyBlock % 6 == 0 && kAttentionKeyBlock % 4 == 0,
              "key blocks must start on a K sliver for every micro-kernel's MR");

// An additive mask value in base 2. A finite value whose product with log2(e)
// overflows (torch.finfo(float32).min, a common "masked" value) stays finite,
// so a row masked entirely with it still gets the uniform weights PyTorch
// gives it; only -inf means "no weight at all". (Finite values beyond
// ±2.36e38 all become ±FLT_MAX, so a row masked only with two such values no
// longer tells them apart; PyTorch's masks use one value.)
inline float maskToBase2(float m) {
  const float x = m * kLog2e;
  return std::isinf(x) && std::isfinite(m) ? std::copysign(std::numeric_limits<float>::max(), m) : x;
}

// Keys [lo, hi) that query row i sees under the window and the causal rule
// (none when hi <= lo). Both ends rise with i.
struct KeyRange {
  int64_t lo, hi;
};
// The keys batch entry b has: keyLengths[b], or seqKV. Only those are packed or read.
inline int64_t keysOf(const AttentionProblem& p, int64_t b) { return p.keyLengths ? p.keyLengths[b] : p.seqKV; }

inline KeyRange visibleRange(const AttentionProblem& p, int64_t b, int64_t i) {
  const int64_t keys = keysOf(p, b);
  const int64_t pos = i + (keys - p.seqQ);
  const int64_t lo = p.windowLeft < 0 ? 0 : std::clamp<int64_t>(pos - p.windowLeft, 0, keys);
  int64_t hi = keys;
  if (p.causal) hi = std::min(hi, pos + 1);
  if (p.windowRight >= 0) hi = std::min(hi, pos + p.windowRight + 1);
  return {lo, std::max(hi, lo)};
}

// A sink's logit in the units of a row's running sum: that sum holds
// 2^(score - shift) (times 2^-margin when the tile's exps are fused), so the
// sink adds 2^(sink * log2(e) - shift) likewise. In double: a sink far above
// the scores gives an infinite denominator, that is, zero weight to every key.
inline double sinkTerm(float sink, float shift, bool fusedScale) {
  return std::exp2(static_cast<double>(sink) * kLog2e - shift - (fusedScale ? kScoresExp2ShiftMargin : 0));
}

// K and V of one (batch, kv head) as the tile's products read them: packed,
// or, when inPlace, their own rows (K's row stride kStride, V's vStride).
struct PackedKV {
  const float* k;  // packed: A-format slivers of K (keys x headDim), one block per kGemmKC of headDim
  const float* v;  // packed: B-format slivers of V (keys x headDimV), one block per kGemmKC of keys
  bool inPlace = false;
  int64_t kStride = 0, vStride = 0;
  bool fusedExp = false;  // whether its tiles apply the exp in the Q·Kᵀ kernel (fusesScoresExp)
};

// Whether queryTile computes S^T with the exp in the micro-kernel's epilogue
// (kt.scoresExp2Tile, scoresExp2Block). Masks and key padding change scores
// after the product, so they keep the column passes; so does a head dim
// deeper than one rank-k update. A softcap is applied in the tile, before
// its max and exp. Under a window only the keys that a whole query tile sees
// are fused (queryTile).
bool fusesScoresExp(const AttentionProblem& p, const KernelTable& kt) {
  return kt.scoresExp2Tile && !p.mask && !p.keyPadding && p.headDim > 0 && p.headDim <= kGemmKC;
}

// fusesScoresExp for V whose largest |v| is vMax (kScoresExp2MinV).
bool vSuitsFusedExp(const AttentionProblem& p, float vMax) {
  return vMax >= kScoresExp2MinV && vMax <= kScoresExp2MaxVTimesKeys / static_cast<float>(p.seqKV);
}

// Whether the tiles read K and V where they lie instead of packed copies.
// Packing copies each row of K and V once per (batch, kv head) so that every
// query tile reads it contiguously; with few query tiles per head (3 at
// N = 197) there is little to amortize, and the copies measured 3-5 % of ViT
// attention. Read in place, K's rows are the broadcast operand of
// S^T = K · Q^T (the direct micro-kernel reads A by rows) and V's rows the
// vector operand of P · V (bStride = V's row stride). That needs unit-stride
// rows, V in whole column slivers (the micro-kernels read nr columns of every
// row) and all keys in one block (beyond, many query tiles re-read K and V
// and the contiguous copies win). The rows of one head must also lie close
// together: spread over more than kAttentionInPlaceMaxSpan (the 9 KiB rows of
// a fused [tokens, 3 * 768] projection, 1.8 MB per head at N = 197), reading
// them in place measured 1-8 % slower than packing. And only where the ISA's
// table says it pays (KernelTable::attentionKVInPlace).
bool readsKVInPlace(const AttentionProblem& p, const KernelTable& kt) {
  if (!kt.attentionKVInPlace || p.kvBf16 || p.kvInt8 || p.k.dimStride != 1 || p.v.dimStride != 1 || p.headDimV % kt.nr != 0 ||
      p.seqKV > kAttentionKeyBlock)
    return false;
  auto spanBytes = [&](const Strided4& x, int64_t width) { return ((p.seqKV - 1) * x.seqStride + width) * 4; };
  return spanBytes(p.k, p.headDim) <= kAttentionInPlaceMaxSpan &&
         spanBytes(p.v, p.headDimV) <= kAttentionInPlaceMaxSpan;
}

// K and V of (batch b, kv head g) in place. vMax caches V's largest |v| for
// the tiles of that head (negative until one of them has measured it: a
// scan per tile measured 2 % of N197; two threads may both measure it, and
// both store the same value).
PackedKV kvInPlace(const AttentionProblem& p, const KernelTable& kt, int64_t b, int64_t g, std::atomic<float>& vMax) {
  PackedKV kv{p.k.data + b * p.k.batchStride + g * p.k.headStride, p.v.data + b * p.v.batchStride + g * p.v.headStride};
  kv.inPlace = true;
  kv.kStride = p.k.seqStride;
  kv.vStride = p.v.seqStride;
  if (fusesScoresExp(p, kt)) {
    float m = vMax.load(std::memory_order_relaxed);
    if (m < 0.0f) {
      m = kt.absMaxRows(kv.v, keysOf(p, b), p.headDimV, kv.vStride);
      vMax.store(m, std::memory_order_relaxed);
    }
    kv.fusedExp = vSuitsFusedExp(p, m);
  }
  return kv;
}

// Rows [0, keys) of a bf16 K or V (width elements each, strides of x) widened
// into a dense float matrix in scratch, for packing. The packing reads each
// float once more from L1/L2; the tiled path is compute-bound, and this keeps
// one packing routine for both dtypes.
StridedMatrix widenRows(const uint16_t* rows, const Strided4& x, int64_t keys, int64_t width) {
  float* w = scratchFloats(ScratchSlot::AttentionWidenKV, static_cast<size_t>(std::max<int64_t>(keys * width, 1)));
  for (int64_t j = 0; j < keys; ++j)
    for (int64_t e = 0; e < width; ++e) w[j * width + e] = bf16ToFloat(rows[j * x.seqStride + e * x.dimStride]);
  return StridedMatrix{w, width, 1};
}

// The same for int8 rows: each value times its row's scale.
StridedMatrix widenRows(const int8_t* rows, const Strided4& x, const float* scales, int64_t scaleStride, int64_t keys,
                        int64_t width) {
  float* w = scratchFloats(ScratchSlot::AttentionWidenKV, static_cast<size_t>(std::max<int64_t>(keys * width, 1)));
  for (int64_t j = 0; j < keys; ++j) {
    const float s = scales[j * scaleStride];
    for (int64_t e = 0; e < width; ++e) w[j * width + e] = static_cast<float>(rows[j * x.seqStride + e * x.dimStride]) * s;
  }
  return StridedMatrix{w, width, 1};
}

// K or V of (batch b, kv head g) as floats: in place, or widened from bf16 or int8.
StridedMatrix kvRows(const AttentionProblem& p, bool values, int64_t b, int64_t g, int64_t keys) {
  const Strided4& x = values ? p.v : p.k;
  const int64_t width = values ? p.headDimV : p.headDim, at = b * x.batchStride + g * x.headStride;
  if (p.kvBf16) return widenRows((values ? p.vBf16 : p.kBf16) + at, x, keys, width);
  if (p.kvInt8) {
    const RowScales& s = values ? p.vScales : p.kScales;
    return widenRows((values ? p.vInt8 : p.kInt8) + at, x, s.data + b * s.batchStride + g * s.headStride, s.seqStride,
                     keys, width);
  }
  return StridedMatrix{x.data + at, x.seqStride, x.dimStride};
}

PackedKV packKV(const AttentionProblem& p, const KernelTable& kt, int64_t b, int64_t g) {
  const int64_t keys = keysOf(p, b);
  const int64_t keysPadded = roundUp(keys, kt.mr);
  const int64_t dvPadded = roundUp(p.headDimV, kt.nr);
  float* kbuf = scratchFloats(ScratchSlot::AttentionPackK, static_cast<size_t>(keysPadded * p.headDim));
  float* vbuf = scratchFloats(ScratchSlot::AttentionPackV, static_cast<size_t>(dvPadded * keys));
  const StridedMatrix kA = kvRows(p, false, b, g, keys);
  for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC)
    packA(kA, 0, keys, pc, std::min(kGemmKC, p.headDim - pc), kt.mr, kbuf + keysPadded * pc);
  // Widened, K's rows are packed by now: V's reuse their scratch.
  const StridedMatrix vB = kvRows(p, true, b, g, keys);
  for (int64_t pc = 0; pc < keys; pc += kGemmKC)
    packB(vB, pc, std::min(kGemmKC, keys - pc), 0, p.headDimV, kt.nr, vbuf + dvPadded * pc);
  PackedKV kv{kbuf, vbuf};
  kv.fusedExp = fusesScoresExp(p, kt) && vSuitsFusedExp(p, kt.absMaxRows(vbuf, 1, dvPadded * keys, 0));
  return kv;
}

// Requests rows [j0, j1) of K and V of (batch b, kv head g) into L2. Packing
// them is a transpose (K) and a copy (V) of rows strided across the heads, and
// measured in an attention profile at ~3x the time the same packing takes on
// cached rows; fetched while the previous head computes, they are cached.
void prefetchKVShare(const AttentionProblem& p, int64_t b, int64_t g, int64_t j0, int64_t j1) {
  auto rows = [&](const auto* data, const Strided4& x, int64_t width) {
    if (x.dimStride != 1) return;  // a transposed layout: its rows are not contiguous
    const auto* base = data + b * x.batchStride + g * x.headStride;
    const int64_t line = 64 / static_cast<int64_t>(sizeof(*data));
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t o = 0; o < width; o += line) __builtin_prefetch(base + j * x.seqStride + o, 0, 2);
  };
  if (p.kvBf16) {
    rows(p.kBf16, p.k, p.headDim);
    rows(p.vBf16, p.v, p.headDimV);
  } else if (p.kvInt8) {
    rows(p.kInt8, p.k, p.headDim);
    rows(p.vInt8, p.v, p.headDimV);
  } else {
    rows(p.k.data, p.k, p.headDim);
    rows(p.v.data, p.v, p.headDimV);
  }
}

void zeroRows(float* out, int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * rowStride + j * colStride] = 0.0f;
}

// Where queryTile's online softmax stands for its R queries: shift[r], the
// exponent subtracted from query r's scores so far (kNegInf before any), and
// sum[r], the sum of their 2^(score - shift). acc (row stride accStride,
// dv wide) holds the earlier key blocks' P · V once `started` (wholly
// padded blocks are skipped, so the first block need not start it).
struct SoftmaxRun {
  float* shift;
  float* sum;
  float* acc;
  int64_t accStride, dv;
  bool started;
};

// The column passes' exp for scores whose terms join the fused kernel's:
// s[j][c] = 2^(s[j][c] - shift[c]) times the kernel's exact
// 2^-kScoresExp2ShiftMargin, and each column's sum of them (scaled alike)
// added to sum[c], for cols <= kAttentionQueryTile.
void exp2SubColumnsFusedScale(const KernelTable& kt, float* s, int64_t rows, int64_t ld, int64_t cols,
                              const float* shift, float* sum) {
  float drop[kAttentionQueryTile], colSum[kAttentionQueryTile];
  const float dropFactor = std::ldexp(1.0f, -kScoresExp2ShiftMargin);
  std::fill(drop, drop + cols, dropFactor);
  std::fill(colSum, colSum + cols, 0.0f);
  kt.exp2SubColumns(s, rows, ld, cols, shift, colSum);
  kt.scaleColumns(s, rows, ld, cols, drop);
  for (int64_t c = 0; c < cols; ++c) sum[c] += colSum[c] * dropFactor;
}

// A tile that scoresExp2Tile left raw: some score passed its column's shift
// by more than kScoresExp2ShiftMargin + kScoresExp2Headroom (or the column
// saw only -inf or NaN so far). Such a column's shift rises to its largest
// score, what was computed under the old shift is scaled by 2^(old - new)
// (this block's rows above the tile, the running sum, and the accumulator of
// earlier blocks), and the tile gets the kernel's exps by the column passes'
// 2^(s - shift) and then the exact 2^-margin (terms the kernel would flush
// below 2^-126 stay as denormals here: weights below 2^-78 of the row's).
void raiseShift(const KernelTable& kt, float* block, int64_t ld, int64_t row, int rows, int64_t col, int cols,
                SoftmaxRun& run) {
  float top[32], factor[32], expShift[32];
  float* tile = block + row * ld + col;
  std::copy(run.shift + col, run.shift + col + cols, top);
  kt.colMax(tile, rows, ld, cols, top);
  for (int c = 0; c < cols; ++c) {
    const float old = run.shift[col + c], m = top[c];
    factor[c] = old == kNegInf ? 0.0f : (m == old ? 1.0f : std::exp2(old - m));
    run.shift[col + c] = m;
    run.sum[col + c] *= factor[c];
    expShift[c] = m == kNegInf ? 0.0f : m;  // an all -inf column: exp gives 0 and the sum stays 0
  }
  kt.scaleColumns(block + col, row, ld, cols, factor);
  if (run.started)
    for (int c = 0; c < cols; ++c)
      if (factor[c] != 1.0f) kt.scaleInPlace(run.acc + (col + c) * run.accStride, run.dv, factor[c]);
  exp2SubColumnsFusedScale(kt, tile, rows, ld, cols, expShift, run.sum + col);
}

// S^T = alpha · K · Q^T for keys [k0, k0 + kb) into s (row stride R), each
// score leaving the micro-kernel as 2^(score - shift) with its column sums
// added (kt.scoresExp2Tile). A column's shift is its first tile's max and
// rises only through raiseShift (see kScoresExp2ShiftMargin), so the scores
// need neither a pass for their maximum nor one for their exp.
void scoresExp2Block(const KernelTable& kt, const PackedKV& kv, int64_t headDim, int64_t k0, int64_t kb,
                     const float* qbuf, int64_t R, float alpha, float cap, float* s, SoftmaxRun& run, bool first) {
  for (int64_t ir = 0; ir < kb; ir += kt.mr) {
    const int rows = static_cast<int>(std::min<int64_t>(kt.mr, kb - ir));
    // K's rows in place, or its packed sliver (one depth block: headDim <= kGemmKC).
    const float* a = kv.inPlace ? kv.k + (k0 + ir) * kv.kStride : kv.k + (k0 + ir) * headDim;
    const int64_t rowStep = kv.inPlace ? kv.kStride : 1, depthStep = kv.inPlace ? 1 : kt.mr;
    for (int64_t jr = 0; jr < R; jr += kt.nr) {
      const int cols = static_cast<int>(std::min<int64_t>(kt.nr, R - jr));
      if (!kt.scoresExp2Tile(headDim, a, rowStep, depthStep, qbuf + jr * headDim, s + ir * R + jr, R, alpha, cap, rows,
                             cols, run.shift + jr, first && ir == 0, run.sum + jr))
        raiseShift(kt, s, R, ir, rows, jr, cols, run);
    }
  }
}

// Queries [i0, i1) of head h (kv head g) in batch b, against packed K and V.
// Keys are taken in blocks of kAttentionKeyBlock with an online softmax: a
// running max and sum per query, the output accumulator rescaled only when a
// block raises a query's max. So the scores buffer (block x R) stays in L2
// whatever seqKV is. With returnWeights the whole key range is one block, so
// the final normalization is known before the weights are written.
// Only the keys some query of the tile sees are computed: from the first
// query's window start (down to a K sliver) to the last query's end.
void queryTile(const AttentionProblem& p, const KernelTable& kt, const PackedKV& kv, int64_t b, int64_t h,
               int64_t i0, int64_t i1) {
  const int64_t R = i1 - i0;
  const KeyRange firstRange = visibleRange(p, b, i0), lastRange = visibleRange(p, b, i1 - 1);
  const int64_t kStart = firstRange.lo / kt.mr * kt.mr;
  const int64_t kEnd = lastRange.hi;
  const int64_t keys = std::max<int64_t>(0, kEnd - kStart);
  float* oBase = p.out + b * p.outView.batchStride + h * p.outView.headStride + i0 * p.outView.seqStride;
  float* wRows = p.weights ? p.weights + ((b * p.heads + h) * p.seqQ + i0) * p.seqKV : nullptr;
  if (kEnd <= firstRange.lo) {
    zeroRows(oBase, R, p.headDimV, p.outView.seqStride, p.outView.dimStride);
    if (wRows) std::fill(wRows, wRows + R * p.seqKV, 0.0f);
    return;
  }
  const int64_t dv = p.headDimV;
  const int64_t block = wRows ? keys : kAttentionKeyBlock;
  // Keys every query of the tile sees, [fusedLo, fusedHi), may take the fused
  // exp; the partial ones at either end get the column passes and the window
  // mask. A partial start is a block of its own (unless the weights need one
  // block), so the fused keys begin a block.
  const int64_t fusedLo = roundUp(lastRange.lo, kt.mr);
  const int64_t fusedHi = firstRange.hi;
  const bool windowed = p.causal || p.windowLeft >= 0 || p.windowRight >= 0;
  auto blockEnd = [&](int64_t k0) {
    const int64_t e = std::min(k0 + block, kEnd);
    return !wRows && kv.fusedExp && k0 < fusedLo && fusedLo < e ? fusedLo : e;
  };
  const int64_t rPadded = roundUp(R, kt.nr);
  const int64_t keysPadded = roundUp(keysOf(p, b), kt.mr);  // as packKV packed them
  const int64_t dvPadded = roundUp(dv, kt.nr);

  // The query tile as the B operand of S^T = K · Q^T, packed once per tile.
  float* qbuf = scratchFloats(ScratchSlot::AttentionPackQ, static_cast<size_t>(rPadded * std::max<int64_t>(p.headDim, 1)));
  const StridedMatrix qB{p.q.data + b * p.q.batchStride + h * p.q.headStride + i0 * p.q.seqStride, p.q.dimStride,
                         p.q.seqStride};
  for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC)
    packB(qB, pc, std::min(kGemmKC, p.headDim - pc), 0, R, kt.nr, qbuf + rPadded * pc);

  // mr floats of slack: a partial last sliver of queries reads past R on the last key.
  float* s = scratchFloats(ScratchSlot::AttentionScores, static_cast<size_t>(std::min(block, keys) * R + kt.mr));
  // With one key block (no rescaling) and unit-stride output rows, P · V goes
  // straight into the output rows and is normalized there: no accumulator to
  // copy out. Over several blocks the compact scratch accumulator is kept:
  // accumulating and rescaling in the output rows (3 KiB apart in bshd)
  // measured 1.01x at N2048 and 1.05x at N4096, slower.
  const bool intoOutput = blockEnd(kStart) == kEnd && p.outView.dimStride == 1;
  float* acc = intoOutput ? oBase
                       : scratchFloats(ScratchSlot::AttentionAcc, static_cast<size_t>(R * std::max<int64_t>(dv, 1)));
  const int64_t accStride = intoOutput ? p.outView.seqStride : dv;
  float state[5 * kAttentionQueryTile];
  float* runMax = state;
  float* runSum = state + R;
  float* blockMax = state + 2 * R;
  float* shift = state + 3 * R;
  float* factor = state + 4 * R;
  std::fill(runMax, runMax + R, kNegInf);
  std::fill(runSum, runSum + R, 0.0f);
  // Both paths keep their running state here; the fused one's shift is runMax (see SoftmaxRun).
  SoftmaxRun run{runMax, runSum, acc, accStride, dv, false};

  // The scores here are in base 2 (log2(e) folded into alpha): so is the cap.
  const float softcap2 = std::min(p.softcap * kLog2e, std::numeric_limits<float>::max());
  GemmProblem sp{};
  sp.n = R;
  sp.k = p.headDim;
  // Saturated like a mask value: a scale above FLT_MAX / log2(e) would make
  // alpha infinite (and 0 * inf a NaN for a zero logit).
  sp.alpha = std::clamp(p.scale * kLog2e, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max());
  sp.out = s;
  sp.outRowStride = R;
  sp.outColStride = 1;
  GemmProblem op{};
  op.m = R;
  op.n = dv;
  op.alpha = 1.0f;
  op.out = acc;
  op.outRowStride = accStride;
  op.outColStride = 1;

  bool anyBlock = false;
  for (int64_t k0 = kStart, kb = 0; k0 < kEnd; k0 += kb) {
    kb = blockEnd(k0) - k0;
    if (p.keyPadding && !wRows) {
      const uint8_t* pad = p.keyPadding + b * p.seqKV + k0;
      if (std::all_of(pad, pad + kb, [](uint8_t x) { return x != 0; })) continue;  // nothing visible here
    }
    // The keys every query of the tile sees (whole K slivers of them, or all
    // of the block) take the fused exp; the rest of the block, at most R + mr
    // keys along a window's edge, gets the column passes below.
    int64_t kbFused = 0;
    if (kv.fusedExp && k0 >= fusedLo) {
      const int64_t avail = fusedHi - k0;
      kbFused = avail >= kb ? kb : std::max<int64_t>(0, avail) / kt.mr * kt.mr;
    }
    if (kbFused > 0) scoresExp2Block(kt, kv, p.headDim, k0, kbFused, qbuf, R, sp.alpha, p.softcap != 0.0f ? softcap2 : 0.0f, s, run,
                    !anyBlock);
    anyBlock = true;
    if (kbFused < kb) {
      // S^T rows for keys [kc0, kc0 + kbc): K's slivers for them start at kc0 (a multiple of mr).
      const int64_t kc0 = k0 + kbFused, kbc = kb - kbFused;
      float* sc = s + kbFused * R;
      sp.m = kbc;
      sp.out = sc;
      if (p.headDim == 0) std::fill(sc, sc + kbc * R, 0.0f);
      for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC) {
        const int64_t kc = std::min(kGemmKC, p.headDim - pc);
        const float* qBlock = qbuf + rPadded * pc;
        if (!kv.inPlace) {
          const float* kSlivers = kv.k + keysPadded * pc + kc0 * kc;
          gemmMacroKernel(kt, sp, 0, kbc, 0, 0, R, kc, kSlivers, kc, kt.mr, qBlock, kc, pc > 0);
          continue;
        }
        for (int64_t ir = 0; ir < kbc; ir += kt.mr) {
          const int rows = static_cast<int>(std::min<int64_t>(kt.mr, kbc - ir));
          const float* kRows = kv.k + (kc0 + ir) * kv.kStride + pc;
          for (int64_t jr = 0; jr < R; jr += kt.nr)
            kt.microKernelDirect(kc, kRows, kv.kStride, qBlock + jr * kc, kt.nr, sc + ir * R + jr, R, sp.alpha, pc > 0,
                                 rows, static_cast<int>(std::min<int64_t>(kt.nr, R - jr)), nullptr);
        }
      }
      if (p.softcap != 0.0f) kt.softcap(sc, kbc * R, softcap2);
      if (p.mask) {
        const float* mb = p.mask + b * p.maskStride[0] + h * p.maskStride[1] + kc0 * p.maskStride[3];
        for (int64_t r = 0; r < R; ++r) {
          const float* m = mb + (i0 + r) * p.maskStride[2];
          for (int64_t j = 0; j < kbc; ++j) sc[j * R + r] += maskToBase2(m[j * p.maskStride[3]]);
        }
      }
      if (p.keyPadding) {
        const uint8_t* pad = p.keyPadding + b * p.seqKV + kc0;
        for (int64_t j = 0; j < kbc; ++j)
          if (pad[j]) std::fill(sc + j * R, sc + (j + 1) * R, kNegInf);
      }
      if (windowed) {
        for (int64_t r = 0; r < R; ++r) {
          const KeyRange range = visibleRange(p, b, i0 + r);
          for (int64_t j = kc0; j < std::min(range.lo, kc0 + kbc); ++j) sc[(j - kc0) * R + r] = kNegInf;
          for (int64_t j = std::max(kc0, range.hi); j < kc0 + kbc; ++j) sc[(j - kc0) * R + r] = kNegInf;
        }
      }

      // Online softmax update, down each column (one column per query).
      std::fill(blockMax, blockMax + R, kNegInf);
      kt.colMax(sc, kbc, R, R, blockMax);
      bool rescale = false, rescaleFused = false;
      for (int64_t r = 0; r < R; ++r) {
        const float m = std::max(runMax[r], blockMax[r]);
        // Factor applied to what the accumulator holds so far: 2^(old - new).
        factor[r] = runMax[r] == kNegInf ? 0.0f : (m == runMax[r] ? 1.0f : std::exp2(runMax[r] - m));
        rescale |= run.started && factor[r] != 1.0f;
        rescaleFused |= factor[r] != 1.0f;
        runMax[r] = m;
        shift[r] = m == kNegInf ? 0.0f : m;  // an all -inf column: exp gives 0 and the sum stays 0
        runSum[r] *= factor[r];
        blockMax[r] = 0.0f;  // reused as this block's sum
      }
      // This block's fused rows were taken against the old shifts.
      if (kbFused > 0 && rescaleFused) kt.scaleColumns(s, kbFused, R, R, factor);
      if (kv.fusedExp) {
        // The tile's fused terms carry the kernel's 2^-margin: these get it too.
        exp2SubColumnsFusedScale(kt, sc, kbc, R, R, shift, runSum);
      } else {
        kt.exp2SubColumns(sc, kbc, R, R, shift, blockMax);
        for (int64_t r = 0; r < R; ++r) runSum[r] += blockMax[r];
      }
      if (rescale)
        for (int64_t r = 0; r < R; ++r)
          if (factor[r] != 1.0f) kt.scaleInPlace(acc + r * accStride, dv, factor[r]);
    }

    // acc (+)= P · V for the block; P = (S^T)^T is already the micro-kernel's
    // A layout (for each key, the tile's queries are contiguous: step R).
    if (kv.inPlace) {
      for (int64_t ir = 0; ir < R; ir += kt.mr) {
        const int rows = static_cast<int>(std::min<int64_t>(kt.mr, R - ir));
        for (int64_t jr = 0; jr < dv; jr += kt.nr)
          kt.microKernel(kb, s + ir, R, kv.v + k0 * kv.vStride + jr, kv.vStride, acc + ir * accStride + jr, accStride,
                         1.0f, run.started, rows, kt.nr, nullptr, nullptr);
      }
      run.started = true;
      continue;
    }
    // V is packed in kGemmKC-key blocks, each of depth vDepth; keys from pc
    // on within one are its slivers' rows from pc - blockStart.
    for (int64_t pc = k0; pc < k0 + kb;) {
      const int64_t blockStart = pc / kGemmKC * kGemmKC;
      const int64_t end = std::min(blockStart + kGemmKC, k0 + kb);
      const int64_t vDepth = std::min(kGemmKC, keysOf(p, b) - blockStart);
      op.k = end - pc;
      gemmMacroKernel(kt, op, 0, R, 0, 0, dv, end - pc, s + (pc - k0) * R, 1, R,
                      kv.v + dvPadded * blockStart + (pc - blockStart) * kt.nr, vDepth, run.started || pc > k0);
      pc = end;
    }
    run.started = true;
  }
  if (!run.started)
    for (int64_t r = 0; r < R; ++r) std::fill(acc + r * accStride, acc + r * accStride + dv, 0.0f);

  // Normalize: out = acc / sum (0 for a query that saw no key), a sink adding to the sum.
  for (int64_t r = 0; r < R; ++r) {
    double sum = runSum[r];
    if (p.sinks && runMax[r] != kNegInf && sum > 0) sum += sinkTerm(p.sinks[h], runMax[r], kv.fusedExp);
    factor[r] = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
    if (p.sinks && std::isnan(p.sinks[h])) factor[r] = std::numeric_limits<float>::quiet_NaN();
  }
  if (intoOutput) {
    for (int64_t r = 0; r < R; ++r) kt.scaleInPlace(acc + r * accStride, dv, factor[r]);
  } else {
    for (int64_t r = 0; r < R; ++r) {
      float* o = oBase + r * p.outView.seqStride;
      const float* a = acc + r * dv;
      const float f = factor[r];
      for (int64_t e = 0; e < dv; ++e) o[e * p.outView.dimStride] = a[e] * f;
    }
  }
  if (wRows) {  // one block: s holds 2^(S - shift) for keys [kStart, kEnd) (2^-48 more when fused); factor normalizes
    for (int64_t r = 0; r < R; ++r) {
      float* w = wRows + r * p.seqKV;
      std::fill(w, w + kStart, 0.0f);
      for (int64_t j = 0; j < keys; ++j) w[kStart + j] = s[j * R + r] * factor[r];
      std::fill(w + kEnd, w + p.seqKV, 0.0f);
    }
  }
}

// The decode path: the query rows of one (batch, kv head), all the query
// heads of its group at every position, stream that head's K and V once
// together, with no packing: each key row is read once and dotted with every
// query of the group while it is in L1, then each V row added into every
// query's accumulator. (One pass per query head read a group's K/V four
// times over for LLaMA 3's 32/8 heads.) Keys [j0, j1) give each query a
// partial result: the max m of its logits, the sum of exp(logit - m), and
// acc = sum exp(logit - m) * v. Partials of disjoint key ranges merge
// exactly, so one group can be split across threads. With weights, the
// unnormalized exps are written to each query's row at [j0, j1).
// A query's state: [m, sum, acc[headDimV]].
struct DecodeGroup {
  int64_t b, g;
  int64_t queries;  // headsPerGroup * seqQ, query u = (head g * headsPerGroup + u / seqQ, row u % seqQ)
  int64_t head(const AttentionProblem& p, int64_t u) const { return g * (p.heads / p.kvHeads) + u / p.seqQ; }
  float* weightsRow(const AttentionProblem& p, int64_t u) const {
    return p.weights ? p.weights + ((b * p.heads + head(p, u)) * p.seqQ + u % p.seqQ) * p.seqKV : nullptr;
  }
};

// One query's scores over keys [j0, j0 + n) in row (already scaled and
// softcapped): the mask, padding and window applied, then the exps, its
// state's m and sum set and acc cleared. Returns whether the row has weight to
// add (false when all its keys are blocked, or its scores are all NaN: the
// state is then final, and row holds zeros so the V pass skips it).
bool decodeRowSoftmax(const AttentionProblem& p, const KernelTable& kt, const DecodeGroup& grp, int64_t u, int64_t j0,
                      int64_t n, float* row, float* state) {
  const int64_t h = grp.head(p, u), i = u % p.seqQ;
  if (p.mask) {
    const float* m =
        p.mask + grp.b * p.maskStride[0] + h * p.maskStride[1] + i * p.maskStride[2] + j0 * p.maskStride[3];
    for (int64_t j = 0; j < n; ++j) row[j] += m[j * p.maskStride[3]];
  }
  if (p.keyPadding) {
    const uint8_t* pad = p.keyPadding + grp.b * p.seqKV + j0;
    for (int64_t j = 0; j < n; ++j)
      if (pad[j]) row[j] = kNegInf;
  }
  const KeyRange range = visibleRange(p, grp.b, i);
  for (int64_t j = 0; j < std::min(range.lo - j0, n); ++j) row[j] = kNegInf;
  for (int64_t j = std::max<int64_t>(range.hi - j0, 0); j < n; ++j) row[j] = kNegInf;

  float* wRow = grp.weightsRow(p, u);
  float* acc = state + 2;
  std::fill(acc, acc + p.headDimV, 0.0f);
  float m = kt.rowMax(row, n);
  // rowMax may or may not pass over NaN scores; take the largest of the others,
  // as the tiled path's column max does, so both paths weight a row alike.
  if (std::isnan(m)) {
    m = kNegInf;
    for (int64_t j = 0; j < n; ++j)
      if (row[j] > m) m = row[j];
  }
  state[0] = m;
  state[1] = 0.0f;
  // A row whose scores are all NaN (a NaN in q, or in every key) would then
  // look fully masked and give zeros: make it NaN, as the tiled path does
  // (decodeMerge carries the NaN acc into the output), its weights NaN but 0
  // at the keys that were masked or padded out.
  if (m == kNegInf && std::any_of(row, row + n, [](float x) { return std::isnan(x); })) {
    constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
    state[0] = 0.0f;
    state[1] = kNaN;
    std::fill(acc, acc + p.headDimV, kNaN);
    if (wRow)
      for (int64_t j = 0; j < n; ++j) wRow[j0 + j] = row[j] == kNegInf ? 0.0f : kNaN;
    std::fill(row, row + n, 0.0f);
    return false;
  }
  if (m == kNegInf) {
    if (wRow) std::fill(wRow + j0, wRow + j0 + n, 0.0f);
    std::fill(row, row + n, 0.0f);
    return false;
  }
  state[1] = kt.expSubSum(row, row, n, m);
  if (wRow) std::copy(row, row + n, wRow + j0);
  return true;
}

// The group's partial states over keys [j0, j1): states[u * (headDimV + 2)].
void decodePartial(const AttentionProblem& p, const KernelTable& kt, const DecodeGroup& grp, int64_t j0, int64_t j1,
                   float* states) {
  // Keys past the entry's last visible one (its own length, with keyLengths) are not computed;
  // decodeMerge writes their weights as zeros.
  j1 = std::clamp(visibleRange(p, grp.b, p.seqQ - 1).hi, j0, std::max(j0, j1));
  const int64_t n = std::max<int64_t>(0, j1 - j0), G = grp.queries, D = p.headDim;
  float* scores = scratchFloats(ScratchSlot::AttentionScores, static_cast<size_t>(std::max<int64_t>(n * G, 1)));
  float* q = scratchFloats(ScratchSlot::AttentionRow, static_cast<size_t>(G * D + 1));
  for (int64_t u = 0; u < G; ++u) {
    const float* qRow = p.q.data + grp.b * p.q.batchStride + grp.head(p, u) * p.q.headStride +
                        (u % p.seqQ) * p.q.seqStride;
    for (int64_t d = 0; d < D; ++d) q[u * D + d] = qRow[d * p.q.dimStride];
  }
  auto rowsOf = [&](const auto* data, const Strided4& x) {
    return data + grp.b * x.batchStride + grp.g * x.headStride + j0 * x.seqStride;
  };
  auto scalesOf = [&](const RowScales& s) { return s.data + grp.b * s.batchStride + grp.g * s.headStride + j0 * s.seqStride; };
  // An int8 row's scale multiplies its scores, and its weights before V. A
  // zero weight stays zero: a key left out is not read, whatever its scale.
  // The integer kernels apply the scales themselves, in this order.
  auto scaleByRows = [&](const RowScales& s) {
    const float* rowScale = scalesOf(s);
    for (int64_t u = 0; u < G; ++u)
      for (int64_t j = 0; j < n; ++j)
        if (scores[u * n + j] != 0.0f) scores[u * n + j] *= rowScale[j * s.seqStride];
  };
  if (p.kvBf16) {
    kt.decodeScoresBf16(q, G, D, rowsOf(p.kBf16, p.k), p.k.seqStride, n, p.scale, scores);
  } else if (p.kvInt8) {
    if (const Int8DecodeScores integer = int8Kernels().decodeScores) {
      // Queries in int16 against the int8 rows: integer dots (gemm_int8.h).
      const int64_t width = roundUp(D, kInt8DecodeQueryAlign);
      auto* q16 = reinterpret_cast<int16_t*>(
          scratchFloats(ScratchSlot::DecodeQueryInt16, static_cast<size_t>((G * width + 1) / 2 + G)));
      float* qScale = reinterpret_cast<float*>(q16 + roundUp(G * width, 2));
      for (int64_t u = 0; u < G; ++u) qScale[u] = quantizeQueryInt16(q + u * D, D, width, q16 + u * width) * p.scale;
      integer(q16, width, qScale, G, D, rowsOf(p.kInt8, p.k), p.k.seqStride, scalesOf(p.kScales), p.kScales.seqStride, n,
              scores);
    } else {
      kt.decodeScoresInt8(q, G, D, rowsOf(p.kInt8, p.k), p.k.seqStride, n, p.scale, scores);
      scaleByRows(p.kScales);
    }
  } else {
    kt.decodeScores(q, G, D, rowsOf(p.k.data, p.k), p.k.seqStride, n, p.scale, scores);
  }
  const int64_t stride = p.headDimV + 2;
  bool anyWeight = false;
  for (int64_t u = 0; u < G; ++u) {
    float* row = scores + u * n;
    if (p.softcap != 0.0f) kt.softcap(row, n, p.softcap);
    anyWeight |= decodeRowSoftmax(p, kt, grp, u, j0, n, row, states + u * stride);
  }
  if (!anyWeight) return;
  if (p.kvBf16) {
    kt.decodeAccumulateBf16(scores, G, n, rowsOf(p.vBf16, p.v), p.v.seqStride, p.headDimV, states + 2, stride);
  } else if (p.kvInt8) {
    // The integer path declines weights that its scales make non-finite (a non-finite value in V
    // makes its row's scale NaN); the float kernels take those.
    const Int8DecodeAccumulate integer = int8Kernels().decodeAccumulate;
    if (!integer || !integer(scores, G, n, rowsOf(p.vInt8, p.v), p.v.seqStride, scalesOf(p.vScales), p.vScales.seqStride,
                             p.headDimV, states + 2, stride)) {
      scaleByRows(p.vScales);
      kt.decodeAccumulateInt8(scores, G, n, rowsOf(p.vInt8, p.v), p.v.seqStride, p.headDimV, states + 2, stride);
    }
  } else
    kt.decodeAccumulate(scores, G, n, rowsOf(p.v.data, p.v), p.v.seqStride, p.headDimV, states + 2, stride);
}

// Most key ranges one group's keys are split into (enough for 64 threads on one group).
constexpr int64_t kDecodeMaxParts = 128;

// Merges the `parts` partial states of query u (keys split at `bounds`),
// adds its head's sink to the denominator, and writes the output row (and
// rescales the weights row). partStride: floats between one part's states
// and the next's.
void decodeMerge(const AttentionProblem& p, const DecodeGroup& grp, int64_t u, const float* states, int64_t parts,
                 int64_t partStride, const int64_t* bounds) {
  const int64_t h = grp.head(p, u), i = u % p.seqQ;
  float m = kNegInf;
  for (int64_t t = 0; t < parts; ++t) m = std::max(m, states[t * partStride]);
  double sum = 0;
  for (int64_t t = 0; t < parts; ++t)
    if (states[t * partStride] != kNegInf) sum += states[t * partStride + 1] * std::exp(states[t * partStride] - m);
  if (p.sinks && m != kNegInf && sum > 0) sum += std::exp(static_cast<double>(p.sinks[h]) - m);
  float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  if (p.sinks && std::isnan(p.sinks[h])) inv = std::numeric_limits<float>::quiet_NaN();
  float* o = p.out + grp.b * p.outView.batchStride + h * p.outView.headStride + i * p.outView.seqStride;
  float partScale[kDecodeMaxParts];
  for (int64_t t = 0; t < parts; ++t)
    partScale[t] = states[t * partStride] == kNegInf ? 0.0f : std::exp(states[t * partStride] - m);
  for (int64_t e = 0; e < p.headDimV; ++e) {
    float v = 0.0f;
    for (int64_t t = 0; t < parts; ++t)
      if (partScale[t] != 0.0f) v += states[t * partStride + 2 + e] * partScale[t];
    o[e * p.outView.dimStride] = v * inv;
  }
  if (float* wRow = grp.weightsRow(p, u)) {
    // The parts wrote weights up to the entry's last visible key (decodePartial); past it they are 0,
    // even when inv is NaN.
    const int64_t end = std::clamp(visibleRange(p, grp.b, p.seqQ - 1).hi, bounds[0], bounds[parts]);
    for (int64_t t = 0; t < parts; ++t) {
      const float f = states[t * partStride] == kNegInf ? 0.0f : std::exp(states[t * partStride] - m) * inv;
      for (int64_t j = bounds[t]; j < std::min(bounds[t + 1], end); ++j) wRow[j] *= f;
    }
    std::fill(wRow, wRow + bounds[0], 0.0f);
    std::fill(wRow + end, wRow + p.seqKV, 0.0f);
  }
}

void decodeForward(const AttentionProblem& p, const KernelTable& kt) {
  const int64_t groups = p.batch * p.kvHeads;
  const int64_t queries = (p.heads / p.kvHeads) * p.seqQ;
  // The keys some query of a group sees: from the first row's window start
  // to the last row's end (rows differ only along the window's edges), over
  // every batch entry (decodePartial stops at each entry's own end).
  int64_t lo = p.seqKV, hi = 0;
  for (int64_t b = 0; b < (p.keyLengths ? p.batch : 1); ++b) {
    lo = std::min(lo, visibleRange(p, b, 0).lo);
    hi = std::max(hi, visibleRange(p, b, p.seqQ - 1).hi);
  }
  hi = std::max(hi, lo);
  // Split each group's keys when groups alone cannot keep every thread busy,
  // in parts of at least kDecodeMinKeysPerPart keys (below that the merge costs more).
  constexpr int64_t kDecodeMinKeysPerPart = 512;
  const int64_t want = ceilDiv(2 * numThreads(), groups);
  const int64_t parts = std::clamp<int64_t>(std::min(want, (hi - lo) / kDecodeMinKeysPerPart), 1, kDecodeMaxParts);
  std::vector<int64_t> bounds(static_cast<size_t>(parts + 1));
  for (int64_t t = 0; t <= parts; ++t) bounds[t] = lo + (hi - lo) * t / parts;
  const int64_t stride = p.headDimV + 2, partStride = queries * stride;
  std::vector<float> states(static_cast<size_t>(groups * parts * partStride));
  auto groupOf = [&](int64_t gi) { return DecodeGroup{gi / p.kvHeads, gi % p.kvHeads, queries}; };
  parallelFor(groups * parts, [&](int64_t task) {
    const int64_t gi = task / parts, t = task % parts;
    decodePartial(p, kt, groupOf(gi), bounds[t], bounds[t + 1], &states[task * partStride]);
  });
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t u = 0; u < queries; ++u)
      decodeMerge(p, groupOf(gi), u, &states[gi * parts * partStride + u * stride], parts, partStride, bounds.data());
}

void runAttention(const AttentionProblem& p) {
  const KernelTable& kt = kernels();

  const bool unitStrideKV = p.k.dimStride == 1 && p.v.dimStride == 1;
  if (p.seqQ <= kAttentionDecodeMaxQueries && unitStrideKV) {
    decodeForward(p, kt);
    return;
  }

  const int64_t tiles = ceilDiv(p.seqQ, kAttentionQueryTile);
  const int64_t headsPerGroup = p.heads / p.kvHeads;
  const int64_t threads = numThreads();
  // Claims are taken in order, so the tasks running at one time are those of
  // consecutive claims. Claim c runs task order[c], which deals the tasks
  // into one contiguous run per thread, interleaved: concurrent tasks are
  // ceil(tasks / threads) apart. Neighbouring heads are neighbouring 256-byte
  // pieces of every 3 KiB row of a [batch, seq, heads * dim] tensor (ViT-B),
  // and two cores writing them at once made attention on the block's layout
  // ~18 % slower at 2 threads (presumably the lines at the pieces' edges
  // moving between the cores' caches); a head-major output never showed it.
  auto claimOrder = [threads](int64_t tasks) {
    const int64_t span = ceilDiv(tasks, threads);
    std::vector<int64_t> order;
    order.reserve(static_cast<size_t>(tasks));
    for (int64_t c = 0; c < span * threads; ++c) {
      const int64_t t = (c % threads) * span + c / threads;
      if (t < tasks) order.push_back(t);
    }
    return order;
  };

  if (readsKVInPlace(p, kt)) {
    // Nothing is packed per (batch, kv head) to share, so a task is one query
    // tile (finer tasks also shorten the wait for the last one).
    const int64_t tasks = p.batch * p.heads * tiles;
    const std::vector<int64_t> order = claimOrder(tasks);
    const int64_t groups = p.batch * p.kvHeads;
    std::unique_ptr<std::atomic<float>[]> vMax(new std::atomic<float>[static_cast<size_t>(groups)]);
    for (int64_t i = 0; i < groups; ++i) vMax[i].store(-1.0f, std::memory_order_relaxed);
    parallelFor(tasks, [&](int64_t c) {
      const int64_t t = order[static_cast<size_t>(c)];
      const int64_t u = t % tiles, bh = t / tiles;
      const int64_t h = bh % p.heads, b = bh / p.heads;
      // This thread's first task on another head is likely claim
      // c + threads * (tiles - u): its K and V rows are requested a share per tile.
      const int64_t later = c + threads * (tiles - u);
      if (later < tasks) {
        const int64_t bh2 = order[static_cast<size_t>(later)] / tiles;
        if (bh2 != bh)
          prefetchKVShare(p, bh2 / p.heads, (bh2 % p.heads) / headsPerGroup, p.seqKV * u / tiles,
                          p.seqKV * (u + 1) / tiles);
      }
      const int64_t i0 = u * kAttentionQueryTile;
      const int64_t g = h / headsPerGroup;
      queryTile(p, kt, kvInPlace(p, kt, b, g, vMax[b * p.kvHeads + g]), b, h, i0,
                std::min(p.seqQ, i0 + kAttentionQueryTile));
    });
    return;
  }

  // Tasks own a (batch, kv head) and pack its K and V once for every query
  // head and tile that reads them. When there are too few for the threads,
  // each (batch, kv head) is split into chunks of query tiles (each chunk
  // packs again), interleaved so causal tiles of every length mix.
  const int64_t groups = p.batch * p.kvHeads;
  const int64_t chunks = std::max<int64_t>(1, std::min(tiles * headsPerGroup, ceilDiv(2 * threads, groups)));
  const int64_t tasks = groups * chunks;
  const std::vector<int64_t> order = claimOrder(tasks);
  parallelFor(tasks, [&](int64_t c) {
    const int64_t t = order[static_cast<size_t>(c)];
    const int64_t group = t / chunks, chunk = t % chunks;
    const int64_t b = group / p.kvHeads, g = group % p.kvHeads;
    const PackedKV kv = packKV(p, kt, b, g);
    // This thread's next claim is likely c + threads: that task's K and V rows
    // are requested a share per query tile of this task.
    const int64_t nextClaim = c + threads;
    const int64_t nextGroup = nextClaim < tasks ? order[static_cast<size_t>(nextClaim)] / chunks : -1;
    const int64_t steps = ceilDiv(tiles * headsPerGroup - chunk, chunks);
    for (int64_t u = chunk, step = 0; u < tiles * headsPerGroup; u += chunks, ++step) {
      const int64_t h = g * headsPerGroup + u / tiles;
      const int64_t i0 = (u % tiles) * kAttentionQueryTile;
      if (nextGroup >= 0)
        prefetchKVShare(p, nextGroup / p.kvHeads, nextGroup % p.kvHeads, p.seqKV * step / steps,
                        p.seqKV * (step + 1) / steps);
      queryTile(p, kt, kv, b, h, i0, std::min(p.seqQ, i0 + kAttentionQueryTile));
    }
  });
}

}  // namespace

void attentionForward(const AttentionProblem& p) {
  if (p.batch == 0 || p.heads == 0 || p.seqQ == 0) return;
  // Nothing to write: skip the scores (seqKV is unbounded when k and v are empty).
  if (p.headDimV == 0 && p.weights == nullptr) return;
  if (p.headDimV == 0) {
    // Only the weights are written. The empty output's data may be null, and
    // offsetting a null pointer is undefined even where nothing is written
    // through it (UBSan, fuzz_calls: a 'bhds' output's rows are 1 apart), so
    // it gets a view that every offset leaves on one float nothing writes.
    static float noOutput = 0.0f;
    AttentionProblem weightsOnly = p;
    weightsOnly.out = &noOutput;
    weightsOnly.outView = Strided4{&noOutput, 0, 0, 0, 0};
    runAttention(weightsOnly);
    return;
  }
  runAttention(p);
}

}  // namespace mhsa
