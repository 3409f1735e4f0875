// Which SIMD instruction sets this CPU can run, detected once.
#pragma once

namespace mhsa {

enum class Isa { Portable = 0, Avx2 = 1, Avx512 = 2 };

// The best ISA both compiled in and supported by the CPU, lowered by the
// MHSA_ISA environment variable (avx512 | avx2 | portable) so tests can force
// each path on one machine. MHSA_ISA never raises the level above what the CPU has.
Isa selectedIsa();

const char* isaName(Isa isa);

// The ISA an MHSA_ISA value names (avx512, avx2 or portable); false
// for any other text, which selectedIsa() reads as no limit.
bool isaFromName(const char* name, Isa* isa);

// Whether the CPU runs PREFETCHW (CPUID 0x80000001 ECX bit 8; AMD since the
// K6-2, Intel since Broadwell). Kernels that request lines for writing fall
// back to a read prefetch without it. Detected once.
bool cpuHasPrefetchW();

// Whether the CPU runs AVX512_BF16's VDPBF16PS (CPUID 7.1 EAX bit 5). A
// build whose AVX-512 table is emulated (MHSA_EMULATED_AVX512) says yes on
// AVX2, as its emulation covers the instruction. Detected once.
bool cpuHasAvx512Bf16();

// Whether the CPU runs AVX512_VNNI's VPDPBUSD (CPUID 7.0 ECX bit 11). Never
// emulated: the int8 kernels that use it run only where the CPU has it.
// Detected once.
bool cpuHasAvx512Vnni();

// Whether the CPU has AMX-TILE and AMX-BF16 (CPUID 7.0 EDX bits 24 and 22)
// and the OS saves the tile state (XCR0 bits 17 and 18), on Linux. Asks the
// OS for nothing. Detected once.
bool cpuHasAmxBf16();

// cpuHasAmxBf16(), and Linux granted this process the tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM; Linux 5.16 and later), asked on the first call. The
// grant is for the whole process and enlarges every thread's signal frames by
// the 8 KiB of tile state, so only the first bf16 product asks.
bool amxTilesUsable();

}  // namespace mhsa
