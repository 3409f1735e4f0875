// The portable kernels compiled for avx512 (see the build files for its flags).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "bf16.h"
#include "exp2_poly.h"
#include "gemm_bf16.h"
#include "exp_poly.h"
#include "kernel_table.h"
#include "decode_avx512.h"
#include "layernorm_avx512.h"
#include "microkernel_avx512.h"
#include "scores_avx512.h"
#include "softmax_avx512.h"

#define MHSA_KERNEL_TABLE_NAME "avx512"
#define MHSA_MICRO_KERNEL ::mhsa::microKernel12x32Avx512
#define MHSA_MICRO_KERNEL_DIRECT ::mhsa::microKernelDirect12x32Avx512
#define MHSA_FEW_ROWS_PACKED ::mhsa::fewRowsPacked2x128Avx512
#define MHSA_FEW_ROWS_MAX 2
#define MHSA_FEW_ROWS_SLIVERS 4
#define MHSA_EXP2_SUB_COLUMNS ::mhsa::exp2SubColumnsAvx512
#define MHSA_SCORES_EXP2_TILE ::mhsa::scoresExp2Tile12x32Avx512
#define MHSA_ABS_MAX_ROWS ::mhsa::absMaxRowsAvx512
#define MHSA_ROW_MAX ::mhsa::rowMaxAvx512
#define MHSA_EXP_SUB_SUM ::mhsa::expSubSumAvx512
#define MHSA_SCALE_STREAM ::mhsa::scaleStreamAvx512
#define MHSA_LAYER_NORM_ROW ::mhsa::layerNormRowAvx512
#define MHSA_DECODE_SCORES ::mhsa::decodeScoresAvx512
#define MHSA_DECODE_ACCUMULATE ::mhsa::decodeAccumulateAvx512
#define MHSA_DECODE_SCORES_BF16 ::mhsa::decodeScoresBf16Avx512
#define MHSA_DECODE_ACCUMULATE_BF16 ::mhsa::decodeAccumulateBf16Avx512
#define MHSA_DECODE_SCORES_INT8 ::mhsa::decodeScoresInt8Avx512
#define MHSA_DECODE_ACCUMULATE_INT8 ::mhsa::decodeAccumulateInt8Avx512
#define MHSA_ATTENTION_KV_IN_PLACE true
#define MHSA_GEMM_A_IN_PLACE true
#define MHSA_MR 12
#define MHSA_NR 32

static_assert(MHSA_MR == ::mhsa::kScoresTileMrAvx512 && MHSA_NR == ::mhsa::kScoresTileNrAvx512,
              "the fused scores tile must match the micro-kernel's geometry");

namespace mhsa {
namespace avx512 {
#include "portable_kernels.inc"
}  // namespace avx512

const KernelTable& avx512Kernels() { return avx512::kTable; }
}  // namespace mhsa
