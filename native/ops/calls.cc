#include "calls.h"

#include <cmath>
#include <string>
#include <utility>

#include "../kernels/bf16.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/layernorm.h"
#include "../runtime/thread_pool.h"
#include "descriptor.h"
#include "descriptor_layouts.h"

namespace mhsa {
namespace {

bool isFiniteFloat(double x) { return std::isfinite(static_cast<float>(x)); }

// Runs each check in order and stops at the first failure.
#define MHSA_RETURN_IF_ERROR(expr)  \
  do {                              \
    Status _st = (expr);            \
    if (!_st.ok()) return _st;      \
  } while (0)

}  // namespace

Status checkNoOverlap(const char* fn, const char* outName, const BufferArg& out, int64_t outElementBytes,
                      const char* inName, const BufferArg& in, int64_t inElementBytes, bool allowSame) {
  if (out.data == nullptr || in.data == nullptr || out.length == 0 || in.length == 0) return Status::success();
  const auto o = reinterpret_cast<uintptr_t>(out.data);
  const auto i = reinterpret_cast<uintptr_t>(in.data);
  const auto outBytes = static_cast<uintptr_t>(out.length * outElementBytes);
  const auto inBytes = static_cast<uintptr_t>(in.length * inElementBytes);
  if (allowSame && o == i && outBytes == inBytes) return Status::success();
  if (o < i + inBytes && i < o + outBytes)
    return Status::rangeError(std::string(fn) + ": " + outName + " must not share memory with " + inName);
  return Status::success();
}

namespace {

// matmul's descriptor fields and checks, for matmul and layerNormMatmul (eps
// non-null: its extra fields, read before the reader finishes).
Status prepareProduct(const char* fn, const Descriptor& desc, const BufferArg& a, const BufferArg& b,
                      const BufferArg& c, const BufferArg& out, MatmulCall* call, double* eps) {
  DescriptorReader r(desc.data, desc.length, fn);
  MatmulFields f;
  f.read(r);
  if (eps) {
    LayerNormMatmulExtraFields extra;
    extra.read(r);
    *eps = extra.eps;
  }
  MHSA_RETURN_IF_ERROR(r.finish());
  MatmulArgs args;
  args.a = f.a;
  args.b = f.b;
  args.c = f.c;
  args.out = f.out;
  args.transposeA = f.transposeA;
  args.transposeB = f.transposeB;
  const double alpha = f.alpha;
  const double beta = f.beta;
  args.bPacked = f.bPacked;
  args.bBf16 = f.bBf16;
  if (b.bf16 != f.bBf16)
    return Status::typeError(std::string(fn) + (f.bBf16 ? ": b must be a Uint16Array (a matrix packed in bf16)"
                                                         : ": b must be a Float32Array"));
  if (a.bf16 || c.bf16 || out.bf16)
    return Status::typeError(std::string(fn) + ": a, c and out must be Float32Arrays");
  if (!isFiniteFloat(alpha) || !isFiniteFloat(beta))
    return Status::rangeError(std::string(fn) + ": alpha and beta must be finite float32 numbers");
  args.hasC = c.present;
  args.aLength = a.length;
  args.bLength = b.length;
  args.cLength = c.length;
  args.outLength = out.length;
  args.fn = fn;
  MHSA_RETURN_IF_ERROR(planMatmul(args, &call->plan));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "a", a, 4, false));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "b", b, b.elementBytes(), false));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "c", c, 4, true));
  call->a = a.floats();
  call->b = b.floats();
  call->c = c.present ? c.floats() : nullptr;
  call->out = out.mutableFloats();
  call->alpha = static_cast<float>(alpha);
  call->beta = static_cast<float>(beta);
  return Status::success();
}

}  // namespace

Status prepareMatmul(const Descriptor& desc, const BufferArg& a, const BufferArg& b, const BufferArg& c,
                     const BufferArg& out, MatmulCall* call) {
  return prepareProduct("matmul", desc, a, b, c, out, call, nullptr);
}

