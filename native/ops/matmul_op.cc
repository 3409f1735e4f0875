#include "matmul_op.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "../kernels/gemm_bf16.h"
#include "../kernels/gemm_blas.h"
#include "../kernels/gemm_int8.h"
#include "../runtime/thread_pool.h"
#include "descriptor.h"
#include "descriptor_layouts.h"

namespace mhsa {
namespace {

Status rankError(const char* fn, const char* arg, const Shape& s) {
  return Status::rangeError(std::string(fn) + ": " + arg + " must have at least 2 dims, received shape " +
                            shapeToString(s));
}

}  // namespace

Status planMatmul(const MatmulArgs& args, MatmulPlan* plan) {
  // Messages name the entry point (matmul or layerNormMatmul); built only on failure.
  auto error = [&](const std::string& message) { return Status::rangeError(std::string(args.fn) + ": " + message); };
  if (args.a.size() < 2) return rankError(args.fn, "a", args.a);
  if (args.b.size() < 2) return rankError(args.fn, "b", args.b);
  Status st = checkLength(args.fn, "a", args.a, args.aLength);
  if (!st.ok()) return st;
  if (args.bPacked) {
    if (args.b.size() != 2 || args.transposeB)
      return error("a packed b must be 2-D and not transposed (transpose when packing)");
    if (elementCount(args.b) < 0)
      return error("packed b's shape " + shapeToString(args.b) + " is too large");
    if (args.bBf16 && args.bInt8) return error("b cannot be packed in both bf16 and int8");
    if (args.bInt8 && args.b[0] > kInt8MaxDepth)
      return error("an int8 b has a depth K of at most " + std::to_string(kInt8MaxDepth) + ", received " +
                   std::to_string(args.b[0]));
    const int64_t expected = args.bInt8   ? packedInt8Bytes(args.b[0], args.b[1])
                             : args.bBf16 ? packedBf16Size(args.b[0], args.b[1])
                                          : packedBSize(args.b[0], args.b[1]);
    const char* unit = args.bInt8 ? " bytes" : args.bBf16 ? " bf16 values" : " floats";
    if (args.bLength != expected)
      return error("packed b holds " + std::to_string(args.bLength) + unit + ", expected " + std::to_string(expected) +
                   " for " + shapeToString(args.b) +
                   (args.bInt8 ? " packed in int8" : args.bBf16 ? " packed in bf16" : " packed for this CPU"));
  } else if (args.bBf16 || args.bInt8) {
    return error(std::string("a ") + (args.bInt8 ? "int8" : "bf16") + " b must be prepacked");
  } else if (!(st = checkLength(args.fn, "b", args.b, args.bLength)).ok()) {
    return st;
  }
  if (args.hasC && !(st = checkLength(args.fn, "c", args.c, args.cLength)).ok()) return st;
  if (!(st = checkLength(args.fn, "out", args.out, args.outLength)).ok()) return st;

  const size_t ra = args.a.size(), rb = args.b.size();
  const int64_t aRows = args.a[ra - 2], aCols = args.a[ra - 1];
  const int64_t bRows = args.b[rb - 2], bCols = args.b[rb - 1];
  const int64_t m = args.transposeA ? aCols : aRows;
  const int64_t k = args.transposeA ? aRows : aCols;
  const int64_t kb = args.transposeB ? bCols : bRows;
  const int64_t n = args.transposeB ? bRows : bCols;
  if (k != kb)
    return error("inner dims differ: op(a) is " + std::to_string(m) + "x" +
                 std::to_string(k) + " but op(b) is " + std::to_string(kb) + "x" +
                 std::to_string(n));

  const Shape aBatch(args.a.begin(), args.a.end() - 2);
  const Shape bBatch(args.b.begin(), args.b.end() - 2);
  Shape batch;
  if (!broadcastShapes(aBatch, bBatch, &batch))
    return error("batch dims of a " + shapeToString(aBatch) + " and b " +
                 shapeToString(bBatch) + " do not broadcast");
  Shape result = batch;
  result.push_back(m);
  result.push_back(n);
  if (elementCount(result) < 0)
    return error("result shape " + shapeToString(result) + " is too large");
  if (args.out != result)
    return error("out.shape must be " + shapeToString(result) + ", received " +
                 shapeToString(args.out));
  if (args.hasC) {
    Shape joined;
    if (args.c.size() > result.size() || !broadcastShapes(args.c, result, &joined) || joined != result)
      return error("c.shape " + shapeToString(args.c) +
                   " must broadcast to the result shape " + shapeToString(result));
  }

  plan->m = m;
  plan->n = n;
  plan->k = k;
  plan->batch = batch;
  plan->batchCount = elementCount(batch);
  plan->aBatchStrides = broadcastStrides(aBatch, batch);
  plan->bBatchStrides = broadcastStrides(bBatch, batch);
  // Each batch entry of a is aRows x aCols row-major; op(a) reads it transposed by swapping strides.
  const int64_t aMatrix = mulSat(aRows, aCols), bMatrix = mulSat(bRows, bCols);
  for (int64_t& s : plan->aBatchStrides) s = mulSat(s, aMatrix);
  for (int64_t& s : plan->bBatchStrides) s = mulSat(s, bMatrix);
  plan->aRowStride = args.transposeA ? 1 : aCols;
  plan->aColStride = args.transposeA ? aCols : 1;
  plan->bRowStride = args.transposeB ? 1 : bCols;
  plan->bColStride = args.transposeB ? bCols : 1;
  plan->hasC = args.hasC;
  plan->bPacked = args.bPacked;
  plan->bBf16 = args.bBf16;
  plan->bInt8 = args.bInt8;
  if (args.hasC) {
    const Shape full = broadcastStrides(args.c, result);
    plan->cBatchStrides.assign(full.begin(), full.end() - 2);
    plan->cRowStride = full[full.size() - 2];
    plan->cColStride = full[full.size() - 1];
  }
  return Status::success();
}

namespace {

// out = beta * c over the whole (broadcast) result, before the products
// accumulate into it. c may be out itself (then only the scaling remains).
// Split into row chunks across the pool: a projection's bias fills a whole
// [tokens, features] output, a pass that on one thread cost as much as a
// tenth of the GEMM after it at 197 x 768.
void applyBetaC(const MatmulPlan& plan, const float* c, float* out, float beta) {
  const int64_t m = plan.m, n = plan.n;
  const size_t rank = plan.batch.size();
  const int64_t rowsPerTask = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(n, 1));
  const int64_t chunks = (m + rowsPerTask - 1) / rowsPerTask;
  parallelFor(plan.batchCount * chunks, [&](int64_t task) {
    const int64_t index = task / chunks, i0 = (task % chunks) * rowsPerTask, i1 = std::min(m, i0 + rowsPerTask);
    int64_t cOff = 0, rem = index;
    for (size_t d = rank; d-- > 0;) {
      cOff += (rem % plan.batch[d]) * plan.cBatchStrides[d];
      rem /= plan.batch[d];
    }
    const float* cb = c + cOff;
    float* ob = out + index * m * n;
    for (int64_t i = i0; i < i1; ++i) {
      const float* cr = cb + i * plan.cRowStride;
      float* orow = ob + i * n;
      if (cr == orow && plan.cColStride == 1) {
        if (beta != 1.0f)
          for (int64_t j = 0; j < n; ++j) orow[j] *= beta;
      } else if (plan.cColStride == 1 && beta == 1.0f) {
        std::memcpy(orow, cr, static_cast<size_t>(n) * sizeof(float));
      } else if (plan.cColStride == 1) {
        for (int64_t j = 0; j < n; ++j) orow[j] = beta * cr[j];
      } else {
        for (int64_t j = 0; j < n; ++j) orow[j] = beta * cr[j * plan.cColStride];
      }
    }
  });
}

// Offset of batch entry `index` in an operand with the given batch strides.
int64_t batchOffset(const MatmulPlan& plan, const Shape& strides, int64_t index) {
  int64_t off = 0;
  for (size_t d = plan.batch.size(); d-- > 0;) {
    off += (index % plan.batch[d]) * strides[d];
    index /= plan.batch[d];
  }
  return off;
}

bool allZero(const Shape& s) {
  for (int64_t v : s)
    if (v != 0) return false;
  return true;
}

// One matrix b for every entry and a's entries row-major, one after another
// (rows k apart throughout): the batch folds into M.
bool contiguousRows(const MatmulPlan& plan) {
  if (!allZero(plan.bBatchStrides)) return false;
  if (plan.aColStride != 1 || (plan.m != 1 && plan.aRowStride != plan.k)) return false;
  int64_t expect = plan.m * plan.k;
  for (size_t d = plan.batch.size(); d-- > 0;) {
    if (plan.batch[d] != 1 && plan.aBatchStrides[d] != expect) return false;
    expect *= plan.batch[d];
  }
  return true;
}

}  // namespace

