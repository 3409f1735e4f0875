// Per-thread scratch buffers that grow on demand and are reused across calls,
// so hot paths do not allocate once warmed up.
#pragma once

#include <cstddef>
#include <vector>

namespace mhsa {

enum class ScratchSlot { GemmPackA, GemmPackB, AttentionScores, Count };

// A buffer of at least n floats owned by the calling thread, valid until the
// next scratchFloats() call on this thread with the same slot. May throw
// std::bad_alloc, which the binding turns into an Error.
inline float* scratchFloats(ScratchSlot slot, size_t n) {
  thread_local std::vector<float> buffers[static_cast<int>(ScratchSlot::Count)];
  std::vector<float>& b = buffers[static_cast<int>(slot)];
  if (b.size() < n) {
    b.clear();
    b.shrink_to_fit();
    b.resize(n);
  }
  return b.data();
}

}  // namespace mhsa
