// matmul and packMatrix through the same prepare/run calls the binding uses,
// against a float64 reference, on poisoned outputs.
#include <cstring>
#include <string>

#include "../kernels/gemm.h"
#include "../runtime/thread_pool.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  bool withC, prepacked;
  int64_t batchA, batchB;  // leading batch dim (1 or more; 0 = none)
};

std::string describe(const Case& c) {
  return "m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) +
         (c.ta ? " tA" : "") + (c.tb ? " tB" : "") + (c.withC ? " +c" : "") + (c.prepacked ? " packed" : "") +
         " batch " + std::to_string(c.batchA) + "/" + std::to_string(c.batchB) + " seed " +
         std::to_string(testSeed());
}

void runCase(const Case& c, std::mt19937_64& rng) {
  const int64_t batch = std::max<int64_t>(std::max(c.batchA, c.batchB), 1);
  const Shape aMat = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
  const Shape bMat = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
  Shape aShape = aMat, bShape = bMat, outShape{c.m, c.n};
  if (c.batchA) aShape.insert(aShape.begin(), c.batchA);
  if (c.batchB) bShape.insert(bShape.begin(), c.batchB);
  if (c.batchA || c.batchB) outShape.insert(outShape.begin(), batch);
  const auto a = randomFloats(rng, static_cast<size_t>(elementCount(aShape)));
  const auto b = randomFloats(rng, static_cast<size_t>(elementCount(bShape)));
  const auto cm = randomFloats(rng, static_cast<size_t>(c.m * c.n));  // broadcast over the batch
  auto out = poisoned(static_cast<size_t>(elementCount(outShape)));

  std::vector<float> packed;
  BufferArg bArg = buf(b);
  if (c.prepacked) {
    DescBuilder sizeDesc;
    sizeDesc.shape({c.k, c.n}).flag(false).flag(false);
    int64_t floats = 0;
    CHECK(preparePackedSize(sizeDesc.done(), &floats).ok());
    packed = poisoned(static_cast<size_t>(floats));
    DescBuilder packDesc;
    packDesc.shape(bMat).flag(c.tb).flag(false).flag(false);
    PackCall pack;
    const Status st = preparePackMatrix(packDesc.done(), buf(b), buf(packed), none(), &pack);
    CHECK_MSG(st.ok(), st.message);
    if (!st.ok()) return;
    runCall(pack);
    bArg = buf(packed);
  }
  DescBuilder d;
  d.shape(aShape).shape(c.prepacked ? Shape{c.k, c.n} : bShape).shape(c.withC ? Shape{c.m, c.n} : Shape{});
  d.shape(outShape).flag(c.ta).flag(c.tb && !c.prepacked).number(c.alpha).number(c.beta).flag(c.prepacked).flag(false).flag(false);
  MatmulCall call;
  const Status st = prepareMatmul(d.done(), buf(a), bArg, c.withC ? buf(cm) : none(), buf(out), &call);
  CHECK_MSG(st.ok(), describe(c) + ": " + st.message);
  if (!st.ok()) return;
  runCall(call);

  std::vector<double> ref(out.size()), magnitude(out.size());
  for (int64_t t = 0; t < batch; ++t) {
    const float* ap = a.data() + (c.batchA > 1 ? t : 0) * c.m * c.k;
    const float* bp = b.data() + (c.batchB > 1 ? t : 0) * c.k * c.n;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0, sAbs = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = c.ta ? ap[p * c.m + i] : ap[i * c.k + p];
          const double y = c.tb ? bp[j * c.k + p] : bp[p * c.n + j];
          s += x * y;
          sAbs += std::fabs(x * y);
        }
        double r = c.alpha * s, rAbs = std::fabs(c.alpha) * sAbs;
        if (c.withC) {
          r += static_cast<double>(c.beta) * cm[i * c.n + j];
          rAbs += std::fabs(static_cast<double>(c.beta) * cm[i * c.n + j]);
        }
        ref[(t * c.m + i) * c.n + j] = r;
        magnitude[(t * c.m + i) * c.n + j] = rAbs;
      }
  }
  // ||out - ref|| / ||ref|| < 1e-5, unless the result is so small that
  // cancellation dominates (a 1x1 output is one dot product that may sum to
  // almost zero): then the error must stay within fp32 rounding of the terms'
  // magnitudes, ||out - ref|| / || |a|.|b| || < 1e-6.
  const double err = relativeError(out, ref);
  const double errMagnitude = errorRelativeTo(out, ref, magnitude);
  CHECK_MSG(err < 1e-5 || errMagnitude < 1e-6,
            describe(c) + ": relative error " + std::to_string(err) + ", against magnitudes " +
                std::to_string(errMagnitude));
}

}  // namespace

