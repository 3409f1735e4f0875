// Reading the numeric arguments of a native call. lib/native.ts packs every
// shape, flag and scalar of one call into a single array of doubles; this
// reader checks each value as it hands it out. Pure C++ (no Node headers), so
// the binding, the native tests and the fuzzers decode calls the same way.
#pragma once

#include <cstddef>

#include "shape.h"

namespace mhsa {

class DescriptorReader {
 public:
  DescriptorReader(const double* data, size_t length, const char* fn) : data_(data), length_(length), fn_(fn) {}

  // A rank (0..32) followed by that many dims, each a non-negative safe integer.
  Shape shape(const char* arg);
  // Any double, NaN included: the op decides what it accepts.
  double number(const char* arg);
  // 0 or 1.
  bool flag(const char* arg);
  // True when every value has been read: an optional trailing field is absent.
  bool atEnd() const { return pos_ >= length_; }
  // The first error met, or a RangeError if values are left unread.
  Status finish() const;

 private:
  // Next value, or NaN after recording "too short" (later reads then fail quietly).
  double next(const char* arg);
  void fail(std::string message);

  const double* data_;
  size_t length_;
  size_t pos_ = 0;
  const char* fn_;
  Status status_;
};

}  // namespace mhsa
