// Which SIMD instruction sets this CPU can run, detected once.
#pragma once

namespace mhsa {

enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };

// The best ISA both compiled in and supported by the CPU, lowered by the
// MHSA_ISA environment variable (avx512 | avx2 | scalar) so tests can force
// each path on one machine. MHSA_ISA never raises the level above what the CPU has.
Isa selectedIsa();

const char* isaName(Isa isa);

// The ISA an MHSA_ISA value names (avx512, avx2, scalar or generic); false
// for any other text, which selectedIsa() reads as no limit.
bool isaFromName(const char* name, Isa* isa);

// Whether the CPU runs PREFETCHW (CPUID 0x80000001 ECX bit 8; AMD since the
// K6-2, Intel since Broadwell). Kernels that request lines for writing fall
// back to a read prefetch without it. Detected once.
bool cpuHasPrefetchW();

}  // namespace mhsa
