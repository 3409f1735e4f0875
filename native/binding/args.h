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

// Throws a JS TypeError or RangeError for a failed Status (no-op when ok).
void throwIfError(Napi::Env env, const Status& st);

// A Float32Array argument; TypeError if it is anything else or detached.
FloatArg floatArg(const Napi::Value& v, const char* fn, const char* arg);
// Same, but null/undefined gives an empty FloatArg (data == nullptr).
FloatArg optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg);
// A Uint8Array, or null/undefined.
ByteArg optionalByteArg(const Napi::Value& v, const char* fn, const char* arg);

// An array of non-negative safe integers.
Shape shapeArg(const Napi::Value& v, const char* fn, const char* arg);

double numberArg(const Napi::Value& v, const char* fn, const char* arg);
bool boolArg(const Napi::Value& v, const char* fn, const char* arg);

// RangeError unless out's bytes are disjoint from the input's (or, when
// allowSame, exactly the same view).
void checkNoOverlap(Napi::Env env, const char* fn, const char* outName, const void* out, int64_t outBytes,
                    const char* inName, const void* in, int64_t inBytes, bool allowSame);

}  // namespace mhsa
