#pragma once
#include <cstdint>
namespace mhsa {
// See microkernel_wasm.cc (WebAssembly with SIMD128 only).
void microKernel4x8WasmSimd(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                            int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias,
                            const float* prefetch);
void microKernelDirect4x8WasmSimd(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias);
}  // namespace mhsa
