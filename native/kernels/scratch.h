// Per-thread scratch buffers that grow on demand and are reused across calls,
// so hot paths do not allocate once warmed up.
#pragma once

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
  Count
};

// A buffer of at least n floats owned by the calling thread, valid until the
// next scratchFloats() call on this thread with the same slot. 64-byte aligned,
// so the micro-kernels' full-vector loads of packed panels never straddle a
// cache line. May throw std::bad_alloc, which the binding turns into an error.
inline float* scratchFloats(ScratchSlot slot, size_t n) {
  constexpr size_t kAlignFloats = 16;  // 64 bytes
  thread_local std::vector<float> buffers[static_cast<int>(ScratchSlot::Count)];
  std::vector<float>& b = buffers[static_cast<int>(slot)];
  if (b.size() < n + kAlignFloats) {
    b.clear();
    b.shrink_to_fit();
    b.resize(n + kAlignFloats);
  }
  const auto addr = reinterpret_cast<uintptr_t>(b.data());
  return b.data() + ((64 - addr % 64) % 64) / sizeof(float);
}

}  // namespace mhsa
