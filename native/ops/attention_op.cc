#include "attention_op.h"

#include <cmath>

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

// A bshd tensor whose tokens are `seqStride` floats apart: rows may not
// overlap (stride >= heads * headDim) and the view must end at its last row:
// length == (batch * seq - 1) * stride + heads * headDim.
Status checkStridedLength(const AttentionArgs& args, int t, const Shape& s, int64_t length) {
  const char* name = t == 0 ? "q" : t == 1 ? "k" : "v";
  const int64_t stride = args.seqStride[t];
  if (args.layout != AttentionLayout::Bshd)
    return Status::rangeError(std::string("attention: a ") + name + " seq stride needs the bshd layout");
  if (elementCount(s) < 0)
    return Status::rangeError(std::string("attention: ") + name + ".shape " + shapeToString(s) + " is too large");
  // Saturating: a shape with a zero dim passes elementCount whatever its other dims.
  const int64_t row = mulSat(s[2], s[3]), rows = mulSat(s[0], s[1]);
  if (stride < row)
    return Status::rangeError(std::string("attention: ") + name + " seq stride " + std::to_string(stride) +
                              " is below heads * headDim = " + std::to_string(row));
  // rows * row < 2^32 here (elementCount passed) but (rows - 1) * stride may saturate.
  const int64_t scaled = rows == 0 || row == 0 ? 0 : mulSat(rows - 1, stride);
  const int64_t span = rows == 0 || row == 0 ? 0 : scaled >= kMaxElements ? kMaxElements : scaled + row;
  if (span >= kMaxElements || length != span)
    return Status::rangeError(std::string("attention: ") + name + ".length must be " + std::to_string(span) +
                              " for shape " + shapeToString(s) + " with seq stride " + std::to_string(stride) +
                              ", received " + std::to_string(length));
  return Status::success();
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
    if (t < 3 && args.seqStride[t] != 0) {
      Status st = checkStridedLength(args, t, *shapes[t], lengths[t]);
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
    // Only bshd gets here (checked above). A view with no elements keeps its
    // contiguous strides: its span was 0 whatever the stride, so a huge one
    // must not reach the kernel's index arithmetic.
    if (args.seqStride[t] == 0 || elementCount(*inputs[t]) == 0) continue;
    views[t]->seqStride = args.seqStride[t];
    views[t]->batchStride = mulSat((*inputs[t])[1], args.seqStride[t]);
  }
  p->outView = stridesOf(args.layout, args.out);
  p->causal = args.causal;

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

}  // namespace mhsa
