// The activations (KernelTable::activate) of the table in use (ctest runs
// this once per ISA path),
// against float64 over a dense grid and the float specials, and the GEMM's
// epilogue (GemmProblem::activation, residual) on each of its paths, against
// act(alpha·A·B + bias) + residual in float64, outputs poisoned first.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <cmath>
#include <limits>
#include <string>

#include "../kernels/gemm.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/gemm_int8.h"
#include "../kernels/kernel_table.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

double reference(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x < 0 ? 0 : x;
    case Activation::kGelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Activation::kGeluTanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::kSilu: return x / (1 + std::exp(-x));
    default: return x;
  }
}

const char* nameOf(Activation a) {
  const char* names[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};
  return names[static_cast<int>(a)];
}

}  // namespace

TEST(activations_against_float64) {
  std::vector<float> x;
  for (double v = -20; v <= 20; v += 1.0 / 1024) x.push_back(static_cast<float>(v));
  for (float v : {1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.0f, -0.0f, 88.0f, -88.0f, 1e6f, -1e6f, 3e38f, -3e38f}) x.push_back(v);
  // A length off the vector widths, so every kernel's tail runs too.
  x.push_back(0.3f);
  for (const KernelTable* kt : {&kernels()}) {
    for (int k = 1; k < kActivationCount; ++k) {
      const Activation a = static_cast<Activation>(k);
      std::vector<float> y = x;
      kt->activate(y.data(), static_cast<int64_t>(y.size()), a);
      double worst = 0, worstAt = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = reference(a, x[i]);
        // The erf GELU to 1e-6 absolute (the bound); the others to 1e-6 absolute or relative,
        // whichever is larger (silu and the tanh form round a few times in float).
        const double allowed = a == Activation::kGelu ? 1e-6 : 1e-6 * std::max(1.0, std::fabs(want));
        const double err = std::fabs(y[i] - want);
        if (!(err <= allowed) && err / allowed > worst) worst = err / allowed, worstAt = x[i];
      }
      CHECK_MSG(worst == 0, std::string(kt->name) + " " + nameOf(a) + ": " + std::to_string(worst) +
                                "x the bound at x = " + std::to_string(worstAt));
      std::vector<float> nan(3, std::numeric_limits<float>::quiet_NaN());
      kt->activate(nan.data(), 3, a);
      CHECK_MSG(std::isnan(nan[0]) && std::isnan(nan[2]), std::string(kt->name) + " " + nameOf(a) + ": NaN must stay NaN");
    }
  }
}

namespace {

struct EpilogueCase {
  int64_t m, n, k;
  bool prepacked, residual, bias;
  int64_t outColStride = 1;  // > 1: a strided output (every outColStride-th column of a wider row)
};

void runEpilogue(const EpilogueCase& c, Activation act, std::mt19937_64& rng) {
  const auto a = randomFloats(rng, static_cast<size_t>(c.m * c.k), -2, 2);
  const auto b = randomFloats(rng, static_cast<size_t>(c.k * c.n), -2, 2);
  const auto bias = randomFloats(rng, static_cast<size_t>(c.n));
  const int64_t resStride = c.n + 3;
  const auto residual = randomFloats(rng, static_cast<size_t>(c.m * resStride));
  const int64_t outRowStride = c.n * c.outColStride;
  auto out = poisoned(static_cast<size_t>(std::max<int64_t>(1, c.m * outRowStride)));
  std::vector<float> packed;
  GemmProblem p{};
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.alpha = 0.75f;
  p.a = StridedMatrix{a.data(), c.k, 1};
  p.b = StridedMatrix{b.data(), c.n, 1};
  if (c.prepacked) {
    packed.resize(static_cast<size_t>(packedBSize(c.k, c.n)));
    packWholeB(p.b, c.k, c.n, packed.data());
    p.packedB = packed.data();
  }
  p.out = out.data();
  p.outRowStride = outRowStride;
  p.outColStride = c.outColStride;
  p.bias = c.bias ? bias.data() : nullptr;
  p.activation = act;
  p.residual = c.residual ? residual.data() : nullptr;
  p.residualRowStride = resStride;
  gemmParallel(p);
  std::vector<float> got;
  std::vector<double> want;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < c.k; ++t) s += static_cast<double>(a[i * c.k + t]) * b[t * c.n + j];
      double y = 0.75 * s + (c.bias ? bias[j] : 0.0);
      y = reference(act, y) + (c.residual ? residual[i * resStride + j] : 0.0);
      want.push_back(y);
      got.push_back(out[i * outRowStride + j * c.outColStride]);
    }
  const std::string what = "m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) +
                           (c.prepacked ? " packed" : "") + (c.residual ? " +residual" : "") + (c.bias ? " +bias" : "") +
                           (c.outColStride > 1 ? " strided out" : "") + " " + nameOf(act) + " seed " + std::to_string(testSeed());
  CHECK_MSG(relativeError(got, want) < 1e-5, what + ": relative error " + std::to_string(relativeError(got, want)));
}

}  // namespace

