#pragma once
#include <cstdint>
namespace mhsa {
// The tile's geometry, which must be its kernel table's mr x nr (isa_avx512.cc checks).
constexpr int kScoresTileMrAvx512 = 12;
constexpr int kScoresTileNrAvx512 = 32;
// See scores_avx512.cc and KernelTable::scoresExp2Tile.
bool scoresExp2Tile12x32Avx512(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b,
                               float* c, int64_t ldc, float alpha, float cap, int rows, int cols, float* shift, bool setShift,
                               float* sum);
float absMaxRowsAvx512(const float* x, int64_t rows, int64_t cols, int64_t ld);
}
