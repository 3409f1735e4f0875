// The AVX2+FMA GEMM micro-kernel: a 6 x 16 tile of C in 12 ymm registers
// (two 8-float vectors per row), leaving 4 of the 16 registers for the two B
// vectors and the A broadcast. 12 accumulators cover FMA latency x ports
// (4 cycles x 2 ports = 8 in flight needed).
//
// The tile must stay in registers for the whole K loop. GCC keeps an array of
// __m256 in registers only when every index into it is a compile-time
// constant, so the row count is a template parameter and every loop over rows
// is fully unrolled, the epilogue included. (With a runtime row count in the
// epilogue, GCC put all 12 accumulators on the stack and every FMA went
// through a store and a reload: 28 % of peak, a third of OpenBLAS.)
// Compiled with -mavx2 -mfma only.
//
// The full packed tile (6 rows, A and B in packWholeB/packA's layout) runs
// its K loop from inline assembly, packedTile6x16Asm below; the other tiles
// keep the intrinsics.
#include "microkernel_avx2.h"

#include <immintrin.h>

#include "avx2_lanes.h"

namespace mhsa {

namespace {
constexpr int kNR = 16;

using avx2lanes::laneMask;

// The epilogue shared by both kernels: row i of c = alpha * acc[i]
// (+ c when accumulate) (+ bias), over `cols` columns (plain loads and stores
// for a whole 16-column row, lane masks at a ragged edge). Inlined into each
// tile so acc stays in registers.
template <int R>
inline void storeTile(__m256 (&acc)[R][2], float* c, int64_t ldc, float alpha, bool accumulate, int cols,
                      const float* bias) {
  const __m256 va = _mm256_set1_ps(alpha);
  const bool whole = cols >= kNR;
  const __m256i m0 = laneMask(cols);
  const __m256i m1 = laneMask(cols - 8);
  auto load = [&](const float* p, __m256i m) { return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); };
  const __m256 bias0 = bias ? load(bias, m0) : _mm256_setzero_ps();
  const __m256 bias1 = bias ? load(bias + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(acc[i][0], va);
    __m256 r1 = _mm256_mul_ps(acc[i][1], va);
    if (accumulate) {
      r0 = _mm256_add_ps(r0, load(row, m0));
      r1 = _mm256_add_ps(r1, load(row + 8, m1));
    }
    if (bias) {
      r0 = _mm256_add_ps(r0, bias0);
      r1 = _mm256_add_ps(r1, bias1);
    }
    if (whole) {
      _mm256_storeu_ps(row, r0);
      _mm256_storeu_ps(row + 8, r1);
    } else {
      _mm256_maskstore_ps(row, m0, r0);
      _mm256_maskstore_ps(row + 8, m1, r1);
    }
  }
}

// R rows of the packed tile (R = 6 but for the last row tile of an M that is
// not a multiple of 6, which then runs only its own rows' FMAs).
template <int R>
void packedTile(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias, const float* prefetch) {
  // Fetch the C tile now so it has arrived by the time the K loop ends.
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  // With no prefetch, harmless requests for lines of this B sliver (offsets up to 2 (kc - 1) floats).
  const float* const fetchBase = prefetch ? prefetch : bp;
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
    if ((k & 7) == 0) _mm_prefetch(reinterpret_cast<const char*>(fetchBase + 16 * (k >> 3)), _MM_HINT_T1);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 a = _mm256_broadcast_ss(ap + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    ap += aStep;
    bp += bStride;
  }
  storeTile<R>(acc, c, ldc, alpha, accumulate, cols, bias);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MHSA_AVX2_ASM_TILE 1

// The K loops of the full tiles below (6 rows x 16 columns, B in packed
// 16-column slivers) in inline assembly: with A packed, eight k steps per
// pass with constant offsets, so a k step is its 20 instructions (2 loads, 6
// broadcasts, 12 FMAs) plus a quarter of one for the loop. GCC compiles the intrinsic loops
// above to 26 per k step (pointer bumps, the compare, the prefetch's test),
// and unrolled intrinsics to register shuffles and spills. At 2 FMAs a cycle
// a k step has 6 cycles, and Zen 3 dispatches 6 ops a cycle per core, or
// fewer when the host's other hardware thread on that core is busy: then 26
// instructions no longer fit in 6 cycles and 20 still nearly do. On a shared
// Zen 3 host both forms ran 1024^3 in the same best time (23-24 ms, one
// thread) but this one took 0.76x the median time, level with OpenBLAS
// (RESULTS.md, entry 129). The sums run in the intrinsic tiles' order, so
// the bits are the same.
//
// Registers: B's two vectors of a k step in ymm0/ymm1, A's value broadcast
// in ymm2, row i's accumulators in ymm(4+2i) and ymm(5+2i).
#define MHSA_ASM_LOAD_B(boff) "vmovups " #boff "(%[b]), %%ymm0\n\t" "vmovups " #boff "+32(%[b]), %%ymm1\n\t"
#define MHSA_ASM_ROW(addr, acc0, acc1)                  \
  "vbroadcastss " addr ", %%ymm2\n\t"                   \
  "vfmadd231ps %%ymm0, %%ymm2, %%ymm" #acc0 "\n\t"      \
  "vfmadd231ps %%ymm1, %%ymm2, %%ymm" #acc1 "\n\t"
// A packed: its six values of a k step adjacent at a + aoff.
#define MHSA_ASM_STEP_PACKED(aoff, boff)                                                             \
  MHSA_ASM_LOAD_B(boff)                                                                              \
  MHSA_ASM_ROW(#aoff "(%[a])", 4, 5) MHSA_ASM_ROW(#aoff "+4(%[a])", 6, 7)                            \
  MHSA_ASM_ROW(#aoff "+8(%[a])", 8, 9) MHSA_ASM_ROW(#aoff "+12(%[a])", 10, 11)                       \
  MHSA_ASM_ROW(#aoff "+16(%[a])", 12, 13) MHSA_ASM_ROW(#aoff "+20(%[a])", 14, 15)
// A in place: rows 0-2 at a0 + {0, 1, 2} lda, rows 3-5 at a3 + {0, 1, 2} lda
// (lda in bytes in l), k steps 4 bytes apart.
#define MHSA_ASM_STEP_ROWS(aoff, boff)                                                               \
  MHSA_ASM_LOAD_B(boff)                                                                              \
  MHSA_ASM_ROW(#aoff "(%[a0])", 4, 5) MHSA_ASM_ROW(#aoff "(%[a0],%[l],1)", 6, 7)                     \
  MHSA_ASM_ROW(#aoff "(%[a0],%[l],2)", 8, 9) MHSA_ASM_ROW(#aoff "(%[a3])", 10, 11)                   \
  MHSA_ASM_ROW(#aoff "(%[a3],%[l],1)", 12, 13) MHSA_ASM_ROW(#aoff "(%[a3],%[l],2)", 14, 15)
#define MHSA_ASM_ZERO_ACC                                                                            \
  "vxorps %%ymm4, %%ymm4, %%ymm4\n\t" "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"                              \
  "vxorps %%ymm6, %%ymm6, %%ymm6\n\t" "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"                              \
  "vxorps %%ymm8, %%ymm8, %%ymm8\n\t" "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"                              \
  "vxorps %%ymm10, %%ymm10, %%ymm10\n\t" "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"                        \
  "vxorps %%ymm12, %%ymm12, %%ymm12\n\t" "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"                        \
  "vxorps %%ymm14, %%ymm14, %%ymm14\n\t" "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
// The accumulators out to tile[6][16] (32-byte aligned), for storeTile.
#define MHSA_ASM_STORE_ACC                                                                           \
  "vmovaps %%ymm4, (%[tile])\n\t" "vmovaps %%ymm5, 32(%[tile])\n\t"                                  \
  "vmovaps %%ymm6, 64(%[tile])\n\t" "vmovaps %%ymm7, 96(%[tile])\n\t"                                \
  "vmovaps %%ymm8, 128(%[tile])\n\t" "vmovaps %%ymm9, 160(%[tile])\n\t"                              \
  "vmovaps %%ymm10, 192(%[tile])\n\t" "vmovaps %%ymm11, 224(%[tile])\n\t"                            \
  "vmovaps %%ymm12, 256(%[tile])\n\t" "vmovaps %%ymm13, 288(%[tile])\n\t"                            \
  "vmovaps %%ymm14, 320(%[tile])\n\t" "vmovaps %%ymm15, 352(%[tile])\n\t"
// Every tile's loop: the accumulators zeroed, `passes` runs of PASS (ending
// in its pointer bumps), `rest` runs of REST (which holds the label 3 its
// loop returns to), the sums stored.
#define MHSA_ASM_TILE_LOOPS(PASS, REST)                                                              \
  MHSA_ASM_ZERO_ACC                                                                                  \
  "testq %[passes], %[passes]\n\t" "jz 2f\n\t"                                                        \
  "1:\n\t" PASS "decq %[passes]\n\t" "jnz 1b\n\t"                                                    \
  "2:\n\t" "testq %[rest], %[rest]\n\t" "jz 4f\n\t"                                                  \
  REST "decq %[rest]\n\t" "jnz 3b\n\t"                                                                \
  "4:\n\t" MHSA_ASM_STORE_ACC
#define MHSA_ASM_CLOBBERS                                                                            \
  "xmm0", "xmm1", "xmm2", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "memory", "cc"

// The epilogue of both: the sums from tile[] through storeTile.
inline void storeAsmTile(const float* tile, float* c, int64_t ldc, float alpha, bool accumulate, int cols,
                         const float* bias) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = _mm256_load_ps(tile + kNR * i);
    acc[i][1] = _mm256_load_ps(tile + kNR * i + 8);
  }
  storeTile<6>(acc, c, ldc, alpha, accumulate, cols, bias);
}

// packedTile<6> with A and B packed (aStep 6, bStride 16).
void packedTile6x16Asm(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, float alpha,
                       bool accumulate, int cols, const float* bias, const float* prefetch) {
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  alignas(32) float tile[6 * kNR];
  // One line of the next B block per 8 k steps, as packedTile requests them
  // (with none, lines of this sliver: harmless).
  const float* fetch = prefetch ? prefetch : bp;
  int64_t passes = kc / 8, rest = kc % 8;
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   "prefetcht1 (%[fetch])\n\t"
                   MHSA_ASM_STEP_PACKED(0, 0) MHSA_ASM_STEP_PACKED(24, 64) MHSA_ASM_STEP_PACKED(48, 128)
                   MHSA_ASM_STEP_PACKED(72, 192) MHSA_ASM_STEP_PACKED(96, 256) MHSA_ASM_STEP_PACKED(120, 320)
                   MHSA_ASM_STEP_PACKED(144, 384) MHSA_ASM_STEP_PACKED(168, 448)
                   "addq $192, %[a]\n\t" "addq $512, %[b]\n\t" "addq $64, %[fetch]\n\t",
                   "prefetcht1 (%[fetch])\n\t" "3:\n\t"
                   MHSA_ASM_STEP_PACKED(0, 0) "addq $24, %[a]\n\t" "addq $64, %[b]\n\t")
      : [a] "+r"(ap), [b] "+r"(bp), [fetch] "+r"(fetch), [passes] "+r"(passes), [rest] "+r"(rest)
      : [tile] "r"(tile)
      : MHSA_ASM_CLOBBERS);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}

// packedTile<6> with B packed and A's k steps aStep floats apart (attention's
// P·V reads its transposed scores in place, a query tile's width apart): the
// pointer bump stays in each k step (21 instructions), no prefetch.
void stridedTile6x16Asm(int64_t kc, const float* ap, int64_t aStep, const float* bp, float* c, int64_t ldc,
                        float alpha, bool accumulate, int cols, const float* bias) {
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  alignas(32) float tile[6 * kNR];
  const int64_t stepBytes = aStep * static_cast<int64_t>(sizeof(float));
  int64_t passes = kc / 4, rest = kc % 4;
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   MHSA_ASM_STEP_PACKED(0, 0) "addq %[step], %[a]\n\t" MHSA_ASM_STEP_PACKED(0, 64)
                   "addq %[step], %[a]\n\t" MHSA_ASM_STEP_PACKED(0, 128) "addq %[step], %[a]\n\t"
                   MHSA_ASM_STEP_PACKED(0, 192) "addq %[step], %[a]\n\t" "addq $256, %[b]\n\t",
                   "3:\n\t" MHSA_ASM_STEP_PACKED(0, 0) "addq %[step], %[a]\n\t" "addq $64, %[b]\n\t")
      : [a] "+r"(ap), [b] "+r"(bp), [passes] "+r"(passes), [rest] "+r"(rest)
      : [step] "r"(stepBytes), [tile] "r"(tile)
      : MHSA_ASM_CLOBBERS);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}

// directTile<6, false> with B a packed sliver (ldb 16): A's six rows read in
// place, lda floats apart (a projection's input against a prepacked weight).
void directTile6x16Asm(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, float alpha,
                       bool accumulate, int cols, const float* bias) {
  alignas(32) float tile[6 * kNR];
  // Rows 3-5 from a second base, formed as an integer: with fewer rows than
  // that it would point past A (it is only formed for whole 6-row tiles).
  const float* a3 = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(a) +
                                                   static_cast<uintptr_t>(3 * lda) * sizeof(float));
  const int64_t ldaBytes = lda * static_cast<int64_t>(sizeof(float));
  int64_t passes = kc / 8, rest = kc % 8;
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   MHSA_ASM_STEP_ROWS(0, 0) MHSA_ASM_STEP_ROWS(4, 64) MHSA_ASM_STEP_ROWS(8, 128)
                   MHSA_ASM_STEP_ROWS(12, 192) MHSA_ASM_STEP_ROWS(16, 256) MHSA_ASM_STEP_ROWS(20, 320)
                   MHSA_ASM_STEP_ROWS(24, 384) MHSA_ASM_STEP_ROWS(28, 448)
                   "addq $32, %[a0]\n\t" "addq $32, %[a3]\n\t" "addq $512, %[b]\n\t",
                   "3:\n\t" MHSA_ASM_STEP_ROWS(0, 0) "addq $4, %[a0]\n\t" "addq $4, %[a3]\n\t" "addq $64, %[b]\n\t")
      : [a0] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [passes] "+r"(passes), [rest] "+r"(rest)
      : [l] "r"(ldaBytes), [tile] "r"(tile)
      : MHSA_ASM_CLOBBERS);
  storeAsmTile(tile, c, ldc, alpha, accumulate, cols, bias);
}
#undef MHSA_ASM_LOAD_B
#undef MHSA_ASM_ROW
#undef MHSA_ASM_STEP_PACKED
#undef MHSA_ASM_STEP_ROWS
#undef MHSA_ASM_ZERO_ACC
#undef MHSA_ASM_STORE_ACC
#undef MHSA_ASM_TILE_LOOPS
#undef MHSA_ASM_CLOBBERS

