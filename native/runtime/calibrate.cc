#include "calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "../kernels/gemm_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mhsa {
namespace {

using Clock = std::chrono::steady_clock;

// Where the measured loops' results go, so that no compiler drops the loops:
// run inline (the single-threaded build), nothing else would read them.
volatile double observed = 0;

// Runs fn(0), ..., fn(threads - 1) at once, one thread each. The
// single-threaded WebAssembly build runs them in turn (it has one thread).
template <typename Fn>
void onThreads(int threads, Fn fn) {
#if defined(MHSA_SINGLE_THREADED)
  for (int t = 0; t < threads; ++t) fn(t);
#else
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&fn, t] { fn(t); });
  for (auto& th : pool) th.join();
#endif
}

#if defined(__x86_64__)
// 16 independent accumulators: more than latency (4) x FMA ports (2) needs.
__attribute__((target("avx512f,fma"))) double fmaLoopAvx512(int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

// 12 accumulators: 16 ymm registers hold them plus the two operands.
__attribute__((target("avx2,fma"))) double fmaLoopAvx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}
#endif

#if defined(__x86_64__)
// Four independent sums so the adds never limit the loads.
__attribute__((target("avx512f"))) float sumAvx512(const float* p, size_t n) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(p + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(p + i + 48));
  }
  float out[16];
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
  return out[0];
}

__attribute__((target("avx2"))) float sumAvx2(const float* p, size_t n) {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return out[0];
}
#endif

float sumPortable(const float* p, size_t n) {
  float s[16] = {};
  for (size_t i = 0; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) s[l] += p[i + l];
  return s[0] + s[15];
}

float sumFloats(const float* p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return sumAvx512(p, n);
  if (__builtin_cpu_supports("avx2")) return sumAvx2(p, n);
#endif
  return sumPortable(p, n);
}

double fmaLoopPortable(int64_t iters) {
  float acc[16][8];
  for (int i = 0; i < 16; ++i)
    for (int l = 0; l < 8; ++l) acc[i][l] = static_cast<float>(i + l) * 1e-3f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i)
      for (int l = 0; l < 8; ++l) acc[i][l] = acc[i][l] * 0.999999f + 1e-7f;
  return acc[3][3];
}

}  // namespace

double measureFmaPeakGflops(int threads, int64_t iters, int reps) {
  bool avx512 = false, avx2 = false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  avx512 = __builtin_cpu_supports("avx512f");
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  const double flopsPerIter = avx512 ? 16.0 * 16 * 2 : avx2 ? 12.0 * 8 * 2 : 16.0 * 8 * 2;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<double> sink(threads);
    const auto t0 = Clock::now();
    onThreads(threads, [&](int t) {
#if defined(__x86_64__)
      sink[t] = avx512 ? fmaLoopAvx512(iters) : avx2 ? fmaLoopAvx2(iters) : fmaLoopPortable(iters);
#else
      sink[t] = fmaLoopPortable(iters);
#endif
    });
    for (double v : sink) observed = observed + v;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double g = flopsPerIter * iters * threads / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

double measureBf16PeakGflops(int threads, int64_t iters, int reps) {
  const Bf16Kernels* kernels = bf16Kernels();
  if (kernels == nullptr) return 0;
  // An AMX round is 6 tile products (~100 cycles), a VDPBF16PS round 16
  // vector ones (~8-16): about as long as the FMA loop's in total.
  const int64_t rounds = std::strcmp(kernels->name, "amx") == 0 ? iters / 8 : iters;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<double> flops(threads);
    const auto t0 = Clock::now();
    onThreads(threads, [&](int t) { flops[t] = kernels->peakLoop(rounds); });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / s / 1e9);
  }
  return best;
}

double measureReadBandwidthGBs(int threads, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float) / 64 / threads * 64 * threads;
  std::vector<float> buf(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<float> sink(threads);
    const auto t0 = Clock::now();
    onThreads(threads, [&](int t) { sink[t] = sumFloats(buf.data() + n / threads * t, n / threads); });
    for (float v : sink) observed = observed + v;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double g = n * sizeof(float) / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

}  // namespace mhsa
