#include "args.h"

#include <cmath>
#include <string>

namespace mhsa {
namespace {

std::string prefix(const char* fn, const char* arg) { return std::string(fn) + ": " + arg; }

bool isDetached(Napi::Env env, napi_value typedArray) {
  napi_value buffer;
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  if (napi_get_typedarray_info(env, typedArray, &type, &length, &data, &buffer, &offset) != napi_ok)
    return false;
  bool detached = false;
  napi_is_detached_arraybuffer(env, buffer, &detached);
  return detached;
}

template <typename T>
T typedArg(const Napi::Value& v, const char* fn, const char* arg, napi_typedarray_type want,
           const char* wantName) {
  Napi::Env env = v.Env();
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != want)
    throw Napi::TypeError::New(env, prefix(fn, arg) + " must be a " + wantName);
  if (isDetached(env, v))
    throw Napi::TypeError::New(env, prefix(fn, arg) + " is backed by a detached ArrayBuffer");
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, &buffer, &offset) != napi_ok)
    throw Napi::TypeError::New(env, prefix(fn, arg) + " could not be read");
  T r;
  r.data = static_cast<decltype(r.data)>(data);
  r.length = static_cast<int64_t>(length);
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

FloatArg floatArg(const Napi::Value& v, const char* fn, const char* arg) {
  return typedArg<FloatArg>(v, fn, arg, napi_float32_array, "Float32Array");
}

FloatArg optionalFloatArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (v.IsNull() || v.IsUndefined()) return FloatArg{};
  return floatArg(v, fn, arg);
}

ByteArg optionalByteArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (v.IsNull() || v.IsUndefined()) return ByteArg{};
  return typedArg<ByteArg>(v, fn, arg, napi_uint8_array, "Uint8Array");
}

Shape shapeArg(const Napi::Value& v, const char* fn, const char* arg) {
  Napi::Env env = v.Env();
  if (!v.IsArray()) throw Napi::TypeError::New(env, prefix(fn, arg) + " must be an array of dims");
  Napi::Array a = v.As<Napi::Array>();
  const uint32_t n = a.Length();
  if (n > 32) throw Napi::RangeError::New(env, prefix(fn, arg) + " must have at most 32 dims");
  Shape s(n);
  for (uint32_t i = 0; i < n; ++i) {
    Napi::Value d = a.Get(i);
    if (!d.IsNumber())
      throw Napi::TypeError::New(env, prefix(fn, arg) + "[" + std::to_string(i) + "] must be a number");
    const double x = d.As<Napi::Number>().DoubleValue();
    if (!(x >= 0) || x > 9007199254740991.0 || std::floor(x) != x)
      throw Napi::RangeError::New(env, prefix(fn, arg) + "[" + std::to_string(i) +
                                           "] must be a non-negative safe integer");
    s[i] = static_cast<int64_t>(x);
  }
  return s;
}

double numberArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), prefix(fn, arg) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

bool boolArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (!v.IsBoolean()) throw Napi::TypeError::New(v.Env(), prefix(fn, arg) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

void checkNoOverlap(Napi::Env env, const char* fn, const char* outName, const void* out, int64_t outBytes,
                    const char* inName, const void* in, int64_t inBytes, bool allowSame) {
  if (out == nullptr || in == nullptr || outBytes == 0 || inBytes == 0) return;
  const auto o = reinterpret_cast<uintptr_t>(out);
  const auto i = reinterpret_cast<uintptr_t>(in);
  if (allowSame && o == i && outBytes == inBytes) return;
  if (o < i + static_cast<uintptr_t>(inBytes) && i < o + static_cast<uintptr_t>(outBytes))
    throw Napi::RangeError::New(env, std::string(fn) + ": " + outName + " must not share memory with " + inName);
}

}  // namespace mhsa
