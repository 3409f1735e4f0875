// rope: rotary position embedding of 4-D q or k, in place or into out.
#pragma once

#include "../kernels/rope.h"
#include "call_args.h"

namespace mhsa {

// rope(x, out, positions?): x and out 4-D in the layout given (bhsd or bshd),
// out = x or disjoint from it; positions an Int32Array of [seq] or
// [batch, seq] non-negative positions, or absent (offset + token index).
struct RopeCall {
  RopeProblem problem{};
};
Status prepareRope(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& positions,
                   RopeCall* call);
void runCall(const RopeCall& call);

}  // namespace mhsa
