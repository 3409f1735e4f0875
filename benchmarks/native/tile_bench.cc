// One thread, one register tile at a time: attention's S^T scores tile (the
// product with the softmax's exp in its epilogue, KernelTable::scoresExp2Tile)
// against the plain GEMM micro-kernel on the same operands, both resident in
// L1. Attention's efficiency is bounded by these two numbers, with none of the
// host's noise that whole-op timings carry, so a change to the tile's epilogue
// can be judged here in seconds (the two tiles' figures on Zen 4, and what
// they leave to cut: docs/design/softmax-exp.md, "What is left").
//
// Build and run: BENCH=tile benchmarks/native/run.sh [depth=64] [rows=mr]
// (MHSA_ISA=avx2 for the AVX2 table; INPLACE=1 gives the scores tile K's rows
// in place, depth floats apart, as attention reads a [batch, heads, seq, d] K.)
// Prints ns per tile, GFLOP/s, % of the one-thread FMA peak and the scores
// tile's time over the GEMM tile's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../../native/kernels/kernel_table.h"
#include "../../native/runtime/calibrate.h"

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fastest of `trials` passes of `body` (each `calls` tiles), in ns per tile.
template <class F>
double bestNsPerTile(F body, int trials, double calls) {
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    const double t0 = seconds();
    body();
    best = std::min(best, seconds() - t0);
  }
  return best / calls * 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const mhsa::KernelTable& kt = mhsa::kernels();
  if (!kt.scoresExp2Tile) {
    std::printf("isa %s has no scores tile\n", kt.name);
    return 0;
  }
  const int64_t depth = argc > 1 ? std::atoll(argv[1]) : 64;
  const int rows = argc > 2 ? std::atoi(argv[2]) : kt.mr;
  const bool kInPlace = std::getenv("INPLACE") != nullptr;
  if (depth < 1 || rows < 1 || rows > kt.mr) {
    std::fprintf(stderr, "usage: tile_bench [depth >= 1] [rows in 1..%d]\n", kt.mr);
    return 2;
  }
  // A pass is the tiles of one query sliver against 516 keys (N512's block),
  // K packed as slivers, the queries one packed sliver: 22 KiB at depth 64.
  constexpr int kTilesPerPass = 43;
  constexpr int kPasses = 2000;
  std::mt19937 rng(7);
  // Scores of about ±2 (in base 2), as a softmax sees them: no column's shift rises.
  std::uniform_real_distribution<float> dist(-0.2f, 0.2f);
  std::vector<float> k(static_cast<size_t>(kTilesPerPass * kt.mr * depth)), q(static_cast<size_t>(depth * kt.nr));
  std::vector<float> s(static_cast<size_t>(kTilesPerPass * kt.mr * kt.nr));
  for (float& x : k) x = dist(rng);
  for (float& x : q) x = dist(rng);
  std::vector<float> shift(static_cast<size_t>(kt.nr)), sum(static_cast<size_t>(kt.nr));
  const float alpha = 0.18f;  // 1/sqrt(64) * log2(e)

  auto gemmPass = [&] {
    for (int pass = 0; pass < kPasses; ++pass)
      for (int t = 0; t < kTilesPerPass; ++t)
        kt.microKernel(depth, k.data() + t * kt.mr * depth, kt.mr, q.data(), kt.nr, s.data() + t * kt.mr * kt.nr, kt.nr,
                       alpha, false, rows, kt.nr, nullptr, nullptr);
  };
  bool raised = false;
  auto scoresPass = [&] {
    for (int pass = 0; pass < kPasses; ++pass) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int t = 0; t < kTilesPerPass; ++t)
        raised |= !kt.scoresExp2Tile(depth, k.data() + t * kt.mr * depth, kInPlace ? depth : 1, kInPlace ? 1 : kt.mr,
                                     q.data(), s.data() + t * kt.mr * kt.nr, kt.nr, alpha, rows, kt.nr, shift.data(),
                                     t == 0, sum.data());
    }
  };

  const double peak = mhsa::measureFmaPeakGflops(1);
  const double flops = 2.0 * rows * kt.nr * depth;
  const double calls = static_cast<double>(kPasses) * kTilesPerPass;
  std::printf("isa %s  tile %d x %d  depth %lld  K %s  one-thread FMA peak %.1f GFLOP/s\n", kt.name, rows, kt.nr,
              static_cast<long long>(depth), kInPlace ? "rows in place" : "packed", peak);
  for (int round = 0; round < 3; ++round) {
    const double g = bestNsPerTile(gemmPass, 5, calls), sc = bestNsPerTile(scoresPass, 5, calls);
    std::printf("  gemm tile %7.1f ns %6.1f GFLOP/s %5.1f %%   scores tile %7.1f ns %6.1f GFLOP/s %5.1f %%   %.3fx\n", g,
                flops / g, 100.0 * flops / g / peak, sc, flops / sc, 100.0 * flops / sc / peak, sc / g);
  }
  // A tile that fell back to raw scores ran a shorter epilogue: the timing would flatter it.
  if (raised) std::printf("  (some tiles raised their shift: not the steady state)\n");
  return 0;
}
