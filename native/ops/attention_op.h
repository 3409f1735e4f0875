// attention: argument checking and stride derivation for the three layouts.
#pragma once

#include "../kernels/attention.h"
#include "shape.h"

namespace mhsa {

// bhsd: [batch, heads, seq, dim]; bshd: [batch, seq, heads, dim] (the packed
// projection output viewed per head); bhds: [batch, heads, dim, seq] (tokens as columns).
enum class AttentionLayout { Bhsd = 0, Bshd = 1, Bhds = 2 };

struct AttentionArgs {
  AttentionLayout layout = AttentionLayout::Bhsd;
  Shape q, k, v, out;  // 4-D in the layout's order
  int64_t qLength = 0, kLength = 0, vLength = 0, outLength = 0;
  bool hasMask = false;
  Shape mask;
  int64_t maskLength = 0;
  bool hasKeyPadding = false;
  int64_t keyPaddingLength = 0;
  bool hasWeights = false;
  int64_t weightsLength = 0;
  bool hasScale = false;
  double scale = 0;
  bool causal = false;
  // Token (seq) strides of q, k and v in floats, bshd layout only; 0 means
  // heads * headDim (contiguous). Larger strides read q, k and v in place from
  // one fused projection output [batch, seq, 3 * heads * headDim].
  int64_t seqStride[3] = {0, 0, 0};
};

// On success fills p's sizes, strides, scale and flags; the data pointers are
// the caller's to set (q.data, k.data, v.data, out, mask, keyPadding, weights).
Status planAttention(const AttentionArgs& args, AttentionProblem* p);

// Logical [batch, head, seq, dim] sizes of a 4-D shape in the given layout.
void logicalDims(AttentionLayout layout, const Shape& s, int64_t* b, int64_t* h, int64_t* seq,
                 int64_t* dim);

}  // namespace mhsa
