#include "descriptor.h"

#include <cmath>
#include <string>

namespace mhsa {
namespace {

constexpr double kMaxRank = 32;

}  // namespace

void DescriptorReader::fail(std::string message) {
  if (status_.ok()) status_ = Status::rangeError(std::move(message));
}

double DescriptorReader::next(const char* arg) {
  if (pos_ >= length_) {
    fail(std::string(fn_) + ": " + arg + ": the argument descriptor is too short");
    return std::nan("");
  }
  return data_[pos_++];
}

Shape DescriptorReader::shape(const char* arg) {
  const double rank = next(arg);
  if (!(rank >= 0 && rank <= kMaxRank) || std::floor(rank) != rank) {
    const bool whole = rank >= 0 && rank < 1e15 && std::floor(rank) == rank;
    fail(std::string(fn_) + ": " + arg + " must have from 0 to " + std::to_string(static_cast<int>(kMaxRank)) + " dims, received " +
         (whole ? std::to_string(static_cast<int64_t>(rank)) : std::string("a rank that is not a whole number")));
    return {};
  }
  Shape s(static_cast<size_t>(rank));
  for (size_t i = 0; i < s.size(); ++i) {
    const double x = next(arg);
    if (!(x >= 0 && x <= kMaxSafeInteger) || std::floor(x) != x) {
      fail(std::string(fn_) + ": " + arg + "[" + std::to_string(i) + "] must be a non-negative safe integer");
      return {};
    }
    s[i] = static_cast<int64_t>(x);
  }
  return s;
}

double DescriptorReader::number(const char* arg) { return next(arg); }

bool DescriptorReader::flag(const char* arg) {
  const double x = next(arg);
  if (x != 0 && x != 1) fail(std::string(fn_) + ": " + arg + " must be 0 or 1");
  return x == 1;
}

Status DescriptorReader::finish() const {
  if (!status_.ok()) return status_;
  if (pos_ != length_) return Status::rangeError(std::string(fn_) + ": the argument descriptor has extra values");
  return Status::success();
}

}  // namespace mhsa
