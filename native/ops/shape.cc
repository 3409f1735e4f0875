#include "shape.h"

#include <cmath>

namespace mhsa {

int64_t elementCount(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) return -1;
  for (int64_t d : s)
    if (d == 0) return 0;  // checked first so a huge dim beside a zero one is still empty
  int64_t n = 1;
  for (int64_t d : s) {
    if (n > kMaxElements / d) return -1;
    n *= d;
  }
  return n;
}

std::string shapeToString(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

Status checkLength(const char* fn, const char* arg, const Shape& s, int64_t length) {
  const int64_t n = elementCount(s);
  if (n < 0)
    return Status::rangeError(std::string(fn) + ": " + arg + ".shape " + shapeToString(s) +
                              " has more elements than a Float32Array can hold");
  if (n != length)
    return Status::rangeError(std::string(fn) + ": " + arg + ".data.length must equal the product of " +
                              arg + ".shape " + shapeToString(s) + " = " + std::to_string(n) +
                              ", received " + std::to_string(length));
  return Status::success();
}

Status readStrides(const char* fn, const char* arg, const double (&given)[3], int64_t (&strides)[3]) {
  for (int a = 0; a < 3; ++a) {
    const double x = given[a];
    if (!(x >= 0 && x <= kMaxSafeInteger) || x != std::floor(x))
      return Status::rangeError(std::string(fn) + ": " + arg + ".strides[" + std::to_string(a) +
                                "] must be a non-negative safe integer");
    strides[a] = static_cast<int64_t>(x);
  }
  return Status::success();
}

Status checkStridedLength(const char* fn, const char* arg, const Shape& s, const int64_t* strides, int64_t length) {
  const int64_t count = elementCount(s);
  if (count < 0)
    return Status::rangeError(std::string(fn) + ": " + arg + ".shape " + shapeToString(s) + " is too large");
  int64_t last = count == 0 ? -1 : s[3] - 1;
  for (int a = 0; a < 3 && count > 0; ++a) last = addSat(last, mulSat(s[a] - 1, strides[a]));
  const int64_t span = last >= kMaxElements ? kMaxElements : last + 1;  // last may have saturated
  if (span >= kMaxElements || length != span)
    return Status::rangeError(std::string(fn) + ": " + arg + ".length must be " +
                              (span >= kMaxElements ? std::string("below 2^32") : std::to_string(span)) +
                              " for shape " + shapeToString(s) + " with strides [" + std::to_string(strides[0]) +
                              ", " + std::to_string(strides[1]) + ", " + std::to_string(strides[2]) +
                              ", 1], received " + std::to_string(length));
  return Status::success();
}

bool broadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  *out = r;
  return true;
}

Shape broadcastStrides(const Shape& s, const Shape& target) {
  Shape strides(target.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    const size_t si = s.size() - 1 - k;
    const size_t ti = target.size() - 1 - k;
    strides[ti] = (s[si] == 1 && target[ti] != 1) ? 0 : stride;
    stride = mulSat(stride, s[si]);
  }
  return strides;
}

}  // namespace mhsa
