// The bf16 GEMM (gemm_bf16.h) on every path this CPU runs (AMX,
// AVX512_BF16, the widening fallback), against float64 over the same
// bf16-rounded operands, on poisoned outputs; and the rounding itself.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../kernels/bf16.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/kernel_table.h"
#include "../kernels/layernorm.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

uint16_t bitsToBf16(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return floatToBf16(x);
}

// The paths to try: each kernel set this CPU runs, then the widening path (null).
std::vector<const Bf16Kernels*> paths() {
  const Bf16Kernels* list[4];
  const int n = availableBf16Kernels(list, 4);
  std::vector<const Bf16Kernels*> all(list, list + n);
  all.push_back(nullptr);
  return all;
}

const char* pathName(const Bf16Kernels* k) { return k ? k->name : "widen"; }

struct Bf16Case {
  int64_t m, n, k;
  bool transposeA = false, bias = false, accumulate = false, layerNorm = false;
  float alpha = 1;
};

std::string describe(const Bf16Case& c, const Bf16Kernels* path) {
  return std::string(pathName(path)) + " m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" +
         std::to_string(c.k) + (c.transposeA ? " tA" : "") + (c.bias ? " bias" : "") + (c.accumulate ? " acc" : "") +
         (c.layerNorm ? " norm" : "") + " seed " + std::to_string(testSeed());
}

void runBf16Case(const Bf16Case& c, const Bf16Kernels* path, std::mt19937_64& rng) {
  const auto a = randomFloats(rng, static_cast<size_t>(c.m * c.k));  // [m, k], or [k, m] when transposed
  const auto b = randomFloats(rng, static_cast<size_t>(c.k * c.n));  // [k, n]
  const auto bias = randomFloats(rng, static_cast<size_t>(c.n));
  const auto normWeight = randomFloats(rng, static_cast<size_t>(c.k), 0.5f, 1.5f);
  const auto normBias = randomFloats(rng, static_cast<size_t>(c.k));
  const auto start = randomFloats(rng, static_cast<size_t>(c.m * c.n));
  auto out = c.accumulate ? start : poisoned(static_cast<size_t>(c.m * c.n));

  std::vector<uint16_t> packed(static_cast<size_t>(packedBf16Size(c.k, c.n)), 0xFFFF);  // NaN bits
  packWholeBBf16(StridedMatrix{b.data(), c.n, 1}, c.k, c.n, packed.data());

  const RowLayerNorm norm{normWeight.data(), normBias.data(), 1e-5f};
  GemmProblem p{};
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.alpha = c.alpha;
  p.a = c.transposeA ? StridedMatrix{a.data(), 1, c.m} : StridedMatrix{a.data(), c.k, 1};
  p.out = out.data();
  p.outRowStride = c.n;
  p.outColStride = 1;
  p.accumulate = c.accumulate;
  p.packedBBf16 = packed.data();
  p.bias = c.bias ? bias.data() : nullptr;
  p.aLayerNorm = c.layerNorm ? &norm : nullptr;
  gemmBf16(p, path);

  // float64 over the rounded operands: A's rows as the GEMM sees them (after
  // the float LayerNorm, which the float path computes with the same kernel).
  std::vector<float> rowBuf(static_cast<size_t>(c.k));
  std::vector<double> ref(static_cast<size_t>(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t kk = 0; kk < c.k; ++kk) rowBuf[kk] = c.transposeA ? a[kk * c.m + i] : a[i * c.k + kk];
    if (c.layerNorm)
      layerNormRow(kernels(), rowBuf.data(), rowBuf.data(), c.k, norm.weight, norm.bias, norm.eps);
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < c.k; ++kk)
        s += static_cast<double>(roundToBf16(rowBuf[kk])) * roundToBf16(b[kk * c.n + j]);
      s *= c.alpha;
      if (c.accumulate) s += start[i * c.n + j];
      if (c.bias) s += bias[j];
      ref[i * c.n + j] = s;
    }
  }
  const double err = relativeError(out, ref);
  CHECK_MSG(err < 1e-5, describe(c, path) + ": relative error " + std::to_string(err));
}

}  // namespace