Status prepareLayerNormMatmul(const Descriptor& desc, const BufferArg& a, const BufferArg& b, const BufferArg& c,
                              const BufferArg& out, const BufferArg& weight, const BufferArg& bias, MatmulCall* call) {
  const char* fn = "layerNormMatmul";
  double eps = 0;
  MHSA_RETURN_IF_ERROR(prepareProduct(fn, desc, a, b, c, out, call, &eps));
  const MatmulPlan& plan = call->plan;
  if (!plan.bPacked || plan.aColStride != 1)
    return Status::rangeError("layerNormMatmul: a must be row-major (no transposeA) and b prepacked");
  if (plan.k > kGemmMaxLayerNormK)
    return Status::rangeError("layerNormMatmul: K must be at most " + std::to_string(kGemmMaxLayerNormK) +
                              ", received " + std::to_string(plan.k));
  if (weight.present && weight.length != plan.k)
    return Status::rangeError("layerNormMatmul: weight.length must be K = " + std::to_string(plan.k) + ", received " +
                              std::to_string(weight.length));
  if (bias.present && bias.length != plan.k)
    return Status::rangeError("layerNormMatmul: bias.length must be K = " + std::to_string(plan.k) + ", received " +
                              std::to_string(bias.length));
  if (!(eps >= 0) || !isFiniteFloat(eps))
    return Status::rangeError("layerNormMatmul: eps must be a finite non-negative number");
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "weight", weight, 4, false));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "bias", bias, 4, false));
  call->layerNorm = true;
  call->norm = {weight.present ? weight.floats() : nullptr, bias.present ? bias.floats() : nullptr,
                static_cast<float>(eps)};
  return Status::success();
}

void runCall(const MatmulCall& call) {
  ComputeScope computing;
  runMatmul(call.plan, call.a, call.b, call.c, call.out, call.alpha, call.beta, call.layerNorm ? &call.norm : nullptr);
}

Status prepareSoftmax(const Descriptor& desc, const BufferArg& x, const BufferArg& out, SoftmaxCall* call) {
  const char* fn = "softmax";
  DescriptorReader r(desc.data, desc.length, fn);
  SoftmaxFields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  SoftmaxArgs args;
  args.x = f.x;
  args.out = f.out;
  const double scale = f.scale;
  if (!isFiniteFloat(scale)) return Status::rangeError("softmax: scale must be a finite float32 number");
  args.xLength = x.length;
  args.outLength = out.length;
  MHSA_RETURN_IF_ERROR(planSoftmax(args, &call->plan));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  call->x = x.floats();
  call->out = out.mutableFloats();
  call->scale = static_cast<float>(scale);
  return Status::success();
}

void runCall(const SoftmaxCall& call) {
  ComputeScope computing;
  runSoftmax(call.plan, call.x, call.out, call.scale);
}

Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, AttentionCall* call) {
  return prepareAttention(desc, q, k, v, out, mask, keyPadding, weights, sinks, BufferArg{}, call);
}

