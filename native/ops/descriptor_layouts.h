// The numeric arguments of each native call, in the order lib/native.ts's
// Descriptor packs them: the one definition of that order. Each op's prepare
// function (calls.h) reads a descriptor only through the structs below, and
// the binding exports the same lists (descriptorLayouts), against which
// test/descriptor-layouts.test.ts checks every descriptor that lib/ builds.
//
// Each list is X(kind, member, name): kind is a DescriptorReader method
// (shape, number or flag), member the struct field, name what an error says.
#pragma once

#include <cstddef>
#include <cstdint>

#include "descriptor.h"

#define MHSA_MATMUL_FIELDS(X)                                                                        \
  X(shape, a, "a.shape") X(shape, b, "b.shape") X(shape, c, "c.shape") X(shape, out, "out.shape")    \
  X(flag, transposeA, "transposeA") X(flag, transposeB, "transposeB") X(number, alpha, "alpha")      \
  X(number, beta, "beta") X(flag, bPacked, "bPacked") X(flag, bBf16, "bBf16")                \
  X(flag, bInt8, "bInt8")

// layerNormMatmul: matmul's fields, then these.
#define MHSA_LAYER_NORM_MATMUL_EXTRA_FIELDS(X) X(number, eps, "eps")

#define MHSA_SOFTMAX_FIELDS(X) X(shape, x, "x.shape") X(shape, out, "out.shape") X(number, scale, "scale")

#define MHSA_ATTENTION_FIELDS(X)                                                                      \
  X(number, layout, "layout") X(shape, q, "q.shape") X(shape, k, "k.shape") X(shape, v, "v.shape")   \
  X(shape, out, "out.shape") X(flag, hasScale, "hasScale") X(number, scale, "scale")                 \
  X(flag, causal, "causal") X(shape, mask, "mask.shape") X(number, softcap, "softcap")                \
  X(number, windowLeft, "window.left") X(number, windowRight, "window.right") X(flag, kvBf16, "kvBf16") \
  X(flag, kvInt8, "kvInt8")

// Optional, all or none: the strides in floats of axes 0-2 of q, k and v, in
// the layout's shape order (views of the block's fused QKV or of a KV cache,
// read in place; attention_op.h).
#define MHSA_ATTENTION_STRIDE_FIELDS(X)                                                                    \
  X(number, q0, "q.strides[0]") X(number, q1, "q.strides[1]") X(number, q2, "q.strides[2]")                \
  X(number, k0, "k.strides[0]") X(number, k1, "k.strides[1]") X(number, k2, "k.strides[2]")                \
  X(number, v0, "v.strides[0]") X(number, v1, "v.strides[1]") X(number, v2, "v.strides[2]")

// rms: RMSNorm (no centering) instead of LayerNorm.
#define MHSA_LAYER_NORM_FIELDS(X) \
  X(shape, x, "x.shape") X(shape, out, "out.shape") X(number, eps, "eps") X(flag, rms, "rms")

#define MHSA_PACKED_SIZE_FIELDS(X) X(shape, b, "b.shape") X(flag, bf16, "bf16") X(flag, int8, "int8")

#define MHSA_PACK_MATRIX_FIELDS(X) \
  X(shape, b, "b.shape") X(flag, transpose, "transpose") X(flag, bf16, "bf16") X(flag, int8, "int8")

// layout: 0 bhsd, 1 bshd. positions.shape is rank 0 when positions is absent.
#define MHSA_ROPE_FIELDS(X)                                                                           \
  X(number, layout, "layout") X(shape, x, "x.shape") X(shape, out, "out.shape")                       \
  X(number, rotaryDim, "rotaryDim") X(number, theta, "theta") X(flag, interleaved, "interleaved")     \
  X(number, offset, "offset") X(shape, positions, "positions.shape")

// Optional, all or none: the strides in floats of axes 0-2 of x and out (one
// view, rope in place), in the layout's shape order (q or k inside a block's
// projection output, read in place).
#define MHSA_ROPE_STRIDE_FIELDS(X) \
  X(number, s0, "x.strides[0]") X(number, s1, "x.strides[1]") X(number, s2, "x.strides[2]")

// n positions of k and v (strides of their batch, position and head axes)
// into storage [batch, kvHeads, maxLength, headDim or valueDim]: float32,
// bf16, or int8 with one scale per row (keyScales, valueScales).
#define MHSA_CACHE_APPEND_FIELDS(X)                                                                   \
  X(number, batch, "batch") X(number, kvHeads, "kvHeads") X(number, maxLength, "maxLength")            \
  X(number, positions, "n") X(number, headDim, "headDim") X(number, valueDim, "valueDim")              \
  X(number, k0, "k.strides[0]") X(number, k1, "k.strides[1]") X(number, k2, "k.strides[2]")            \
  X(number, v0, "v.strides[0]") X(number, v1, "v.strides[1]") X(number, v2, "v.strides[2]")            \
  X(flag, bf16, "bf16") X(flag, int8, "int8")

