// Shared pieces of the native tests: seeded random data, poisoned outputs,
// descriptors built like lib/native.ts builds them, and the float64 error norm.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../ops/calls.h"

namespace mhsa_test {

// Seeded per test so a failure reproduces; MHSA_TEST_SEED overrides.
uint64_t testSeed();

inline std::vector<float> randomFloats(std::mt19937_64& rng, size_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// NaN everywhere: an element the op forgets to write fails the comparison.
inline std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

// ||out - ref|| / ||scale|| in float64; infinity if out holds a NaN, or if
// scale is zero and out differs from ref.
inline double errorRelativeTo(const std::vector<float>& out, const std::vector<double>& ref,
                              const std::vector<double>& scale) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(out[i])) return std::numeric_limits<double>::infinity();
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += scale[i] * scale[i];
  }
  if (den == 0) return num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

// ||out - ref|| / ||ref||.
inline double relativeError(const std::vector<float>& out, const std::vector<double>& ref) {
  return errorRelativeTo(out, ref, ref);
}

class DescBuilder {
 public:
  DescBuilder& shape(const mhsa::Shape& s) {
    values_.push_back(static_cast<double>(s.size()));
    for (int64_t d : s) values_.push_back(static_cast<double>(d));
    return *this;
  }
  DescBuilder& number(double x) {
    values_.push_back(x);
    return *this;
  }
  DescBuilder& flag(bool x) { return number(x ? 1 : 0); }
  mhsa::Descriptor done() const { return {values_.data(), values_.size()}; }
  std::vector<double>& values() { return values_; }

 private:
  std::vector<double> values_;
};

inline mhsa::BufferArg buf(const std::vector<float>& v) { return {v.data(), static_cast<int64_t>(v.size()), true}; }
inline mhsa::BufferArg bytes(const std::vector<uint8_t>& v) {
  return {v.data(), static_cast<int64_t>(v.size()), true};
}
inline mhsa::BufferArg none() { return {}; }

}  // namespace mhsa_test
