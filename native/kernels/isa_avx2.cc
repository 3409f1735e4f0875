// The portable kernels compiled for avx2 (see the build files for its flags).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "bf16.h"
#include "exp2_poly.h"
#include "gemm_bf16.h"
#include "decode_avx2.h"
#include "exp_poly.h"
#include "kernel_table.h"
#include "layernorm_avx2.h"
#include "microkernel_avx2.h"
#include "scores_avx2.h"
#include "softmax_avx2.h"

#define MHSA_KERNEL_TABLE_NAME "avx2"
#define MHSA_MICRO_KERNEL ::mhsa::microKernel6x16Avx2
#define MHSA_MICRO_KERNEL_DIRECT ::mhsa::microKernelDirect6x16Avx2
#define MHSA_FEW_ROWS_PACKED ::mhsa::fewRowsPacked2x64Avx2
#define MHSA_FEW_ROWS_MAX 2
#define MHSA_FEW_ROWS_SLIVERS 4
#define MHSA_EXP2_SUB_COLUMNS ::mhsa::exp2SubColumnsAvx2
#define MHSA_SCORES_EXP2_TILE ::mhsa::scoresExp2Tile6x16Avx2
#define MHSA_ABS_MAX_ROWS ::mhsa::absMaxRowsAvx2
#define MHSA_ROW_MAX ::mhsa::rowMaxAvx2
#define MHSA_EXP_SUB_SUM ::mhsa::expSubSumAvx2
#define MHSA_SCALE_STREAM ::mhsa::scaleStreamAvx2
#define MHSA_LAYER_NORM_ROW ::mhsa::layerNormRowAvx2
#define MHSA_DECODE_SCORES ::mhsa::decodeScoresAvx2
#define MHSA_DECODE_ACCUMULATE ::mhsa::decodeAccumulateAvx2
#define MHSA_DECODE_SCORES_BF16 ::mhsa::decodeScoresBf16Avx2
#define MHSA_DECODE_ACCUMULATE_BF16 ::mhsa::decodeAccumulateBf16Avx2
#define MHSA_DECODE_SCORES_INT8 ::mhsa::decodeScoresInt8Avx2
#define MHSA_DECODE_ACCUMULATE_INT8 ::mhsa::decodeAccumulateInt8Avx2
#define MHSA_MR 6
#define MHSA_NR 16
#define MHSA_GEMM_A_IN_PLACE true

static_assert(MHSA_MR == ::mhsa::kScoresTileMrAvx2 && MHSA_NR == ::mhsa::kScoresTileNrAvx2,
              "the fused scores tile must match the micro-kernel's geometry");

namespace mhsa {
namespace avx2 {
#include "portable_kernels.inc"
}  // namespace avx2

const KernelTable& avx2Kernels() { return avx2::kTable; }
}  // namespace mhsa