// Each op's buffer arguments, in order: its descriptor follows them, then (at
// an op's own entry point) an optional callback. The binding indexes its
// arguments through these names (<op>_args below) and exports them with the
// fields, and lib/ finds a buffer's place by its name (argIndex, lib/native.ts).
#define MHSA_MATMUL_ARGS(X) X(a) X(b) X(c) X(out)
#define MHSA_LAYER_NORM_MATMUL_ARGS(X) X(a) X(b) X(c) X(out) X(weight) X(bias)
#define MHSA_SOFTMAX_ARGS(X) X(x) X(out)
#define MHSA_ATTENTION_ARGS(X) \
  X(q) X(k) X(v) X(out) X(mask) X(keyPaddingMask) X(weights) X(sinks) X(keyLengths) X(kScales) X(vScales)
#define MHSA_LAYER_NORM_ARGS(X) X(x) X(out) X(weight) X(bias)
#define MHSA_PACKED_SIZE_ARGS(X)
#define MHSA_PACK_MATRIX_ARGS(X) X(b) X(out) X(scales)
#define MHSA_ROPE_ARGS(X) X(x) X(out) X(positions)
#define MHSA_CACHE_APPEND_ARGS(X) X(k) X(v) X(keys) X(values) X(starts) X(counts) X(keyScales) X(valueScales)

namespace mhsa {

namespace descriptor_field {
using shape = Shape;
using number = double;
using flag = bool;
}  // namespace descriptor_field

#define MHSA_DESCRIPTOR_MEMBER(kind, member, name) descriptor_field::kind member{};
#define MHSA_DESCRIPTOR_READ(kind, member, name) member = r.kind(name);

// Reads the fields in order; errors collect in r (DescriptorReader::finish).
#define MHSA_DESCRIPTOR_STRUCT(Type, FIELDS)              \
  struct Type {                                           \
    FIELDS(MHSA_DESCRIPTOR_MEMBER)                        \
    void read(DescriptorReader& r) { FIELDS(MHSA_DESCRIPTOR_READ) } \
  };

MHSA_DESCRIPTOR_STRUCT(MatmulFields, MHSA_MATMUL_FIELDS)
MHSA_DESCRIPTOR_STRUCT(LayerNormMatmulExtraFields, MHSA_LAYER_NORM_MATMUL_EXTRA_FIELDS)
MHSA_DESCRIPTOR_STRUCT(SoftmaxFields, MHSA_SOFTMAX_FIELDS)
MHSA_DESCRIPTOR_STRUCT(AttentionFields, MHSA_ATTENTION_FIELDS)
MHSA_DESCRIPTOR_STRUCT(AttentionStrideFields, MHSA_ATTENTION_STRIDE_FIELDS)
MHSA_DESCRIPTOR_STRUCT(LayerNormFields, MHSA_LAYER_NORM_FIELDS)
MHSA_DESCRIPTOR_STRUCT(PackedSizeFields, MHSA_PACKED_SIZE_FIELDS)
MHSA_DESCRIPTOR_STRUCT(PackMatrixFields, MHSA_PACK_MATRIX_FIELDS)
MHSA_DESCRIPTOR_STRUCT(RopeFields, MHSA_ROPE_FIELDS)
MHSA_DESCRIPTOR_STRUCT(RopeStrideFields, MHSA_ROPE_STRIDE_FIELDS)
MHSA_DESCRIPTOR_STRUCT(CacheAppendFields, MHSA_CACHE_APPEND_FIELDS)

// <op>_args::<name>: a buffer argument's index; kDescriptor follows the last.
#define MHSA_ARG_ENUM(name) name,
#define MHSA_ARG_INDICES(ns, ARGS) \
  namespace ns {                  \
  enum Index : uint32_t { ARGS(MHSA_ARG_ENUM) kDescriptor }; \
  }
MHSA_ARG_INDICES(matmul_args, MHSA_MATMUL_ARGS)
MHSA_ARG_INDICES(layer_norm_matmul_args, MHSA_LAYER_NORM_MATMUL_ARGS)
MHSA_ARG_INDICES(softmax_args, MHSA_SOFTMAX_ARGS)
MHSA_ARG_INDICES(attention_args, MHSA_ATTENTION_ARGS)
MHSA_ARG_INDICES(layer_norm_args, MHSA_LAYER_NORM_ARGS)
MHSA_ARG_INDICES(packed_size_args, MHSA_PACKED_SIZE_ARGS)
MHSA_ARG_INDICES(pack_matrix_args, MHSA_PACK_MATRIX_ARGS)
MHSA_ARG_INDICES(rope_args, MHSA_ROPE_ARGS)
MHSA_ARG_INDICES(cache_append_args, MHSA_CACHE_APPEND_ARGS)
#undef MHSA_ARG_INDICES
#undef MHSA_ARG_ENUM

#undef MHSA_DESCRIPTOR_STRUCT
#undef MHSA_DESCRIPTOR_READ
#undef MHSA_DESCRIPTOR_MEMBER

struct DescriptorFieldInfo {
  const char* kind;  // "shape", "number" or "flag"
  const char* name;
};

// One op's layout, as the binding exports it: its buffer arguments' names,
// the fields every descriptor has, then a group that is either all present or
// all absent.
struct DescriptorLayoutInfo {
  const char* op;
  const char* const* args;
  size_t argCount;
  const DescriptorFieldInfo* fields;
  size_t fieldCount;
  const DescriptorFieldInfo* optional;
  size_t optionalCount;
};

// Every op's layout; *count receives how many.
const DescriptorLayoutInfo* descriptorLayouts(size_t* count);

}  // namespace mhsa
