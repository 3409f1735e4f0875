#include "attention_op.h"

#include <cmath>
#include <string>
#include <utility>

#include "../runtime/thread_pool.h"
#include "descriptor.h"
#include "descriptor_layouts.h"

namespace mhsa {
namespace {

const char* kDimNames[3][4] = {
    {"batch", "heads", "seq", "headDim"},
    {"batch", "seq", "heads", "headDim"},
    {"batch", "heads", "headDim", "seq"},
};

// Position of the logical batch/head/seq/dim axes in each layout's shape.
const int kAxis[3][4] = {{0, 1, 2, 3}, {0, 2, 1, 3}, {0, 1, 3, 2}};

Strided4 stridesOf(AttentionLayout layout, const Shape& s) {
  const int64_t st[4] = {mulSat(mulSat(s[1], s[2]), s[3]), mulSat(s[2], s[3]), s[3], 1};
  const int* ax = kAxis[static_cast<int>(layout)];
  return {nullptr, st[ax[0]], st[ax[1]], st[ax[2]], st[ax[3]]};
}

Status mismatch(const char* arg, int axis, const char* name, const char* ref, int refAxis,
                int64_t want, int64_t got) {
  return Status::rangeError(std::string("attention: ") + arg + ".shape[" + std::to_string(axis) + "] (" +
                            name + ") must equal " + ref + ".shape[" + std::to_string(refAxis) +
                            "] = " + std::to_string(want) + ", received " + std::to_string(got));
}

}  // namespace

void logicalDims(AttentionLayout layout, const Shape& s, int64_t* b, int64_t* h, int64_t* seq,
                 int64_t* dim) {
  const int* ax = kAxis[static_cast<int>(layout)];
  *b = s[ax[0]];
  *h = s[ax[1]];
  *seq = s[ax[2]];
  *dim = s[ax[3]];
}

Status planAttention(const AttentionArgs& args, AttentionProblem* p) {
  const int li = static_cast<int>(args.layout);
  if (li < 0 || li > 2) return Status::rangeError("attention: unknown layout");
  const char* names[4] = {"q", "k", "v", "out"};
  const Shape* shapes[4] = {&args.q, &args.k, &args.v, &args.out};
  const int64_t lengths[4] = {args.qLength, args.kLength, args.vLength, args.outLength};
  for (int t = 0; t < 4; ++t) {
    if (shapes[t]->size() != 4)
      return Status::rangeError(std::string("attention: ") + names[t] + " must have 4 dims, received shape " +
                                shapeToString(*shapes[t]));
    if (t < 3 && args.hasStrides) {
      Status st = checkStridedLength("attention", t == 0 ? "q" : t == 1 ? "k" : "v", *shapes[t], args.strides[t], lengths[t]);
      if (!st.ok()) return st;
      continue;
    }
    Status st = checkLength("attention", names[t], *shapes[t], lengths[t]);
    if (!st.ok()) return st;
  }
  const int* ax = kAxis[li];
  const char* const* dn = kDimNames[li];
  int64_t B, H, Sq, D, kB, kH, Skv, kD, vB, vH, vS, Dv;
  logicalDims(args.layout, args.q, &B, &H, &Sq, &D);
  logicalDims(args.layout, args.k, &kB, &kH, &Skv, &kD);
  logicalDims(args.layout, args.v, &vB, &vH, &vS, &Dv);
  if (kB != B) return mismatch("k", ax[0], dn[ax[0]], "q", ax[0], B, kB);
  if (vB != B) return mismatch("v", ax[0], dn[ax[0]], "q", ax[0], B, vB);
  if (kD != D) return mismatch("k", ax[3], "headDim", "q", ax[3], D, kD);
  if (vH != kH) return mismatch("v", ax[1], "heads", "k", ax[1], kH, vH);
  if (vS != Skv) return mismatch("v", ax[2], "seq", "k", ax[2], Skv, vS);
  if (kH == 0 ? H != 0 : H % kH != 0)
    return Status::rangeError("attention: q's heads (" + std::to_string(H) +
                              ") must be a multiple of k's heads (" + std::to_string(kH) + ")");
  Shape expectOut(4);
  const int64_t logical[4] = {B, H, Sq, Dv};
  for (int a = 0; a < 4; ++a) expectOut[ax[a]] = logical[a];
  if (args.out != expectOut)
    return Status::rangeError("attention: out.shape must be " + shapeToString(expectOut) + ", received " +
                              shapeToString(args.out));

  p->batch = B;
  p->heads = H;
  p->kvHeads = kH == 0 ? 1 : kH;
  p->seqQ = Sq;
  p->seqKV = Skv;
  p->headDim = D;
  p->headDimV = Dv;
  p->q = stridesOf(args.layout, args.q);
  p->k = stridesOf(args.layout, args.k);
  p->v = stridesOf(args.layout, args.v);
  Strided4* views[3] = {&p->q, &p->k, &p->v};
  const Shape* inputs[3] = {&args.q, &args.k, &args.v};
  for (int t = 0; t < 3; ++t) {
    // A view with no elements keeps its contiguous strides: its span was 0
    // whatever the strides, so a huge one must not reach the kernel's index
    // arithmetic.
    if (!args.hasStrides || elementCount(*inputs[t]) == 0) continue;
    int64_t* logicalStride[4] = {&views[t]->batchStride, &views[t]->headStride, &views[t]->seqStride,
                                 &views[t]->dimStride};
    for (int l = 0; l < 4; ++l) *logicalStride[l] = ax[l] == 3 ? 1 : args.strides[t][ax[l]];
  }
  p->outView = stridesOf(args.layout, args.out);
  p->causal = args.causal;
  const float softcap = static_cast<float>(args.softcap);
  if (!(softcap >= 0.0f) || !std::isfinite(softcap))
    return Status::rangeError("attention: softcap must be a finite float32 number >= 0 (0: none), received " +
                              std::to_string(args.softcap));
  p->softcap = softcap;
  // A window side beyond every key distance is the same as none; clamped, the
  // kernel's position arithmetic stays small.
  const double sides[2] = {args.windowLeft, args.windowRight};
  int64_t* windowSides[2] = {&p->windowLeft, &p->windowRight};
  for (int w = 0; w < 2; ++w) {
    const double x = sides[w];
    if (!(x == -1 || (x >= 0 && x <= kMaxSafeInteger && x == std::floor(x))))
      return Status::rangeError(std::string("attention: window.") + (w == 0 ? "left" : "right") +
                                " must be a non-negative integer (-1: unlimited), received " + std::to_string(x));
    *windowSides[w] = x < 0 ? -1 : static_cast<int64_t>(std::min(x, static_cast<double>(Sq + Skv)));
  }
  if (args.hasSinks && args.sinksLength != H)
    return Status::rangeError("attention: sinks.length must be heads = " + std::to_string(H) + ", received " +
                              std::to_string(args.sinksLength));

  if (args.hasScale) {
    const float scale = static_cast<float>(args.scale);
    if (!std::isfinite(scale))
      return Status::rangeError("attention: scale must be a finite float32 number, received " +
                                std::to_string(args.scale));
    p->scale = scale;
  } else {
    p->scale = D > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))) : 1.0f;
  }

  const Shape full = {B, H, Sq, Skv};
  if (args.hasMask) {
    Shape joined;
    if (args.mask.size() > 4 || !broadcastShapes(args.mask, full, &joined) || joined != full)
      return Status::rangeError("attention: mask.shape " + shapeToString(args.mask) +
                                " must broadcast to [batch, heads, seqQ, seqKV] = " + shapeToString(full));
    Status st = checkLength("attention", "mask", args.mask, args.maskLength);
    if (!st.ok()) return st;
    const Shape ms = broadcastStrides(args.mask, full);
    for (int a = 0; a < 4; ++a) p->maskStride[a] = ms[a];
  }
  if (args.hasKeyPadding && args.keyPaddingLength != elementCount({B, Skv}))
    return Status::rangeError("attention: keyPaddingMask.length must be batch * seqKV = " +
                              std::to_string(elementCount({B, Skv})) + ", received " +
                              std::to_string(args.keyPaddingLength));
  if (args.hasWeights) {
    const int64_t n = elementCount(full);
    if (n < 0) return Status::rangeError("attention: weights [batch, heads, seqQ, seqKV] would be too large");
    if (args.weightsLength != n)
      return Status::rangeError("attention: weights.length must be " + std::to_string(n) + ", received " +
                                std::to_string(args.weightsLength));
  }
  return Status::success();
}

