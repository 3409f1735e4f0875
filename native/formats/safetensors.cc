#include "safetensors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

namespace mhsa {
namespace {

// Deeper nesting than this is refused rather than recursed into: the header
// of a real file nests three levels, and the limit bounds the parser's stack.
constexpr int kMaxJsonDepth = 256;

// Received values are quoted in messages up to this many bytes.
constexpr size_t kMaxQuotedBytes = 96;

// Index of the first byte that breaks UTF-8 (overlong forms, surrogates and
// code points past U+10FFFF included, as a fatal TextDecoder rejects them),
// or `length` when the text is valid.
size_t firstInvalidUtf8(const uint8_t* s, size_t length) {
  size_t i = 0;
  while (i < length) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the first continuation byte
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;  // no overlong 4-byte forms
      if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    } else {
      return i;
    }
    if (length - i <= extra) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k <= extra; ++k)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += extra + 1;
  }
  return length;
}

void appendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// A string as JSON.stringify would quote it, for messages.
std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += ch;
    } else if (c < 0x20) {
      static const char* const kHex = "0123456789abcdef";
      r += "\\u00";
      r += kHex[c >> 4];
      r += kHex[c & 15];
    } else {
      r += ch;
    }
  }
  return r + '"';
}

// A number as JS would print it in a template string (integers without an
// exponent up to 2^63; otherwise the shortest round-trip form).
std::string formatNumber(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x == std::floor(x) && std::fabs(x) < 9.2e18) return std::to_string(static_cast<int64_t>(x));
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// The raw JSON text of a value (or "undefined" when absent), cut short for messages.
struct Span {
  const char* begin = nullptr;
  const char* end = nullptr;

  bool present() const { return begin != nullptr; }
  char first() const { return begin < end ? *begin : '\0'; }
  std::string text() const {
    if (!present()) return "undefined";
    size_t n = static_cast<size_t>(end - begin);
    if (n <= kMaxQuotedBytes) return std::string(begin, n);
    n = kMaxQuotedBytes;
    while (n > 0 && (static_cast<unsigned char>(begin[n]) & 0xC0) == 0x80) --n;  // whole characters only
    return std::string(begin, n) + "...";
  }
};

// Reads JSON from [p, end). Every read is bounds-checked: the syntax pass runs
// it on untrusted text, the semantic pass re-reads the same text by spans.
class JsonCursor {
 public:
  JsonCursor(const char* begin, const char* end) : origin_(begin), p_(begin), end_(end) {}
  explicit JsonCursor(const Span& s) : origin_(s.begin), p_(s.begin), end_(s.end) {}

  const char* position() const { return p_; }
  bool atEnd() const { return p_ >= end_; }
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  const std::string& error() const { return error_; }
  bool tooDeep() const { return tooDeep_; }

