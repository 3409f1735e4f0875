// The one mapping from a C++ exception to the error JS sees, for sync calls,
// async jobs and module setup alike: native code never lets an exception
// reach Node (where it would abort the process).
#pragma once

#include <napi.h>

#include <string>
#include <vector>

namespace mhsa {

// What JS sees of a failed call.
struct NativeError {
  enum class Kind { None, Range, Generic };
  Kind kind = Kind::None;
  std::string message;
};

// The exception being handled, as an error naming fn: std::bad_alloc is a
// RangeError ("fn: out of memory (std::bad_alloc)"), anything else an Error
// with its what(). Call only inside a catch block.
NativeError currentExceptionAsError(const char* fn);

// The JS error (a RangeError or an Error) for error, made with plain Node-API
// calls that never throw: safe in a thread-safe function's callback too.
napi_value jsErrorOf(napi_env env, const NativeError& error);

// A finished async job's JS callback and its one argument (null, or the
// error). Made by takeCallback, which deletes the job's references to the
// callback and to its buffers; call() it once the job's own bookkeeping is
// done, so that the callback sees the job settled.
struct JobCallback {
  napi_value callback = nullptr;
  napi_value arg = nullptr;
  void call(napi_env env) const;
};
JobCallback takeCallback(napi_env env, napi_ref callback, const std::vector<napi_ref>& refs, const NativeError& error);

// The same, to throw from a Node-API callback.
inline Napi::Error toJsError(Napi::Env env, const NativeError& error) { return Napi::Error(env, jsErrorOf(env, error)); }

}  // namespace mhsa
