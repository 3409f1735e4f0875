// attention: argument checking and stride derivation for the three layouts.
#pragma once

#include <vector>

#include "../kernels/attention.h"
#include "call_args.h"
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
  double softcap = 0;                        // 0: none
  double windowLeft = -1, windowRight = -1;  // -1: unlimited
  bool hasSinks = false;
  int64_t sinksLength = 0;
  // With hasStrides, the strides in floats of axes 0-2 of q, k and v, in the
  // layout's shape order (axis 3 is contiguous): views that read the block's
  // fused QKV output or a KV cache's storage in place. Each such tensor's
  // length must reach exactly its last element.
  bool hasStrides = false;
  int64_t strides[3][3] = {};
};

// On success fills p's sizes, strides, scale and flags; the data pointers are
// the caller's to set (q.data, k.data, v.data, out, mask, keyPadding, weights).
Status planAttention(const AttentionArgs& args, AttentionProblem* p);

// Logical [batch, head, seq, dim] sizes of a 4-D shape in the given layout.
void logicalDims(AttentionLayout layout, const Shape& s, int64_t* b, int64_t* h, int64_t* seq,
                 int64_t* dim);

// attention(q, k, v, out, mask?, keyPaddingMask?, weights?, sinks?, keyLengths?, kScales?, vScales?).
// keyLengths (int32 [batch]) is copied into the call: the kernel's key ranges
// come from it, so a later change to the caller's buffer cannot move them.
// With kvInt8, k and v are Int8Arrays with contiguous rows whose axis strides
// are multiples of the row width, and kScales (vScales) holds one float per
// row of k (v), the row at element offset o having scale [o / width].
struct AttentionCall {
  AttentionProblem problem{};
  std::vector<int64_t> keyLengths;
};
Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, const BufferArg& keyLengths,
                        AttentionCall* call, const BufferArg& kScales = BufferArg{},
                        const BufferArg& vScales = BufferArg{});
// The same without keyLengths.
Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, AttentionCall* call);
void runCall(const AttentionCall& call);

}  // namespace mhsa
