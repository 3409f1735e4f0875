#include "attention.h"

#include <algorithm>
#include <limits>

#include "../runtime/thread_pool.h"
#include "gemm.h"
#include "kernel_table.h"
#include "scratch.h"

// The tiled path computes, per tile of queries, the TRANSPOSED scores
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
void queryTile(const AttentionProblem& p, const KernelTable& kt, const PackedKV& kv, int64_t b, int64_t h,
               int64_t i0, int64_t i1) {
  const int64_t R = i1 - i0;
  // Keys past the last query's causal limit are blocked for the whole tile: skip them.
  const int64_t keys = std::max<int64_t>(0, visibleKeys(p, i1 - 1));
  float* oBase = p.out + b * p.outView.batchStride + h * p.outView.headStride + i0 * p.outView.seqStride;
  float* wRows = p.weights ? p.weights + ((b * p.heads + h) * p.seqQ + i0) * p.seqKV : nullptr;
  if (keys == 0 || p.headDimV == 0) {
    zeroRows(oBase, R, p.headDimV, p.outView.seqStride, p.outView.dimStride);
    if (wRows) std::fill(wRows, wRows + R * p.seqKV, 0.0f);
    if (keys == 0 || !wRows) return;
  }

  // S^T = scale * K · Q^T, keys x R, row stride R.
  const int64_t rPadded = roundUp(R, kt.nr);
  const int64_t keysPadded = roundUp(p.seqKV, kt.mr);
  float* qbuf = scratchFloats(ScratchSlot::AttentionPackQ, static_cast<size_t>(rPadded * std::max<int64_t>(p.headDim, 1)));
  // mr floats of slack: a partial last sliver of queries reads past R on the last key.
  float* s = scratchFloats(ScratchSlot::AttentionScores, static_cast<size_t>(keys * R + kt.mr));
  const StridedMatrix qB{p.q.data + b * p.q.batchStride + h * p.q.headStride + i0 * p.q.seqStride, p.q.dimStride,
                         p.q.seqStride};
  GemmProblem sp{};
  sp.m = keys;
  sp.n = R;
  sp.k = p.headDim;
  sp.alpha = p.scale;
  sp.out = s;
  sp.outRowStride = R;
  sp.outColStride = 1;
  if (p.headDim == 0) std::fill(s, s + keys * R, 0.0f);
  for (int64_t pc = 0; pc < p.headDim; pc += kGemmKC) {
    const int64_t kc = std::min(kGemmKC, p.headDim - pc);
    packB(qB, pc, kc, 0, R, kt.nr, qbuf + rPadded * pc);
    gemmMacroKernel(kt, sp, 0, keys, 0, 0, R, kc, kv.k + keysPadded * pc, kc, kt.mr, qbuf + rPadded * pc, kc,
                    pc > 0);
  }

  // Masks: additive mask, padded keys, and the causal edge inside the tile.
  if (p.mask) {
    const float* mb = p.mask + b * p.maskStride[0] + h * p.maskStride[1];
    for (int64_t r = 0; r < R; ++r) {
      const float* m = mb + (i0 + r) * p.maskStride[2];
      for (int64_t j = 0; j < keys; ++j) s[j * R + r] += m[j * p.maskStride[3]];
    }
  }
  if (p.keyPadding) {
    const uint8_t* pad = p.keyPadding + b * p.seqKV;
    for (int64_t j = 0; j < keys; ++j)
      if (pad[j]) std::fill(s + j * R, s + (j + 1) * R, kNegInf);
  }
  if (p.causal) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = std::max<int64_t>(0, visibleKeys(p, i0 + r)); j < keys; ++j) s[j * R + r] = kNegInf;
  }

  // Softmax down each column. A column whose keys are all blocked becomes zeros.
  float colState[3 * kAttentionQueryTile];
  float* mx = colState;
  float* sum = colState + R;
  float* f = colState + 2 * R;
  std::fill(mx, mx + R, kNegInf);
  kt.colMax(s, keys, R, R, mx);
  for (int64_t r = 0; r < R; ++r) {
    if (mx[r] == kNegInf) mx[r] = 0.0f;  // every entry is -inf: exp gives 0, the sum stays 0
    sum[r] = 0.0f;
  }
  kt.expSubColumns(s, keys, R, R, mx, sum);
  for (int64_t r = 0; r < R; ++r) f[r] = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
  kt.scaleColumns(s, keys, R, R, f);

  if (wRows) {
    for (int64_t r = 0; r < R; ++r) {
      float* w = wRows + r * p.seqKV;
      for (int64_t j = 0; j < keys; ++j) w[j] = s[j * R + r];
      std::fill(w + keys, w + p.seqKV, 0.0f);
    }
    if (p.headDimV == 0) return;
  }

  // O = P · V with P = (S^T)^T: for each key the tile's queries are
  // contiguous, which is the micro-kernel's A layout already (step R per key).
  const int64_t dvPadded = roundUp(p.headDimV, kt.nr);
  GemmProblem op{};
  op.m = R;
  op.n = p.headDimV;
  op.k = keys;
  op.alpha = 1.0f;
  op.out = oBase;
  op.outRowStride = p.outView.seqStride;
  op.outColStride = p.outView.dimStride;
  for (int64_t pc = 0; pc < keys; pc += kGemmKC) {
    const int64_t kc = std::min(kGemmKC, keys - pc);
    // V's block was packed for all seqKV keys; a causal tile may use fewer.
    const int64_t vDepth = std::min(kGemmKC, p.seqKV - pc);
    gemmMacroKernel(kt, op, 0, R, 0, 0, p.headDimV, kc, s + pc * R, 1, R, kv.v + dvPadded * pc, vDepth, pc > 0);
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
