#include "peak.h"

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mhsa {
namespace {

using Clock = std::chrono::steady_clock;

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
#endif

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

double measureFmaPeakGflops(int threads) {
  const int64_t iters = 20'000'000;
  bool avx512 = false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  avx512 = __builtin_cpu_supports("avx512f");
#endif
  const double flopsPerIter = avx512 ? 16.0 * 16 * 2 : 16.0 * 8 * 2;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<double> sink(threads);
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
#if defined(__x86_64__)
        sink[t] = avx512 ? fmaLoopAvx512(iters) : fmaLoopPortable(iters);
#else
        sink[t] = fmaLoopPortable(iters);
#endif
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double g = flopsPerIter * iters * threads / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

double measureReadBandwidthGBs(int threads) {
  const size_t n = size_t{1} << 27;  // 512 MiB of floats, far beyond any cache
  std::vector<float> buf(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<float> sink(threads);
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t b = n / threads * t, e = n / threads * (t + 1);
        float s[16] = {};
        for (size_t i = b; i < e; i += 16)
          for (int l = 0; l < 16; ++l) s[l] += buf[i + l];
        sink[t] = s[0] + s[7];
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double g = n * sizeof(float) / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

}  // namespace mhsa
