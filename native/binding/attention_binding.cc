#include "../ops/attention_op.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value attentionBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "attention";
  const double layout = numberArg(info[0], fn, "layout");
  if (layout != 0 && layout != 1 && layout != 2)
    throw Napi::RangeError::New(env, "attention: layout code must be 0, 1 or 2");
  FloatArg q = floatArg(info[1], fn, "q");
  FloatArg k = floatArg(info[3], fn, "k");
  FloatArg v = floatArg(info[5], fn, "v");
  FloatArg out = floatArg(info[7], fn, "out");
  FloatArg mask = optionalFloatArg(info[11], fn, "mask");
  ByteArg pad = optionalByteArg(info[13], fn, "keyPaddingMask");
  FloatArg weights = optionalFloatArg(info[14], fn, "weights");

  AttentionArgs args;
  args.layout = static_cast<AttentionLayout>(static_cast<int>(layout));
  args.q = shapeArg(info[2], fn, "q.shape");
  args.k = shapeArg(info[4], fn, "k.shape");
  args.v = shapeArg(info[6], fn, "v.shape");
  args.out = shapeArg(info[8], fn, "out.shape");
  args.qLength = q.length;
  args.kLength = k.length;
  args.vLength = v.length;
  args.outLength = out.length;
  args.hasScale = !info[9].IsNull() && !info[9].IsUndefined();
  if (args.hasScale) args.scale = numberArg(info[9], fn, "scale");
  args.causal = boolArg(info[10], fn, "causal");
  args.hasMask = !info[11].IsNull() && !info[11].IsUndefined();
  if (args.hasMask) args.mask = shapeArg(info[12], fn, "mask.shape");
  args.maskLength = mask.length;
  args.hasKeyPadding = !info[13].IsNull() && !info[13].IsUndefined();
  args.keyPaddingLength = pad.length;
  args.hasWeights = !info[14].IsNull() && !info[14].IsUndefined();
  args.weightsLength = weights.length;

  AttentionProblem p{};
  throwIfError(env, planAttention(args, &p));
  const int64_t outBytes = out.length * 4;
  checkNoOverlap(env, fn, "out", out.data, outBytes, "q", q.data, q.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "k", k.data, k.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "v", v.data, v.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "mask", mask.data, mask.length * 4, false);
  checkNoOverlap(env, fn, "out", out.data, outBytes, "keyPaddingMask", pad.data, pad.length, false);
  const int64_t wBytes = weights.length * 4;
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "out", out.data, outBytes, false);
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "q", q.data, q.length * 4, false);
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "k", k.data, k.length * 4, false);
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "v", v.data, v.length * 4, false);
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "mask", mask.data, mask.length * 4, false);
  checkNoOverlap(env, fn, "weights", weights.data, wBytes, "keyPaddingMask", pad.data, pad.length, false);

  p.q.data = q.data;
  p.k.data = k.data;
  p.v.data = v.data;
  p.out = out.data;
  p.mask = mask.data;
  p.keyPadding = pad.data;
  p.weights = weights.data;
  runOrSubmit(info, 15, {q.value, k.value, v.value, out.value, mask.value, pad.value, weights.value},
              [p] { attentionForward(p); });
  return env.Undefined();
}

}  // namespace mhsa
