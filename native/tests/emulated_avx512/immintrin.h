// Test builds only (CMake option MHSA_EMULATE_AVX512): the AVX-512 kernels
// compiled for a CPU without AVX-512, their intrinsics emulated by SIMDe
// (Debian's libsimde-dev) on AVX2, so the native tests can run the AVX-512
// kernel table where no AVX-512 hardware is at hand. Correctness only: the
// emulation says nothing about speed. This directory comes first on those
// files' include path, so their `#include <immintrin.h>` lands here.
#pragma once

#include_next <immintrin.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// Intrinsics the kernels use that SIMDe 0.7.4 lacks. The masked loads and
// stores touch only the lanes the mask selects, as the hardware does (the
// kernels rely on it at the end of a row that ends at a page boundary).
namespace mhsa_emulated_avx512 {

// A vector's lanes as floats, for the lane-by-lane emulations below
// (simde__m512 or simde__m256; the masks are 16 or 8 bits).
template <class V>
struct Lanes {
  static constexpr int kCount = static_cast<int>(sizeof(V) / sizeof(float));
  float at[kCount];
  explicit Lanes(V x) { std::memcpy(at, &x, sizeof at); }
  V vector() const {
    V r;
    std::memcpy(&r, at, sizeof r);
    return r;
  }
};

template <class V>
V maskLoad(V src, unsigned k, const void* p) {
  Lanes<V> lanes(src);
  const float* from = static_cast<const float*>(p);
  for (int i = 0; i < Lanes<V>::kCount; ++i)
    if ((k >> i) & 1) lanes.at[i] = from[i];
  return lanes.vector();
}

template <class V>
void maskStore(void* p, unsigned k, V x) {
  const Lanes<V> lanes(x);
  float* to = static_cast<float*>(p);
  for (int i = 0; i < Lanes<V>::kCount; ++i)
    if ((k >> i) & 1) to[i] = lanes.at[i];
}

// vreduceps in the one form the kernels use, imm = round to nearest, no
// fraction bits kept: x - round(x), exact, and 0 for +-inf (exp2_avx512.h
// relies on that); NaN stays NaN. Rounds half to even whatever the rounding
// mode, as the immediate does.
constexpr int kReduceNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

inline float reduceLane(float x) {
  if (std::isinf(x)) return 0.0f;
  return x - _mm_cvtss_f32(_mm_round_ss(_mm_setzero_ps(), _mm_set_ss(x), kReduceNearest));
}

template <int Imm, class V>
V reduceArgument(V x) {
  static_assert(Imm == kReduceNearest, "the shim emulates vreduceps with imm = nearest, no fraction bits only");
  Lanes<V> lanes(x);
  for (float& v : lanes.at) v = reduceLane(v);
  return lanes.vector();
}

// vscalefps: a * 2^floor(b), rounded once. SIMDe multiplies by 2^floor(b)
// as a float, which overflows to inf from b = 128 although a * 2^128 is
// finite for a < 1, the case exp2's polynomial lands in near the top of the range.
inline float scaleLane(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  if (std::isinf(b)) {
    if (b > 0) return a == 0.0f ? std::numeric_limits<float>::quiet_NaN() : std::copysign(INFINITY, a);
    return std::isinf(a) ? std::numeric_limits<float>::quiet_NaN() : std::copysign(0.0f, a);
  }
  const float n = std::floor(b);
  return std::ldexp(a, static_cast<int>(std::max(-400.0f, std::min(400.0f, n))));
}

template <class V>
V maskzScale(unsigned k, V a, V b) {
  Lanes<V> x(a);
  const Lanes<V> y(b);
  for (int i = 0; i < Lanes<V>::kCount; ++i) x.at[i] = ((k >> i) & 1) ? scaleLane(x.at[i], y.at[i]) : 0.0f;
  return x.vector();
}

// vmovntps faults on an address that is not 64-byte aligned; so does this,
// so an alignment bug in a streaming store fails here as on hardware.
inline void streamStore(float* p, simde__m512 x) {
  if ((reinterpret_cast<uintptr_t>(p) & 63) != 0) __builtin_trap();
  simde_mm512_storeu_ps(p, x);
}

// GCC's own reduction order (halves, then quarters, then pairs) with the AVX
// operation at each step, so sums round and NaN lanes of a max are dropped or
// kept exactly as GCC's hardware build does. (Clang's own _mm512_reduce_*
// are builtins that may reorder and assume no NaN: under clang this matches
// GCC's build, not clang's.)
template <class Op256, class Op128>
inline float reduce(simde__m512 x, Op256 op256, Op128 op128) {
  __m256 halves[2];
  std::memcpy(halves, &x, sizeof halves);
  const __m256 h = op256(halves[1], halves[0]);
  const __m128 q = op128(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  const __m128 p = op128(q, _mm_shuffle_ps(q, q, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m128 s = op128(p, _mm_shuffle_ps(p, p, _MM_SHUFFLE(0, 1, 0, 1)));
  return _mm_cvtss_f32(s);
}

inline float reduceMax(simde__m512 x) {
  return reduce(x, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); },
                [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

inline float reduceAdd(simde__m512 x) {
  return reduce(x, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); },
                [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}

// vpmovdw: each 32-bit lane truncated to its low 16 bits.
inline simde__m256i truncate32To16(simde__m512i x) {
  uint32_t in[16];
  uint16_t out[16];
  std::memcpy(in, &x, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<uint16_t>(in[i]);
  simde__m256i r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

// vmovdqu16 with a zeroing mask: the 16-bit lanes k selects, read from p; the others 0.
inline simde__m256i maskzLoad16(unsigned k, const void* p) {
  uint16_t lanes[16] = {};
  const uint16_t* from = static_cast<const uint16_t*>(p);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) lanes[i] = from[i];
  simde__m256i r;
  std::memcpy(&r, lanes, sizeof r);
  return r;
}

// vpmovzxwd: 16 unsigned 16-bit values widened to 32-bit lanes.
inline simde__m512i widen16To32(simde__m256i x) {
  uint16_t in[16];
  uint32_t out[16];
  std::memcpy(in, &x, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = in[i];
  simde__m512i r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

// vpmovsxbd: 16 signed bytes widened to 32-bit lanes.
inline simde__m512i widen8To32(simde__m128i x) {
  int8_t in[16];
  int32_t out[16];
  std::memcpy(in, &x, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = in[i];
  simde__m512i r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

// vcvtdq2ps: 16 int32 lanes to floats.
inline simde__m512 int32ToFloat(simde__m512i x) {
  int32_t in[16];
  float out[16];
  std::memcpy(in, &x, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<float>(in[i]);
  simde__m512 r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

// vmovdqu8 xmm{k}{z}: the bytes of mask k, zeros elsewhere.
inline simde__m128i maskzLoad8(unsigned k, const void* p) {
  int8_t lanes[16] = {};
  const int8_t* from = static_cast<const int8_t*>(p);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) lanes[i] = from[i];
  simde__m128i r;
  std::memcpy(&r, lanes, sizeof r);
  return r;
}

}  // namespace mhsa_emulated_avx512

#undef _mm512_mask_loadu_ps
#define _mm512_mask_loadu_ps(src, k, p) mhsa_emulated_avx512::maskLoad((src), (k), (p))
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps(k, p) mhsa_emulated_avx512::maskLoad(simde_mm512_setzero_ps(), (k), (p))
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps(p, k, x) mhsa_emulated_avx512::maskStore((p), (k), (x))
#undef _mm256_maskz_loadu_ps
#define _mm256_maskz_loadu_ps(k, p) mhsa_emulated_avx512::maskLoad(simde_mm256_setzero_ps(), (k), (p))
#undef _mm256_mask_storeu_ps
#define _mm256_mask_storeu_ps(p, k, x) mhsa_emulated_avx512::maskStore((p), (k), (x))
// SIMDe 0.7.4 has the function but no native alias for it (decode_avx512.cc's lane sums).
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm) simde_mm512_shuffle_f32x4((a), (b), (imm))
#undef _mm512_stream_ps
#define _mm512_stream_ps(p, x) mhsa_emulated_avx512::streamStore((p), (x))
#undef _mm512_maskz_scalef_ps
#define _mm512_maskz_scalef_ps(k, a, b) mhsa_emulated_avx512::maskzScale((k), (a), (b))
#undef _mm256_maskz_scalef_ps
#define _mm256_maskz_scalef_ps(k, a, b) mhsa_emulated_avx512::maskzScale((k), (a), (b))
#undef _mm512_reduce_ps
#define _mm512_reduce_ps(x, imm) mhsa_emulated_avx512::reduceArgument<(imm)>(x)
#undef _mm256_reduce_ps
#define _mm256_reduce_ps(x, imm) mhsa_emulated_avx512::reduceArgument<(imm)>(x)
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps(x) mhsa_emulated_avx512::reduceMax(x)
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps(x) mhsa_emulated_avx512::reduceAdd(x)
#undef _mm512_mask_cmp_ps_mask
#define _mm512_mask_cmp_ps_mask(k, a, b, predicate) \
  static_cast<simde__mmask16>((k) & simde_mm512_cmp_ps_mask((a), (b), (predicate)))
#undef _mm256_mask_cmp_ps_mask
#define _mm256_mask_cmp_ps_mask(k, a, b, predicate) \
  static_cast<simde__mmask8>((k) & simde_mm256_cmp_ps_mask((a), (b), (predicate)))
// SIMDe 0.7.4 lacks it (gemm_bf16_avx512.cc's rounding to bf16).
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16(x) mhsa_emulated_avx512::truncate32To16(x)
// SIMDe 0.7.4 lacks it (decode_avx512.cc's widening of bf16 keys and values).
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32(x) mhsa_emulated_avx512::widen16To32(x)
// SIMDe 0.7.4 lacks it (decode_avx512.cc's ragged tail of bf16 keys and values).
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16(k, p) mhsa_emulated_avx512::maskzLoad16((k), (p))
// SIMDe 0.7.4 lacks these (decode_avx512.cc's int8 keys and values).
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32(x) mhsa_emulated_avx512::widen8To32(x)
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps(x) mhsa_emulated_avx512::int32ToFloat(x)
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8(k, p) mhsa_emulated_avx512::maskzLoad8((k), (p))