TEST(gemm_epilogue_on_every_path) {
  std::mt19937_64 rng(testSeed() + 91);
  const EpilogueCase cases[] = {
      {5, 7, 9, false, true, true},          // direct, one tile
      {63, 65, 17, false, true, false},      // direct, edge tiles
      {197, 130, 768, true, true, true},     // packed B, A read in place, columns split over threads
      {197, 300, 1100, false, false, true},  // packed per call, several depth blocks
      {1, 1000, 4097, true, true, true},     // one row at any depth (fewRowsPacked)
      {2, 65, 1500, true, false, false},     // two rows
      {1601, 45, 96, true, true, false},     // rows split over threads
      {1200, 67, 390, false, true, true},    // several A blocks and depth blocks
      {17, 33, 65, false, true, true, 3},    // a strided output
      {3, 5, 0, false, true, true},          // no depth: bias, then the epilogue
  };
  for (const EpilogueCase& c : cases)
    for (int k = 1; k < kActivationCount; ++k) runEpilogue(c, static_cast<Activation>(k), rng);
  runEpilogue({17, 33, 65, true, true, false}, Activation::kNone, rng);  // a residual alone
}

// On every driver (float, bf16 and int8 weights, each kernel this CPU runs),
// the epilogue gives the bits of the same product without it, followed by the
// table's activation and the residual: applied once to every output, after
// its last depth step.
TEST(gemm_epilogue_after_the_last_step_on_every_driver) {
  std::mt19937_64 rng(testSeed() + 92);
  const KernelTable& kt = kernels();
  const Bf16Kernels* bf16[4];
  const int bf16Count = availableBf16Kernels(bf16, 4);
  const Int8Kernels* int8[4];
  const int int8Count = availableInt8Kernels(int8, 4);
  for (const auto& [m, n, k] : {std::array<int64_t, 3>{1, 70, 1100}, {3, 33, 65}, {40, 100, 700}, {197, 64, 1500}}) {
    const auto a = randomFloats(rng, static_cast<size_t>(m * k), -2, 2);
    const auto b = randomFloats(rng, static_cast<size_t>(k * n), -2, 2);
    const auto bias = randomFloats(rng, static_cast<size_t>(n));
    const auto residual = randomFloats(rng, static_cast<size_t>(m * n));
    std::vector<float> packedF(static_cast<size_t>(packedBSize(k, n)));
    packWholeB(StridedMatrix{b.data(), n, 1}, k, n, packedF.data());
    std::vector<uint16_t> packedH(static_cast<size_t>(packedBf16Size(k, n)));
    packWholeBBf16(StridedMatrix{b.data(), n, 1}, k, n, packedH.data());
    std::vector<int8_t> packedQ(static_cast<size_t>(packedInt8Bytes(k, n)));
    packWholeBInt8(StridedMatrix{b.data(), n, 1}, k, n, packedQ.data());
    // Each driver: a name and how it runs p.
    std::vector<std::pair<std::string, std::function<void(GemmProblem&)>>> drivers = {
        {"float packed", [&](GemmProblem& p) { p.packedB = packedF.data(); gemmParallel(p); }},
        {"float unpacked", [&](GemmProblem& p) { gemmParallel(p); }},
        {"bf16 widened", [&](GemmProblem& p) { p.packedBBf16 = packedH.data(); gemmBf16(p, nullptr); }},
    };
    for (int i = 0; i < bf16Count; ++i)
      drivers.push_back({std::string("bf16 ") + bf16[i]->name, [&, i](GemmProblem& p) { p.packedBBf16 = packedH.data(); gemmBf16(p, bf16[i]); }});
    for (int i = 0; i < int8Count; ++i)
      drivers.push_back({std::string("int8 ") + int8[i]->name, [&, i](GemmProblem& p) { p.packedBInt8 = packedQ.data(); gemmInt8(p, *int8[i]); }});
    for (const auto& [name, run] : drivers)
      for (int act = 0; act < kActivationCount; ++act) {
        auto problem = [&](float* out, bool epilogue) {
          GemmProblem p{};
          p.m = m;
          p.n = n;
          p.k = k;
          p.alpha = 1.25f;
          p.a = StridedMatrix{a.data(), k, 1};
          p.b = StridedMatrix{b.data(), n, 1};
          p.out = out;
          p.outRowStride = n;
          p.outColStride = 1;
          p.bias = bias.data();
          if (epilogue) {
            p.activation = static_cast<Activation>(act);
            p.residual = residual.data();
            p.residualRowStride = n;
          }
          return p;
        };
        auto plain = poisoned(static_cast<size_t>(m * n)), fused = poisoned(static_cast<size_t>(m * n));
        GemmProblem p0 = problem(plain.data(), false), p1 = problem(fused.data(), true);
        run(p0);
        run(p1);
        for (int64_t i = 0; i < m; ++i) {
          kt.activate(plain.data() + i * n, n, static_cast<Activation>(act));
          for (int64_t j = 0; j < n; ++j) plain[i * n + j] += residual[i * n + j];
        }
        const bool same = std::memcmp(plain.data(), fused.data(), plain.size() * sizeof(float)) == 0;
        CHECK_MSG(same, name + " m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k) + " " +
                            nameOf(static_cast<Activation>(act)) + ": not the bits of the product, then the epilogue");
      }
  }
}
