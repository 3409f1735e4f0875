#include "args.h"

#include <cmath>
#include <string>

namespace mhsa {
namespace {

std::string prefix(const char* fn, const char* arg) { return std::string(fn) + ": " + arg; }

template <typename T>
T typedArg(const Napi::Value& v, const char* fn, const char* arg, napi_typedarray_type want,
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
  T r;
  r.data = static_cast<decltype(r.data)>(data);
  r.length = static_cast<int64_t>(length);
  r.value = v;
  return r;
}

}  // namespace

bool isNullish(const Napi::Value& v) {
  napi_valuetype t;
  return napi_typeof(v.Env(), v, &t) == napi_ok && (t == napi_null || t == napi_undefined);
}

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
  if (isNullish(v)) return FloatArg{};
  return floatArg(v, fn, arg);
}

ByteArg optionalByteArg(const Napi::Value& v, const char* fn, const char* arg) {
  if (isNullish(v)) return ByteArg{};
  return typedArg<ByteArg>(v, fn, arg, napi_uint8_array, "Uint8Array");
}

Descriptor::Descriptor(const Napi::Value& v, const char* fn) : fn_(fn), env_(v.Env()) {
  napi_typedarray_type type;
  size_t length, offset;
  void* data;
  napi_value buffer;
  if (napi_get_typedarray_info(env_, v, &type, &length, &data, &buffer, &offset) != napi_ok ||
      type != napi_float64_array)
    throw Napi::TypeError::New(env_, std::string(fn) + ": the argument descriptor must be a Float64Array");
  data_ = static_cast<const double*>(data);
  length_ = length;
}

double Descriptor::next(const char* arg) {
  if (pos_ >= length_)
    throw Napi::RangeError::New(env_, prefix(fn_, arg) + ": the argument descriptor is too short");
  return data_[pos_++];
}

Shape Descriptor::shape(const char* arg) {
  const double rank = next(arg);
  if (!(rank >= 0 && rank <= 32) || std::floor(rank) != rank)
    throw Napi::RangeError::New(env_, prefix(fn_, arg) + " must have from 0 to 32 dims");
  Shape s(static_cast<size_t>(rank));
  for (size_t i = 0; i < s.size(); ++i) {
    const double x = next(arg);
    if (!(x >= 0) || x > 9007199254740991.0 || std::floor(x) != x)
      throw Napi::RangeError::New(env_, prefix(fn_, arg) + "[" + std::to_string(i) +
                                            "] must be a non-negative safe integer");
    s[i] = static_cast<int64_t>(x);
  }
  return s;
}

double Descriptor::number(const char* arg) { return next(arg); }

bool Descriptor::flag(const char* arg) {
  const double x = next(arg);
  if (x != 0 && x != 1) throw Napi::RangeError::New(env_, prefix(fn_, arg) + " must be 0 or 1");
  return x == 1;
}

void Descriptor::finish() {
  if (pos_ != length_)
    throw Napi::RangeError::New(env_, std::string(fn_) + ": the argument descriptor has extra values");
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