TEST(bf16_rounding) {
  CHECK(floatToBf16(1.0f) == 0x3F80);
  CHECK(floatToBf16(-0.0f) == 0x8000);
  CHECK(bitsToBf16(0x3F808000u) == 0x3F80);  // a tie rounds to the even neighbour below
  CHECK(bitsToBf16(0x3F818000u) == 0x3F82);  // and above
  CHECK(bitsToBf16(0x3F808001u) == 0x3F81);
  CHECK(bitsToBf16(0x3F807FFFu) == 0x3F80);
  CHECK(bitsToBf16(0x7F7FFFFFu) == 0x7F80);  // FLT_MAX rounds up to inf
  CHECK(bitsToBf16(0x7F800000u) == 0x7F80);
  CHECK(bitsToBf16(0xFF800000u) == 0xFF80);
  CHECK(bitsToBf16(0x7F800001u) == 0x7FC0);  // a NaN stays NaN, even one whose rounding would carry into inf
  CHECK(bitsToBf16(0xFFFFFFFFu) == 0x7FC0);
  CHECK(bitsToBf16(0x00018000u) == 0x0002);  // subnormals round, not flush
  CHECK(bf16ToFloat(0x3F80) == 1.0f);

  // The vector conversion against the scalar one, on random bit patterns
  // (NaNs, infinities and subnormals among them) and a ragged row end.
  std::mt19937_64 rng(testSeed());
  const Bf16Kernels* list[4];
  const int n = availableBf16Kernels(list, 4);
  for (int p = 0; p < n; ++p) {
    std::vector<float> src(2 * 1000);
    for (float& x : src) {
      const uint32_t bits = static_cast<uint32_t>(rng());
      std::memcpy(&x, &bits, sizeof x);
    }
    std::vector<uint16_t> dst(2 * 1024, 0xABCD);
    list[p]->convertRows(src.data(), 1000, 2, 997, 1024, dst.data());
    int wrong = 0;
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 1024; ++k) {
        const uint16_t want = k < 997 ? floatToBf16(src[r * 1000 + k]) : uint16_t{0};
        wrong += dst[r * 1024 + k] != want;
      }
    CHECK_MSG(wrong == 0, std::string(list[p]->name) + ": " + std::to_string(wrong) + " conversions differ");
  }
}

TEST(bf16_pack_from_bf16) {
  // A matrix already in bf16 packs to the bits its float form rounds to.
  std::mt19937_64 rng(testSeed());
  for (int64_t k : {1, 17, 65, 1100})
    for (int64_t n : {1, 33}) {
      const auto b = randomFloats(rng, static_cast<size_t>(k * n));
      std::vector<uint16_t> bf(b.size());
      for (size_t i = 0; i < b.size(); ++i) bf[i] = floatToBf16(b[i]);
      const auto size = static_cast<size_t>(packedBf16Size(k, n));
      std::vector<uint16_t> fromFloat(size, 1), fromBf16(size, 2);
      packWholeBBf16(StridedMatrix{b.data(), 1, k}, k, n, fromFloat.data());  // b read as [n, k] transposed
      std::vector<uint16_t> bfT(b.size());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) bfT[j * n + i] = bf[i * k + j];
      packWholeBBf16(StridedBf16Matrix{bfT.data(), n, 1}, k, n, fromBf16.data());
      CHECK_MSG(fromFloat == fromBf16, "k" + std::to_string(k) + " n" + std::to_string(n));
    }
}

TEST(bf16_gemm_sizes) {
  std::mt19937_64 rng(testSeed());
  for (const Bf16Kernels* path : paths()) {
    for (int64_t m : {1, 3, 17, 63, 65, 197})
      for (int64_t n : {1, 3, 17, 33, 63, 65})
        for (int64_t k : {1, 17, 64, 197}) runBf16Case({m, n, k}, path, rng);
    for (int64_t k : {3, 63, 65, 768, 1000, 1100}) runBf16Case({65, 97, k}, path, rng);
    runBf16Case({1000, 130, 65}, path, rng);
    runBf16Case({600, 40, 33}, path, rng);  // past one 512-row block of A
  }
}

TEST(bf16_gemm_options) {
  std::mt19937_64 rng(testSeed());
  for (const Bf16Kernels* path : paths()) {
    for (int64_t m : {1, 17, 197}) {
      Bf16Case c{m, 65, 768};
      c.bias = true;
      runBf16Case(c, path, rng);
      c.accumulate = true;
      c.alpha = 0.5f;
      runBf16Case(c, path, rng);
      c = Bf16Case{m, 33, 63};
      c.transposeA = true;
      runBf16Case(c, path, rng);
      c = Bf16Case{m, 40, 768};
      c.layerNorm = true;
      c.bias = true;
      runBf16Case(c, path, rng);
      c = Bf16Case{m, 40, 1100};  // depth blocks: the second accumulates, the bias only once
      c.bias = true;
      c.alpha = -2;
      runBf16Case(c, path, rng);
    }
  }
}

TEST(bf16_gemm_empty) {
  for (const Bf16Kernels* path : paths()) {
    std::vector<float> bias{1, 2, 3};
    std::vector<float> out(6, std::nanf(""));
    std::vector<uint16_t> packed;  // k = 0: nothing packed
    GemmProblem p{};
    p.m = 2;
    p.n = 3;
    p.k = 0;
    p.alpha = 1;
    p.out = out.data();
    p.outRowStride = 3;
    p.outColStride = 1;
    p.packedBBf16 = packed.data();
    p.bias = bias.data();
    gemmBf16(p, path);
    CHECK_MSG(out[0] == 1 && out[5] == 3, pathName(path));
  }
}

