#include "cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(MHSA_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif
#if defined(MHSA_HAVE_X86_KERNELS) && defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace mhsa {
namespace {

Isa detectCpuIsa() {
#if defined(MHSA_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  // AVX-512 kernels use F, VL, BW and DQ; the AVX2 kernels need FMA beside AVX2.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma"))
    return Isa::Avx512;
#if defined(MHSA_EMULATED_AVX512)
  // A test build whose AVX-512 kernels run on AVX2 (CMake's MHSA_EMULATE_AVX512).
  constexpr Isa kAvx2Runs = Isa::Avx512;
#else
  constexpr Isa kAvx2Runs = Isa::Avx2;
#endif
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kAvx2Runs;
#endif
  return Isa::Portable;
}

Isa requestedIsa() {
  Isa isa = Isa::Avx512;
  const char* env = std::getenv("MHSA_ISA");
  return env != nullptr && isaFromName(env, &isa) ? isa : Isa::Avx512;
}

}  // namespace

bool isaFromName(const char* name, Isa* isa) {
  if (std::strcmp(name, "avx512") == 0) {
    *isa = Isa::Avx512;
  } else if (std::strcmp(name, "avx2") == 0) {
    *isa = Isa::Avx2;
  } else if (std::strcmp(name, "portable") == 0) {
    *isa = Isa::Portable;
  } else {
    return false;
  }
  return true;
}

Isa selectedIsa() {
  static const Isa isa = [] {
    Isa cpu = detectCpuIsa();
    Isa want = requestedIsa();
    return static_cast<int>(want) < static_cast<int>(cpu) ? want : cpu;
  }();
  return isa;
}

bool cpuHasPrefetchW() {
  static const bool has = [] {
#if defined(MHSA_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 8)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

bool cpuHasAvx512Bf16() {
  static const bool has = [] {
#if defined(MHSA_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
#if defined(MHSA_EMULATED_AVX512)
    if (selectedIsa() == Isa::Avx512) return true;
#endif
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

bool cpuHasAvx512Vnni() {
  static const bool has = [] {
#if defined(MHSA_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__)) && !defined(MHSA_EMULATED_AVX512)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 11)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

bool cpuHasAmxBf16() {
  static const bool has = [] {
#if defined(MHSA_HAVE_X86_KERNELS) && defined(__x86_64__) && defined(__linux__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
#else
    return false;
#endif
  }();
  return has;
}

bool amxTilesUsable() {
  static const bool usable = [] {
#if defined(MHSA_HAVE_X86_KERNELS) && defined(__x86_64__) && defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return cpuHasAmxBf16() && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return usable;
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: break;
  }
#if defined(__aarch64__)
  return "neon";
#else
  return "portable";
#endif
}

}  // namespace mhsa
