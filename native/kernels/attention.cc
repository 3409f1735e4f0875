#include "attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "../runtime/thread_pool.h"
#include "gemm.h"
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

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int64_t ceilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// Number of keys query row i may see (may be <= 0 under the causal rule).
inline int64_t visibleKeys(const AttentionProblem& p, int64_t i) {
  return p.causal ? std::min(p.seqKV, i + (p.seqKV - p.seqQ) + 1) : p.seqKV;
}

struct PackedKV {
  const float* k;  // A-format slivers of K (keys x headDim), one block per kGemmKC of headDim
  const float* v;  // B-format slivers of V (keys x headDimV), one block per kGemmKC of keys
};

PackedKV packKV(const AttentionProblem& p, const KernelTable& kt, int64_t b, int64_t g) {
  const int64_t keysPadded = roundUp(p.seqKV, kt.mr);
  const int64_t dvPadded = roundUp(p.headDimV, kt.nr);
  float* kbuf = scratchFloats(ScratchSlot::AttentionPackK, static_cast<size_t>(keysPadded * p.headDim));
  float* vbuf = scratchFloats(ScratchSlot::AttentionPackV, static_cast<size_t>(dvPadded * p.seqKV));
  const StridedMatrix kA{p.k.data + b * p.k.batchStride + g * p.k.headStride, p.k.seqStride, p.k.dimStride};
  for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC)
    packA(kA, 0, p.seqKV, pc, std::min(kGemmKC, p.headDim - pc), kt.mr, kbuf + keysPadded * pc);
  const StridedMatrix vB{p.v.data + b * p.v.batchStride + g * p.v.headStride, p.v.seqStride, p.v.dimStride};
  for (int64_t pc = 0; pc < p.seqKV; pc += kGemmKC)
    packB(vB, pc, std::min(kGemmKC, p.seqKV - pc), 0, p.headDimV, kt.nr, vbuf + dvPadded * pc);
  return {kbuf, vbuf};
}

void zeroRows(float* out, int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * rowStride + j * colStride] = 0.0f;
}

