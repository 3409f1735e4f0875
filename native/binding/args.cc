#include "args.h"

#include <string>

namespace mhsa {
namespace {

std::string prefix(const char* fn, const char* arg) { return std::string(fn) + ": " + arg; }

bool isNullish(const Napi::Value& v) {
  napi_valuetype t;
  return napi_typeof(v.Env(), v, &t) == napi_ok && (t == napi_null || t == napi_undefined);
}

JsBuffer typedArg(const Napi::Value& v, const char* fn, const char* arg, napi_typedarray_type want,
                  const char* wantName) {
  Napi::Env env = v.Env();
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, &buffer, &offset) != napi_ok || type != want)
    throw Napi::TypeError::New(env, prefix(fn, arg) + " must be a " + wantName);
  bool detached = false;
  if (napi_is_detached_arraybuffer(env, buffer, &detached) == napi_ok && detached)
    throw Napi::TypeError::New(env, prefix(fn, arg) + " is backed by a detached ArrayBuffer");
  JsBuffer r;
  r.arg.data = data;
  r.arg.length = static_cast<int64_t>(length);
  r.arg.present = true;
  r.value = v;
  return r;
}

}  // namespace

void throwIfError(Napi::Env env, const Status& st) {
  switch (st.kind) {
    case Status::Kind::Ok: return;
    case Status::Kind::Type: throw Napi::TypeError::New(env, st.message);
    case Status::Kind::Range: throw Napi::RangeError::New(env, st.message);
  }
}

JsBuffer floatArg(const Napi::Value& v, const char* fn, const char* arg) {
  return typedArg(v, fn, arg, napi_float32_array, "Float32Array");
}

JsBuffer floatOrBf16Arg(const Napi::Value& v, const char* fn, const char* arg, const char* expected) {
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  const bool halves = napi_get_typedarray_info(v.Env(), v, &type, &length, &data, &buffer, &offset) == napi_ok &&
                      type == napi_uint16_array;
  if (!halves) return typedArg(v, fn, arg, napi_float32_array, expected);
  JsBuffer r = typedArg(v, fn, arg, napi_uint16_array, "Uint16Array");
  r.arg.bf16 = true;
  return r;
}

JsBuffer floatBf16OrInt8Arg(const Napi::Value& v, const char* fn, const char* arg) {
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  const bool bytes = napi_get_typedarray_info(v.Env(), v, &type, &length, &data, &buffer, &offset) == napi_ok &&
                     type == napi_int8_array;
  if (!bytes) return floatOrBf16Arg(v, fn, arg, "Float32Array, a Uint16Array of bf16 values or an Int8Array");
  JsBuffer r = typedArg(v, fn, arg, napi_int8_array, "Int8Array");
  r.arg.int8 = true;
  return r;
}

JsBuffer optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (isNullish(v)) return JsBuffer{};
  return floatArg(v, fn, arg);
}

JsBuffer optionalByteArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (isNullish(v)) return JsBuffer{};
  return typedArg(v, fn, arg, napi_uint8_array, "Uint8Array");
}

JsBuffer int32Arg(const Napi::Value& v, const char* fn, const char* arg) {
  return typedArg(v, fn, arg, napi_int32_array, "Int32Array");
}

JsBuffer optionalInt32Arg(const Napi::Value& v, const char* fn, const char* arg) {
  if (isNullish(v)) return JsBuffer{};
  return int32Arg(v, fn, arg);
}

Descriptor descriptorArg(const Napi::Value& v, const char* fn) {
  Napi::Env env = v.Env();
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, &buffer, &offset) != napi_ok ||
      type != napi_float64_array)
    throw Napi::TypeError::New(env, std::string(fn) + ": the argument descriptor must be a Float64Array");
  bool detached = false;
  if (napi_is_detached_arraybuffer(env, buffer, &detached) == napi_ok && detached)
    throw Napi::TypeError::New(env, std::string(fn) + ": the argument descriptor is detached");
  return Descriptor{static_cast<const double*>(data), length};
}

}  // namespace mhsa
