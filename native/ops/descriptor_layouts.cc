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
constexpr DescriptorFieldInfo kCastBf16[] = {MHSA_CAST_BF16_FIELDS(MHSA_FIELD_INFO)};

#undef MHSA_FIELD_INFO

template <size_t N>
constexpr size_t countOf(const DescriptorFieldInfo (&)[N]) {
  return N;
}

constexpr DescriptorLayoutInfo kLayouts[] = {
    {"matmul", kMatmul, countOf(kMatmul), nullptr, 0},
    {"layerNormMatmul", kLayerNormMatmul, countOf(kLayerNormMatmul), nullptr, 0},
    {"softmax", kSoftmax, countOf(kSoftmax), nullptr, 0},
    {"attention", kAttention, countOf(kAttention), kAttentionStrides, countOf(kAttentionStrides)},
    {"layerNorm", kLayerNorm, countOf(kLayerNorm), nullptr, 0},
    {"packedSize", kPackedSize, countOf(kPackedSize), nullptr, 0},
    {"packMatrix", kPackMatrix, countOf(kPackMatrix), nullptr, 0},
    {"rope", kRope, countOf(kRope), nullptr, 0},
    {"castBf16", kCastBf16, countOf(kCastBf16), nullptr, 0},
};

}  // namespace

const DescriptorLayoutInfo* descriptorLayouts(size_t* count) {
  *count = sizeof(kLayouts) / sizeof(kLayouts[0]);
  return kLayouts;
}

}  // namespace mhsa
