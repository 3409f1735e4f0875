#include "native_error.h"

#include <exception>
#include <new>

namespace mhsa {

NativeError currentExceptionAsError(const char* fn) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return {NativeError::Kind::Range, std::string(fn) + ": out of memory (std::bad_alloc)"};
  } catch (const std::exception& e) {
    return {NativeError::Kind::Generic, std::string(fn) + ": " + e.what()};
  } catch (...) {
    return {NativeError::Kind::Generic, std::string(fn) + ": unknown native error"};
  }
}

napi_value jsErrorOf(napi_env env, const NativeError& error) {
  napi_value message = nullptr, value = nullptr;
  napi_create_string_utf8(env, error.message.c_str(), error.message.size(), &message);
  if (error.kind == NativeError::Kind::Range)
    napi_create_range_error(env, nullptr, message, &value);
  else
    napi_create_error(env, nullptr, message, &value);
  return value;
}

JobCallback takeCallback(napi_env env, napi_ref callback, const std::vector<napi_ref>& refs, const NativeError& error) {
  JobCallback r;
  napi_get_reference_value(env, callback, &r.callback);
  if (error.kind == NativeError::Kind::None)
    napi_get_null(env, &r.arg);
  else
    r.arg = jsErrorOf(env, error);
  for (napi_ref ref : refs) napi_delete_reference(env, ref);
  napi_delete_reference(env, callback);
  return r;
}

void JobCallback::call(napi_env env) const {
  if (callback == nullptr) return;
  napi_value global = nullptr;
  napi_get_global(env, &global);
  napi_call_function(env, global, callback, 1, &arg, nullptr);
}

}  // namespace mhsa
