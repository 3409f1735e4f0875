// A KV cache's append: new positions' key and value rows copied into the
// cache's storage [batch, kvHeads, maxLength, dim] at each batch entry's own
// length, rounded to bf16 when the storage is bf16, or quantized per row
// (gemm_int8.h's quantizeInt8) with each row's scale stored beside it when the
// storage is int8.
#pragma once

#include <cstdint>

namespace mhsa {

// One of k or v: where its rows are read and where they go.
struct CacheAppendTensor {
  const float* src = nullptr;
  // Element strides of src's batch, position and head axes; features are contiguous.
  int64_t batchStride = 0, positionStride = 0, headStride = 0;
  int64_t dim = 0;
  float* storage = nullptr;      // float32 storage, or
  uint16_t* storage16 = nullptr;  // bf16 storage, or
  int8_t* storage8 = nullptr;     // int8 storage, with
  float* scales = nullptr;        // one scale per row: [batch, kvHeads, maxLength]
};

struct CacheAppendProblem {
  CacheAppendTensor k, v;
  int64_t batch = 0, kvHeads = 0, maxLength = 0;
  // Positions in src (n); entry b takes its last counts[b] of them and writes
  // them from position starts[b] on.
  int64_t positions = 0;
  const int64_t* starts = nullptr;
  const int64_t* counts = nullptr;
};

void cacheAppend(const CacheAppendProblem& p);

}  // namespace mhsa
