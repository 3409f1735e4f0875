#include <cmath>

#include "../kernels/layernorm.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value layerNormBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "layerNorm";
  FloatArg x = floatArg(info[0], fn, "x");
  FloatArg out = floatArg(info[1], fn, "out");
  FloatArg weight = optionalFloatArg(info[2], fn, "weight");
  FloatArg bias = optionalFloatArg(info[3], fn, "bias");
  Descriptor desc(info[4], fn);
  const Shape xs = desc.shape("x.shape");
  const Shape os = desc.shape("out.shape");
  const double eps = desc.number("eps");
  desc.finish();
  if (xs.empty()) throw Napi::RangeError::New(env, "layerNorm: x must have at least 1 dim");
  throwIfError(env, checkLength(fn, "x", xs, x.length));
  throwIfError(env, checkLength(fn, "out", os, out.length));
  if (os != xs) throw Napi::RangeError::New(env, "layerNorm: out.shape must equal x.shape " + shapeToString(xs));
  const int64_t dim = xs.back();
  const bool hasWeight = weight.data != nullptr || !isNullish(info[2]);
  const bool hasBias = bias.data != nullptr || !isNullish(info[3]);
  if (hasWeight && weight.length != dim)
    throw Napi::RangeError::New(env, "layerNorm: weight.length must be " + std::to_string(dim));
  if (hasBias && bias.length != dim)
    throw Napi::RangeError::New(env, "layerNorm: bias.length must be " + std::to_string(dim));
  if (!(eps >= 0) || !std::isfinite(static_cast<float>(eps)))
    throw Napi::RangeError::New(env, "layerNorm: eps must be a finite non-negative number");
  const int64_t outBytes = out.length * 4;
  checkNoOverlap(env, fn, "out", out.data, outBytes, "x", x.data, x.length * 4, true);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "weight", weight.data, weight.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "bias", bias.data, bias.length * 4, false);
  const int64_t rows = dim == 0 ? 0 : x.length / dim;
  const float* xp = x.data;
  float* op = out.data;
  const float* wp = hasWeight ? weight.data : nullptr;
  const float* bp = hasBias ? bias.data : nullptr;
  const float e = static_cast<float>(eps);
  runOrSubmit(fn, info, 5, {x.value, out.value, weight.value, bias.value},
              [=] { layerNormRows(xp, op, rows, dim, wp, bp, e); });
  return env.Undefined();
}

}  // namespace mhsa