// Depth from which the assembly tiles pay for their round trip of the tile
// through memory (24 moves): a few k steps' worth.
constexpr int64_t kAsmTileMinDepth = 16;
#endif


}  // namespace

// ap: kc x 6 (k-major, 6 rows interleaved, aStep floats per k); bp: kc x 16
// (bStride floats per k); c: row stride ldc. Writes c[i][j] = alpha*acc
// (+ c[i][j] when accumulate) (+ bias[j]) for i < mr, j < nr.
void microKernel6x16Avx2(int64_t kc, const float* ap, int64_t aStep, const float* bp, int64_t bStride, float* c,
                         int64_t ldc, float alpha, bool accumulate, int mr, int nr, const float* bias,
                         const float* prefetch) {
#ifdef MHSA_AVX2_ASM_TILE
  if (mr == 6 && aStep == 6 && bStride == kNR && kc >= kAsmTileMinDepth)
    return packedTile6x16Asm(kc, ap, bp, c, ldc, alpha, accumulate, nr, bias, prefetch);
  if (mr == 6 && bStride == kNR && prefetch == nullptr && kc >= kAsmTileMinDepth)
    return stridedTile6x16Asm(kc, ap, aStep, bp, c, ldc, alpha, accumulate, nr, bias);
#endif
  switch (mr) {
#define MHSA_PACKED_CASE(R) \
  case R: return packedTile<R>(kc, ap, aStep, bp, bStride, c, ldc, alpha, accumulate, nr, bias, prefetch);
    MHSA_PACKED_CASE(6) MHSA_PACKED_CASE(1) MHSA_PACKED_CASE(2) MHSA_PACKED_CASE(3) MHSA_PACKED_CASE(4)
    MHSA_PACKED_CASE(5)
#undef MHSA_PACKED_CASE
    default: return;
  }
}

