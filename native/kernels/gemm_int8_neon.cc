// The int8 tiles on arm64 (gemm_int8.h): up to 2 rows x 32 columns, 16
// accumulators of 4 int32 lanes, each lane one column. With the dot-product
// instructions (ARMv8.2 DOTPROD, detected at run time), SDOT adds the 4
// products of a lane's 4 depths into it: the packed layout's own shape.
// Without them, SMULL/SMULL2 form the products as int16 (|a| <= 127, so they
// fit) and SADALP adds neighbouring pairs into int32 lanes that hold each
// column's two half sums until the end. Compiled everywhere; arm64 only.
#include "gemm_int8.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#if defined(__linux__)
#include <sys/auxv.h>
#endif

namespace mhsa {
namespace {

constexpr int kMr = 2;

inline int8x16_t broadcastWord(const int8_t* p) {
  int32_t word;
  std::memcpy(&word, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(word));
}

// The dot-product functions are compiled for ARMv8.2 with DOTPROD (GCC's
// target pragma; clang's attribute); they run only where cpuHasDotProduct().
#if defined(__clang__)
#define MHSA_DOTPROD __attribute__((target("dotprod")))
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#define MHSA_DOTPROD
#endif

template <int R>
MHSA_DOTPROD void dotTileRows(int64_t groups, const int8_t* ap, const int8_t* bp, int32_t* acc) {
  int32x4_t sum[R][8];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 8; ++v) sum[i][v] = vdupq_n_s32(0);
  for (int64_t g = 0; g < groups; ++g) {
    int8x16_t b[8];
    for (int v = 0; v < 8; ++v) b[v] = vld1q_s8(bp + 16 * v);
    for (int i = 0; i < R; ++i) {
      const int8x16_t a = broadcastWord(ap + 4 * i);
      for (int v = 0; v < 8; ++v) sum[i][v] = vdotq_s32(sum[i][v], b[v], a);
    }
    ap += 4 * kMr;
    bp += 128;
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 8; ++v) vst1q_s32(acc + 32 * i + 4 * v, sum[i][v]);
}

MHSA_DOTPROD void dotTile(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc) {
  if (rows == 2)
    dotTileRows<2>(groups, ap, bp, acc);
  else
    dotTileRows<1>(groups, ap, bp, acc);
}

#if !defined(__clang__)
#pragma GCC pop_options
#endif

// Lanes hold pair sums: lane 2c and 2c + 1 of halves[2v + h] are column
// 4v + 2h + c's two halves, added at the end.
template <int R>
void widenTileRows(int64_t groups, const int8_t* ap, const int8_t* bp, int32_t* acc) {
  int32x4_t halves[R][16];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 16; ++v) halves[i][v] = vdupq_n_s32(0);
  for (int64_t g = 0; g < groups; ++g) {
    for (int v = 0; v < 8; ++v) {
      const int8x16_t b = vld1q_s8(bp + 16 * v);
      for (int i = 0; i < R; ++i) {
        const int8x16_t a = broadcastWord(ap + 4 * i);
        halves[i][2 * v] = vpadalq_s16(halves[i][2 * v], vmull_s8(vget_low_s8(b), vget_low_s8(a)));
        halves[i][2 * v + 1] = vpadalq_s16(halves[i][2 * v + 1], vmull_high_s8(b, a));
      }
    }
    ap += 4 * kMr;
    bp += 128;
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 8; ++v) vst1q_s32(acc + 32 * i + 4 * v, vpaddq_s32(halves[i][2 * v], halves[i][2 * v + 1]));
}

void widenTile(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc) {
  if (rows == 2)
    widenTileRows<2>(groups, ap, bp, acc);
  else
    widenTileRows<1>(groups, ap, bp, acc);
}

const Int8Kernels kDot = {"neon-dotprod", kMr, false, dotTile, nullptr, nullptr, nullptr};
const Int8Kernels kWiden = {"neon", kMr, false, widenTile, nullptr, nullptr, nullptr};

}  // namespace

bool cpuHasDotProduct() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
#else
  return false;
#endif
}

const Int8Kernels& neonDotInt8Kernels() { return kDot; }
const Int8Kernels& neonInt8Kernels() { return kWiden; }

}  // namespace mhsa

#endif  // __aarch64__