  void skipWhitespace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool consume(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  // Checks the grammar of one value and moves past it.
  bool skipValue(int depth = 0) {
    if (depth > kMaxJsonDepth) {
      tooDeep_ = true;
      return fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    switch (peek()) {
      case '{':
        return skipContainer('}', depth, true);
      case '[':
        return skipContainer(']', depth, false);
      case '"':
        return readString(nullptr);
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return readNumber(nullptr);
        return unexpected();
    }
  }

  // A string token, its escapes decoded to UTF-8 (out may be null to skip).
  bool readString(std::string* out) {
    if (!consume('"')) return unexpected();
    while (true) {
      if (atEnd()) return fail("unterminated string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return fail("control character in a string at header byte " + std::to_string(offset()));
      if (c != '\\') {
        if (out) out->push_back(static_cast<char>(c));
        ++p_;
        continue;
      }
      ++p_;
      const char e = peek();
      ++p_;
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("unpaired surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low;
            if (!consume('\\') || !consume('u') || !hex4(&low) || low < 0xDC00 || low > 0xDFFF)
              return fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (out) appendUtf8(cp, out);
          continue;
        }
        default:
          --p_;
          return fail("bad escape in a string at header byte " + std::to_string(offset()));
      }
      if (out) out->push_back(plain);
    }
  }

  // A number token (JSON grammar), its value in *out (may be null). Values
  // beyond a double's range read as ±Infinity, tiny ones as ±0, as in JS.
  bool readNumber(double* out) {
    const char* start = p_;
    consume('-');
    if (consume('0')) {
      // no further integer digits after a leading zero
    } else if (peek() >= '1' && peek() <= '9') {
      digits();
    } else {
      return unexpected();
    }
    if (consume('.') && !digits()) return unexpected();
    bool negativeExponent = false;
    if (consume('e') || consume('E')) {
      negativeExponent = peek() == '-';
      if (!consume('+')) consume('-');
      if (!digits()) return unexpected();
    }
    if (out) {
      const auto r = std::from_chars(start, p_, *out);
      if (r.ec == std::errc::result_out_of_range) {
        const double sign = *start == '-' ? -1.0 : 1.0;
        *out = negativeExponent ? sign * 0.0 : sign * HUGE_VAL;
      } else if (r.ec != std::errc() || r.ptr != p_) {
        return fail("unreadable number");
      }
    }
    return true;
  }

  size_t offset() const { return static_cast<size_t>(p_ - origin_); }

 private:
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  bool unexpected() {
    if (atEnd()) return fail("unexpected end of the header");
    const auto c = static_cast<unsigned char>(*p_);
    char shown[16];
    if (c >= 0x20 && c < 0x7F)
      std::snprintf(shown, sizeof shown, "'%c'", c);
    else
      std::snprintf(shown, sizeof shown, "byte 0x%02x", c);
    return fail(std::string("unexpected ") + shown + " at header byte " + std::to_string(offset()));
  }

  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return unexpected();
    p_ += n;
    return true;
  }

  bool digits() {
    const char* start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ > start;
  }

  bool hex4(uint32_t* v) {
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        return fail("bad \\u escape at header byte " + std::to_string(offset()));
      *v = *v * 16 + d;
      ++p_;
    }
    return true;
  }

  bool skipContainer(char close, int depth, bool object) {
    ++p_;
    skipWhitespace();
    if (consume(close)) return true;
    while (true) {
      if (object) {
        if (peek() != '"') return unexpected();
        if (!readString(nullptr)) return false;
        skipWhitespace();
        if (!consume(':')) return unexpected();
        skipWhitespace();
      }
      if (!skipValue(depth + 1)) return false;
      skipWhitespace();
      if (consume(close)) return true;
      if (!consume(',')) return unexpected();
      skipWhitespace();
    }
  }

  const char* origin_;
  const char* p_;
  const char* end_;
  std::string error_;
  bool tooDeep_ = false;
};

// What the semantic pass reports if the text stops being the JSON the syntax
// pass accepted: possible only when another thread writes the bytes (a
// SharedArrayBuffer) during the call. The loops below stop instead of spinning.
Status changedWhileRead() { return Status::typeError("the header changed while it was being read"); }

// Calls member(key, valueSpan) for each member of the object at `span`, in
// order; stops at the first non-ok Status. The text is known to be valid JSON.
template <typename Member>
Status forEachMember(const Span& span, Member member) {
  JsonCursor c(span);
  c.consume('{');
  c.skipWhitespace();
  if (c.consume('}')) return Status::success();
  while (true) {
    if (c.peek() != '"') return changedWhileRead();
    std::string key;
    c.readString(&key);
    c.skipWhitespace();
    c.consume(':');
    c.skipWhitespace();
    Span value{c.position(), nullptr};
    c.skipValue();
    value.end = c.position();
    Status st = member(key, value);
    if (!st.ok()) return st;
    c.skipWhitespace();
    if (c.consume('}') || c.atEnd()) return Status::success();
    c.consume(',');
    c.skipWhitespace();
  }
}

// The elements of the array at `span` that are numbers; false if any is not.
bool readNumberArray(const Span& span, std::vector<double>* values) {
  JsonCursor c(span);
  c.consume('[');
  c.skipWhitespace();
  if (c.consume(']')) return true;
  bool allNumbers = true;
  while (!c.atEnd()) {
    double v = 0;
    const char* before = c.position();
    if (c.peek() == '-' || (c.peek() >= '0' && c.peek() <= '9')) {
      c.readNumber(&v);
      values->push_back(v);
    } else {
      c.skipValue();
      allNumbers = false;
    }
    if (c.position() == before) return false;  // not the text the syntax pass accepted (changedWhileRead)
    c.skipWhitespace();
    if (c.consume(']')) break;
    c.consume(',');
    c.skipWhitespace();
  }
  return allNumbers;
}

bool isSafeInteger(double x) { return std::fabs(x) <= kMaxSafeInteger && x == std::floor(x); }

