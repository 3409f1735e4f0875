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

}  // namespace mhsa
