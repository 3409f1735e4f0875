#include "descriptor_layouts.h"

namespace mhsa {
namespace {

#define MHSA_FIELD_INFO(kind, member, name) {#kind, name},

constexpr DescriptorFieldInfo kMatmul[] = {MHSA_MATMUL_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kLayerNormMatmul[] = {
    MHSA_MATMUL_FIELDS(MHSA_FIELD_INFO) MHSA_LAYER_NORM_MATMUL_EXTRA_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kSoftmax[] = {MHSA_SOFTMAX_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kAttention[] = {MHSA_ATTENTION_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kAttentionStrides[] = {MHSA_ATTENTION_STRIDE_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kLayerNorm[] = {MHSA_LAYER_NORM_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kPackedSize[] = {MHSA_PACKED_SIZE_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kPackMatrix[] = {MHSA_PACK_MATRIX_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kRope[] = {MHSA_ROPE_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kRopeStrides[] = {MHSA_ROPE_STRIDE_FIELDS(MHSA_FIELD_INFO)};
constexpr DescriptorFieldInfo kCacheAppend[] = {MHSA_CACHE_APPEND_FIELDS(MHSA_FIELD_INFO)};

#undef MHSA_FIELD_INFO

#define MHSA_ARG_NAME(name) #name,
constexpr const char* kMatmulArgs[] = {MHSA_MATMUL_ARGS(MHSA_ARG_NAME)};
constexpr const char* kLayerNormMatmulArgs[] = {MHSA_LAYER_NORM_MATMUL_ARGS(MHSA_ARG_NAME)};
constexpr const char* kSoftmaxArgs[] = {MHSA_SOFTMAX_ARGS(MHSA_ARG_NAME)};
constexpr const char* kAttentionArgs[] = {MHSA_ATTENTION_ARGS(MHSA_ARG_NAME)};
constexpr const char* kLayerNormArgs[] = {MHSA_LAYER_NORM_ARGS(MHSA_ARG_NAME)};
constexpr const char* kPackMatrixArgs[] = {MHSA_PACK_MATRIX_ARGS(MHSA_ARG_NAME)};
constexpr const char* kRopeArgs[] = {MHSA_ROPE_ARGS(MHSA_ARG_NAME)};
constexpr const char* kCacheAppendArgs[] = {MHSA_CACHE_APPEND_ARGS(MHSA_ARG_NAME)};
#undef MHSA_ARG_NAME

template <typename T, size_t N>
constexpr size_t countOf(const T (&)[N]) {
  return N;
}

#define MHSA_LAYOUT(op, args, fields) op, args, countOf(args), fields, countOf(fields)
constexpr DescriptorLayoutInfo kLayouts[] = {
    {MHSA_LAYOUT("matmul", kMatmulArgs, kMatmul), nullptr, 0},
    {MHSA_LAYOUT("layerNormMatmul", kLayerNormMatmulArgs, kLayerNormMatmul), nullptr, 0},
    {MHSA_LAYOUT("softmax", kSoftmaxArgs, kSoftmax), nullptr, 0},
    {MHSA_LAYOUT("attention", kAttentionArgs, kAttention), kAttentionStrides, countOf(kAttentionStrides)},
    {MHSA_LAYOUT("layerNorm", kLayerNormArgs, kLayerNorm), nullptr, 0},
    {"packedSize", nullptr, 0, kPackedSize, countOf(kPackedSize), nullptr, 0},
    {MHSA_LAYOUT("packMatrix", kPackMatrixArgs, kPackMatrix), nullptr, 0},
    {MHSA_LAYOUT("rope", kRopeArgs, kRope), kRopeStrides, countOf(kRopeStrides)},
    {MHSA_LAYOUT("cacheAppend", kCacheAppendArgs, kCacheAppend), nullptr, 0},
};
#undef MHSA_LAYOUT

}  // namespace

const DescriptorLayoutInfo* descriptorLayouts(size_t* count) {
  *count = sizeof(kLayouts) / sizeof(kLayouts[0]);
  return kLayouts;
}

}  // namespace mhsa
