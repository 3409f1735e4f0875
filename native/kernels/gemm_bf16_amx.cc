// The bf16 GEMM strip on AMX-BF16 (Sapphire Rapids): 32 x 32 of C in four
// 16 x 16 float tiles, from two A tiles (16 rows x 32 depths) and two B tiles
// (16 depth pairs x 16 columns), four TDPBF16PS per 32 depths; each tile
// product is 16 x 16 x 32 multiply-adds, 16 times a 512-bit VDPBF16PS's. The
// C tiles go through a 4 KiB buffer in L1 for the epilogue (alpha, the
// accumulated out, the bias, the edge masks), as the vector kernels' do.
// Compiled with the AVX-512 flags, -mamx-tile and -mamx-bf16.
// Nothing here is inline in a shared header: this file keeps its real
// flags in the build whose AVX-512 files are emulated, and a shared inline
// function's copy from here could be the one the linker keeps for all.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gemm_bf16.h"

#if defined(_WIN64) && defined(__GNUC__) && !defined(__clang__)
// GCC 12's amxtileintrin.h casts the stride to `long`, 32 bits on Win64 (LLP64), and the assembler
// refuses the 32-bit index register it then picks: the same instructions with a 64-bit stride.
#undef _tile_loadd_internal
#define _tile_loadd_internal(dst, base, stride)                                           \
  __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #dst "|tileloadd\t%%tmm" #dst ", [%0+%1*1]}" \
                   ::"r"((const void*)(base)), "r"((long long)(stride)))
#undef _tile_stored_internal
#define _tile_stored_internal(src, base, stride)                                            \
  __asm__ volatile("{tilestored\t%%tmm" #src ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #src "}" \
                   ::"r"((void*)(base)), "r"((long long)(stride))                            \
                   : "memory")
#endif

namespace mhsa {
namespace {

__mmask16 firstLanes(int n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

// ldtilecfg's 64-byte operand: palette 1, then each tile's bytes per row and rows.
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t startRow;
  uint8_t reserved[14];
  uint16_t bytesPerRow[16];
  uint8_t rows[16];
};

// Tiles 0-3: C (rows 0-15 / 16-31 x columns 0-15 / 16-31); 4, 5: A; 6, 7: B.
// A constant in memory: GCC 12 dropped the stores that filled a local
// configuration before ldtilecfg read it (the builtin does not tell the
// compiler that it reads all 64 bytes).
constexpr TileConfig kTileConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

void enter() { _tile_loadconfig(&kTileConfig); }

void leave() { _tile_release(); }

// 16 (Two false) or 32 rows of the strip into tmp (32 x 32 floats).
template <bool Two>
void tileRows(int64_t kpad, const uint16_t* a, const uint16_t* b, float* tmp) {
  const int64_t aStride = kpad * 2;  // bytes
  _tile_zero(0);
  _tile_zero(1);
  if (Two) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < kpad; k += kBf16DepthStep) {
    _tile_loadd(6, b + k * kBf16SliverColumns, 128);
    _tile_loadd(7, b + k * kBf16SliverColumns + 32, 128);
    _tile_loadd(4, a + k, aStride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (Two) {
      _tile_loadd(5, a + 16 * kpad + k, aStride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, tmp, 128);
  _tile_stored(1, tmp + 16, 128);
  if (Two) {
    _tile_stored(2, tmp + 16 * 32, 128);
    _tile_stored(3, tmp + 16 * 32 + 16, 128);
  }
}

// At most this many rows, a strip runs on VDPBF16PS: 16-row tiles would
// multiply mostly zeros, and both paths wait on B's bytes (a decode step's
// projection, 1-2 rows x 4096 x 4096: 0.93 and 1.27 ms with VDPBF16PS against
// 1.77 and 1.71 ms with tiles; docs/design/bf16.md).
constexpr int64_t kVectorMaxRows = 2;

void strip(int64_t kpad, const uint16_t* a, int64_t rows, const uint16_t* b, float* c, int64_t ldc, float alpha,
           bool accumulate, int cols, const float* bias) {
  if (rows <= kVectorMaxRows) {
    avx512Bf16Kernels().strip(kpad, a, rows, b, c, ldc, alpha, accumulate, cols, bias);
    return;
  }
  alignas(64) float tmp[32 * 32];
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 mask[2] = {firstLanes(cols), firstLanes(cols - 16)};
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(mask[0], bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(mask[1], bias + 16) : _mm512_setzero_ps();
  for (int64_t r0 = 0; r0 < rows; r0 += 32) {
    const int64_t n = rows - r0 < 32 ? rows - r0 : 32;
    if (n > 16) {
      tileRows<true>(kpad, a + r0 * kpad, b, tmp);
    } else {
      tileRows<false>(kpad, a + r0 * kpad, b, tmp);
    }
    for (int64_t i = 0; i < n; ++i) {
      float* row = c + (r0 + i) * ldc;
      for (int v = 0; v < 2; ++v) {
        if (mask[v] == 0) continue;
        __m512 r = _mm512_mul_ps(_mm512_load_ps(tmp + i * 32 + 16 * v), va);
        if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask[v], row + 16 * v));
        if (bias) r = _mm512_add_ps(r, v == 0 ? bias0 : bias1);
        _mm512_mask_storeu_ps(row + 16 * v, mask[v], r);
      }
    }
  }
}

// Six C tiles against one A and one B tile, loaded once: independent tile
// products back to back.
double peakLoop(int64_t iterations) {
  alignas(64) static const uint16_t kZeros[16 * 32] = {};
  enter();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, kZeros, 64);
  _tile_loadd(7, kZeros, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  leave();
  return static_cast<double>(iterations) * 6 * 16 * 16 * 32 * 2;
}

const Bf16Kernels kKernels = {"amx", strip, enter, leave, convertRowsToBf16Avx512, peakLoop};

}  // namespace

const Bf16Kernels& amxBf16Kernels() { return kKernels; }

}  // namespace mhsa
