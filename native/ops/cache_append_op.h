// cacheAppend(k, v, keys, values, starts, counts): a KV cache's append
// (kernels/cache_append.h). keys and values are the cache's whole storage,
// [batch, kvHeads, maxLength, headDim or valueDim], float32, both bf16, or
// both int8 with keyScales and valueScales [batch, kvHeads, maxLength]; k
// and v are float32 views with the strides of their batch, position and head
// axes; starts and counts are Int32Arrays of batch entries, copied into the
// call, so a later change to the caller's arrays cannot move a write.
#pragma once

#include <vector>

#include "../kernels/cache_append.h"
#include "call_args.h"

namespace mhsa {

struct CacheAppendCall {
  CacheAppendProblem problem{};
  std::vector<int64_t> starts, counts;
};
Status prepareCacheAppend(const Descriptor& desc, const BufferArg& k, const BufferArg& v, const BufferArg& keys,
                          const BufferArg& values, const BufferArg& starts, const BufferArg& counts,
                          CacheAppendCall* call, const BufferArg& keyScales = BufferArg{},
                          const BufferArg& valueScales = BufferArg{});
void runCall(const CacheAppendCall& call);

}  // namespace mhsa