void runMatmul(const MatmulPlan& plan, const float* a, const float* b, const float* c, float* out,
               float alpha, float beta, const RowLayerNorm* aNorm) {
  if (plan.batchCount == 0 || plan.m == 0 || plan.n == 0) return;
  bool accumulate = plan.hasC && beta != 0.0f;
  // A bias row (c of shape [n] or [1, n], beta 1) goes to the GEMM, which adds
  // it to each tile as it first writes it: no pass over out beforehand. Not
  // with a system BLAS, which takes c only as out's starting value.
  const bool biasRow = accumulate && beta == 1.0f && c != out && plan.cRowStride == 0 && plan.cColStride == 1 &&
                       allZero(plan.cBatchStrides) && (systemBlasName() == nullptr || plan.bBf16 || plan.bInt8);
  if (accumulate && !biasRow) applyBetaC(plan, c, out, beta);
  if (biasRow) accumulate = false;

  GemmProblem p{};
  p.m = plan.m;
  p.n = plan.n;
  p.k = plan.k;
  p.alpha = alpha;
  p.a = {a, plan.aRowStride, plan.aColStride};
  p.b = {b, plan.bRowStride, plan.bColStride};
  p.out = out;
  p.outRowStride = plan.n;
  p.outColStride = 1;
  p.accumulate = accumulate;
  if (plan.bPacked && !plan.bBf16 && !plan.bInt8) p.packedB = b;
  if (plan.bBf16) p.packedBBf16 = reinterpret_cast<const uint16_t*>(b);
  if (plan.bInt8) p.packedBInt8 = reinterpret_cast<const int8_t*>(b);
  if (biasRow) p.bias = c;
  p.aLayerNorm = aNorm;

  // Batch entry `index` as its own product.
  auto entry = [&](int64_t index) {
    GemmProblem q = p;
    q.a.data = a + batchOffset(plan, plan.aBatchStrides, index);
    q.b.data = b + batchOffset(plan, plan.bBatchStrides, index);
    q.out = out + index * plan.m * plan.n;
    return q;
  };

  // A bf16 or int8 weight: rows of every entry folded into M where they lie
  // evenly (as below), else one product per entry, each over the pool.
  if (plan.bBf16 || plan.bInt8) {
    auto run = [&](const GemmProblem& g) { plan.bInt8 ? gemmInt8(g) : gemmBf16(g); };
    if (contiguousRows(plan)) {
      p.m = plan.m * plan.batchCount;
      p.a.rowStride = plan.k;
      run(p);
      return;
    }
    for (int64_t index = 0; index < plan.batchCount; ++index) run(entry(index));
    return;
  }

  // Built with a system BLAS: one sgemm per entry (BLAS threads each). An
  // entry BLAS declines (strides it cannot take, or BLAS busy with another
  // caller) runs on the built-in kernels.
  if (systemBlasGemm(entry(0))) {
    for (int64_t index = 1; index < plan.batchCount; ++index)
      if (!systemBlasGemm(entry(index))) gemmParallel(entry(index));
    return;
  }

  // One weight matrix against a batch of row-major inputs (a projection): the
  // batch folds into M, so B is packed once for every row of every entry.
  // Entry rows must be k apart: true for a row-major a, or a single row.
  if (contiguousRows(plan)) {
    p.m = plan.m * plan.batchCount;
    p.a.rowStride = plan.k;
    gemmParallel(p);
    return;
  }

  // Many small products (attention-shaped batches): one product per task.
  const double flops = 2.0 * plan.m * plan.n * plan.k;
  if (plan.batchCount >= numThreads() && flops < kGemmBatchPerTaskMaxFlops) {
    parallelFor(plan.batchCount, [&](int64_t index) { gemmSerial(entry(index)); });
    return;
  }
  for (int64_t index = 0; index < plan.batchCount; ++index) gemmParallel(entry(index));
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
  args.bInt8 = f.bInt8;
  if (b.bf16 != f.bBf16 || b.int8 != f.bInt8)
    return Status::typeError(std::string(fn) + (f.bInt8   ? ": b must be an Int8Array (a matrix packed in int8)"
                                                : f.bBf16 ? ": b must be a Uint16Array (a matrix packed in bf16)"
                                                          : ": b must be a Float32Array"));
  if (a.bf16 || c.bf16 || out.bf16 || a.int8 || c.int8 || out.int8)
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
  if (plan.bInt8) return Status::rangeError("layerNormMatmul: b must be packed in float32 or bf16, not int8");
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

}  // namespace mhsa