namespace {

// The row scales of an int8 k or v (x, rows of `width` elements): rows
// contiguous, axis strides whole rows, and scales reaching the last row.
Status rowScalesOf(const char* name, const char* scalesName, const Strided4& x, int64_t width,
                   const AttentionProblem& p, const BufferArg& scales, RowScales* out) {
  const int64_t heads = p.kvHeads, keys = p.seqKV;
  *out = RowScales{nullptr, 0, 0, 0};
  if (p.batch == 0 || heads == 0 || keys == 0 || width == 0) return Status::success();
  const std::string fn = std::string("attention: an int8 ") + name;
  if (x.dimStride != 1 && width > 1) return Status::rangeError(fn + " must have contiguous rows (not the bhds layout)");
  const int64_t strides[3] = {x.batchStride, x.headStride, x.seqStride};
  for (int64_t s : strides)
    if (s % width != 0)
      return Status::rangeError(fn + "'s strides must be whole rows of " + std::to_string(width) + ", received " +
                                std::to_string(x.batchStride) + ", " + std::to_string(x.headStride) + ", " +
                                std::to_string(x.seqStride));
  *out = RowScales{nullptr, x.batchStride / width, x.headStride / width, x.seqStride / width};
  const int64_t lastRow = (p.batch - 1) * out->batchStride + (heads - 1) * out->headStride + (keys - 1) * out->seqStride;
  if (scales.length <= lastRow)
    return Status::rangeError(std::string("attention: ") + scalesName + ".length must be at least " +
                              std::to_string(lastRow + 1) + " (one scale per row of " + name + "), received " +
                              std::to_string(scales.length));
  return Status::success();
}

}  // namespace

Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, AttentionCall* call) {
  return prepareAttention(desc, q, k, v, out, mask, keyPadding, weights, sinks, BufferArg{}, call);
}

Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, const BufferArg& keyLengths,
                        AttentionCall* call, const BufferArg& kScales, const BufferArg& vScales) {
  const char* fn = "attention";
  AttentionFields f;
  AttentionStrideFields strideFields;
  bool hasStrides = false;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, fn, &f, &strideFields, &hasStrides));
  AttentionArgs args;
  const double layout = f.layout;
  args.q = f.q;
  args.k = f.k;
  args.v = f.v;
  args.out = f.out;
  args.hasScale = f.hasScale;
  args.scale = f.scale;
  args.causal = f.causal;
  args.mask = f.mask;
  args.softcap = f.softcap;
  args.windowLeft = f.windowLeft;
  args.windowRight = f.windowRight;
  const double strides[3][3] = {{strideFields.q0, strideFields.q1, strideFields.q2},
                                {strideFields.k0, strideFields.k1, strideFields.k2},
                                {strideFields.v0, strideFields.v1, strideFields.v2}};
  args.hasStrides = hasStrides;
  for (int t = 0; t < 3 && hasStrides; ++t)
    MHSA_RETURN_IF_ERROR(readStrides(fn, t == 0 ? "q" : t == 1 ? "k" : "v", strides[t], args.strides[t]));
  if (layout != 0 && layout != 1 && layout != 2)
    return Status::rangeError("attention: layout code must be 0, 1 or 2");
  args.layout = static_cast<AttentionLayout>(static_cast<int>(layout));
  args.hasMask = mask.present;
  args.hasKeyPadding = keyPadding.present;
  args.hasWeights = weights.present;
  args.hasSinks = sinks.present;
  args.sinksLength = sinks.length;
  args.qLength = q.length;
  args.kLength = k.length;
  args.vLength = v.length;
  args.outLength = out.length;
  args.maskLength = mask.length;
  args.keyPaddingLength = keyPadding.length;
  args.weightsLength = weights.length;
  // k and v are both bf16 (a bf16 KV cache), both int8 with their row scales
  // (an int8 KV cache) or both float; everything else is float.
  if (f.kvBf16 && f.kvInt8) return Status::typeError("attention: kvBf16 and kvInt8 cannot both be set");
  for (const auto& kv : {std::pair<const char*, const BufferArg*>{"k", &k}, {"v", &v}})
    if (kv.second->bf16 != f.kvBf16 || kv.second->int8 != f.kvInt8)
      return Status::typeError(std::string("attention: ") + kv.first +
                               (f.kvBf16   ? " must be a Uint16Array of bf16 values (kvBf16)"
                                : f.kvInt8 ? " must be an Int8Array (kvInt8)"
                                           : " must be a Float32Array"));
  for (const auto& in : {std::pair<const char*, const BufferArg*>{"q", &q}, {"out", &out}, {"mask", &mask},
                         {"weights", &weights}, {"sinks", &sinks}, {"kScales", &kScales}, {"vScales", &vScales}})
    if (in.second->bf16 || in.second->int8)
      return Status::typeError(std::string("attention: ") + in.first + " must be a Float32Array");
  if (kScales.present != f.kvInt8 || vScales.present != f.kvInt8)
    return Status::typeError(f.kvInt8 ? "attention: int8 k and v (kvInt8) need kScales and vScales"
                                      : "attention: kScales and vScales go with int8 k and v (kvInt8) only");
  AttentionProblem& p = call->problem;
  MHSA_RETURN_IF_ERROR(planAttention(args, &p));
  if (f.kvInt8) {
    MHSA_RETURN_IF_ERROR(rowScalesOf("k", "kScales", p.k, p.headDim, p, kScales, &p.kScales));
    MHSA_RETURN_IF_ERROR(rowScalesOf("v", "vScales", p.v, p.headDimV, p, vScales, &p.vScales));
  }
  // out and weights are written; neither may overlap anything else.
  const struct { const char* name; const BufferArg* buf; int64_t elementBytes; } inputs[] = {
      {"q", &q, 4}, {"k", &k, k.elementBytes()}, {"v", &v, v.elementBytes()}, {"mask", &mask, 4},
      {"keyPaddingMask", &keyPadding, 1},
      {"sinks", &sinks, 4}, {"keyLengths", &keyLengths, 4}, {"kScales", &kScales, 4}, {"vScales", &vScales, 4}};
  for (const auto& in : inputs) {
    MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, in.name, *in.buf, in.elementBytes, false));
    MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "weights", weights, 4, in.name, *in.buf, in.elementBytes, false));
  }
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "weights", weights, 4, "out", out, 4, false));
  call->keyLengths.clear();
  if (keyLengths.present) {
    if (keyLengths.length != p.batch)
      return Status::rangeError("attention: keyLengths.length must be batch = " + std::to_string(p.batch) +
                                ", received " + std::to_string(keyLengths.length));
    const auto* lengths = static_cast<const int32_t*>(keyLengths.data);
    for (int64_t b = 0; b < p.batch; ++b)
      if (lengths[b] < 0 || lengths[b] > p.seqKV)
        return Status::rangeError("attention: keyLengths[" + std::to_string(b) + "] must be in [0, seqKV = " +
                                  std::to_string(p.seqKV) + "], received " + std::to_string(lengths[b]));
    call->keyLengths.assign(lengths, lengths + p.batch);
  }
  p.q.data = q.floats();
  p.kvBf16 = f.kvBf16;
  p.kvInt8 = f.kvInt8;
  const bool kvFloat = !f.kvBf16 && !f.kvInt8;
  p.k.data = kvFloat ? k.floats() : nullptr;
  p.v.data = kvFloat ? v.floats() : nullptr;
  p.kBf16 = f.kvBf16 ? k.halves() : nullptr;
  p.vBf16 = f.kvBf16 ? v.halves() : nullptr;
  p.kInt8 = f.kvInt8 ? k.bytes() : nullptr;
  p.vInt8 = f.kvInt8 ? v.bytes() : nullptr;
  p.kScales.data = f.kvInt8 ? kScales.floats() : nullptr;
  p.vScales.data = f.kvInt8 ? vScales.floats() : nullptr;
  p.out = out.mutableFloats();
  p.mask = mask.present ? mask.floats() : nullptr;
  p.keyPadding = keyPadding.present ? static_cast<const uint8_t*>(keyPadding.data) : nullptr;
  p.weights = weights.present ? weights.mutableFloats() : nullptr;
  p.sinks = sinks.present ? sinks.floats() : nullptr;
  return Status::success();
}

void runCall(const AttentionCall& call) {
  ComputeScope computing;
  AttentionProblem p = call.problem;
  p.keyLengths = call.keyLengths.empty() ? nullptr : call.keyLengths.data();
  attentionForward(p);
}

}  // namespace mhsa