Status prepareAttention(const Descriptor& desc, const BufferArg& q, const BufferArg& k, const BufferArg& v,
                        const BufferArg& out, const BufferArg& mask, const BufferArg& keyPadding,
                        const BufferArg& weights, const BufferArg& sinks, const BufferArg& keyLengths,
                        AttentionCall* call) {
  const char* fn = "attention";
  DescriptorReader r(desc.data, desc.length, fn);
  AttentionFields f;
  f.read(r);
  // The optional token strides are read first and judged after finish(), so
  // an earlier field's error is the one reported.
  AttentionStrideFields strideFields;
  const bool hasStrides = !r.atEnd();
  if (hasStrides) strideFields.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
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
    for (int a = 0; a < 3; ++a) {
      const double x = strides[t][a];
      if (!(x >= 0 && x <= kMaxSafeInteger) || x != static_cast<double>(static_cast<int64_t>(x)))
        return Status::rangeError(std::string("attention: ") + "qkv"[t] + ".strides[" + std::to_string(a) +
                                  "] must be a non-negative safe integer");
      args.strides[t][a] = static_cast<int64_t>(x);
    }
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
  // k and v are both bf16 (a bf16 KV cache) or both float; everything else is float.
  for (const auto& kv : {std::pair<const char*, const BufferArg*>{"k", &k}, {"v", &v}})
    if (kv.second->bf16 != f.kvBf16)
      return Status::typeError(std::string("attention: ") + kv.first +
                               (f.kvBf16 ? " must be a Uint16Array of bf16 values (kvBf16)" : " must be a Float32Array"));
  for (const auto& in : {std::pair<const char*, const BufferArg*>{"q", &q}, {"out", &out}, {"mask", &mask},
                         {"weights", &weights}, {"sinks", &sinks}})
    if (in.second->bf16) return Status::typeError(std::string("attention: ") + in.first + " must be a Float32Array");
  AttentionProblem& p = call->problem;
  MHSA_RETURN_IF_ERROR(planAttention(args, &p));
  // out and weights are written; neither may overlap anything else.
  const struct { const char* name; const BufferArg* buf; int64_t elementBytes; } inputs[] = {
      {"q", &q, 4}, {"k", &k, k.elementBytes()}, {"v", &v, v.elementBytes()}, {"mask", &mask, 4},
      {"keyPaddingMask", &keyPadding, 1},
      {"sinks", &sinks, 4}, {"keyLengths", &keyLengths, 4}};
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
  p.k.data = f.kvBf16 ? nullptr : k.floats();
  p.v.data = f.kvBf16 ? nullptr : v.floats();
  p.kBf16 = f.kvBf16 ? k.halves() : nullptr;
  p.vBf16 = f.kvBf16 ? v.halves() : nullptr;
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

Status prepareCastBf16(const Descriptor& desc, const BufferArg& src, const BufferArg& out, CastBf16Call* call) {
  const char* fn = "castBf16";
  DescriptorReader r(desc.data, desc.length, fn);
  CastBf16Fields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  if (src.bf16) return Status::typeError("castBf16: src must be a Float32Array");
  if (!out.bf16) return Status::typeError("castBf16: out must be a Uint16Array");
  const struct { const char* name; double value; int64_t* field; } counts[] = {
      {"rows", f.rows, &call->rows},
      {"width", f.width, &call->width},
      {"src.rowStride", f.srcRowStride, &call->srcRowStride},
      {"out.rowStride", f.outRowStride, &call->outRowStride}};
  for (const auto& c : counts) {
    if (!(c.value >= 0 && c.value < static_cast<double>(kMaxElements)) || c.value != std::floor(c.value))
      return Status::rangeError(std::string(fn) + ": " + c.name + " must be an integer in [0, 2^32), received " +
                                std::to_string(c.value));
    *c.field = static_cast<int64_t>(c.value);
  }
  if (call->width == 0) call->rows = 0;  // nothing to write: no row is addressed
  const int64_t rows = call->rows, width = call->width;
  if (rows > 1 && (width > call->srcRowStride || width > call->outRowStride))
    return Status::rangeError("castBf16: rows of width " + std::to_string(width) + " must fit their row strides");
  // The element just past each view's last row; 0 when empty.
  auto span = [&](int64_t stride) { return rows == 0 || width == 0 ? 0 : addSat(mulSat(rows - 1, stride), width); };
  if (src.length < span(call->srcRowStride) || out.length < span(call->outRowStride))
    return Status::rangeError("castBf16: src must hold " + std::to_string(span(call->srcRowStride)) +
                              " floats and out " + std::to_string(span(call->outRowStride)) + " values, received " +
                              std::to_string(src.length) + " and " + std::to_string(out.length));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 2, "src", src, 4, false));
  call->src = src.floats();
  call->out = static_cast<uint16_t*>(const_cast<void*>(out.data));
  return Status::success();
}

void runCall(const CastBf16Call& call) {
  for (int64_t i = 0; i < call.rows; ++i) {
    const float* s = call.src + i * call.srcRowStride;
    uint16_t* o = call.out + i * call.outRowStride;
    for (int64_t e = 0; e < call.width; ++e) o[e] = floatToBf16(s[e]);
  }
}

