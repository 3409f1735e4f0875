// libFuzzer harness for the safetensors reader: the bytes are a whole file.
// Whatever parseSafetensors accepts must keep its promises (checked here, a
// broken one traps): the header and data sections tile the file, every entry
// lies inside the data with a byte count its shape and dtype agree with, and
// no two entries overlap. Then every float tensor is decoded from exactly its
// bytes, so AddressSanitizer sees any read the checks should have stopped, and
// each F16 value is compared with its definition.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../formats/safetensors.h"

namespace {

using namespace mhsa;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// IEEE half from its definition, independently of decodeF16.
float halfByDefinition(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0x1F) return mantissa ? std::nanf("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

void checkEntry(const SafetensorsHeader& h, const SafetensorsEntry& e, const uint8_t* data) {
  require(0 <= e.begin && e.begin <= e.end && e.end <= h.dataLength);
  require(e.elementBytes == safetensorsDtypeBytes(e.dtype));
  const int64_t bytes = e.end - e.begin;
  if (e.elementBytes != 0) {
    __int128 count = 1;
    for (const int64_t d : e.shape) {
      require(d >= 0);
      count = std::min<__int128>(count * d, static_cast<__int128>(1) << 62);
    }
    require(count * e.elementBytes == bytes);
  }
  const uint8_t* src = data + h.dataStart + e.begin;
  if (e.dtype == "F32") {
    std::vector<float> out(static_cast<size_t>(bytes / 4));
    if (!out.empty()) std::memcpy(out.data(), src, static_cast<size_t>(bytes));
  } else if (e.dtype == "F16" || e.dtype == "BF16") {
    std::vector<float> out(static_cast<size_t>(bytes / 2));
    if (e.dtype == "F16") {
      decodeF16(src, static_cast<int64_t>(out.size()), out.data());
      for (size_t i = 0; i < out.size(); ++i) {
        const float want = halfByDefinition(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
        require(std::isnan(want) ? std::isnan(out[i]) : std::memcmp(&want, &out[i], 4) == 0);
      }
    } else {
      decodeBF16(src, static_cast<int64_t>(out.size()), out.data());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsHeader h;
  const Status st = parseSafetensors(data, size, &h);
  if (!st.ok()) {
    require(!st.message.empty());
    return 0;
  }
  require(h.dataStart >= 8 && static_cast<size_t>(h.dataStart + h.dataLength) == size);
  for (const SafetensorsEntry& e : h.entries) checkEntry(h, e, data);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const SafetensorsEntry& e : h.entries)
    if (e.end > e.begin) ranges.emplace_back(e.begin, e.end);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) require(ranges[i].first >= ranges[i - 1].second);
  return 0;
}