std::string rangeText(int64_t begin, int64_t end) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "[" + std::string&& in C++20.
  std::string text = "[";
  text += std::to_string(begin);
  text += ", ";
  text += std::to_string(end);
  text += "]";
  return text;
}

Status parseEntry(const std::string& name, const Span& value, int64_t dataLength, SafetensorsEntry* e) {
  const std::string t = "tensor " + quoted(name) + ": ";
  if (value.first() != '{')
    return Status::typeError(t + "expected an object { dtype, shape, data_offsets }, received " + value.text());
  Span dtype, shape, offsets;
  Status st = forEachMember(value, [&](const std::string& key, const Span& v) {
    Span* slot = key == "dtype" ? &dtype : key == "shape" ? &shape : key == "data_offsets" ? &offsets : nullptr;
    if (!slot) return Status::success();  // other keys are ignored, as the format's readers do
    if (slot->present()) return Status::typeError(t + "\"" + key + "\" appears twice");
    *slot = v;
    return Status::success();
  });
  if (!st.ok()) return st;

  if (dtype.first() != '"') return Status::typeError(t + "dtype must be a string, received " + dtype.text());
  JsonCursor(dtype).readString(&e->dtype);

  if (shape.first() != '[') return Status::typeError(t + "shape must be an array of dims, received " + shape.text());
  std::vector<double> dims;
  if (!readNumberArray(shape, &dims)) return Status::typeError(t + "shape must hold numbers, received " + shape.text());
  for (const double d : dims) {
    if (!isSafeInteger(d) || d < 0)
      return Status::rangeError(t + "shape dims must be integers in [0, 2^53 - 1], received " + shape.text());
    e->shape.push_back(static_cast<int64_t>(d));
  }

  std::vector<double> range;
  if (offsets.first() != '[' || !readNumberArray(offsets, &range) || range.size() != 2)
    return Status::typeError(t + "data_offsets must be [begin, end], received " + offsets.text());
  if (!isSafeInteger(range[0]) || !isSafeInteger(range[1]) || range[0] < 0 || range[0] > range[1])
    return Status::rangeError(t + "data_offsets must be integers with 0 <= begin <= end, received [" +
                              formatNumber(range[0]) + ", " + formatNumber(range[1]) + "]");
  e->begin = static_cast<int64_t>(range[0]);
  e->end = static_cast<int64_t>(range[1]);
  if (e->end > dataLength)
    return Status::rangeError(t + "data_offsets " + rangeText(e->begin, e->end) + " fall outside the " +
                              std::to_string(dataLength) + " data bytes");

  e->elementBytes = safetensorsDtypeBytes(e->dtype);
  if (e->elementBytes != 0) {
    // The element count saturates at 2^53 - 1, far beyond any byte count that fits.
    int64_t count = 1;
    for (const int64_t d : e->shape) count = std::min(mulSat(count, d), static_cast<int64_t>(kMaxSafeInteger));
    const int64_t needs = count * e->elementBytes;
    if (needs != e->end - e->begin) {
      // The message's count in double, which does not saturate (2^80 bytes reads as ~1.2e24).
      double exact = static_cast<double>(e->elementBytes);
      for (const int64_t d : e->shape) exact *= static_cast<double>(d);
      return Status::rangeError(t + "shape " + shapeToString(e->shape) + " of " + e->dtype + " needs " +
                                formatNumber(exact) + " bytes, data_offsets " + rangeText(e->begin, e->end) +
                                " hold " + std::to_string(e->end - e->begin));
    }
  }
  e->name = name;
  return Status::success();
}

Status parseMetadata(const Span& value, std::vector<std::pair<std::string, std::string>>* out) {
  if (value.first() != '{')
    return Status::typeError("__metadata__ must be an object of strings, received " + value.text());
  std::unordered_set<std::string> seen;
  return forEachMember(value, [&](const std::string& key, const Span& v) {
    if (v.first() != '"')
      return Status::typeError("__metadata__[" + quoted(key) + "] must be a string, received " + v.text());
    if (!seen.insert(key).second) return Status::typeError("__metadata__ has " + quoted(key) + " twice");
    std::string text;
    JsonCursor(v).readString(&text);
    out->emplace_back(key, std::move(text));
    return Status::success();
  });
}