Status prepareLayerNorm(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& weight,
                        const BufferArg& bias, LayerNormCall* call) {
  const char* fn = "layerNorm";
  DescriptorReader r(desc.data, desc.length, fn);
  LayerNormFields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  const Shape& xs = f.x;
  const Shape& os = f.out;
  const double eps = f.eps;
  if (xs.empty()) return Status::rangeError("layerNorm: x must have at least 1 dim");
  MHSA_RETURN_IF_ERROR(checkLength(fn, "x", xs, x.length));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "out", os, out.length));
  if (os != xs) return Status::rangeError("layerNorm: out.shape must equal x.shape " + shapeToString(xs));
  const int64_t dim = xs.back();
  if (weight.present && weight.length != dim)
    return Status::rangeError("layerNorm: weight.length must be " + std::to_string(dim) + ", received " +
                              std::to_string(weight.length));
  if (bias.present && bias.length != dim)
    return Status::rangeError("layerNorm: bias.length must be " + std::to_string(dim) + ", received " +
                              std::to_string(bias.length));
  if (!(eps >= 0) || !isFiniteFloat(eps))
    return Status::rangeError("layerNorm: eps must be a finite non-negative number");
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "weight", weight, 4, false));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "bias", bias, 4, false));
  call->x = x.floats();
  call->out = out.mutableFloats();
  call->weight = weight.present ? weight.floats() : nullptr;
  call->bias = bias.present ? bias.floats() : nullptr;
  call->dim = dim;
  call->rows = dim == 0 ? 0 : x.length / dim;
  call->eps = static_cast<float>(eps);
  call->rms = f.rms;
  return Status::success();
}

void runCall(const LayerNormCall& call) {
  ComputeScope computing;
  if (call.rms)
    rmsNormRows(call.x, call.out, call.rows, call.dim, call.weight, call.bias, call.eps);
  else
    layerNormRows(call.x, call.out, call.rows, call.dim, call.weight, call.bias, call.eps);
}

Status preparePackedSize(const Descriptor& desc, int64_t* floats) {
  DescriptorReader r(desc.data, desc.length, "packMatrix");
  PackedSizeFields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  const Shape& s = f.b;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  if (elementCount(s) < 0)
    return Status::rangeError("packMatrix: b.shape " + shapeToString(s) + " is too large");
  *floats = f.bf16 ? packedBf16Size(s[0], s[1]) : packedBSize(s[0], s[1]);
  return Status::success();
}

Status preparePackMatrix(const Descriptor& desc, const BufferArg& b, const BufferArg& out, PackCall* call) {
  const char* fn = "packMatrix";
  DescriptorReader r(desc.data, desc.length, fn);
  PackMatrixFields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  const Shape& s = f.b;
  const bool transpose = f.transpose;
  if (s.size() != 2) return Status::rangeError("packMatrix: b must be 2-D, received " + shapeToString(s));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "b", s, b.length));
  // The packed matrix is op(b): [K, N] = b's shape, or its transpose.
  const int64_t k = transpose ? s[1] : s[0], n = transpose ? s[0] : s[1];
  if (out.bf16 != f.bf16)
    return Status::typeError(f.bf16 ? "packMatrix: out must be a Uint16Array for bf16" : "packMatrix: out must be a Float32Array");
  if (b.bf16 && !f.bf16)
    return Status::rangeError("packMatrix: a bf16 b packs only in bf16");
  const int64_t want = f.bf16 ? packedBf16Size(k, n) : packedBSize(k, n);
  if (out.length != want)
    return Status::rangeError("packMatrix: out must hold " + std::to_string(want) + (f.bf16 ? " bf16 values" : " floats") +
                              ", received " + std::to_string(out.length));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, out.elementBytes(), "b", b, b.elementBytes(), false));
  const int64_t rowStride = transpose ? 1 : s[1], colStride = transpose ? s[1] : 1;
  call->bf16 = f.bf16;
  call->sourceBf16 = b.bf16;
  if (b.bf16)
    call->b16 = StridedBf16Matrix{b.halves(), rowStride, colStride};
  else
    call->b = StridedMatrix{b.floats(), rowStride, colStride};
  if (f.bf16) call->out16 = static_cast<uint16_t*>(const_cast<void*>(out.data));
  call->k = k;
  call->n = n;
  call->out = out.mutableFloats();
  return Status::success();
}

