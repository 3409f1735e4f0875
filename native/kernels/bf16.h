// bfloat16: the top 16 bits of a float (8 exponent bits, 7 of mantissa).
// Stored as uint16_t; the conversion from float rounds to nearest, ties to
// even, in integer arithmetic, as PyTorch's c10::BFloat16 does, so a weight
// rounded here has the bits torch's `w.to(torch.bfloat16)` gives (subnormals
// kept, NaN as 0x7FC0). The hardware's VCVTNEPS2BF16 would flush subnormal
// inputs to zero, so no path uses it: every path rounds alike.
#pragma once

#include <cstdint>
#include <cstring>

namespace mhsa {

inline uint16_t floatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// x rounded to the nearest bf16 and widened back.
inline float roundToBf16(float x) { return bf16ToFloat(floatToBf16(x)); }

}  // namespace mhsa
