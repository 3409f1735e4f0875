#include "cache_append_op.h"

#include <cmath>
#include <string>

#include "descriptor.h"
#include "descriptor_layouts.h"

namespace mhsa {
namespace {

constexpr const char* kFn = "cacheAppend";

Status countField(const char* name, double value, int64_t* out) {
  if (!(value >= 0 && value < static_cast<double>(kMaxElements)) || value != std::floor(value))
    return Status::rangeError(std::string(kFn) + ": " + name + " must be an integer in [0, 2^32), received " +
                              std::to_string(value));
  *out = static_cast<int64_t>(value);
  return Status::success();
}

// k or v: its strides checked, its length against the span its rows cover.
Status checkSource(const char* name, const BufferArg& src, const double (&strides)[3], int64_t batch,
                   int64_t positions, int64_t heads, int64_t dim, CacheAppendTensor* t) {
  if (src.bf16 || src.int8) return Status::typeError(std::string(kFn) + ": " + name + " must be a Float32Array");
  int64_t s[3];
  MHSA_RETURN_IF_ERROR(readStrides(kFn, name, strides, s));
  MHSA_RETURN_IF_ERROR(checkStridedLength(kFn, name, Shape{batch, positions, heads, dim}, s, src.length));
  t->src = src.floats();
  t->batchStride = s[0];
  t->positionStride = s[1];
  t->headStride = s[2];
  t->dim = dim;
  return Status::success();
}

Status checkStorage(const char* name, const BufferArg& storage, const char* scalesName, const BufferArg& scales,
                    const CacheAppendFields& f, int64_t rows, int64_t dim, CacheAppendTensor* t) {
  if (storage.bf16 != f.bf16 || storage.int8 != f.int8)
    return Status::typeError(std::string(kFn) + ": " + name +
                             (f.bf16 ? " must be a Uint16Array of bf16 values"
                              : f.int8 ? " must be an Int8Array"
                                       : " must be a Float32Array"));
  const int64_t want = mulSat(rows, dim);
  if (want >= kMaxElements || storage.length != want)
    return Status::rangeError(std::string(kFn) + ": " + name + ".length must be batch·kvHeads·maxLength·dim = " +
                              std::to_string(want) + ", received " + std::to_string(storage.length));
  if (scales.present != f.int8)
    return Status::typeError(std::string(kFn) + ": " + scalesName +
                             (f.int8 ? " must be a Float32Array (int8 storage)" : " goes with int8 storage only"));
  if (scales.present && (scales.bf16 || scales.int8))
    return Status::typeError(std::string(kFn) + ": " + scalesName + " must be a Float32Array");
  if (scales.present && scales.length != rows)
    return Status::rangeError(std::string(kFn) + ": " + scalesName + ".length must be batch·kvHeads·maxLength = " +
                              std::to_string(rows) + ", received " + std::to_string(scales.length));
  if (f.int8) {
    t->storage8 = static_cast<int8_t*>(const_cast<void*>(storage.data));
    t->scales = scales.mutableFloats();
  } else if (f.bf16) {
    t->storage16 = static_cast<uint16_t*>(const_cast<void*>(storage.data));
  } else {
    t->storage = storage.mutableFloats();
  }
  return Status::success();
}

// starts or counts: one Int32 per batch entry, copied.
Status readEntries(const char* name, const BufferArg& list, int64_t batch, std::vector<int64_t>* out) {
  if (list.length != batch)
    return Status::rangeError(std::string(kFn) + ": " + name + ".length must be batch = " + std::to_string(batch) +
                              ", received " + std::to_string(list.length));
  const auto* values = static_cast<const int32_t*>(list.data);
  out->assign(values, values + batch);
  return Status::success();
}

}  // namespace

Status prepareCacheAppend(const Descriptor& desc, const BufferArg& k, const BufferArg& v, const BufferArg& keys,
                          const BufferArg& values, const BufferArg& starts, const BufferArg& counts,
                          CacheAppendCall* call, const BufferArg& keyScales, const BufferArg& valueScales) {
  CacheAppendFields f;
  MHSA_RETURN_IF_ERROR(readDescriptor(desc, kFn, &f));
  CacheAppendProblem& p = call->problem;
  int64_t headDim = 0, valueDim = 0;
  MHSA_RETURN_IF_ERROR(countField("batch", f.batch, &p.batch));
  MHSA_RETURN_IF_ERROR(countField("kvHeads", f.kvHeads, &p.kvHeads));
  MHSA_RETURN_IF_ERROR(countField("maxLength", f.maxLength, &p.maxLength));
  MHSA_RETURN_IF_ERROR(countField("n", f.positions, &p.positions));
  MHSA_RETURN_IF_ERROR(countField("headDim", f.headDim, &headDim));
  MHSA_RETURN_IF_ERROR(countField("valueDim", f.valueDim, &valueDim));
  MHSA_RETURN_IF_ERROR(checkSource("k", k, {f.k0, f.k1, f.k2}, p.batch, p.positions, p.kvHeads, headDim, &p.k));
  MHSA_RETURN_IF_ERROR(checkSource("v", v, {f.v0, f.v1, f.v2}, p.batch, p.positions, p.kvHeads, valueDim, &p.v));
  const int64_t rows = mulSat(mulSat(p.batch, p.kvHeads), p.maxLength);
  if (f.bf16 && f.int8) return Status::typeError(std::string(kFn) + ": bf16 and int8 cannot both be set");
  MHSA_RETURN_IF_ERROR(checkStorage("keys", keys, "keyScales", keyScales, f, rows, headDim, &p.k));
  MHSA_RETURN_IF_ERROR(checkStorage("values", values, "valueScales", valueScales, f, rows, valueDim, &p.v));
  MHSA_RETURN_IF_ERROR(readEntries("starts", starts, p.batch, &call->starts));
  MHSA_RETURN_IF_ERROR(readEntries("counts", counts, p.batch, &call->counts));
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = call->starts[b], count = call->counts[b];
    if (count < 0 || count > p.positions)
      return Status::rangeError(std::string(kFn) + ": counts[" + std::to_string(b) + "] must be in [0, n = " +
                                std::to_string(p.positions) + "], received " + std::to_string(count));
    if (start < 0 || start + count > p.maxLength)
      return Status::rangeError(std::string(kFn) + ": starts[" + std::to_string(b) + "] + counts[" +
                                std::to_string(b) + "] must be in [0, maxLength = " + std::to_string(p.maxLength) +
                                "], received " + std::to_string(start) + " + " + std::to_string(count));
  }
  // Every written buffer is disjoint from every other buffer.
  const struct { const char* name; const BufferArg* buf; int64_t bytes; bool written; } all[] = {
      {"keys", &keys, keys.elementBytes(), true},   {"values", &values, values.elementBytes(), true},
      {"keyScales", &keyScales, 4, true},           {"valueScales", &valueScales, 4, true},
      {"k", &k, 4, false}, {"v", &v, 4, false}, {"starts", &starts, 4, false}, {"counts", &counts, 4, false}};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i)
    for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); ++j)
      if (all[i].written && j != i && (!all[j].written || j < i))
        MHSA_RETURN_IF_ERROR(checkNoOverlap(kFn, all[i].name, *all[i].buf, all[i].bytes, all[j].name, *all[j].buf,
                                            all[j].bytes, false));
  return Status::success();
}

void runCall(const CacheAppendCall& call) {
  CacheAppendProblem p = call.problem;
  p.starts = call.starts.data();
  p.counts = call.counts.data();
  cacheAppend(p);
}

}  // namespace mhsa
