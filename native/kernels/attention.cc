#include "attention.h"

#include <algorithm>
#include <limits>

#include "../runtime/thread_pool.h"
#include "gemm.h"
#include "kernel_table.h"
#include "scratch.h"

namespace mhsa {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Number of keys query row i may see under the causal rule (may be <= 0).
inline int64_t causalKeyLimit(const AttentionProblem& p, int64_t i) {
  return std::min(p.seqKV, i + (p.seqKV - p.seqQ) + 1);
}

// One tile of query rows [i0, i1) of head h in batch b.
void attentionTile(const AttentionProblem& p, int64_t b, int64_t h, int64_t i0, int64_t i1) {
  const KernelTable& kt = kernels();
  const int64_t rows = i1 - i0;
  const int64_t g = h / (p.heads / p.kvHeads);
  // Keys beyond the last row's causal limit are masked for every row: skip them.
  const int64_t keys = p.causal ? std::max<int64_t>(0, causalKeyLimit(p, i1 - 1)) : p.seqKV;

  // Scores live in the caller's weights buffer when asked for, else in scratch.
  const int64_t ld = p.weights ? p.seqKV : std::max<int64_t>(keys, 1);
  float* scores = p.weights ? p.weights + ((b * p.heads + h) * p.seqQ + i0) * p.seqKV
                            : scratchFloats(ScratchSlot::AttentionScores, rows * ld);

  const float* qBase = p.q.data + b * p.q.batchStride + h * p.q.headStride + i0 * p.q.seqStride;
  const float* kBase = p.k.data + b * p.k.batchStride + g * p.k.headStride;
  const float* vBase = p.v.data + b * p.v.batchStride + g * p.v.headStride;
  float* oBase = p.out + b * p.outView.batchStride + h * p.outView.headStride +
                 i0 * p.outView.seqStride;

  if (keys > 0) {
    GemmProblem s{};
    s.m = rows;
    s.n = keys;
    s.k = p.headDim;
    s.alpha = p.scale;
    s.a = {qBase, p.q.seqStride, p.q.dimStride};
    s.b = {kBase, p.k.dimStride, p.k.seqStride};  // K^T: rows are head dims
    s.out = scores;
    s.outRowStride = ld;
    s.outColStride = 1;
    s.accumulate = false;
    gemmSerial(s);
  }

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    float* row = scores + r * ld;
    const int64_t visible = p.causal ? std::max<int64_t>(0, causalKeyLimit(p, i)) : keys;
    if (p.mask) {
      const float* m = p.mask + b * p.maskStride[0] + h * p.maskStride[1] + i * p.maskStride[2];
      const int64_t ms = p.maskStride[3];
      for (int64_t j = 0; j < visible; ++j) row[j] += m[j * ms];
    }
    if (p.keyPadding) {
      const uint8_t* pad = p.keyPadding + b * p.seqKV;
      for (int64_t j = 0; j < visible; ++j)
        if (pad[j]) row[j] = kNegInf;
    }
    const float shift = kt.rowMax(row, visible);
    if (shift == kNegInf) {
      // Every key blocked: the row's output is zero rather than 0/0.
      std::fill(row, row + keys, 0.0f);
    } else {
      const float sum = kt.expScaledSum(row, row, visible, 1.0f, shift);
      kt.scaleInPlace(row, visible, 1.0f / sum);
      std::fill(row + visible, row + keys, 0.0f);
    }
    if (p.weights) std::fill(row + keys, row + p.seqKV, 0.0f);
  }

  GemmProblem o{};
  o.m = rows;
  o.n = p.headDimV;
  o.k = keys;
  o.alpha = 1.0f;
  o.a = {scores, ld, 1};
  o.b = {vBase, p.v.seqStride, p.v.dimStride};
  o.out = oBase;
  o.outRowStride = p.outView.seqStride;
  o.outColStride = p.outView.dimStride;
  o.accumulate = false;
  gemmSerial(o);
}

}  // namespace

void attentionForward(const AttentionProblem& p) {
  if (p.batch == 0 || p.heads == 0 || p.seqQ == 0) return;
  // Nothing to write: skip the scores (seqKV is unbounded when k and v are empty).
  if (p.headDimV == 0 && p.weights == nullptr) return;
  const int64_t tilesPerHead = (p.seqQ + kAttentionQueryTile - 1) / kAttentionQueryTile;
  const int64_t tasks = p.batch * p.heads * tilesPerHead;
  parallelFor(tasks, [&](int64_t t) {
    const int64_t tile = t % tilesPerHead;
    const int64_t bh = t / tilesPerHead;
    const int64_t i0 = tile * kAttentionQueryTile;
    attentionTile(p, bh / p.heads, bh % p.heads, i0, std::min(p.seqQ, i0 + kAttentionQueryTile));
  });
}

}  // namespace mhsa
