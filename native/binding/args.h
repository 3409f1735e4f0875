// Unwrapping JS arguments for the native entry points: typed arrays become
// BufferArgs (pointer + length, no copy) and the Float64Array of shapes, flags
// and scalars becomes a Descriptor. Every check that protects memory happens
// after this, in each op's prepare function (ops/<op>_op.cc), which the
// native tests and the fuzzer share.
#pragma once

#include <napi.h>

#include <vector>

#include "../ops/calls.h"
#include "../ops/descriptor_layouts.h"

namespace mhsa {

// The arguments of one op: a call's own (info[i]), or one stage of
// sequence(), read out of its array beforehand (items[i]). Reading an array
// item can run JS (a getter, a Proxy), which could detach a buffer already
// unwrapped into a pointer; a call's own arguments and values already read
// cannot.
class OpArgs {
 public:
  explicit OpArgs(const Napi::CallbackInfo& info) : info_(&info) {}
  explicit OpArgs(const std::vector<Napi::Value>& items) : items_(&items) {}
  Napi::Value operator[](uint32_t i) const {
    if (info_) return (*info_)[i];
    return i < items_->size() ? (*items_)[i] : Napi::Value();
  }

 private:
  const Napi::CallbackInfo* info_ = nullptr;
  const std::vector<Napi::Value>* items_ = nullptr;
};

// A typed-array argument and the JS value that async jobs keep alive.
struct JsBuffer {
  BufferArg arg;
  Napi::Value value;
};

// A Float32Array; TypeError if it is anything else or its buffer is detached.
JsBuffer floatArg(const Napi::Value& v, const char* fn, const char* arg);
// A Float32Array, or a Uint16Array of bf16 values (BufferArg::bf16 set).
JsBuffer floatOrBf16Arg(const Napi::Value& v, const char* fn, const char* arg,
                        const char* expected = "Float32Array or a Uint16Array of bf16 values");
// A Float32Array, a Uint16Array of bf16 values (bf16 set) or an Int8Array (int8 set): a packed
// matrix's storage, or an attention's k and v.
JsBuffer floatBf16OrInt8Arg(const Napi::Value& v, const char* fn, const char* arg);
// Same, but null/undefined gives an absent buffer.
JsBuffer optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg);
// A Uint8Array, or null/undefined.
JsBuffer optionalByteArg(const Napi::Value& v, const char* fn, const char* arg);
// An Int32Array.
JsBuffer int32Arg(const Napi::Value& v, const char* fn, const char* arg);
// An Int32Array, or null/undefined.
JsBuffer optionalInt32Arg(const Napi::Value& v, const char* fn, const char* arg);

// The call's Float64Array descriptor (read synchronously, before returning to JS).
Descriptor descriptorArg(const Napi::Value& v, const char* fn);

// Throws a JS TypeError or RangeError for a failed Status (no-op when ok).
void throwIfError(Napi::Env env, const Status& st);

}  // namespace mhsa
