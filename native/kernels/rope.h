// Rotary position embedding (RoFormer): each pair of a head's first rotaryDim
// features turns by the angle position · theta^(−2i / rotaryDim). The pairs are
// (i, i + rotaryDim/2) in the rotate-half form (LLaMA, GPT-NeoX) and (2i, 2i+1)
// in the interleaved form (GPT-J). Features past rotaryDim pass unchanged.
#pragma once

#include <cstdint>

namespace mhsa {

struct RopeProblem {
  const float* x = nullptr;
  float* out = nullptr;  // may be x itself
  int64_t batch = 0, seq = 0, heads = 0, headDim = 0;
  // Element strides of x and out (one layout for both); features are contiguous.
  int64_t batchStride = 0, seqStride = 0, headStride = 0;
  int64_t rotaryDim = 0;  // even, <= headDim
  bool interleaved = false;
  double theta = 10000;
  // Token s of batch entry b sits at positions[s] ([seq]), positions[b·seq + s]
  // ([batch, seq]) or, with no positions, offset + s.
  const int32_t* positions = nullptr;
  bool positionsPerBatch = false;
  int64_t offset = 0;
};

void ropeForward(const RopeProblem& p);

}  // namespace mhsa
