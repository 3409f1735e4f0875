// Native GEMM benchmark: mhsa's GEMM against OpenBLAS (when built with it)
// and the measured FMA peak, in one run. Build and run: benchmarks/native/run.sh
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../../native/kernels/gemm.h"
#include "../../native/kernels/kernel_table.h"
#include "../../native/runtime/thread_pool.h"
#include "../../native/runtime/calibrate.h"

#ifdef MHSA_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int64_t m, n, k;
};

template <typename F>
double medianSeconds(F&& f, double minTime) {
  f();  // warm-up
  std::vector<double> t;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while (std::chrono::duration<double>(Clock::now() - start).count() < minTime || t.size() < 5);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const double minTime = argc > 1 ? std::atof(argv[1]) : 0.5;
  std::vector<Shape> shapes = {
      {"g_sq64", 64, 64, 64},          {"g_sq256", 256, 256, 256},       {"g_sq1024", 1024, 1024, 1024},
      {"g_sq2048", 2048, 2048, 2048},  {"g_qk512", 512, 512, 64},        {"g_av512", 512, 64, 512},
      {"g_qkv197", 197, 2304, 768},    {"g_qkv1024", 1024, 2304, 768},   {"g_proj197", 197, 768, 768},
      // Small and skinny products, around gemmDirect's limits (m, n, k).
      {"g_sq96", 96, 96, 96},          {"g_sq128", 128, 128, 128},       {"g_qk197", 197, 197, 64},
      {"g_row1", 1, 2304, 768},        {"g_rows8", 8, 768, 768},         {"g_rows24", 24, 768, 768},
  };
  if (const char* only = std::getenv("SHAPES")) {
    std::string want = only;
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                [&](const Shape& s) { return want.find(s.name) == std::string::npos; }),
                 shapes.end());
  }
  // MNK="197x2304x768,192x2304x768": these shapes (m x n x k) instead.
  static std::vector<std::string> names;
  if (const char* list = std::getenv("MNK")) {
    shapes.clear();
    std::string all = list;
    for (size_t at = 0; at <= all.size();) {
      const size_t end = std::min(all.find(',', at), all.size());
      long long m = 0, n = 0, k = 0;
      if (std::sscanf(all.substr(at, end - at).c_str(), "%lldx%lldx%lld", &m, &n, &k) == 3) names.push_back(all.substr(at, end - at));
      at = end + 1;
    }
    for (const std::string& nm : names) {
      long long m = 0, n = 0, k = 0;
      std::sscanf(nm.c_str(), "%lldx%lldx%lld", &m, &n, &k);
      shapes.push_back({nm.c_str(), m, n, k});
    }
  }
  std::printf("isa %s\n", mhsa::kernels().name);
  std::vector<int> threadCounts = {1, 2};
  if (const char* t = std::getenv("THREADS")) threadCounts = {std::atoi(t)};
  for (int threads : threadCounts) {
    const double peak = mhsa::measureFmaPeakGflops(threads);
    mhsa::setNumThreads(threads);
#ifdef MHSA_BENCH_OPENBLAS
    openblas_set_num_threads(threads);
#endif
    std::printf("\nthreads %d  measured FMA peak %.1f GFLOP/s\n", threads, peak);
    std::printf("%-10s %10s %9s %7s %10s %9s %7s %8s\n", "shape", "mhsa ms", "GFLOP/s", "%peak", "oblas ms",
                "GFLOP/s", "ratio", "relerr");
    for (const Shape& s : shapes) {
      std::mt19937 rng(42);
      std::uniform_real_distribution<float> dist(-1, 1);
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n), ref(s.m * s.n);
      for (auto& x : a) x = dist(rng);
      for (auto& x : b) x = dist(rng);
      mhsa::GemmProblem p{};
      p.m = s.m;
      p.n = s.n;
      p.k = s.k;
      p.alpha = 1;
      p.a = {a.data(), s.k, 1};
      p.b = {b.data(), s.n, 1};
      p.out = c.data();
      p.outRowStride = s.n;
      p.outColStride = 1;
      p.accumulate = false;
      // PREPACK=1: B packed once up front (as the block's weights are), so only A is packed per call.
      std::vector<float> packedB;
      if (std::getenv("PREPACK")) {
        packedB.resize(static_cast<size_t>(mhsa::packedBSize(s.k, s.n)));
        mhsa::packWholeB(p.b, s.k, s.n, packedB.data());
        p.packedB = packedB.data();
      }
      const double flops = 2.0 * s.m * s.n * s.k;
      const double tm = medianSeconds([&] { mhsa::gemmParallel(p); }, minTime);
      // Relative error on a sample of rows against a double reference.
      double num = 0, den = 0;
      for (int64_t i = 0; i < s.m; i += std::max<int64_t>(1, s.m / 16))
        for (int64_t j = 0; j < s.n; ++j) {
          double r = 0;
          for (int64_t q = 0; q < s.k; ++q) r += double(a[i * s.k + q]) * b[q * s.n + j];
          num += (c[i * s.n + j] - r) * (c[i * s.n + j] - r);
          den += r * r;
        }
      double to = NAN;
#ifdef MHSA_BENCH_OPENBLAS
      to = medianSeconds([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                    0.0f, ref.data(), s.n);
      }, minTime);
#endif
      std::printf("%-10s %10.4f %9.1f %6.1f%% %10.4f %9.1f %7.2f %8.1e\n", s.name, tm * 1e3, flops / tm / 1e9,
                  100.0 * flops / tm / 1e9 / peak, to * 1e3, flops / to / 1e9, to / tm, std::sqrt(num / den));
    }
  }
  return 0;
}