TEST(matmul_awkward_sizes_every_transpose) {
  std::mt19937_64 rng(testSeed());
  const int64_t sizes[] = {1, 3, 17, 33, 63, 65, 197};
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : {int64_t{1}, int64_t{17}, int64_t{65}}) {
        const bool ta = (m + n + k) % 2 == 1, tb = (m * n + k) % 3 == 0;
        runCase({m, n, k, ta, tb, 1, 0, false, false, 0, 0}, rng);
      }
}

// Row-major products this small take the unpacked path (gemmDirect): every
// tile height up to the widest MR (12) and every width around NR (16, 32),
// on buffers sized exactly, so an edge tile that read past A or B would be an
// ASan report. The same shapes with a transposed A take the packed path.
TEST(matmul_direct_every_edge_tile) {
  std::mt19937_64 rng(testSeed() + 5);
  for (int64_t m = 1; m <= 13; ++m)
    for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 47})
      for (int64_t k : {1, 5, 300}) {
        runCase({m, n, k, false, false, 1, 0, false, false, 0, 0}, rng);
        if (k == 5) runCase({m, n, k, true, false, -0.5f, 1, true, false, 0, 0}, rng);
      }
  // One tile high but large: direct whatever the volume (B read once either way).
  runCase({3, 700, 900, false, false, 1.5f, 0.5f, true, false, 0, 0}, rng);
  runCase({12, 130, 2000, false, false, 1, 0, false, false, 2, 2}, rng);
}

TEST(matmul_narrow_products_of_any_volume) {
  std::mt19937_64 rng(testSeed() + 6);
  // At most two column slivers wide (64 on AVX-512, 32 on AVX2 and the portable
  // table) with B under kGemmNarrowMaxBFloats: direct, row tiles outside, rows
  // split across threads, whatever m * n * k; 65 columns and B past the limit go packed.
  for (int64_t n : {1, 17, 32, 33, 63, 64, 65})
    runCase({1000, n, 1000, false, false, 1, 0, false, false, 0, 0}, rng);
  runCase({1001, 64, 4097, false, false, 0.5f, 1, true, false, 0, 0}, rng);
  runCase({197, 17, 2000, false, false, 1, 0, false, false, 2, 0}, rng);
}

TEST(matmul_alpha_beta_c_and_batches) {
  std::mt19937_64 rng(testSeed() + 1);
  runCase({17, 33, 65, false, true, 0.5f, -2, true, false, 3, 1}, rng);
  runCase({63, 65, 17, true, false, 2, 1, true, false, 1, 4}, rng);
  runCase({5, 7, 9, true, true, 1, 0.25f, true, false, 2, 2}, rng);
  runCase({197, 64, 197, false, true, 0.125f, 0, false, false, 2, 0}, rng);
}

TEST(matmul_prepacked_b_across_cache_blocks) {
  std::mt19937_64 rng(testSeed() + 2);
  // k > kGemmKCSingleMax (1024; then KC = 384 steps) and n > NC (512) cross the
  // packed layout's block boundaries.
  runCase({17, 1000, 400, false, false, 1, 0, false, true, 0, 0}, rng);
  runCase({65, 33, 1100, false, true, 1, 0, false, true, 0, 0}, rng);
  runCase({197, 130, 65, true, false, 1, 1, true, true, 3, 0}, rng);
}

TEST(matmul_prepacked_b_against_a_read_in_place) {
  // A row-major A against a prepacked B is read where it lies, not packed,
  // where the kernel table allows it (gemm.cc, readsAInPlace): when the threads
  // share one A (few rows) and when each takes its own rows (at least 64
  // slivers per thread), with edge rows and columns, alpha and c, and A
  // transposed (packed as before).
  std::mt19937_64 rng(testSeed() + 8);
  runCase({197, 130, 768, false, false, 1, 0, false, true, 0, 0}, rng);
  runCase({61, 37, 1000, false, false, 0.5f, 1, true, true, 0, 0}, rng);
  runCase({1601, 45, 96, false, false, 1, 0.25f, true, true, 0, 0}, rng);
  runCase({1601, 45, 96, true, false, 2, 0, false, true, 0, 0}, rng);
  // One or two rows are read in place at any depth, across depth blocks (k > 1024 steps by 384).
  runCase({1, 1000, 4097, false, false, 1, 0, false, true, 0, 0}, rng);
  runCase({2, 65, 1500, false, false, 0.5f, 1, true, true, 0, 0}, rng);
}

TEST(matmul_larger_than_one_a_block) {
  std::mt19937_64 rng(testSeed() + 3);
  // m > MC (1152) and k > KC: several A blocks and rank-KC updates, threads split the grid.
  runCase({1200, 67, 390, false, false, 1, 0, false, false, 0, 0}, rng);
}

