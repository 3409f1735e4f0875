// Unwrapping JS arguments for the native entry points. The TypeScript layer
// has already validated everything with friendlier messages; these checks
// exist so that no caller, however it reaches the addon, can make native code
// read or write out of bounds.
#pragma once

#include <napi.h>

#include <cstdint>
#include <vector>

#include "../ops/shape.h"

namespace mhsa {

struct FloatArg {
  float* data = nullptr;
  int64_t length = 0;
  Napi::Value value;  // the typed array, kept alive by async jobs
};

struct ByteArg {
  uint8_t* data = nullptr;
  int64_t length = 0;
  Napi::Value value;
};

// True for null or undefined (one N-API call).
bool isNullish(const Napi::Value& v);

// Throws a JS TypeError or RangeError for a failed Status (no-op when ok).
void throwIfError(Napi::Env env, const Status& st);

// A Float32Array argument; TypeError if it is anything else or detached.
FloatArg floatArg(const Napi::Value& v, const char* fn, const char* arg);
// Same, but null/undefined gives an empty FloatArg (data == nullptr).
FloatArg optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg);
// A Uint8Array, or null/undefined.
ByteArg optionalByteArg(const Napi::Value& v, const char* fn, const char* arg);

// The numeric arguments of a call (shapes, flags, scalars) arrive packed in
// one Float64Array, so a call costs a handful of N-API round trips instead of
// one per dim. The reader checks every value it hands out.
class Descriptor {
 public:
  Descriptor(const Napi::Value& v, const char* fn);
  // A rank followed by that many dims, each a non-negative safe integer.
  Shape shape(const char* arg);
  double number(const char* arg);
  bool flag(const char* arg);
  // RangeError unless every value has been read.
  void finish();

 private:
  double next(const char* arg);
  const double* data_ = nullptr;
  size_t length_ = 0;
  size_t pos_ = 0;
  const char* fn_;
  Napi::Env env_;
};

// RangeError unless out's bytes are disjoint from the input's (or, when
// allowSame, exactly the same view).
void checkNoOverlap(Napi::Env env, const char* fn, const char* outName, const void* out, int64_t outBytes,
                    const char* inName, const void* in, int64_t inBytes, bool allowSame);

}  // namespace mhsa
