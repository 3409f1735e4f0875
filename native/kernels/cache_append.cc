#include "cache_append.h"

#include <cstring>

#include "bf16.h"
#include "gemm_int8.h"

namespace mhsa {
namespace {

void appendRows(const CacheAppendProblem& p, const CacheAppendTensor& t) {
  if (t.dim == 0) return;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t count = p.counts[b], skip = p.positions - count;
    for (int64_t h = 0; h < p.kvHeads; ++h) {
      const int64_t firstRow = (b * p.kvHeads + h) * p.maxLength + p.starts[b], first = firstRow * t.dim;
      for (int64_t i = 0; i < count; ++i) {
        const float* row = t.src + b * t.batchStride + (skip + i) * t.positionStride + h * t.headStride;
        if (t.storage8 != nullptr) {
          t.scales[firstRow + i] = quantizeInt8(row, t.dim, t.storage8 + first + i * t.dim);
        } else if (t.storage16 != nullptr) {
          uint16_t* to = t.storage16 + first + i * t.dim;
          for (int64_t e = 0; e < t.dim; ++e) to[e] = floatToBf16(row[e]);
        } else {
          std::memcpy(t.storage + first + i * t.dim, row, static_cast<size_t>(t.dim) * sizeof(float));
        }
      }
    }
  }
}

}  // namespace

void cacheAppend(const CacheAppendProblem& p) {
  appendRows(p, p.k);
  appendRows(p, p.v);
}

}  // namespace mhsa