TEST(matmul_empty_dims_write_nothing_or_zeros) {
  // K = 0: out = beta * c (or 0); M or N = 0: nothing to write.
  std::vector<float> a, b, c{1, 2, 3, 4, 5, 6};
  std::vector<float> out = poisoned(6);
  DescBuilder d;
  d.shape({2, 0}).shape({0, 3}).shape({2, 3}).shape({2, 3}).flag(false).flag(false).number(1).number(2).flag(false).flag(false).flag(false);
  MatmulCall call;
  const Status st = prepareMatmul(d.done(), {nullptr, 0, true}, {nullptr, 0, true}, buf(c), buf(out), &call);
  CHECK_MSG(st.ok(), st.message);
  runCall(call);
  for (int i = 0; i < 6; ++i) CHECK(out[i] == 2 * c[i]);
}

TEST(matmul_column_blocks_all_taken_by_one_thread) {
  // Called from inside a parallel task, gemmParallel runs its tasks on this
  // thread alone, one after the other: the first takes its own column run,
  // then all of the other threads' runs from the back (gemm.cc, SliverRun),
  // as a thread does when the host stalls the others; each run's last pieces
  // are narrower than a block.
  if (numThreads() < 2) return;
  std::mt19937_64 rng(testSeed() + 7);
  parallelFor(2, [&](int64_t t) {
    if (t != 0) return;
    runCase({197, 1000, 768, false, false, 1, 1, true, false, 0, 0}, rng);   // B packed per call, whole blocks
    runCase({197, 1000, 768, false, true, 1, 0, false, true, 0, 0}, rng);    // prepacked, blocks fetched ahead
    runCase({197, 300, 1100, false, false, 0.5f, 1, true, false, 0, 0}, rng);  // several depth blocks
  });
}

TEST(few_rows_against_packed_b_keep_the_bits) {
  // One or two rows against a prepacked B (a decode step's projections) give
  // the bits the same rows get inside a 13-row product, whatever path or tile
  // height each takes: across depth blocks (k 1100 > 1024 steps by 384), edge
  // slivers, alpha, a bias, accumulating into out, a transposed A, and A
  // LayerNorm'd as it is packed.
  std::mt19937_64 rng(testSeed() + 53);
  for (int64_t k : {1, 17, 385, 1100})
    for (int64_t n : {1, 33, 65, 200}) {  // 200: four slivers at once, then three of 72 columns (fewRowsPacked)
      const auto a = randomFloats(rng, static_cast<size_t>(13 * k));
      const auto b = randomFloats(rng, static_cast<size_t>(k * n));
      const auto bias = randomFloats(rng, static_cast<size_t>(n));
      const auto start = randomFloats(rng, static_cast<size_t>(13 * n));
      const auto weight = randomFloats(rng, static_cast<size_t>(k), 0.5f, 1.5f);
      const auto shift = randomFloats(rng, static_cast<size_t>(k));
      std::vector<float> at(a.size());  // A transposed: [k, 13]
      for (int64_t i = 0; i < 13; ++i)
        for (int64_t p = 0; p < k; ++p) at[p * 13 + i] = a[i * k + p];
      std::vector<float> packed(static_cast<size_t>(packedBSize(k, n)));
      packWholeB(StridedMatrix{b.data(), n, 1}, k, n, packed.data());
      const RowLayerNorm norm{weight.data(), shift.data(), 1e-5f};
      for (int variant = 0; variant < 4; ++variant) {
        const bool accumulate = variant == 1, transposed = variant == 2, normalized = variant == 3;
        if (normalized && k > kGemmMaxLayerNormK) continue;
        auto product = [&](int64_t m, int64_t row0) {
          std::vector<float> out(start.begin() + row0 * n, start.begin() + (row0 + m) * n);
          GemmProblem p{};
          p.m = m;
          p.n = n;
          p.k = k;
          p.alpha = 0.37f;
          p.a = transposed ? StridedMatrix{at.data() + row0, 1, 13} : StridedMatrix{a.data() + row0 * k, k, 1};
          p.out = out.data();
          p.outRowStride = n;
          p.outColStride = 1;
          p.accumulate = accumulate;
          p.packedB = packed.data();
          p.bias = accumulate ? nullptr : bias.data();
          p.aLayerNorm = normalized ? &norm : nullptr;
          gemmParallel(p);
          return out;
        };
        const auto all = product(13, 0);
        for (int64_t m : {1, 2}) {
          const int64_t row0 = 13 - m;  // the last rows: an edge tile of the 13-row product
          const auto rows = product(m, row0);
          const bool same = std::memcmp(rows.data(), all.data() + row0 * n, rows.size() * sizeof(float)) == 0;
          CHECK_MSG(same, "m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n) +
                              " variant " + std::to_string(variant) + " seed " + std::to_string(testSeed()));
        }
      }
    }
}
