// Scaled dot-product attention over strided 4-D views, batched over batch and heads:
//   out[b,h] = softmax(softcap(scale * q[b,h] k[b,g]^T) + mask[b,h] + padding + window) v[b,g]
// with g = h / (heads / kvHeads) (grouped-query attention), softcap(s) =
// c tanh(s / c), and an optional sink logit per head that joins each row's
// softmax denominator only.
#pragma once

#include <cstdint>

namespace mhsa {

// A 4-D view in logical [batch, head, seq, dim] order; strides in elements.
struct Strided4 {
  const float* data;
  int64_t batchStride, headStride, seqStride, dimStride;
};

// One float per row of an int8 K or V: the row (b, h, j) holds
// data[b * batchStride + h * headStride + j * seqStride].
struct RowScales {
  const float* data;
  int64_t batchStride, headStride, seqStride;
};

struct AttentionProblem {
  int64_t batch, heads, kvHeads, seqQ, seqKV, headDim, headDimV;
  Strided4 q, k, v;
  // bf16 keys and values (a bf16 KV cache): with kvBf16, k.data and v.data
  // are null and kBf16 and vBf16 hold the rows at k's and v's strides. They
  // are widened exactly, so the result is that of float K and V holding the
  // same values.
  bool kvBf16;
  const uint16_t* kBf16;
  const uint16_t* vBf16;
  // int8 keys and values (an int8 KV cache): with kvInt8, k.data and v.data
  // are null, kInt8 and vInt8 hold the rows at k's and v's strides, and each
  // row's value is its int8 values times its scale. The tiled path widens
  // each row to those floats; the decode path applies the scales to the
  // scores and to the weights, which rounds differently (within float32's
  // rounding of the same sums).
  bool kvInt8;
  const int8_t* kInt8;
  const int8_t* vInt8;
  RowScales kScales, vScales;
  float* out;  // strides as in outView (its data pointer is ignored)
  Strided4 outView;
  float scale;
  // Query i of batch entry b sits at key position pos = i + (L_b - seqQ) and
  // sees keys [pos - windowLeft, pos + windowRight] of [0, L_b) (a side < 0 is
  // unlimited); causal caps the right side at 0. L_b = keyLengths[b], or
  // seqKV without keyLengths.
  bool causal;
  int64_t windowLeft, windowRight;
  float softcap;        // 0: none
  const float* sinks;   // [heads] logits (natural units); may be null
  // Additive mask in [batch, head, seqQ, seqKV] order; a broadcast dim has stride 0.
  const float* mask;
  int64_t maskStride[4];
  const uint8_t* keyPadding;  // [batch, seqKV], nonzero = ignore that key; may be null
  float* weights;             // contiguous [batch, heads, seqQ, seqKV]; may be null
  const int64_t* keyLengths;  // [batch], each in [0, seqKV]: the keys each entry has; may be null
};

// Queries handled together. Per thread, the packed K and V of one (batch, kv
// head) are the only O(seqKV) buffers; the tile's transposed scores take one
// key block (kAttentionKeyBlock x 96), or seqKV x 96 when the weights are
// returned. Memory stays linear in sequence length.
// 96 is a whole number of micro-tiles both ways on every ISA: 8 x 12 and 3 x 32
// (AVX-512), 16 x 6 and 6 x 16 (AVX2), 8 x 12 and 12 x 8 (NEON), 24 x 4 and
// 6 x 16 (portable).
constexpr int64_t kAttentionQueryTile = 96;

// Keys per online-softmax block: the scores of a block (768 x 96 floats,
// 288 KiB) stay in L2. A multiple of kGemmKC (V is packed in KC-key blocks)
// and of every micro-kernel's MR (K is packed in MR-key slivers).
constexpr int64_t kAttentionKeyBlock = 768;

// Largest distance in bytes between the first and the last element of one
// head's K (or V) rows for the tiles to read them in place (attention.cc,
// readsKVInPlace): [batch, heads, seq, 64] rows are 256 bytes apart, the rows
// of [batch, 197, 12 * 64] span 605 KB, those of a fused [batch, 197, 3 * 768]
// projection 1.8 MB.
constexpr int64_t kAttentionInPlaceMaxSpan = 768 * 1024;

// Up to this many queries per head take the decode path: dot products and
// axpys streaming K and V once, with no packing (a decode step is memory-bound).
constexpr int64_t kAttentionDecodeMaxQueries = 4;

void attentionForward(const AttentionProblem& p);

}  // namespace mhsa