Status checkNoOverlap(const std::vector<SafetensorsEntry>& entries) {
  // Indices of the entries that hold bytes, by begin; ties keep file order so
  // the message names the earlier entry first.
  std::vector<size_t> order;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].end > entries[i].begin) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].begin != entries[b].begin ? entries[a].begin < entries[b].begin : a < b;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const SafetensorsEntry& a = entries[order[i - 1]];
    const SafetensorsEntry& b = entries[order[i]];
    if (b.begin < a.end)
      return Status::rangeError("tensors " + quoted(a.name) + " " + rangeText(a.begin, a.end) + " and " +
                                quoted(b.name) + " " + rangeText(b.begin, b.end) + " overlap");
  }
  return Status::success();
}

uint16_t loadLe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

int safetensorsDtypeBytes(const std::string& dtype) {
  static const std::pair<const char*, int> kTable[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  for (const auto& [name, bytes] : kTable)
    if (dtype == name) return bytes;
  return 0;
}

Status parseSafetensors(const uint8_t* bytes, size_t length, SafetensorsHeader* out) {
  *out = SafetensorsHeader{};
  if (length < 8)
    return Status::rangeError("truncated: " + std::to_string(length) + " bytes, shorter than the 8-byte header length");
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | bytes[i];
  if (headerLength > length - 8)
    return Status::rangeError("header length " + std::to_string(headerLength) + " exceeds the " +
                              std::to_string(length - 8) + " bytes after the 8-byte prefix");
  const size_t n = static_cast<size_t>(headerLength);
  out->dataStart = static_cast<int64_t>(8 + n);
  out->dataLength = static_cast<int64_t>(length - 8 - n);
  const std::string notJson = "the " + std::to_string(n) + "-byte header is not valid UTF-8 JSON (";

  // Pass 1: the whole header is UTF-8 and one JSON value, before any of it is interpreted.
  const size_t bad = firstInvalidUtf8(bytes + 8, n);
  if (bad < n) return Status::typeError(notJson + "invalid UTF-8 at header byte " + std::to_string(bad) + ")");
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  JsonCursor syntax(text, text + n);
  syntax.skipWhitespace();
  const char* valueBegin = syntax.position();
  if (!syntax.skipValue()) {
    if (syntax.tooDeep())
      return Status::rangeError("the " + std::to_string(n) + "-byte header nests deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels, more than this reader follows");
    return Status::typeError(notJson + syntax.error() + ")");
  }
  const Span header{valueBegin, syntax.position()};
  syntax.skipWhitespace();
  if (!syntax.atEnd())
    return Status::typeError(notJson + "unexpected text after the JSON value at header byte " +
                             std::to_string(syntax.offset()) + ")");
  if (header.first() != '{')
    return Status::typeError("the header must be a JSON object, received " +
                             (header.first() == '[' ? std::string("an array") : header.text()));

  // Pass 2: metadata and entries, each checked in full before anything is decoded.
  std::unordered_set<std::string> names;
  bool sawMetadata = false;
  Status st = forEachMember(header, [&](const std::string& key, const Span& value) {
    if (key == "__metadata__") {
      if (sawMetadata) return Status::typeError("__metadata__ appears twice");
      sawMetadata = true;
      return parseMetadata(value, &out->metadata);
    }
    if (!names.insert(key).second) return Status::typeError("tensor " + quoted(key) + " appears twice");
    SafetensorsEntry e;
    Status entry = parseEntry(key, value, out->dataLength, &e);
    if (entry.ok()) out->entries.push_back(std::move(e));
    return entry;
  });
  if (!st.ok()) return st;
  return checkNoOverlap(out->entries);
}

void decodeF16(const uint8_t* src, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t h = loadLe16(src + 2 * i);
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1F;
    const uint32_t mantissa = h & 0x3FF;
    if (exponent == 0x1F) {
      out[i] = floatFromBits(sign | 0x7F800000u | (mantissa << 13));  // ±Infinity, NaN with its payload
    } else if (exponent != 0) {
      out[i] = floatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));  // rebias 15 -> 127
    } else {
      // ±0 and subnormals: mantissa * 2^-24 is exact in float; the sign bit keeps -0.
      const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
      uint32_t bits;
      std::memcpy(&bits, &magnitude, sizeof bits);
      out[i] = floatFromBits(sign | bits);
    }
  }
}

void decodeBF16(const uint8_t* src, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = floatFromBits(static_cast<uint32_t>(loadLe16(src + 2 * i)) << 16);
}

}  // namespace mhsa