// Queries [i0, i1) of head h (kv head g) in batch b, against packed K and V.
// Keys are taken in blocks of kAttentionKeyBlock with an online softmax: a
// running max and sum per query, the output accumulator rescaled only when a
// block raises a query's max. So the scores buffer (block x R) stays in L2
// whatever seqKV is. With returnWeights the whole key range is one block, so
// the final normalization is known before the weights are written.
void queryTile(const AttentionProblem& p, const KernelTable& kt, const PackedKV& kv, int64_t b, int64_t h,
               int64_t i0, int64_t i1) {
  const int64_t R = i1 - i0;
  // Keys past the last query's causal limit are blocked for the whole tile: skip them.
  const int64_t keys = std::max<int64_t>(0, visibleKeys(p, i1 - 1));
  float* oBase = p.out + b * p.outView.batchStride + h * p.outView.headStride + i0 * p.outView.seqStride;
  float* wRows = p.weights ? p.weights + ((b * p.heads + h) * p.seqQ + i0) * p.seqKV : nullptr;
  if (keys == 0) {
    zeroRows(oBase, R, p.headDimV, p.outView.seqStride, p.outView.dimStride);
    if (wRows) std::fill(wRows, wRows + R * p.seqKV, 0.0f);
    return;
  }
  const int64_t dv = p.headDimV;
  const int64_t block = wRows ? keys : kAttentionKeyBlock;
  const int64_t rPadded = roundUp(R, kt.nr);
  const int64_t keysPadded = roundUp(p.seqKV, kt.mr);
  const int64_t dvPadded = roundUp(dv, kt.nr);

  // The query tile as the B operand of S^T = K · Q^T, packed once per tile.
  float* qbuf = scratchFloats(ScratchSlot::AttentionPackQ, static_cast<size_t>(rPadded * std::max<int64_t>(p.headDim, 1)));
  const StridedMatrix qB{p.q.data + b * p.q.batchStride + h * p.q.headStride + i0 * p.q.seqStride, p.q.dimStride,
                         p.q.seqStride};
  for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC)
    packB(qB, pc, std::min(kGemmKC, p.headDim - pc), 0, R, kt.nr, qbuf + rPadded * pc);

  // mr floats of slack: a partial last sliver of queries reads past R on the last key.
  float* s = scratchFloats(ScratchSlot::AttentionScores, static_cast<size_t>(std::min(block, keys) * R + kt.mr));
  float* acc = scratchFloats(ScratchSlot::AttentionAcc, static_cast<size_t>(R * std::max<int64_t>(dv, 1)));
  float state[5 * kAttentionQueryTile];
  float* runMax = state;
  float* runSum = state + R;
  float* blockMax = state + 2 * R;
  float* shift = state + 3 * R;
  float* factor = state + 4 * R;
  std::fill(runMax, runMax + R, kNegInf);
  std::fill(runSum, runSum + R, 0.0f);

  GemmProblem sp{};
  sp.n = R;
  sp.k = p.headDim;
  sp.alpha = p.scale;
  sp.out = s;
  sp.outRowStride = R;
  sp.outColStride = 1;
  GemmProblem op{};
  op.m = R;
  op.n = dv;
  op.alpha = 1.0f;
  op.out = acc;
  op.outRowStride = dv;
  op.outColStride = 1;

  bool started = false;  // whether acc holds anything yet (wholly padded blocks are skipped)
  for (int64_t k0 = 0; k0 < keys; k0 += block) {
    const int64_t kb = std::min(block, keys - k0);
    if (p.keyPadding && !wRows) {
      const uint8_t* pad = p.keyPadding + b * p.seqKV + k0;
      if (std::all_of(pad, pad + kb, [](uint8_t x) { return x != 0; })) continue;  // nothing visible here
    }
    // S^T rows for keys [k0, k0+kb): K's slivers for them start at k0 (a multiple of mr).
    sp.m = kb;
    if (p.headDim == 0) std::fill(s, s + kb * R, 0.0f);
    for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC) {
      const int64_t kc = std::min(kGemmKC, p.headDim - pc);
      gemmMacroKernel(kt, sp, 0, kb, 0, 0, R, kc, kv.k + keysPadded * pc + k0 * kc, kc, kt.mr, qbuf + rPadded * pc,
                      kc, pc > 0);
    }
    if (p.mask) {
      const float* mb = p.mask + b * p.maskStride[0] + h * p.maskStride[1] + k0 * p.maskStride[3];
      for (int64_t r = 0; r < R; ++r) {
        const float* m = mb + (i0 + r) * p.maskStride[2];
        for (int64_t j = 0; j < kb; ++j) s[j * R + r] += m[j * p.maskStride[3]];
      }
    }
    if (p.keyPadding) {
      const uint8_t* pad = p.keyPadding + b * p.seqKV + k0;
      for (int64_t j = 0; j < kb; ++j)
        if (pad[j]) std::fill(s + j * R, s + (j + 1) * R, kNegInf);
    }
    if (p.causal) {
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = std::max<int64_t>(k0, visibleKeys(p, i0 + r)); j < k0 + kb; ++j) s[(j - k0) * R + r] = kNegInf;
    }

    // Online softmax update, down each column (one column per query).
    std::fill(blockMax, blockMax + R, kNegInf);
    kt.colMax(s, kb, R, R, blockMax);
    bool rescale = false;
    for (int64_t r = 0; r < R; ++r) {
      const float m = std::max(runMax[r], blockMax[r]);
      // Factor applied to what the accumulator holds so far: exp(old - new).
      factor[r] = runMax[r] == kNegInf ? 0.0f : (m == runMax[r] ? 1.0f : std::exp(runMax[r] - m));
      rescale |= started && factor[r] != 1.0f;
      runMax[r] = m;
      shift[r] = m == kNegInf ? 0.0f : m;  // an all -inf column: exp gives 0 and the sum stays 0
      runSum[r] *= factor[r];
      blockMax[r] = 0.0f;  // reused as this block's sum
    }
    kt.expSubColumns(s, kb, R, R, shift, blockMax);
    for (int64_t r = 0; r < R; ++r) runSum[r] += blockMax[r];
    if (rescale)
      for (int64_t r = 0; r < R; ++r)
        if (factor[r] != 1.0f) kt.scaleInPlace(acc + r * dv, dv, factor[r]);

    // acc (+)= P · V for the block; P = (S^T)^T is already the micro-kernel's
    // A layout (for each key, the tile's queries are contiguous: step R).
    for (int64_t pc = k0; pc < k0 + kb; pc += kGemmKC) {
      const int64_t kc = std::min(kGemmKC, k0 + kb - pc);
      // V's block was packed for all seqKV keys; a causal tile may use fewer.
      const int64_t vDepth = std::min(kGemmKC, p.seqKV - pc);
      op.k = kc;
      gemmMacroKernel(kt, op, 0, R, 0, 0, dv, kc, s + (pc - k0) * R, 1, R, kv.v + dvPadded * pc, vDepth,
                      started || pc > k0);
    }
    started = true;
  }
  if (!started) std::fill(acc, acc + R * dv, 0.0f);

  // Normalize: out = acc / sum (0 for a query that saw no key).
  for (int64_t r = 0; r < R; ++r) factor[r] = runSum[r] > 0.0f ? 1.0f / runSum[r] : 0.0f;
  for (int64_t r = 0; r < R; ++r) {
    float* o = oBase + r * p.outView.seqStride;
    const float* a = acc + r * dv;
    const float f = factor[r];
    if (p.outView.dimStride == 1) {
      for (int64_t e = 0; e < dv; ++e) o[e] = a[e] * f;
    } else {
      for (int64_t e = 0; e < dv; ++e) o[e * p.outView.dimStride] = a[e] * f;
    }
  }
  if (wRows) {  // one block: s holds exp(S - max) for every key
    for (int64_t r = 0; r < R; ++r) {
      float* w = wRows + r * p.seqKV;
      for (int64_t j = 0; j < keys; ++j) w[j] = s[j * R + r] * factor[r];
      std::fill(w + keys, w + p.seqKV, 0.0f);
    }
  }
}

