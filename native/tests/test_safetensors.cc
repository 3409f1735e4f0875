// The safetensors reader under the sanitizers: a valid file's entries and
// metadata, every truncation and header-length field of it (an error or a
// consistent result, never a read outside the image), the error class of each
// kind of damage, and the F16/BF16 decoders over all 65536 bit patterns.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../formats/safetensors.h"
#include "check.h"

using namespace mhsa;

namespace {

// 8-byte little-endian length, header text, data bytes; each in its own exact-size allocation.
std::vector<uint8_t> image(const std::string& header, const std::vector<uint8_t>& data, uint64_t length = UINT64_MAX) {
  if (length == UINT64_MAX) length = header.size();
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status parse(const std::vector<uint8_t>& bytes, SafetensorsHeader* h) {
  // A copy of exactly the image's size, so AddressSanitizer flags any read past it.
  std::vector<uint8_t> exact(bytes);
  exact.shrink_to_fit();
  return parseSafetensors(exact.data(), exact.size(), h);
}

const char* const kValidHeader =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"caf\\u00e9\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"
    "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[24,32]},"
    "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,7],\"data_offsets\":[5,5]}}";

}  // namespace

TEST(safetensors_valid_file) {
  SafetensorsHeader h;
  const Status st = parse(image(kValidHeader, std::vector<uint8_t>(40, 1)), &h);
  CHECK_MSG(st.ok(), st.message);
  CHECK(h.dataStart == 8 + static_cast<int64_t>(std::strlen(kValidHeader)));
  CHECK(h.dataLength == 40);
  CHECK(h.metadata.size() == 1 && h.metadata[0].first == "format" && h.metadata[0].second == "pt");
  CHECK(h.entries.size() == 4);
  if (h.entries.size() != 4) return;
  CHECK(h.entries[0].name == "w" && h.entries[0].shape == Shape({2, 2}) && h.entries[0].elementBytes == 4);
  CHECK(h.entries[1].name == "caf\xc3\xa9" && h.entries[1].begin == 16 && h.entries[1].end == 22);
  CHECK(h.entries[2].dtype == "I64" && h.entries[2].elementBytes == 8);
  CHECK(h.entries[3].shape == Shape({0, 7}) && h.entries[3].begin == h.entries[3].end);
}

TEST(safetensors_every_truncation_and_header_length) {
  const std::vector<uint8_t> whole = image(kValidHeader, std::vector<uint8_t>(40, 1));
  // The last entry ends 32 bytes into the data: any shorter image cuts into the
  // header or leaves that entry outside the data; longer ones only lose padding.
  const size_t needed = 8 + std::strlen(kValidHeader) + 32;
  for (size_t n = 0; n <= whole.size(); ++n) {
    SafetensorsHeader h;
    const Status st = parse(std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<long>(n)), &h);
    CHECK_MSG(st.ok() == (n >= needed), "truncated to " + std::to_string(n) + " bytes: " + st.message);
    CHECK(st.ok() || !st.message.empty());
  }
  const uint64_t lengths[] = {0, 1, 2, 7, 8, std::strlen(kValidHeader) - 1, std::strlen(kValidHeader) + 1,
                              whole.size() - 8, whole.size() - 7, uint64_t{1} << 31, uint64_t{1} << 63, UINT64_MAX - 1};
  for (const uint64_t len : lengths) {
    std::vector<uint8_t> bytes = whole;
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(len >> (8 * i));
    SafetensorsHeader h;
    const Status st = parse(bytes, &h);
    CHECK_MSG(!st.ok(), "header length " + std::to_string(len) + " was accepted");
  }
}

TEST(safetensors_error_classes) {
  struct Case {
    const char* header;
    size_t dataBytes;
    Status::Kind kind;
    const char* fragment;
  };
  const Case cases[] = {
      {"", 0, Status::Kind::Type, "the 0-byte header is not valid UTF-8 JSON"},
      {"[1]", 0, Status::Kind::Type, "must be a JSON object, received an array"},
      {"{\"a\":1", 0, Status::Kind::Type, "unexpected end of the header"},
      {"{\"a\":tru}", 0, Status::Kind::Type, "unexpected 't'"},
      {"{\"a\":\"\\x\"}", 0, Status::Kind::Type, "bad escape"},
      {"{\"a\":\"\\u12g4\"}", 0, Status::Kind::Type, "bad \\u escape"},
      {"{\"a\":-}", 0, Status::Kind::Type, "unexpected '}'"},
      {"{\"a\":1.}", 0, Status::Kind::Type, "unexpected '}'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 3, Status::Kind::Range, "fall outside the 3 data bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, Status::Kind::Range, "needs 8 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, Status::Kind::Range, "0 <= begin <= end, received [4, 0]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4]}}", 4, Status::Kind::Range, "received [0.5, 4]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", 4, Status::Kind::Type, "shape must hold numbers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, Status::Kind::Type, "data_offsets must be [begin, end]"},
      {"{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, Status::Kind::Type, "dtype must be a string, received 7"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}",
       8, Status::Kind::Range, "tensors \"a\" [0, 4] and \"b\" [3, 5] overlap"},
  };
  for (const Case& c : cases) {
    SafetensorsHeader h;
    const Status st = parse(image(c.header, std::vector<uint8_t>(c.dataBytes, 0)), &h);
    CHECK_MSG(st.kind == c.kind && st.message.find(c.fragment) != std::string::npos,
              std::string("header ") + c.header + ": got \"" + st.message + "\"");
  }
  // Invalid UTF-8: an overlong '/', a UTF-16 surrogate encoded directly, a code point past U+10FFFF.
  for (const std::string bad : {std::string("{\"\xc0\xaf\":1}"), std::string("{\"\xed\xa0\x80\":1}"),
                                std::string("{\"\xf4\x90\x80\x80\":1}"), std::string("{\"\xe2\x82\":1}")}) {
    SafetensorsHeader h;
    const Status st = parse(image(bad, {}), &h);
    CHECK_MSG(st.kind == Status::Kind::Type && st.message.find("invalid UTF-8 at header byte 2") != std::string::npos,
              st.message);
  }
}

TEST(safetensors_half_decoders_every_bit_pattern) {
  std::vector<uint8_t> src(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    src[2 * h] = static_cast<uint8_t>(h);
    src[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::vector<float> f16(65536), bf16(65536);
  decodeF16(src.data(), 65536, f16.data());
  decodeBF16(src.data(), 65536, bf16.data());
  int wrong16 = 0, wrongBf = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const double want = e == 0x1F ? (m ? NAN : sign * INFINITY)
                        : e == 0   ? sign * std::ldexp(m, -24)
                                   : sign * std::ldexp(1024 + m, e - 25);
    const bool same = std::isnan(want) ? std::isnan(f16[h])
                                       : (f16[h] == want && std::signbit(f16[h]) == std::signbit(want));
    wrong16 += !same;
    uint32_t bits;
    std::memcpy(&bits, &bf16[h], 4);
    wrongBf += bits != h << 16;
  }
  CHECK_MSG(wrong16 == 0, std::to_string(wrong16) + " F16 patterns decoded wrong");
  CHECK_MSG(wrongBf == 0, std::to_string(wrongBf) + " BF16 patterns decoded wrong");
}
