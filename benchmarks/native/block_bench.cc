// Native benchmark of the ViT-B/16 block's stages (no Node involved): the
// fused QKV projection against a prepacked weight, attention read in place
// from its output, and the output projection, as MultiHeadSelfAttention.forward
// runs them; then attention alone on each input/output layout.
// Every variant runs in alternating bursts in one process, so all of them see
// the same minutes of a noisy host (two processes minutes apart differ by up
// to ±30 % here). Build and run: BENCH=block benchmarks/native/run.sh [seconds]
// Env: THREADS=1|2 (default both), BATCH=1,8 (default), TOKENS=197.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../../native/kernels/attention.h"
#include "../../native/kernels/gemm.h"
#include "../../native/kernels/kernel_table.h"
#include "../../native/runtime/calibrate.h"
#include "../../native/runtime/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

struct Variant {
  std::string name;
  double flops;
  std::function<void()> run;
  std::vector<double> times;
};

// Runs every variant in bursts of `burst` timed calls (after one untimed call),
// round after round, for at least `minTime` seconds; prints medians.
void timeInterleaved(std::vector<Variant>& vs, double minTime, double peak) {
  constexpr int burst = 3;
  const double start = seconds();
  while (seconds() - start < minTime || vs[0].times.size() < 15)
    for (Variant& v : vs) {
      v.run();
      for (int i = 0; i < burst; ++i) {
        const double t0 = seconds();
        v.run();
        v.times.push_back(seconds() - t0);
      }
    }
  for (Variant& v : vs) {
    std::sort(v.times.begin(), v.times.end());
    const double med = v.times[v.times.size() / 2];
    std::printf("  %-34s %9.3f ms  %7.1f GFLOP/s  %5.1f %% of peak\n", v.name.c_str(), med * 1e3,
                v.flops / med * 1e-9, 100.0 * v.flops / med * 1e-9 / peak);
  }
}