// The decode path: each query row streams its head's K and V once.
void decodeRow(const AttentionProblem& p, const KernelTable& kt, int64_t b, int64_t h, int64_t i) {
  const int64_t g = h / (p.heads / p.kvHeads);
  const int64_t lim = std::max<int64_t>(0, visibleKeys(p, i));
  float* row = scratchFloats(ScratchSlot::AttentionScores, static_cast<size_t>(std::max<int64_t>(p.seqKV, 1)));
  float* acc = scratchFloats(ScratchSlot::AttentionRow, static_cast<size_t>(p.headDim + p.headDimV + 1));
  float* q = acc + p.headDimV;
  const float* qRow = p.q.data + b * p.q.batchStride + h * p.q.headStride + i * p.q.seqStride;
  for (int64_t d = 0; d < p.headDim; ++d) q[d] = qRow[d * p.q.dimStride];
  const float* kBase = p.k.data + b * p.k.batchStride + g * p.k.headStride;
  const float* vBase = p.v.data + b * p.v.batchStride + g * p.v.headStride;
  for (int64_t j = 0; j < lim; ++j) row[j] = p.scale * kt.dot(q, kBase + j * p.k.seqStride, p.headDim);
  if (p.mask) {
    const float* m = p.mask + b * p.maskStride[0] + h * p.maskStride[1] + i * p.maskStride[2];
    for (int64_t j = 0; j < lim; ++j) row[j] += m[j * p.maskStride[3]];
  }
  if (p.keyPadding) {
    const uint8_t* pad = p.keyPadding + b * p.seqKV;
    for (int64_t j = 0; j < lim; ++j)
      if (pad[j]) row[j] = kNegInf;
  }
  const float shift = kt.rowMax(row, lim);
  const bool blocked = shift == kNegInf;
  if (!blocked) {
    const float sum = kt.expScaledSum(row, row, lim, 1.0f, shift);
    kt.scaleInPlace(row, lim, 1.0f / sum);
  }
  std::fill(acc, acc + p.headDimV, 0.0f);
  if (!blocked)
    for (int64_t j = 0; j < lim; ++j)
      if (row[j] != 0.0f) kt.axpy(row[j], vBase + j * p.v.seqStride, acc, p.headDimV);
  float* o = p.out + b * p.outView.batchStride + h * p.outView.headStride + i * p.outView.seqStride;
  for (int64_t e = 0; e < p.headDimV; ++e) o[e * p.outView.dimStride] = acc[e];
  if (p.weights) {
    float* w = p.weights + ((b * p.heads + h) * p.seqQ + i) * p.seqKV;
    if (blocked)
      std::fill(w, w + p.seqKV, 0.0f);
    else
      std::copy(row, row + lim, w), std::fill(w + lim, w + p.seqKV, 0.0f);
  }
}

}  // namespace

void attentionForward(const AttentionProblem& p) {
  if (p.batch == 0 || p.heads == 0 || p.seqQ == 0) return;
  // Nothing to write: skip the scores (seqKV is unbounded when k and v are empty).
  if (p.headDimV == 0 && p.weights == nullptr) return;
  const KernelTable& kt = kernels();

  const bool unitStrideKV = p.k.dimStride == 1 && p.v.dimStride == 1;
  if (p.seqQ <= kAttentionDecodeMaxQueries && unitStrideKV) {
    parallelFor(p.batch * p.heads * p.seqQ, [&](int64_t t) {
      decodeRow(p, kt, t / (p.heads * p.seqQ), (t / p.seqQ) % p.heads, t % p.seqQ);
    });
    return;
  }

  // Tasks own a (batch, kv head) and pack its K and V once for every query
  // head and tile that reads them. When there are too few for the threads,
  // each (batch, kv head) is split into chunks of query tiles (each chunk
  // packs again), interleaved so causal tiles of every length mix.
  const int64_t tiles = ceilDiv(p.seqQ, kAttentionQueryTile);
  const int64_t groups = p.batch * p.kvHeads;
  const int64_t headsPerGroup = p.heads / p.kvHeads;
  const int64_t chunks = std::max<int64_t>(1, std::min(tiles * headsPerGroup, ceilDiv(2 * numThreads(), groups)));
  parallelFor(groups * chunks, [&](int64_t t) {
    const int64_t group = t / chunks, chunk = t % chunks;
    const int64_t b = group / p.kvHeads, g = group % p.kvHeads;
    const PackedKV kv = packKV(p, kt, b, g);
    for (int64_t u = chunk; u < tiles * headsPerGroup; u += chunks) {
      const int64_t h = g * headsPerGroup + u / tiles;
      const int64_t i0 = (u % tiles) * kAttentionQueryTile;
      queryTile(p, kt, kv, b, h, i0, std::min(p.seqQ, i0 + kAttentionQueryTile));
    }
  });
}

}  // namespace mhsa
