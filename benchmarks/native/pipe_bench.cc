// Which AVX-512 operations compete with FMAs for issue, measured rather than
// looked up: a loop of eight independent FMA chains keeps the FMA pipes busy
// (one 512-bit FMA per cycle on Zen 4), then 4 or 8 independent operations of
// one kind are added to each iteration. An operation that runs on other pipes
// leaves the iteration's time alone; one that shares the FMA pipes adds to
// it. This is what an epilogue fused into a GEMM-bound kernel pays for (the
// scores tile's exp: docs/design/softmax-exp.md, "What is left", has this
// file's figures on Zen 4 and the cuts they were weighed against).
//
// Build and run: BENCH=pipes benchmarks/native/run.sh (AVX-512 hosts only).
// Prints ns per iteration with 0, 4 and 8 added operations, and the cycles
// those add per operation at the clock the FMA-only loop implies.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

constexpr long kIterations = 20000000;

// ns per iteration of 8 FMAs plus `Extra` (0, 4 or 8) of `op`, each on its own chain.
template <int Extra, class Op>
__attribute__((noinline)) double nsPerIteration(Op op) {
  __m512 f0 = _mm512_set1_ps(0.1f), f1 = _mm512_set1_ps(0.2f), f2 = _mm512_set1_ps(0.3f), f3 = _mm512_set1_ps(0.4f);
  __m512 f4 = _mm512_set1_ps(0.5f), f5 = _mm512_set1_ps(0.6f), f6 = _mm512_set1_ps(0.7f), f7 = _mm512_set1_ps(0.8f);
  __m512 x0 = _mm512_set1_ps(1.3f), x1 = _mm512_set1_ps(1.4f), x2 = _mm512_set1_ps(1.5f), x3 = _mm512_set1_ps(1.6f);
  __m512 x4 = _mm512_set1_ps(1.7f), x5 = _mm512_set1_ps(1.8f), x6 = _mm512_set1_ps(1.9f), x7 = _mm512_set1_ps(2.0f);
  // f = f * 0.999 + 1e-4 converges to 0.1: no denormals, no overflow.
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.0001f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i) {
    f0 = _mm512_fmadd_ps(f0, a, b);
    f1 = _mm512_fmadd_ps(f1, a, b);
    f2 = _mm512_fmadd_ps(f2, a, b);
    f3 = _mm512_fmadd_ps(f3, a, b);
    f4 = _mm512_fmadd_ps(f4, a, b);
    f5 = _mm512_fmadd_ps(f5, a, b);
    f6 = _mm512_fmadd_ps(f6, a, b);
    f7 = _mm512_fmadd_ps(f7, a, b);
    if (Extra >= 4) {
      x0 = op(x0);
      x1 = op(x1);
      x2 = op(x2);
      x3 = op(x3);
    }
    if (Extra >= 8) {
      x4 = op(x4);
      x5 = op(x5);
      x6 = op(x6);
      x7 = op(x7);
    }
    // Opaque to the compiler: every chain stays live and in a register.
    asm volatile("" : "+v"(f0), "+v"(f1), "+v"(f2), "+v"(f3), "+v"(f4), "+v"(f5), "+v"(f6), "+v"(f7));
    asm volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6), "+v"(x7));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s / kIterations * 1e9;
}

// The fastest of three timings: the host's noise only ever adds time.
template <int Extra, class Op>
double bestNs(Op op) {
  double best = nsPerIteration<Extra>(op);
  for (int t = 0; t < 2; ++t) best = std::min(best, nsPerIteration<Extra>(op));
  return best;
}

template <class Op>
void report(const char* name, Op op) {
  const double base = bestNs<0>(op), four = bestNs<4>(op), eight = bestNs<8>(op);
  const double cycleNs = base / 8;  // the FMA-only loop issues one FMA per cycle
  std::printf("  %-24s %6.3f %6.3f %6.3f ns   %+5.2f %+5.2f cycles per added op\n", name, base, four, eight,
              (four - base) / cycleNs / 4, (eight - base) / cycleNs / 8);
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
    std::printf("pipe_bench needs AVX-512F and DQ\n");
    return 0;
  }
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512i three = _mm512_set1_epi32(3);
  std::printf("8 FMA chains per iteration, plus 0 / 4 / 8 independent ops of one kind:\n");
  nsPerIteration<0>([](__m512 v) { return v; });  // wakes the clock before the first timing
  report("vaddps", [&](__m512 v) { return _mm512_add_ps(v, half); });
  report("vmaxps", [&](__m512 v) { return _mm512_max_ps(v, half); });
  report("vmulps", [&](__m512 v) { return _mm512_mul_ps(v, one); });
  report("vfmadd", [&](__m512 v) { return _mm512_fmadd_ps(v, one, half); });
  report("vrndscaleps", [&](__m512 v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT); });
  report("vreduceps", [&](__m512 v) { return _mm512_reduce_ps(v, _MM_FROUND_TO_NEAREST_INT); });
  report("vscalefps", [&](__m512 v) { return _mm512_scalef_ps(v, half); });
  report("vcmpps -> k, masked mov", [&](__m512 v) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, half, _CMP_NLT_UQ), v);
  });
  report("masked mov (const k)", [&](__m512 v) { return _mm512_maskz_mov_ps(0x0ff0, v); });
  report("vpermps", [&](__m512 v) { return _mm512_permutexvar_ps(_mm512_castps_si512(v), half); });
  report("vpermt2ps", [&](__m512 v) { return _mm512_permutex2var_ps(half, _mm512_castps_si512(v), one); });
  report("vpaddd", [&](__m512 v) { return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(v), three)); });
  report("vpmulld", [&](__m512 v) {
    return _mm512_castsi512_ps(_mm512_mullo_epi32(_mm512_castps_si512(v), three));
  });
  report("vcvtps2dq", [&](__m512 v) { return _mm512_castsi512_ps(_mm512_cvtps_epi32(v)); });
  return 0;
}