std::vector<int> listFromEnv(const char* name, std::vector<int> fallback) {
  const char* s = std::getenv(name);
  if (!s) return fallback;
  std::vector<int> out;
  for (std::string all = s; !all.empty();) {
    const size_t comma = all.find(',');
    out.push_back(std::atoi(all.substr(0, comma).c_str()));
    all = comma == std::string::npos ? "" : all.substr(comma + 1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const double minTime = argc > 1 ? std::atof(argv[1]) : 5.0;
  const int64_t T = std::getenv("TOKENS") ? std::atoi(std::getenv("TOKENS")) : 197;
  const int64_t D = 768, H = 12, dh = 64, inner = H * dh;
  std::printf("isa %s, ViT-B/16 block: %lld tokens, dim %lld, %lld heads x %lld\n", mhsa::kernels().name,
              static_cast<long long>(T), static_cast<long long>(D), static_cast<long long>(H),
              static_cast<long long>(dh));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> wqkv(D * 3 * inner), wo(inner * D);
  for (auto& x : wqkv) x = dist(rng) * 0.05f;
  for (auto& x : wo) x = dist(rng) * 0.05f;
  std::vector<float> packedQkv(static_cast<size_t>(mhsa::packedBSize(D, 3 * inner)));
  std::vector<float> packedOut(static_cast<size_t>(mhsa::packedBSize(inner, D)));
  mhsa::packWholeB({wqkv.data(), 3 * inner, 1}, D, 3 * inner, packedQkv.data());
  mhsa::packWholeB({wo.data(), D, 1}, inner, D, packedOut.data());

  for (int threads : listFromEnv("THREADS", {1, 2})) {
    const double peak = mhsa::measureFmaPeakGflops(threads);
    mhsa::setNumThreads(threads);
    for (int batch : listFromEnv("BATCH", {1, 8})) {
      const int64_t B = batch, M = B * T;
      std::printf("\nthreads %d, batch %lld, measured FMA peak %.1f GFLOP/s\n", threads, static_cast<long long>(B), peak);
      std::vector<float> x(M * D), qkv(M * 3 * inner), o(M * inner), y(M * D);
      std::vector<float> q(M * inner), k(M * inner), v(M * inner), oHeads(M * inner);
      for (auto& e : x) e = dist(rng);
      for (auto* t : {&q, &k, &v})
        for (auto& e : *t) e = dist(rng);

      mhsa::GemmProblem proj{};
      proj.m = M;
      proj.n = 3 * inner;
      proj.k = D;
      proj.alpha = 1;
      proj.a = {x.data(), D, 1};
      proj.out = qkv.data();
      proj.outRowStride = 3 * inner;
      proj.outColStride = 1;
      proj.packedB = packedQkv.data();
      mhsa::GemmProblem outProj = proj;
      outProj.n = D;
      outProj.k = inner;
      outProj.a = {o.data(), inner, 1};
      outProj.out = y.data();
      outProj.outRowStride = D;
      outProj.packedB = packedOut.data();

      // Attention over [B, T, heads * dh] rows with a given token stride (inner
      // for separate q, k, v; 3 * inner inside the fused projection output),
      // or over [B, H, T, dh] (bhsd).
      auto problem = [&](const float* qp, const float* kp, const float* vp, int64_t rowStride, bool headMajorIn,
                         float* out, bool headMajorOut) {
        mhsa::AttentionProblem p{};
        p.batch = B;
        p.heads = p.kvHeads = H;
        p.seqQ = p.seqKV = T;
        p.headDim = p.headDimV = dh;
        auto view = [&](const float* d) -> mhsa::Strided4 {
          return headMajorIn ? mhsa::Strided4{d, H * T * dh, T * dh, dh, 1} : mhsa::Strided4{d, T * rowStride, dh, rowStride, 1};
        };
        p.q = view(qp);
        p.k = view(kp);
        p.v = view(vp);
        p.out = out;
        p.outView = headMajorOut ? mhsa::Strided4{out, H * T * dh, T * dh, dh, 1} : mhsa::Strided4{out, T * inner, dh, inner, 1};
        p.scale = 0.125f;
        return p;
      };
      const mhsa::AttentionProblem inBlock =
          problem(qkv.data(), qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, false, o.data(), false);
      const double projFlops = 2.0 * M * D * 3 * inner, outFlops = 2.0 * M * inner * D;
      const double attFlops = 4.0 * B * H * T * T * dh;

      std::printf(" stages in order, as forward runs them (LayerNorm not included):\n");
      std::vector<Variant> stages = {
          {"qkv projection (prepacked)", projFlops, [&] { mhsa::gemmParallel(proj); }, {}},
          {"attention on the fused qkv", attFlops, [&] { mhsa::attentionForward(inBlock); }, {}},
          {"output projection (prepacked)", outFlops, [&] { mhsa::gemmParallel(outProj); }, {}},
          {"all three", projFlops + attFlops + outFlops,
           [&] {
             mhsa::gemmParallel(proj);
             mhsa::attentionForward(inBlock);
             mhsa::gemmParallel(outProj);
           },
           {}},
      };
      timeInterleaved(stages, minTime, peak);

      std::printf(" attention alone, by layout (in -> out):\n");
      const auto bhsdBhsd = problem(q.data(), k.data(), v.data(), inner, true, oHeads.data(), true);
      const auto bshdBhsd = problem(q.data(), k.data(), v.data(), inner, false, oHeads.data(), true);
      const auto bhsdBshd = problem(q.data(), k.data(), v.data(), inner, true, o.data(), false);
      const auto bshdBshd = problem(q.data(), k.data(), v.data(), inner, false, o.data(), false);
      std::vector<Variant> layouts = {
          {"bhsd -> bhsd", attFlops, [&] { mhsa::attentionForward(bhsdBhsd); }, {}},
          {"bshd -> bhsd", attFlops, [&] { mhsa::attentionForward(bshdBhsd); }, {}},
          {"bhsd -> bshd", attFlops, [&] { mhsa::attentionForward(bhsdBshd); }, {}},
          {"bshd -> bshd", attFlops, [&] { mhsa::attentionForward(bshdBshd); }, {}},
          {"fused qkv -> bshd (the block's)", attFlops, [&] { mhsa::attentionForward(inBlock); }, {}},
      };
      timeInterleaved(layouts, minTime, peak);
    }
  }
  return 0;
}
