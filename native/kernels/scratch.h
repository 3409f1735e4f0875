// Per-thread scratch buffers that grow on demand and are reused across calls,
// so hot paths do not allocate once warmed up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mhsa {

enum class ScratchSlot {
  GemmPackA,
  GemmPackB,
  AttentionScores,
  AttentionPackK,
  AttentionPackV,
  AttentionPackQ,
  AttentionAcc,
  AttentionRow,
  AttentionWidenKV,
  SoftmaxRow,
  Bf16ARow,
  Int8PackA,
  Int8RowScales,
  DecodeQueryInt16,
  Count
};

// Bytes held by every thread's scratch buffers together (reported by info()).
inline std::atomic<int64_t>& scratchBytes() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}

// One thread's buffers; what they hold leaves the count when the thread exits.
struct ScratchBuffers {
  std::vector<float> slots[static_cast<int>(ScratchSlot::Count)];
  ~ScratchBuffers() {
    for (const auto& b : slots) scratchBytes().fetch_sub(static_cast<int64_t>(b.capacity() * sizeof(float)));
  }
};

// A buffer of at least n floats owned by the calling thread, valid until the
// next scratchFloats() call on this thread with the same slot. 64-byte aligned,
// so the micro-kernels' full-vector loads of packed panels never straddle a
// cache line. May throw std::bad_alloc, which the binding turns into an error.
inline float* scratchFloats(ScratchSlot slot, size_t n) {
  constexpr size_t kAlignFloats = 16;  // 64 bytes
  thread_local ScratchBuffers buffers;
  std::vector<float>& b = buffers.slots[static_cast<int>(slot)];
  if (b.size() < n + kAlignFloats) {
    scratchBytes().fetch_sub(static_cast<int64_t>(b.capacity() * sizeof(float)));
    b.clear();
    b.shrink_to_fit();
    b.resize(n + kAlignFloats);
    scratchBytes().fetch_add(static_cast<int64_t>(b.capacity() * sizeof(float)));
  }
  const auto addr = reinterpret_cast<uintptr_t>(b.data());
  return b.data() + ((64 - addr % 64) % 64) / sizeof(float);
}

}  // namespace mhsa