Status prepareRope(const Descriptor& desc, const BufferArg& x, const BufferArg& out, const BufferArg& positions,
                   RopeCall* call) {
  const char* fn = "rope";
  DescriptorReader r(desc.data, desc.length, fn);
  RopeFields f;
  f.read(r);
  MHSA_RETURN_IF_ERROR(r.finish());
  if (f.layout != 0 && f.layout != 1) return Status::rangeError("rope: layout code must be 0 (bhsd) or 1 (bshd)");
  if (f.x.size() != 4) return Status::rangeError("rope: x must be 4-D, received " + shapeToString(f.x));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "x", f.x, x.length));
  MHSA_RETURN_IF_ERROR(checkLength(fn, "out", f.out, out.length));
  if (f.out != f.x) return Status::rangeError("rope: out.shape must equal x.shape " + shapeToString(f.x));
  const bool bshd = f.layout == 1;
  const int64_t batch = f.x[0], seq = bshd ? f.x[1] : f.x[2], heads = bshd ? f.x[2] : f.x[1], headDim = f.x[3];
  const double rd = f.rotaryDim;
  if (!(rd >= 0 && rd <= static_cast<double>(headDim)) || std::floor(rd) != rd || std::fmod(rd, 2.0) != 0)
    return Status::rangeError("rope: rotaryDim must be an even whole number from 0 to headDim = " +
                              std::to_string(headDim));
  if (!(f.theta > 0) || !std::isfinite(f.theta))
    return Status::rangeError("rope: theta must be a finite number above 0");
  if (!(f.offset >= 0 && f.offset <= kMaxSafeInteger) || std::floor(f.offset) != f.offset)
    return Status::rangeError("rope: offset must be a non-negative safe integer");
  const int64_t offset = static_cast<int64_t>(f.offset);
  if (offset > static_cast<int64_t>(kMaxSafeInteger) - seq)
    return Status::rangeError("rope: offset + seq must be a safe integer");
  if (positions.present != !f.positions.empty())
    return Status::rangeError("rope: positions.shape must be given exactly when positions is");
  bool perBatch = false;
  if (positions.present && offset != 0) return Status::rangeError("rope: offset must be 0 when positions is given");
  if (positions.present) {
    const Shape& ps = f.positions;
    perBatch = ps.size() == 2;
    if (!(ps.size() == 1 && ps[0] == seq) && !(ps.size() == 2 && ps[0] == batch && ps[1] == seq))
      return Status::rangeError("rope: positions.shape must be [seq] = [" + std::to_string(seq) +
                                "] or [batch, seq] = [" + std::to_string(batch) + ", " + std::to_string(seq) +
                                "], received " + shapeToString(ps));
    MHSA_RETURN_IF_ERROR(checkLength(fn, "positions", ps, positions.length));
    const auto* pos = static_cast<const int32_t*>(positions.data);
    for (int64_t i = 0; i < positions.length; ++i)
      if (pos[i] < 0)
        return Status::rangeError("rope: positions[" + std::to_string(i) + "] must be non-negative, received " +
                                  std::to_string(pos[i]));
  }
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "x", x, 4, true));
  MHSA_RETURN_IF_ERROR(checkNoOverlap(fn, "out", out, 4, "positions", positions, 4, false));
  RopeProblem& p = call->problem;
  p.x = x.floats();
  p.out = out.mutableFloats();
  p.batch = batch;
  p.seq = seq;
  p.heads = heads;
  p.headDim = headDim;
  p.headStride = bshd ? headDim : seq * headDim;
  p.seqStride = bshd ? heads * headDim : headDim;
  p.batchStride = seq * heads * headDim;
  p.rotaryDim = static_cast<int64_t>(rd);
  p.interleaved = f.interleaved;
  p.theta = f.theta;
  p.positions = positions.present ? static_cast<const int32_t*>(positions.data) : nullptr;
  p.positionsPerBatch = perBatch;
  p.offset = offset;
  return Status::success();
}

void runCall(const RopeCall& call) {
  ComputeScope computing;
  ropeForward(call.problem);
}

void runCall(const PackCall& call) {
  ComputeScope computing;
  if (!call.bf16) {
    packWholeB(call.b, call.k, call.n, call.out);
  } else if (call.sourceBf16) {
    packWholeBBf16(call.b16, call.k, call.n, call.out16);
  } else {
    packWholeBBf16(call.b, call.k, call.n, call.out16);
  }
}

}  // namespace mhsa
