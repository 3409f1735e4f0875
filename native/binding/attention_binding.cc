#include "../ops/attention_op.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value attentionBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "attention";
  FloatArg q = floatArg(info[0], fn, "q");
  FloatArg k = floatArg(info[1], fn, "k");
  FloatArg v = floatArg(info[2], fn, "v");
  FloatArg out = floatArg(info[3], fn, "out");
  FloatArg mask = optionalFloatArg(info[4], fn, "mask");
  ByteArg pad = optionalByteArg(info[5], fn, "keyPaddingMask");
  FloatArg weights = optionalFloatArg(info[6], fn, "weights");
  Descriptor desc(info[7], fn);

  AttentionArgs args;
  const double layout = desc.number("layout");
  if (layout != 0 && layout != 1 && layout != 2)
    throw Napi::RangeError::New(env, "attention: layout code must be 0, 1 or 2");
  args.layout = static_cast<AttentionLayout>(static_cast<int>(layout));
  args.q = desc.shape("q.shape");
  args.k = desc.shape("k.shape");
  args.v = desc.shape("v.shape");
  args.out = desc.shape("out.shape");
  args.hasScale = desc.flag("hasScale");
  args.scale = desc.number("scale");
  args.causal = desc.flag("causal");
  args.mask = desc.shape("mask.shape");
  desc.finish();
  args.hasMask = mask.data != nullptr || !isNullish(info[4]);
  args.hasKeyPadding = pad.data != nullptr || !isNullish(info[5]);
  args.hasWeights = weights.data != nullptr || !isNullish(info[6]);
  args.qLength = q.length;
  args.kLength = k.length;
  args.vLength = v.length;
  args.outLength = out.length;
  args.maskLength = mask.length;
  args.keyPaddingLength = pad.length;
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
  runOrSubmit(fn, info, 8, {q.value, k.value, v.value, out.value, mask.value, pad.value, weights.value},
              [p] { attentionForward(p); });
  return env.Undefined();
}

}  // namespace mhsa
