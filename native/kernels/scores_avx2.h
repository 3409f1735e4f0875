#pragma once
#include <cstdint>
namespace mhsa {
// The tile's geometry, which must be its kernel table's mr x nr (isa_avx2.cc checks).
constexpr int kScoresTileMrAvx2 = 6;
constexpr int kScoresTileNrAvx2 = 16;
// See scores_avx2.cc and KernelTable::scoresExp2Tile.
bool scoresExp2Tile6x16Avx2(int64_t kc, const float* a, int64_t aRowStep, int64_t aDepthStep, const float* b,
                            float* c, int64_t ldc, float alpha, float cap, int rows, int cols, float* shift, bool setShift,
                            float* sum);
float absMaxRowsAvx2(const float* x, int64_t rows, int64_t cols, int64_t ld);
}
