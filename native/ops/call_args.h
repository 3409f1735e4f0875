// What every op's prepare function (calls.h) takes and shares: buffers as the
// binding saw them, the descriptor of doubles built by lib/native.ts, and the
// checks common to all ops.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "descriptor.h"
#include "shape.h"

namespace mhsa {

// A typed array as the binding saw it. present is false for null/undefined.
// length counts elements (floats, or bytes for a Uint8Array).
struct BufferArg {
  const void* data = nullptr;
  int64_t length = 0;
  bool present = false;

  // A Uint16Array of bf16 values (a prepacked bf16 matrix, or a checkpoint's
  // tensor kept in bf16), where the op takes one.
  bool bf16 = false;
  // An Int8Array (a matrix packed in int8), where the op takes one.
  bool int8 = false;

  const float* floats() const { return static_cast<const float*>(data); }
  const uint16_t* halves() const { return static_cast<const uint16_t*>(data); }
  const int8_t* bytes() const { return static_cast<const int8_t*>(data); }
  int64_t elementBytes() const { return int8 ? 1 : bf16 ? 2 : 4; }
  float* mutableFloats() const { return static_cast<float*>(const_cast<void*>(data)); }
};

struct Descriptor {
  const double* data = nullptr;
  size_t length = 0;
};

// RangeError unless out's bytes are disjoint from in's (or, when allowSame,
// exactly the same view). Absent or empty buffers never overlap.
Status checkNoOverlap(const char* fn, const char* outName, const BufferArg& out, int64_t outElementBytes,
                      const char* inName, const BufferArg& in, int64_t inElementBytes, bool allowSame);

inline bool isFiniteFloat(double x) { return std::isfinite(static_cast<float>(x)); }

// Reads a descriptor of exactly Fields (descriptor_layouts.h) into *fields:
// the first bad value's error, or a RangeError if values are left unread.
template <class Fields>
Status readDescriptor(const Descriptor& desc, const char* fn, Fields* fields) {
  DescriptorReader r(desc.data, desc.length, fn);
  fields->read(r);
  return r.finish();
}

// The same for Fields followed by an Optional group (all or none): *present
// says whether it was there. The group is read before the reader finishes and
// judged by the caller after, so an earlier field's error is the one reported.
template <class Fields, class Optional>
Status readDescriptor(const Descriptor& desc, const char* fn, Fields* fields, Optional* optional, bool* present) {
  DescriptorReader r(desc.data, desc.length, fn);
  fields->read(r);
  *present = !r.atEnd();
  if (*present) optional->read(r);
  return r.finish();
}

}  // namespace mhsa

// Runs each check in order and stops at the first failure.
#define MHSA_RETURN_IF_ERROR(expr)  \
  do {                              \
    Status _st = (expr);            \
    if (!_st.ok()) return _st;      \
  } while (0)
