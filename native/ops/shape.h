// Shape checking shared by the op planners. Pure C++: the binding, native tests
// and fuzzers all go through these, so untrusted shapes are checked in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mhsa {

using Shape = std::vector<int64_t>;

// The outcome of checking an op's arguments. kind mirrors the JS error class
// the binding throws: a wrong kind of value is Type, a wrong value is Range.
struct Status {
  enum class Kind { Ok, Type, Range };
  Kind kind = Kind::Ok;
  std::string message;

  bool ok() const { return kind == Kind::Ok; }
  static Status success() { return {}; }
  static Status typeError(std::string m) { return {Kind::Type, std::move(m)}; }
  static Status rangeError(std::string m) { return {Kind::Range, std::move(m)}; }
};

// Largest integer a double (and a JS number) holds exactly: 2^53 - 1.
constexpr double kMaxSafeInteger = 9007199254740991.0;

// Largest element count accepted for one tensor: 2^32 - 1, the most a Node 20
// Float32Array holds, so count * 4 bytes and every offset fit comfortably in int64.
constexpr int64_t kMaxElements = (int64_t{1} << 32) - 1;

// a * b for non-negative sizes, saturating at INT64_MAX instead of overflowing.
// Strides and sizes of a tensor with no elements may be astronomically large
// ([0, 2^40, 2^40]); they are never used to address memory, but computing them
// must not be undefined behaviour.
inline int64_t mulSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

// a + b for non-negative sizes, saturating at INT64_MAX.
inline int64_t addSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

// Product of dims, or -1 if it exceeds kMaxElements (dims must be >= 0).
int64_t elementCount(const Shape& s);

std::string shapeToString(const Shape& s);

// Checks that a tensor's data length equals the product of its shape.
Status checkLength(const char* fn, const char* arg, const Shape& s, int64_t length);

// A view's strides of axes 0-2 as a descriptor gives them: each a
// non-negative safe integer, else a RangeError naming arg.strides[a].
Status readStrides(const char* fn, const char* arg, const double (&given)[3], int64_t (&strides)[3]);

// checkLength for a 4-D view whose axes 0-2 have the given strides (axis 3
// contiguous): its length must reach exactly its last element, (dim - 1) *
// stride summed over the axes, plus one; 0 when it has no elements. Sums
// saturate, so no stride, however large, overflows. The elements may overlap
// (such views are only read, or written one row at a time).
Status checkStridedLength(const char* fn, const char* arg, const Shape& s, const int64_t* strides, int64_t length);

// Numpy broadcasting of two shapes (right-aligned, 1 stretches). False if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape* out);

// Element strides of a contiguous tensor of shape s viewed as the right-aligned
// target shape: a missing or size-1 dim that the target stretches gets stride 0.
// Requires s to be broadcastable to target.
Shape broadcastStrides(const Shape& s, const Shape& target);

}  // namespace mhsa
