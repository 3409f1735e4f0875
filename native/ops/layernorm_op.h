// layerNorm (or RMSNorm) over the last axis; out may be x itself.
#pragma once

#include <cstdint>

#include "call_args.h"

namespace mhsa {

// layerNorm(x, out, weight?, bias?). out may be x.
struct LayerNormCall {
  const float* x = nullptr;
  float* out = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  int64_t rows = 0, dim = 0;
  float eps = 1e-5f;
  bool rms = false;
};
Status prepareLayerNorm(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& weight,
                        const BufferArg& bias, LayerNormCall* call);
void runCall(const LayerNormCall& call);

}  // namespace mhsa