namespace {

// R rows x 16 columns read in place (see the AVX-512 directTile). A narrow
// edge (Masked) loads B with lane masks so it reads only its columns.
template <int R, bool Masked>
void directTile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                float alpha, bool accumulate, int cols, const float* bias) {
  const __m256i m0 = laneMask(cols);
  const __m256i m1 = laneMask(cols - 8);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = Masked ? _mm256_maskload_ps(b, m0) : _mm256_loadu_ps(b);
    const __m256 b1 = Masked ? _mm256_maskload_ps(b + 8, m1) : _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
    b += ldb;
  }
  storeTile<R>(acc, c, ldc, alpha, accumulate, cols, bias);
}

template <bool Masked>
void directRows(int rows, int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc, float alpha, bool accumulate, int cols, const float* bias) {
  switch (rows) {
#define MHSA_DIRECT_CASE(R) \
  case R: return directTile<R, Masked>(kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
    MHSA_DIRECT_CASE(1) MHSA_DIRECT_CASE(2) MHSA_DIRECT_CASE(3) MHSA_DIRECT_CASE(4) MHSA_DIRECT_CASE(5)
    MHSA_DIRECT_CASE(6)
#undef MHSA_DIRECT_CASE
    default: return;
  }
}

}  // namespace

void microKernelDirect6x16Avx2(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, float alpha, bool accumulate, int rows, int cols, const float* bias) {
#ifdef MHSA_AVX2_ASM_TILE
  if (rows == 6 && cols >= kNR && ldb == kNR && kc >= kAsmTileMinDepth)
    return directTile6x16Asm(kc, a, lda, b, c, ldc, alpha, accumulate, cols, bias);
#endif
  if (cols >= kNR)
    directRows<false>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
  else
    directRows<true>(rows, kc, a, lda, b, ldb, c, ldc, alpha, accumulate, cols, bias);
}

}  // namespace mhsa
