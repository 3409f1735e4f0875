// The safetensors container format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of UTF-8 JSON describing
// each tensor ({"name": {"dtype", "shape", "data_offsets": [begin, end]}},
// plus an optional "__metadata__" object of strings), then the raw tensor
// bytes. Model files come from anywhere, so everything in them is untrusted:
// parseSafetensors checks the whole header, and every entry against the data
// section, before any tensor byte is read. The parser is pure C++ (no Node)
// so the native tests and a libFuzzer harness run it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../ops/shape.h"

namespace mhsa {

struct SafetensorsEntry {
  std::string name;   // UTF-8, may contain any character the JSON string encodes
  std::string dtype;  // as written: F32, BF16, I64, ... (or anything else)
  Shape shape;
  int64_t begin = 0;  // byte offsets relative to the start of the data section
  int64_t end = 0;
  int elementBytes = 0;  // bytes per element, 0 for a dtype the format does not define
};

struct SafetensorsHeader {
  int64_t dataStart = 0;   // 8 + N: where the data section starts in the file
  int64_t dataLength = 0;  // bytes from dataStart to the end of the file
  std::vector<SafetensorsEntry> entries;                     // in file order
  std::vector<std::pair<std::string, std::string>> metadata;  // in file order
};

// Parses and checks a whole safetensors image of `length` bytes. On success
// every entry satisfies 0 <= begin <= end <= dataLength, entries with bytes do
// not overlap, and for a known dtype (end - begin) = elementBytes * prod(shape).
// Errors mirror the JS classes: malformed content (not JSON, wrong kinds of
// values) is a Type error, sizes and offsets that do not fit are Range errors.
// Messages do not name the function or file; the caller prefixes them.
Status parseSafetensors(const uint8_t* bytes, size_t length, SafetensorsHeader* out);

// Bytes per element of a dtype the format defines, or 0.
int safetensorsDtypeBytes(const std::string& dtype);

// count little-endian IEEE half / bfloat16 values at src (any alignment) to
// float, exactly (every half and bfloat16 is a float; NaN payloads are kept).
void decodeF16(const uint8_t* src, int64_t count, float* out);
void decodeBF16(const uint8_t* src, int64_t count, float* out);

}  // namespace mhsa
