// Unwrapping JS arguments for the native entry points: typed arrays become
// BufferArgs (pointer + length, no copy) and the Float64Array of shapes, flags
// and scalars becomes a Descriptor. Every check that protects memory happens
// after this, in ops/calls.cc, which the native tests and the fuzzer share.
#pragma once

#include <napi.h>

#include "../ops/calls.h"

namespace mhsa {

// The arguments of one op: a call's own (info[i]), or one stage of
// sequence() (the stage array's items after its kind, stage[offset + i]).
class OpArgs {
 public:
  explicit OpArgs(const Napi::CallbackInfo& info) : info_(&info) {}
  OpArgs(Napi::Array stage, uint32_t offset) : stage_(stage), offset_(offset) {}
  Napi::Value operator[](uint32_t i) const { return info_ ? (*info_)[i] : stage_.Get(offset_ + i); }

 private:
  const Napi::CallbackInfo* info_ = nullptr;
  Napi::Array stage_;
  uint32_t offset_ = 0;
};

// A typed-array argument and the JS value that async jobs keep alive.
struct JsBuffer {
  BufferArg arg;
  Napi::Value value;
};

// A Float32Array; TypeError if it is anything else or its buffer is detached.
JsBuffer floatArg(const Napi::Value& v, const char* fn, const char* arg);
// Same, but null/undefined gives an absent buffer.
JsBuffer optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg);
// A Uint8Array, or null/undefined.
JsBuffer optionalByteArg(const Napi::Value& v, const char* fn, const char* arg);

// The call's Float64Array descriptor (read synchronously, before returning to JS).
Descriptor descriptorArg(const Napi::Value& v, const char* fn);

// Throws a JS TypeError or RangeError for a failed Status (no-op when ok).
void throwIfError(Napi::Env env, const Status& st);

}  // namespace mhsa
