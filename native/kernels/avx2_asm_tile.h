// The K loops of the AVX2 micro-kernel's full tiles (6 rows x 16 columns, B
// in packed 16-column slivers; microkernel_avx2.cc) in inline assembly. Each
// leaves its sums in a tile[6][16] buffer, which the caller's epilogue
// (intrinsics) reads back. Include only from files compiled with -mavx2 -mfma.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../runtime/cpu_features.h"
#include "row_bases.h"

#if defined(__x86_64__) && defined(__LP64__) && (defined(__GNUC__) || defined(__clang__))
#define MHSA_AVX2_ASM_TILE 1

namespace mhsa {
namespace avx2asm {
// Local to the one file that includes this header (not exported, always inlined).
namespace {

// Why assembly: with A packed, eight k steps per pass with constant offsets
// make a k step its 20 instructions (2 loads, 6 broadcasts, 12 FMAs) plus a
// quarter of one for the loop. GCC compiles the intrinsic loops
// (microkernel_avx2.cc) to 26 per k step (pointer bumps, the
// compare, a prefetch's test), and unrolled intrinsics to register shuffles
// and spills. At 2 FMAs a cycle a k step has 6 cycles, and Zen 3 dispatches
// 6 ops a cycle per core, or fewer when the host's other hardware thread on
// that core is busy: then 26 instructions no longer fit in 6 cycles and 20
// still nearly do. On a shared Zen 3 host both forms ran 1024^3 in the same
// best time (23-24 ms, one thread) but this one took 0.76x the median time,
// level with OpenBLAS (docs/design/gemm-blocking.md). Each sum runs over k in the
// intrinsic loops' order, so the bits are the same.
//
// Registers: B's two vectors of a k step in ymm0/ymm1, A's value broadcast
// in ymm2, row i's accumulators in ymm(4+2i) and ymm(5+2i).
#define MHSA_ASM_LOAD_B(boff) "vmovups " #boff "(%[b]), %%ymm0\n\t" "vmovups " #boff "+32(%[b]), %%ymm1\n\t"
#define MHSA_ASM_ROW(addr, acc0, acc1)                                                               \
  "vbroadcastss " addr ", %%ymm2\n\t"                                                                \
  "vfmadd231ps %%ymm0, %%ymm2, %%ymm" #acc0 "\n\t"                                                   \
  "vfmadd231ps %%ymm1, %%ymm2, %%ymm" #acc1 "\n\t"
// A packed: its six values of a k step adjacent at a + aoff.
#define MHSA_ASM_STEP_PACKED(aoff, boff)                                                             \
  MHSA_ASM_LOAD_B(boff)                                                                              \
  MHSA_ASM_ROW(#aoff "(%[a])", 4, 5) MHSA_ASM_ROW(#aoff "+4(%[a])", 6, 7)                            \
  MHSA_ASM_ROW(#aoff "+8(%[a])", 8, 9) MHSA_ASM_ROW(#aoff "+12(%[a])", 10, 11)                       \
  MHSA_ASM_ROW(#aoff "+16(%[a])", 12, 13) MHSA_ASM_ROW(#aoff "+20(%[a])", 14, 15)
// A in place: rows 0-2 at a0 + {0, 1, 2} lda, rows 3-5 at a3 + {0, 1, 2} lda
// (RowBases<6>; lda in bytes in l), k steps 4 bytes apart.
#define MHSA_ASM_STEP_ROWS(aoff, boff)                                                               \
  MHSA_ASM_LOAD_B(boff)                                                                              \
  MHSA_ASM_ROW(#aoff "(%[a0])", 4, 5) MHSA_ASM_ROW(#aoff "(%[a0],%[l],1)", 6, 7)                     \
  MHSA_ASM_ROW(#aoff "(%[a0],%[l],2)", 8, 9) MHSA_ASM_ROW(#aoff "(%[a3])", 10, 11)                   \
  MHSA_ASM_ROW(#aoff "(%[a3],%[l],1)", 12, 13) MHSA_ASM_ROW(#aoff "(%[a3],%[l],2)", 14, 15)
#define MHSA_ASM_ZERO_ACC                                                                            \
  "vxorps %%ymm4, %%ymm4, %%ymm4\n\t" "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"                            \
  "vxorps %%ymm6, %%ymm6, %%ymm6\n\t" "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"                            \
  "vxorps %%ymm8, %%ymm8, %%ymm8\n\t" "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"                            \
  "vxorps %%ymm10, %%ymm10, %%ymm10\n\t" "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"                      \
  "vxorps %%ymm12, %%ymm12, %%ymm12\n\t" "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"                      \
  "vxorps %%ymm14, %%ymm14, %%ymm14\n\t" "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
// The accumulators out to tile[6][16], for storeTile (unaligned stores: the
// buffer is aligned where the compiler honours alignas on the stack).
#define MHSA_ASM_STORE_ACC                                                                           \
  "vmovups %%ymm4, (%[tile])\n\t" "vmovups %%ymm5, 32(%[tile])\n\t"                                  \
  "vmovups %%ymm6, 64(%[tile])\n\t" "vmovups %%ymm7, 96(%[tile])\n\t"                                \
  "vmovups %%ymm8, 128(%[tile])\n\t" "vmovups %%ymm9, 160(%[tile])\n\t"                              \
  "vmovups %%ymm10, 192(%[tile])\n\t" "vmovups %%ymm11, 224(%[tile])\n\t"                            \
  "vmovups %%ymm12, 256(%[tile])\n\t" "vmovups %%ymm13, 288(%[tile])\n\t"                            \
  "vmovups %%ymm14, 320(%[tile])\n\t" "vmovups %%ymm15, 352(%[tile])\n\t"
// C's tile requested, rows 0-2 at c0 + {0, 1, 2} ldc, rows 3-5 at c3 (ldc in
// bytes in lc), each row's first and last float (two lines when the row is
// not 64-byte aligned): for writing (PREFETCHW) where w (kFetchCForWrite) is
// true, for reading (PREFETCHT0) on CPUs without that instruction.
#define MHSA_ASM_FETCH_C_ROW(op, addr) op " " addr "\n\t" op " 60" addr "\n\t"
#define MHSA_ASM_FETCH_C_ROWS(op)                                                                    \
  MHSA_ASM_FETCH_C_ROW(op, "(%[c0])") MHSA_ASM_FETCH_C_ROW(op, "(%[c0],%[lc],1)")                    \
  MHSA_ASM_FETCH_C_ROW(op, "(%[c0],%[lc],2)") MHSA_ASM_FETCH_C_ROW(op, "(%[c3])")                    \
  MHSA_ASM_FETCH_C_ROW(op, "(%[c3],%[lc],1)") MHSA_ASM_FETCH_C_ROW(op, "(%[c3],%[lc],2)")
#define MHSA_ASM_FETCH_C                                                                             \
  "testb $1, %[w]\n\t" "jz 7f\n\t" MHSA_ASM_FETCH_C_ROWS("prefetchw") "jmp 8f\n\t"                   \
  "7:\n\t" MHSA_ASM_FETCH_C_ROWS("prefetcht0") "8:\n\t"
// Every tile's loop: the accumulators zeroed, `early` runs of PASS, C's tile
// requested, `late` runs of PASS (each ending in its pointer bumps), `rest`
// runs of REST (which holds the label 3 its loop returns to), the sums stored.
#define MHSA_ASM_TILE_LOOPS(PASS, REST)                                                              \
  MHSA_ASM_ZERO_ACC                                                                                  \
  "testq %[early], %[early]\n\t" "jz 2f\n\t"                                                         \
  ".p2align 6\n\t" "1:\n\t" PASS "decq %[early]\n\t" "jnz 1b\n\t"                                    \
  "2:\n\t" MHSA_ASM_FETCH_C "testq %[late], %[late]\n\t" "jz 6f\n\t"                                 \
  ".p2align 6\n\t" "5:\n\t" PASS "decq %[late]\n\t" "jnz 5b\n\t"                                     \
  "6:\n\t" "testq %[rest], %[rest]\n\t" "jz 4f\n\t"                                                  \
  REST "decq %[rest]\n\t" "jnz 3b\n\t"                                                               \
  "4:\n\t" MHSA_ASM_STORE_ACC
#define MHSA_ASM_CLOBBERS                                                                            \
  "xmm0", "xmm1", "xmm2", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "memory", "cc"

// Depth from which an assembly tile pays for its round trip of the tile
// through memory (24 moves): a few k steps' worth.
constexpr int64_t kMinDepth = 16;

// How many k steps before the end of its K loop a tile requests C's lines
// (whole passes of them, so 32 plus the remainder's steps; a loop of fewer
// passes requests them at its start). Requested at the start of a long loop,
// they were gone again by the epilogue: a 768-deep sliver of B (48 KiB)
// passes through the 32 KiB L1 meanwhile and the B block through L2, so the
// twelve stores of the epilogue waited on misses and filled the store buffer,
// and the next call stalled on its first stores (the pushes of its
// arguments, ~3 % of the ViT block's samples). At ~6 cycles a k step, 32
// steps cover a miss to L3.
constexpr int64_t kFetchCAhead = 32;

// Whether MHSA_ASM_FETCH_C requests C's lines for writing, read once as this
// file's static initializers run (a product run from an earlier initializer
// would request them for reading: slower, same results). Requested for
// reading, the block at B1 measured 1.5-3.5 % slower (Zen 3; docs/design/gemm-blocking.md).
const bool kFetchCForWrite = cpuHasPrefetchW();

// A tile's C rows for MHSA_ASM_FETCH_C: rows 0-2 from c0, 3-5 from c3 (RowBases<6>), ldc in bytes.
struct CTileRows {
  const float* c0;
  const float* c3;
  int64_t ldcBytes;
  CTileRows(const float* c, int64_t ldc)
      : c0(c), c3(RowBases<6>(c, ldc).base[1]), ldcBytes(ldc * static_cast<int64_t>(sizeof(float))) {}
};

// A K loop of kc steps, `perPass` steps a pass: `early` passes, C's request,
// `late` passes (the last kFetchCAhead steps' worth, or all of them when
// fewer), then `rest` single steps. The assembly counts each down to 0.
struct LoopCounts {
  int64_t early, late, rest;
  LoopCounts(int64_t kc, int64_t perPass) {
    const int64_t passes = kc / perPass;
    late = std::min(passes, kFetchCAhead / perPass);
    early = passes - late;
    rest = kc % perPass;
  }
};

// tile[i][j] = sum_k ap[k * 6 + i] * bp[k * 16 + j] (A and B packed), one line
// at fetch requested into L2 per 8 k steps, fetch advancing a line each time.
__attribute__((always_inline)) inline void packedProduct(int64_t kc, const float* ap, const float* bp,
                                                         const float* fetch, CTileRows c, float* tile) {
  LoopCounts n(kc, 8);
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   "prefetcht1 (%[fetch])\n\t"
                   MHSA_ASM_STEP_PACKED(0, 0) MHSA_ASM_STEP_PACKED(24, 64) MHSA_ASM_STEP_PACKED(48, 128)
                   MHSA_ASM_STEP_PACKED(72, 192) MHSA_ASM_STEP_PACKED(96, 256) MHSA_ASM_STEP_PACKED(120, 320)
                   MHSA_ASM_STEP_PACKED(144, 384) MHSA_ASM_STEP_PACKED(168, 448)
                   "addq $192, %[a]\n\t" "addq $512, %[b]\n\t" "addq $64, %[fetch]\n\t",
                   "prefetcht1 (%[fetch])\n\t" "3:\n\t"
                   MHSA_ASM_STEP_PACKED(0, 0) "addq $24, %[a]\n\t" "addq $64, %[b]\n\t")
               : [a] "+r"(ap), [b] "+r"(bp), [fetch] "+r"(fetch), [early] "+r"(n.early), [late] "+r"(n.late),
                 [rest] "+r"(n.rest)
               : [tile] "r"(tile), [c0] "r"(c.c0), [c3] "r"(c.c3), [lc] "r"(c.ldcBytes),
                 [w] "m"(kFetchCForWrite)
               : MHSA_ASM_CLOBBERS);
}

// The same with A's k steps aStep floats apart: the pointer bump stays in
// each k step (21 instructions); no prefetch of B.
__attribute__((always_inline)) inline void stridedProduct(int64_t kc, const float* ap, int64_t aStep,
                                                          const float* bp, CTileRows c, float* tile) {
  const int64_t stepBytes = aStep * static_cast<int64_t>(sizeof(float));
  LoopCounts n(kc, 4);
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   MHSA_ASM_STEP_PACKED(0, 0) "addq %[step], %[a]\n\t" MHSA_ASM_STEP_PACKED(0, 64)
                   "addq %[step], %[a]\n\t" MHSA_ASM_STEP_PACKED(0, 128) "addq %[step], %[a]\n\t"
                   MHSA_ASM_STEP_PACKED(0, 192) "addq %[step], %[a]\n\t" "addq $256, %[b]\n\t",
                   "3:\n\t" MHSA_ASM_STEP_PACKED(0, 0) "addq %[step], %[a]\n\t" "addq $64, %[b]\n\t")
               : [a] "+r"(ap), [b] "+r"(bp), [early] "+r"(n.early), [late] "+r"(n.late), [rest] "+r"(n.rest)
               : [step] "r"(stepBytes), [tile] "r"(tile), [c0] "r"(c.c0), [c3] "r"(c.c3), [lc] "r"(c.ldcBytes),
                 [w] "m"(kFetchCForWrite)
               : MHSA_ASM_CLOBBERS);
}

// The same with A's six rows read in place, lda floats apart, and B a packed
// sliver (a projection's input against a prepacked weight).
__attribute__((always_inline)) inline void rowsProduct(int64_t kc, const float* a, int64_t lda, const float* b,
                                                       CTileRows c, float* tile) {
  // Rows 0-2 and 3-5 from two bases (row_bases.h), each row a base plus the
  // stride scaled by 1 or 2 in the addressing.
  const float* a3 = RowBases<6>(a, lda).base[1];
  const int64_t ldaBytes = lda * static_cast<int64_t>(sizeof(float));
  LoopCounts n(kc, 8);
  asm volatile(MHSA_ASM_TILE_LOOPS(
                   MHSA_ASM_STEP_ROWS(0, 0) MHSA_ASM_STEP_ROWS(4, 64) MHSA_ASM_STEP_ROWS(8, 128)
                   MHSA_ASM_STEP_ROWS(12, 192) MHSA_ASM_STEP_ROWS(16, 256) MHSA_ASM_STEP_ROWS(20, 320)
                   MHSA_ASM_STEP_ROWS(24, 384) MHSA_ASM_STEP_ROWS(28, 448)
                   "addq $32, %[a0]\n\t" "addq $32, %[a3]\n\t" "addq $512, %[b]\n\t",
                   "3:\n\t" MHSA_ASM_STEP_ROWS(0, 0) "addq $4, %[a0]\n\t" "addq $4, %[a3]\n\t" "addq $64, %[b]\n\t")
               : [a0] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [early] "+r"(n.early), [late] "+r"(n.late),
                 [rest] "+r"(n.rest)
               : [l] "r"(ldaBytes), [tile] "r"(tile), [c0] "r"(c.c0), [c3] "r"(c.c3), [lc] "r"(c.ldcBytes),
                 [w] "m"(kFetchCForWrite)
               : MHSA_ASM_CLOBBERS);
}

#undef MHSA_ASM_LOAD_B
#undef MHSA_ASM_ROW
#undef MHSA_ASM_STEP_PACKED
#undef MHSA_ASM_STEP_ROWS
#undef MHSA_ASM_ZERO_ACC
#undef MHSA_ASM_STORE_ACC
#undef MHSA_ASM_FETCH_C_ROW
#undef MHSA_ASM_FETCH_C_ROWS
#undef MHSA_ASM_FETCH_C
#undef MHSA_ASM_TILE_LOOPS
#undef MHSA_ASM_CLOBBERS

}  // namespace
}  // namespace avx2asm
}  // namespace mhsa
#endif
