// int8 products (gemm_int8.h): every kernel this CPU runs gives the bits of a
// scalar reference of the scheme, written here from its definition (int64
// sums, std::nearbyint), over awkward shapes, alpha, a bias, accumulating, a
// strided A and non-finite rows; and the result is within int8's error of the
// float64 product.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "../kernels/gemm_int8.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

// max|v| / 127 and the values rounded, as the scheme defines them.
struct Quantized {
  float scale;
  std::vector<int32_t> q;
};
Quantized quantized(const float* v, int64_t n, int64_t stride) {
  float most = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(v[i * stride]);
    most = std::max(most, std::fabs(v[i * stride]));
  }
  Quantized r{0.0f, std::vector<int32_t>(static_cast<size_t>(n), 0)};
  if (!finite) {
    r.scale = std::numeric_limits<float>::quiet_NaN();
    for (auto& x : r.q) x = -127;  // NaN * 0 rounds to NaN, clamped to -127
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(v[i * stride])) r.q[i] = 0;
    return r;
  }
  if (most == 0) return r;
  const float inverse = 127.0f / most;
  r.scale = most / 127.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i * stride] * inverse;
    r.q[i] = static_cast<int32_t>(std::max(-127.0f, std::min(127.0f, std::nearbyint(x))));
  }
  return r;
}

std::vector<float> reference(int64_t m, int64_t n, int64_t k, const float* a, int64_t aRow, int64_t aCol,
                             const std::vector<float>& b, float alpha, const std::vector<float>& start,
                             bool accumulate, const float* bias) {
  std::vector<Quantized> cols;
  for (int64_t j = 0; j < n; ++j) cols.push_back(quantized(b.data() + j, k, n));
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    const Quantized row = quantized(a + i * aRow, k, aCol);
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t d = 0; d < k; ++d) sum += int64_t{row.q[d]} * cols[j].q[d];
      float r = alpha * (static_cast<float>(sum) * (row.scale * cols[j].scale));
      if (accumulate) r = r + start[i * n + j];
      if (bias) r = r + bias[j];
      out[i * n + j] = r;
    }
  }
  return out;
}

bool sameBits(const std::vector<float>& x, const std::vector<float>& y, std::string* where) {
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], 4) != 0 && !(std::isnan(x[i]) && std::isnan(y[i]))) {
      *where = "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " + std::to_string(y[i]);
      return false;
    }
  return true;
}

}  // namespace

TEST(int8_products_give_the_scheme_bits_on_every_kernel) {
  std::mt19937_64 rng(testSeed() + 71);
  const Int8Kernels* kernels[4];
  const int count = availableInt8Kernels(kernels, 4);
  CHECK(count >= 1);
#if defined(__aarch64__)
  // NEON is arm64's baseline: its tile is always among them (and SDOT's where the CPU has it).
  CHECK(std::any_of(kernels, kernels + count, [](const Int8Kernels* k) { return std::string(k->name) == "neon"; }));
  CHECK(cpuHasDotProduct() == std::any_of(kernels, kernels + count, [](const Int8Kernels* k) { return std::string(k->name) == "neon-dotprod"; }));
#endif
  if (std::getenv("MHSA_TEST_VERBOSE"))
    for (int c = 0; c < count; ++c) std::printf("int8 kernels: %s\n", kernels[c]->name);
  int variant = 0;
  for (int64_t m : {1, 2, 3, 13, 65})
    for (int64_t k : {1, 3, 17, 65, 197})
      for (int64_t n : {1, 17, 63, 65, 200}) {
        ++variant;
        const bool accumulate = variant % 3 == 1, withBias = variant % 2 == 0, transposed = variant % 5 == 0;
        const float alpha = variant % 4 == 0 ? 0.37f : 1.0f;
        auto a = randomFloats(rng, static_cast<size_t>(m * k), -3, 3);
        if (variant % 7 == 0) a[static_cast<size_t>((m - 1) * k)] = std::numeric_limits<float>::infinity();
        if (variant % 11 == 0) a[static_cast<size_t>(k - 1)] = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> at(a.size());  // A transposed: [k, m]
        for (int64_t i = 0; i < m; ++i)
          for (int64_t d = 0; d < k; ++d) at[d * m + i] = a[i * k + d];
        const auto b = randomFloats(rng, static_cast<size_t>(k * n));
        const auto bias = randomFloats(rng, static_cast<size_t>(n));
        const auto start = randomFloats(rng, static_cast<size_t>(m * n));
        std::vector<int8_t> packed(static_cast<size_t>(packedInt8Bytes(k, n)));
        packWholeBInt8(StridedMatrix{b.data(), n, 1}, k, n, packed.data());
        const auto want = reference(m, n, k, a.data(), k, 1, b, alpha, start, accumulate, withBias ? bias.data() : nullptr);
        for (int c = 0; c < count; ++c) {
          std::vector<float> out = accumulate ? start : poisoned(static_cast<size_t>(m * n));
          GemmProblem p{};
          p.m = m, p.n = n, p.k = k, p.alpha = alpha;
          p.a = transposed ? StridedMatrix{at.data(), 1, m} : StridedMatrix{a.data(), k, 1};
          p.packedBInt8 = packed.data();
          p.out = out.data(), p.outRowStride = n, p.outColStride = 1;
          p.accumulate = accumulate;
          p.bias = withBias ? bias.data() : nullptr;
          gemmInt8(p, *kernels[c]);
          std::string where;
          CHECK_MSG(sameBits(out, want, &where), std::string(kernels[c]->name) + " " + std::to_string(m) + "x" +
                                                     std::to_string(k) + "x" + std::to_string(n) + ": " + where);
        }
      }
}

TEST(int8_products_are_within_int8_error_of_float64) {
  // N(0,1)-like operands at depth 768: about 1 % relative error (docs/design/int8.md).
  std::mt19937_64 rng(testSeed() + 72);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 17, k = 768, n = 65;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (auto& x : a) x = normal(rng);
  for (auto& x : b) x = normal(rng);
  std::vector<int8_t> packed(static_cast<size_t>(packedInt8Bytes(k, n)));
  packWholeBInt8(StridedMatrix{b.data(), n, 1}, k, n, packed.data());
  std::vector<double> ref(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t d = 0; d < k; ++d) s += double{a[i * k + d]} * b[d * n + j];
      ref[i * n + j] = s;
    }
  auto out = poisoned(static_cast<size_t>(m * n));
  GemmProblem p{};
  p.m = m, p.n = n, p.k = k, p.alpha = 1.0f;
  p.a = StridedMatrix{a.data(), k, 1};
  p.packedBInt8 = packed.data();
  p.out = out.data(), p.outRowStride = n, p.outColStride = 1;
  gemmInt8(p);
  const double err = relativeError(out, ref);
  CHECK_MSG(err < 1.5e-2, "relative error " + std::to_string(err));
}
