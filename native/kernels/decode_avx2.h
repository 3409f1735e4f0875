#pragma once
#include <cstdint>
namespace mhsa {
// KernelTable::decodeScores and decodeAccumulate with AVX2 intrinsics (decode_avx2.cc).
void decodeScoresAvx2(const float* q, int64_t queries, int64_t d, const float* k, int64_t kStride, int64_t n,
                      float scale, float* s);
void decodeAccumulateAvx2(const float* p, int64_t queries, int64_t n, const float* v, int64_t vStride, int64_t dv,
                          float* acc, int64_t accStride);
// The same over bf16 K and V rows (KernelTable::decodeScoresBf16, decodeAccumulateBf16).
void decodeScoresBf16Avx2(const float* q, int64_t queries, int64_t d, const uint16_t* k, int64_t kStride, int64_t n,
                          float scale, float* s);
void decodeAccumulateBf16Avx2(const float* p, int64_t queries, int64_t n, const uint16_t* v, int64_t vStride,
                              int64_t dv, float* acc, int64_t accStride);
// The same over int8 K and V rows, converted exactly (KernelTable::decodeScoresInt8, decodeAccumulateInt8).
void decodeScoresInt8Avx2(const float* q, int64_t queries, int64_t d, const int8_t* k, int64_t kStride, int64_t n,
                              float scale, float* s);
void decodeAccumulateInt8Avx2(const float* p, int64_t queries, int64_t n, const int8_t* v, int64_t vStride,
                                  int64_t dv, float* acc, int64_t accStride);
}  // namespace mhsa
