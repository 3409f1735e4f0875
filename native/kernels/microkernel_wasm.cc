// WebAssembly SIMD128 GEMM micro-kernels: a 4 x 8 tile of C in 8 of the 16
// vector registers that V8 maps wasm's v128 values to on x86-64 (4 rows x 2
// vectors of 4 columns), 2 for the 8 values of B at one k and 1 for a
// broadcast A value. Base SIMD128 has no fused multiply-add (relaxed SIMD's
// is not enabled in Node 20), so each step is a multiply and an add, rounded
// apart: the same arithmetic as the portable kernel's. Larger tiles (6 x 8,
// 12 accumulators) leave V8's allocator too few registers on x86-64, the
// choice XNNPACK's wasmsimd kernels make too (docs/design/wasm.md). NR = 8
// divides the GEMM's column blocks (kGemmNC = 512).
// On other targets this file compiles to nothing.
#if defined(__wasm_simd128__)
#include "microkernel_wasm.h"

#include <wasm_simd128.h>

namespace mhsa {
namespace {

constexpr int kMR = 4;
constexpr int kNR = 8;

// acc[i][v] * alpha (+ c) (+ bias) into rows < rows, columns < cols of c.
inline void storeTile(const v128_t (&acc)[kMR][2], float* c, int64_t ldc, float alpha, bool accumulate, int rows,
                      int cols, const float* bias) {
  const v128_t va = wasm_f32x4_splat(alpha);
  if (cols == kNR) {
    const v128_t bias0 = bias ? wasm_v128_load(bias) : wasm_f32x4_splat(0.0f);
    const v128_t bias1 = bias ? wasm_v128_load(bias + 4) : wasm_f32x4_splat(0.0f);
    for (int i = 0; i < rows; ++i) {
      float* row = c + i * ldc;
      v128_t r0 = wasm_f32x4_mul(acc[i][0], va), r1 = wasm_f32x4_mul(acc[i][1], va);
      if (accumulate) {
        r0 = wasm_f32x4_add(wasm_v128_load(row), r0);
        r1 = wasm_f32x4_add(wasm_v128_load(row + 4), r1);
      }
      if (bias) {
        r0 = wasm_f32x4_add(r0, bias0);
        r1 = wasm_f32x4_add(r1, bias1);
      }
      wasm_v128_store(row, r0);
      wasm_v128_store(row + 4, r1);
    }
    return;
  }
  for (int i = 0; i < rows; ++i) {
    float tile[kNR];
    wasm_v128_store(tile, wasm_f32x4_mul(acc[i][0], va));
    wasm_v128_store(tile + 4, wasm_f32x4_mul(acc[i][1], va));
    float* row = c + i * ldc;
    for (int j = 0; j < cols; ++j) {
      float v = accumulate ? row[j] + tile[j] : tile[j];
      if (bias) v += bias[j];
      row[j] = v;
    }
  }
}

inline v128_t lane(v128_t v, int i) {
  switch (i) {
    case 0: return wasm_i32x4_shuffle(v, v, 0, 0, 0, 0);
    case 1: return wasm_i32x4_shuffle(v, v, 1, 1, 1, 1);
    case 2: return wasm_i32x4_shuffle(v, v, 2, 2, 2, 2);
    default: return wasm_i32x4_shuffle(v, v, 3, 3, 3, 3);
  }
}

// R rows of A read in place (a[i * lda + k]); B row k read in place when the
// tile is 8 wide, else copied into a zero-padded row so no column past the
// operand is read.
template <int R>
void directTile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias) {
  v128_t acc[kMR][2];
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = wasm_f32x4_splat(0.0f);
  float edge[kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* brow = b + k * ldb;
    if (cols < kNR) {
      for (int j = 0; j < cols; ++j) edge[j] = brow[j];
      brow = edge;
    }
    const v128_t b0 = wasm_v128_load(brow), b1 = wasm_v128_load(brow + 4);
    for (int i = 0; i < R; ++i) {
      const v128_t x = wasm_f32x4_splat(a[i * lda + k]);
      acc[i][0] = wasm_f32x4_add(acc[i][0], wasm_f32x4_mul(x, b0));
      acc[i][1] = wasm_f32x4_add(acc[i][1], wasm_f32x4_mul(x, b1));
    }
  }
  storeTile(acc, c, ldc, alpha, accumulate, R, cols, bias);
}

}  // namespace

void microKernel4x8WasmSimd(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                            int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias,
                            const float* /*prefetch: wasm has no prefetch*/) {
  v128_t acc[kMR][2];
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = wasm_f32x4_splat(0.0f);
  for (int64_t k = 0; k < kc; ++k) {
    const v128_t av = wasm_v128_load(ap);
    const v128_t b0 = wasm_v128_load(bp), b1 = wasm_v128_load(bp + 4);
    for (int i = 0; i < kMR; ++i) {
      const v128_t x = lane(av, i);
      acc[i][0] = wasm_f32x4_add(acc[i][0], wasm_f32x4_mul(x, b0));
      acc[i][1] = wasm_f32x4_add(acc[i][1], wasm_f32x4_mul(x, b1));
    }
    ap += aStep;
    bp += bStride;
  }
  storeTile(acc, c, ldc, alpha, accumulate, rows, cols, bias);
}

void microKernelDirect4x8WasmSimd(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias) {
  switch (rows) {
    case 1: return directTile<1>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    case 2: return directTile<2>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    case 3: return directTile<3>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    case 4: return directTile<4>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    default: return;
  }
}

}  // namespace mhsa
#endif  // __wasm_simd128__
