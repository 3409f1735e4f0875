// softmax and layerNorm against float64, and the argument checks every
// native entry point relies on: malformed descriptors, lengths, overflowing
// shapes and aliasing are rejected before anything is written.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "../kernels/kernel_table.h"
#include "../kernels/layernorm.h"
#include "../runtime/thread_pool.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

TEST(softmax_rows_against_float64) {
  std::mt19937_64 rng(testSeed() + 20);
  // The last pair is past kSoftmaxStreamMinElements: the streaming path.
  const std::pair<int64_t, int64_t> streamed{1031, 4099};
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{65}, streamed.first}) {
    for (int64_t cols : {1, 3, 17, 63, 65, 197, 1000, 4099}) {
      if ((rows == streamed.first) != (cols == streamed.second)) continue;
      auto x = randomFloats(rng, rows * cols, -20, 20);
      if (rows > 1) std::fill(x.begin() + cols, x.begin() + 2 * cols, -INFINITY);  // a fully masked row
      auto out = poisoned(x.size());
      const float scale = 0.7f;
      DescBuilder d;
      d.shape({rows, cols}).shape({rows, cols}).number(scale);
      SoftmaxCall call;
      const Status st = prepareSoftmax(d.done(), buf(x), buf(out), &call);
      CHECK_MSG(st.ok(), st.message);
      if (!st.ok()) continue;
      runCall(call);
      std::vector<double> ref(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(x[r * cols + c]) * scale);
        for (int64_t c = 0; c < cols; ++c)
          sum += ref[r * cols + c] = mx == -INFINITY ? 0 : std::exp(x[r * cols + c] * static_cast<double>(scale) - mx);
        for (int64_t c = 0; c < cols; ++c) ref[r * cols + c] = sum > 0 ? ref[r * cols + c] / sum : 0;
      }
      const double err = relativeError(out, ref);
      CHECK_MSG(err < 1e-5, "softmax " + std::to_string(rows) + "x" + std::to_string(cols) + " error " +
                                std::to_string(err) + " seed " + std::to_string(testSeed()));
    }
  }
}

// The streaming softmax (outputs of 2^22+ elements) with logits so large that
// scale * max has a rounding error far above 1: the largest term must still
// be exp(0) = 1, not a term the error underflowed (NaN rows) or overflowed
// (zero rows).
TEST(softmax_streaming_huge_logits) {
  const int64_t rows = 64, cols = 65536;
  for (float scale : {0.7f, 0.3f}) {
    std::vector<float> x(static_cast<size_t>(rows * cols), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      x[r * cols] = 1e10f;
      if (r % 2) x[r * cols + 1] = 1e10f;  // odd rows: two equal maxima
    }
    auto out = poisoned(x.size());
    DescBuilder d;
    d.shape({rows, cols}).shape({rows, cols}).number(scale);
    SoftmaxCall call;
    CHECK(prepareSoftmax(d.done(), buf(x), buf(out), &call).ok());
    runCall(call);
    for (int64_t r = 0; r < rows; ++r) {
      const float want = r % 2 ? 0.5f : 1.0f;
      CHECK_MSG(out[r * cols] == want && (r % 2 == 0 || out[r * cols + 1] == want) && out[r * cols + 2] == 0.0f,
                "row " + std::to_string(r) + " scale " + std::to_string(scale) + ": " + std::to_string(out[r * cols]));
    }
  }
}

TEST(layernorm_and_rmsnorm_rows_against_float64) {
  std::mt19937_64 rng(testSeed() + 21);
  for (const bool rms : {false, true})
  for (int64_t dim : {1, 3, 17, 197, 1000}) {
    const int64_t rows = 5;
    auto x = randomFloats(rng, rows * dim, -3, 5);
    const auto w = randomFloats(rng, dim), b = randomFloats(rng, dim);
    auto out = poisoned(x.size());
    DescBuilder d;
    d.shape({rows, dim}).shape({rows, dim}).number(1e-5).flag(rms);
    LayerNormCall call;
    const Status st = prepareLayerNorm(d.done(), buf(x), buf(out), buf(w), buf(b), &call);
    CHECK_MSG(st.ok(), st.message);
    if (!st.ok()) continue;
    runCall(call);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < dim; ++c) mean += x[r * dim + c];
      mean = rms ? 0 : mean / dim;
      for (int64_t c = 0; c < dim; ++c) var += (x[r * dim + c] - mean) * (x[r * dim + c] - mean);
      var /= dim;
      for (int64_t c = 0; c < dim; ++c)
        ref[r * dim + c] = (x[r * dim + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
    }
    const double err = relativeError(out, ref);
    CHECK_MSG(err < 1e-5, (rms ? "rmsNorm dim " : "layerNorm dim ") + std::to_string(dim) + " error " + std::to_string(err));
  }
}

namespace {

// Prepares a 2x3 by 3x2 matmul from raw descriptor values; out must stay poisoned on failure.
Status tryMatmul(const std::vector<double>& values, const std::vector<float>& a, const std::vector<float>& b,
                 std::vector<float>& out) {
  MatmulCall call;
  const Status st = prepareMatmul({values.data(), values.size()}, buf(a), buf(b), none(), buf(out), &call);
  if (st.ok()) runCall(call);
  return st;
}

}  // namespace

namespace {

// LayerNorm of each row of x in float64, as PyTorch defines it.
std::vector<double> layerNormReference(const std::vector<float>& x, int64_t dim, const std::vector<float>& w,
                                       const std::vector<float>& b, double eps) {
  std::vector<double> ref(x.size());
  for (size_t r = 0; r < x.size() / dim; ++r) {
    const float* row = &x[r * dim];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < dim; ++c) mean += row[c];
    mean /= dim;
    for (int64_t c = 0; c < dim; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= dim;
    for (int64_t c = 0; c < dim; ++c) ref[r * dim + c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
  }
  return ref;
}

}  // namespace

// The float kernel's centering (KernelTable::layerNormRow) against float64 where
// a plain float mean would fail: a common offset 10^4 times the spread, values
// whose squares overflow float (the row falls back to float64), in place.
TEST(layernorm_offsets_overflow_and_in_place) {
  std::mt19937_64 rng(testSeed() + 78);
  for (int64_t dim : {1, 3, 17, 197, 1000}) {
    const auto w = randomFloats(rng, dim, 0.5f, 2.0f), b = randomFloats(rng, dim);
    for (const float offset : {1e4f, -3e5f, 0.0f}) {
      for (const float spread : {1.0f, 1e36f}) {
        if (offset != 0.0f && spread > 1.0f) continue;
        auto x = randomFloats(rng, 3 * dim, -spread, spread);
        for (float& v : x) v += offset;
        const auto ref = layerNormReference(x, dim, w, b, 1e-5);
        auto out = poisoned(x.size());
        layerNormRows(x.data(), out.data(), 3, dim, w.data(), b.data(), 1e-5f);
        const double err = relativeError(out, ref);
        CHECK_MSG(err < 1e-5, std::string(kernels().name) + " layerNorm dim " + std::to_string(dim) + " offset " +
                                  std::to_string(offset) + " spread " + std::to_string(spread) + " error " +
                                  std::to_string(err));
        layerNormRows(x.data(), x.data(), 3, dim, w.data(), b.data(), 1e-5f);  // in place: the same values
        CHECK_MSG(x == out, "layerNorm in place differs, dim " + std::to_string(dim));
      }
    }
  }
  std::vector<float> inf = {1.0f, INFINITY, 2.0f}, one(3, 1.0f), zero(3, 0.0f), y(3, 0.0f);
  layerNormRows(inf.data(), y.data(), 1, 3, one.data(), zero.data(), 1e-5f);
  CHECK(std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]));
}

TEST(descriptor_and_shape_rejections) {
  const std::vector<float> a(6, 1), b(6, 1);
  const double nan = std::nan(""), inf = INFINITY;
  const std::vector<double> good = {2, 2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0};
  {
    std::vector<float> out = poisoned(4);
    CHECK(tryMatmul(good, a, b, out).ok());
    CHECK(out[0] == 3 && out[3] == 3);
  }
  const std::vector<std::vector<double>> bad = {
      {},                                               // empty
      {2, 2, 3},                                        // too short
      {2, 2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0, 7}, // extra value
      {nan, 2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},  // NaN rank
      {2, nan, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},  // NaN dim
      {2, -2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},   // negative dim
      {2, 2.5, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},  // fractional dim
      {2, inf, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},  // infinite dim
      {2, 4294967296.0, 4294967296.0, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},  // 2^64 elements
      {33, 2, 3, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},   // rank beyond 32
      {2, 2, 3, 2, 3, 2, 0, 2, 2, 2, 2, 0, 1, 0, 0, 0, 0},    // flag not 0/1
      {2, 2, 3, 2, 2, 3, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0},    // inner dims differ
      {2, 2, 3, 2, 3, 2, 0, 2, 2, 3, 0, 0, 1, 0, 0, 0, 0},    // wrong out shape
      {2, 3, 2, 2, 3, 2, 0, 2, 2, 2, 0, 0, 1, 0, 1, 0, 0},    // packed b of the wrong length
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    std::vector<float> out = poisoned(4);
    const Status st = tryMatmul(bad[i], a, b, out);
    CHECK_MSG(!st.ok(), "bad descriptor " + std::to_string(i) + " accepted");
    CHECK_MSG(st.kind == Status::Kind::Range, "bad descriptor " + std::to_string(i) + ": not a RangeError");
    CHECK_MSG(st.message.rfind("matmul: ", 0) == 0, "message does not name the op: " + st.message);
    CHECK_MSG(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }),
              "bad descriptor " + std::to_string(i) + " wrote to out");
  }
  // a's length disagrees with its shape.
  std::vector<float> out = poisoned(4);
  std::vector<float> shortA(5, 1);
  CHECK(!tryMatmul(good, shortA, b, out).ok());
}

TEST(aliasing_of_out_is_rejected) {
  std::vector<float> storage(64, 1);
  const BufferArg a{storage.data(), 6, true}, b{storage.data() + 6, 6, true};
  const BufferArg overlapping{storage.data() + 4, 4, true}, disjoint{storage.data() + 12, 4, true};
  DescBuilder d;
  d.shape({2, 3}).shape({3, 2}).shape({}).shape({2, 2}).flag(false).flag(false).number(1).number(0).flag(false).flag(false).flag(false);
  MatmulCall call;
  const Status st = prepareMatmul(d.done(), a, b, none(), overlapping, &call);
  CHECK(!st.ok() && st.message.find("must not share memory with a") != std::string::npos);
  CHECK(prepareMatmul(d.done(), a, b, none(), disjoint, &call).ok());
  // softmax in place is allowed; a shifted view of the same buffer is not.
  std::vector<float> x(8, 0.5f);
  DescBuilder s;
  s.shape({2, 3}).shape({2, 3}).number(1);
  SoftmaxCall sc;
  CHECK(prepareSoftmax(s.done(), {x.data(), 6, true}, {x.data(), 6, true}, &sc).ok());
  CHECK(!prepareSoftmax(s.done(), {x.data(), 6, true}, {x.data() + 1, 6, true}, &sc).ok());
}

TEST(attention_rejects_inconsistent_shapes) {
  std::vector<float> q(2 * 3 * 4), k(2 * 3 * 4), v(2 * 3 * 4), out = poisoned(2 * 3 * 4);
  auto attempt = [&](const Shape& ks, double layout, const Shape& mask, int64_t maskLen) {
    DescBuilder d;
    d.number(layout).shape({1, 2, 3, 4}).shape(ks).shape({1, 2, 3, 4}).shape({1, 2, 3, 4});
    d.flag(false).number(0).flag(false).shape(mask).number(0).number(-1).number(-1).flag(false).flag(false);
    std::vector<float> m(maskLen);
    AttentionCall call;
    return prepareAttention(d.done(), buf(q), buf(k), buf(v), buf(out), mask.empty() ? none() : buf(m), none(),
                            none(), none(), &call);
  };
  CHECK(attempt({1, 2, 3, 4}, 0, {}, 0).ok());
  CHECK(!attempt({1, 2, 3, 4}, 3, {}, 0).ok());          // unknown layout
  CHECK(!attempt({1, 2, 3, 4}, std::nan(""), {}, 0).ok());
  CHECK(!attempt({1, 2, 4, 3}, 0, {}, 0).ok());          // head dims differ
  CHECK(!attempt({1, 2, 3, 4}, 0, {4, 3}, 12).ok());     // mask does not broadcast
  CHECK(!attempt({1, 2, 3, 4}, 0, {3, 3}, 8).ok());      // mask length wrong
  CHECK(attempt({1, 2, 3, 4}, 0, {3, 3}, 9).ok());
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
}

TEST(thread_pool_runs_every_task_once_and_rethrows) {
  std::vector<std::atomic<int>> hits(1000);
  parallelFor(1000, [&](int64_t t) { hits[t].fetch_add(1); });
  CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; }));
  bool threw = false;
  try {
    parallelFor(64, [](int64_t t) {
      if (t == 17) throw std::bad_alloc();
    });
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  // The pool still works after a task threw.
  std::atomic<int64_t> sum{0};
  parallelFor(100, [&](int64_t t) { sum += t; });
  CHECK(sum.load() == 4950);
}

TEST(concurrent_callers_share_the_pool_and_stay_correct) {
  // Several threads compute at once (as JS threads and the async dispatcher
  // do): one owns the pool, the others run alone, every result is right.
  const int callers = 4;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(testSeed() + 100 + c);
      const int64_t n = 96;
      const auto a = randomFloats(rng, n * n), b = randomFloats(rng, n * n);
      DescBuilder d;
      d.shape({n, n}).shape({n, n}).shape({}).shape({n, n}).flag(false).flag(false).number(1).number(0).flag(false).flag(false).flag(false);
      std::vector<double> ref(n * n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < n; ++p) s += static_cast<double>(a[i * n + p]) * b[p * n + j];
          ref[i * n + j] = s;
        }
      for (int rep = 0; rep < 20; ++rep) {
        auto out = poisoned(n * n);
        MatmulCall call;
        if (!prepareMatmul(d.done(), buf(a), buf(b), none(), buf(out), &call).ok()) ++wrong;
        runCall(call);
        if (relativeError(out, ref) > 1e-5) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong.load() == 0);
}

TEST(thread_pool_stress_regions_resizes_and_concurrent_callers) {
  // Thousands of short regions back to back (helpers often still spinning, or
  // waking late), resizes in between, and two other threads calling at the
  // same time: every task of every region runs exactly once.
  const int original = numThreads();
  std::atomic<int> wrong{0};
  auto hammer = [&](uint64_t seed, int regions, bool resize) {
    std::mt19937_64 rng(seed);
    for (int r = 0; r < regions; ++r) {
      if (resize && r % 250 == 249) setNumThreads(1 + static_cast<int>(rng() % 4));
      const int64_t tasks = 2 + static_cast<int64_t>(rng() % 40);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      parallelFor(tasks, [&](int64_t t) { hits[static_cast<size_t>(t)].fetch_add(1); });
      for (const auto& h : hits)
        if (h.load() != 1) ++wrong;
    }
  };
  std::thread other1(hammer, testSeed() + 50, 1500, false);
  std::thread other2(hammer, testSeed() + 51, 1500, false);
  hammer(testSeed() + 52, 3000, true);
  other1.join();
  other2.join();
  setNumThreads(original);
  CHECK(wrong.load() == 0);
}

TEST(empty_tensors_with_huge_dims_plan_without_overflow) {
  // No elements, so valid, but the other dims multiply past int64 (UBSan
  // flagged the stride arithmetic before it saturated). Found in review.
  {
    DescBuilder d;
    d.shape({0, 1LL << 40, 1LL << 40}).shape({1LL << 40, 0}).shape({}).shape({0, 1LL << 40, 0});
    d.flag(false).flag(false).number(1).number(0).flag(false).flag(false).flag(false);
    MatmulCall call;
    const Status st = prepareMatmul(d.done(), {nullptr, 0, true}, {nullptr, 0, true}, none(), {nullptr, 0, true}, &call);
    CHECK_MSG(st.ok(), st.message);
    if (st.ok()) runCall(call);
  }
  {
    DescBuilder d;
    const Shape huge{0, 1LL << 40, 1LL << 40, 1LL << 40};
    d.number(0).shape(huge).shape(huge).shape(huge).shape(huge).flag(false).number(0).flag(false).shape({});
    d.number(0).number(-1).number(-1).flag(false).flag(false);
    AttentionCall call;
    const Status st = prepareAttention(d.done(), {nullptr, 0, true}, {nullptr, 0, true}, {nullptr, 0, true},
                                       {nullptr, 0, true}, none(), none(), none(), none(), &call);
    CHECK_MSG(st.ok(), st.message);
    if (st.ok()) runCall(call);
  }
}

TEST(nested_parallel_for_runs_inline) {
  std::atomic<int> inner{0};
  parallelFor(8, [&](int64_t) { parallelFor(16, [&](int64_t) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 8 * 16);
  // Inline runs still finish every task before rethrowing the first error.
  std::atomic<int> ran{0};
  bool threw = false;
  try {
    parallelFor(1, [&](int64_t) {
      parallelFor(10, [&](int64_t t) {
        ran.fetch_add(1);
        if (t == 3) throw std::runtime_error("task 3");
      });
    });
  } catch (const std::runtime_error&) {
    threw = true;
  }
  CHECK(threw);
  CHECK(ran.load() == 10);
}

// The column exp of attention's online softmax (kernels().exp2SubColumns, base
// 2, with intrinsics on AVX2 and AVX-512): error against double exp2 over its
// whole input range, the zero below the normal range, -inf -> 0, NaN kept,
// +inf and overflow, and the column sums. Columns from 1 to 33 wide reach
// every lane mask.
TEST(exp2_sub_columns_accuracy_and_edges) {
  const KernelTable& kt = kernels();
  for (int64_t cols : {1, 15, 16, 17, 33}) {
    const int64_t rows = 4001;
    std::vector<float> s(static_cast<size_t>(rows * cols)), shift(static_cast<size_t>(cols)), sum(static_cast<size_t>(cols), 0.5f);
    for (int64_t i = 0; i < cols; ++i) shift[i] = static_cast<float>(i % 3);  // 0, 1, 2
    // Arguments from -130 to 127.9: below the normal range up to just under overflow.
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < cols; ++i) s[j * cols + i] = -130.0f + 257.9f * static_cast<float>(j) / (rows - 1) + shift[i];
    std::vector<float> x = s;
    kt.exp2SubColumns(s.data(), rows, cols, cols, shift.data(), sum.data());
    double worstUlp = 0;
    for (int64_t i = 0; i < cols; ++i) {
      double want = 0.5;
      for (int64_t j = 0; j < rows; ++j) {
        const float arg = x[j * cols + i] - shift[i];
        const double ref = arg < -126.0f ? 0.0 : std::exp2(static_cast<double>(arg));
        const float got = s[j * cols + i];
        want += got;
        if (ref == 0.0) {
          CHECK_MSG(got == 0.0f, "exp2(" + std::to_string(arg) + ") should be 0, got " + std::to_string(got));
          continue;
        }
        const double ulp = std::ldexp(1.0, std::ilogb(ref) - 23);
        worstUlp = std::max(worstUlp, std::fabs(got - ref) / ulp);
      }
      // The sum adds the column's terms in row order (float); compare with a
      // float64 sum of them. Terms near 2^128 overflow it: then it is +inf.
      if (want < 1e38)
        CHECK_MSG(std::fabs(sum[i] - want) <= 1e-4 * want, "column sum " + std::to_string(i));
      else
        CHECK_MSG(std::isinf(sum[i]) || std::fabs(sum[i] - want) <= 1e-4 * want, "column sum " + std::to_string(i));
    }
    CHECK_MSG(worstUlp <= 3.0, std::string(kt.name) + ": exp2 error " + std::to_string(worstUlp) + " ulp");
  }
  std::vector<float> edge = {-INFINITY, NAN, 0.0f, -126.5f, -126.0f, 127.99f, 128.5f, INFINITY, -1e30f, 1e30f};
  std::vector<float> zero(edge.size(), 0.0f), acc(edge.size(), 0.0f);
  kt.exp2SubColumns(edge.data(), 1, static_cast<int64_t>(edge.size()), static_cast<int64_t>(edge.size()), zero.data(),
                    acc.data());
  CHECK(edge[0] == 0.0f);
  CHECK(std::isnan(edge[1]));
  CHECK(edge[2] == 1.0f);
  CHECK(edge[3] == 0.0f);
  CHECK(edge[4] == std::ldexp(1.0f, -126));
  CHECK(std::isfinite(edge[5]) && edge[5] > 3.3e38f);
  CHECK_MSG(std::isinf(edge[6]) && std::isinf(edge[7]) && edge[7] > 0, std::string(kt.name) + ": exp2 overflow");
  CHECK(edge[8] == 0.0f);
  CHECK(std::isinf(edge[9]));
}

// Attention's scores tile with the exp in its epilogue (KernelTable::scoresExp2Tile;
// the AVX-512 and AVX2 tables have one, the portable table runs the column passes, which
// the test above covers): every rows x cols edge, A as a packed sliver and as
// rows in place, against float64. The shift it sets is the column max; the
// exps are 2^(t - shift - kScoresExp2ShiftMargin), up to
// kScoresExp2ShiftMargin + kScoresExp2Headroom above the shift; past
// that the tile is left raw and shift and sums untouched. Lanes past cols
// stay unwritten.
TEST(scores_exp2_tile_against_float64) {
  const KernelTable& kt = kernels();
  if (!kt.scoresExp2Tile) return;
  std::mt19937_64 rng(testSeed() + 31);
  const int64_t kc = 37, lda = kc + 3, ldc = 40;
  const float alpha = 1.7f, sumStart = 0.25f, unset = -12345.0f;
  for (int rows = 1; rows <= kt.mr; ++rows)
    // 8 | 9 and 16 | 17: where a tile goes from one register to two (AVX2: 8
    // lanes each; AVX-512: a ymm, then one zmm, then two).
    for (int cols : {1, 5, 8, 9, 12, 16, 17, 31, 32}) {
      if (cols > kt.nr) continue;
      for (bool packed : {true, false}) {
        const std::string where = std::string(packed ? "packed" : "rows") + " " + std::to_string(rows) + "x" +
                                  std::to_string(cols);
        const auto kRows = randomFloats(rng, static_cast<size_t>(rows * lda), -1, 1);
        std::vector<float> sliver(static_cast<size_t>(kc * kt.mr), 0.0f);
        for (int i = 0; i < rows; ++i)
          for (int64_t k = 0; k < kc; ++k) sliver[k * kt.mr + i] = kRows[i * lda + k];
        const auto q = randomFloats(rng, static_cast<size_t>(kc * kt.nr), -1, 1);
        // The scores in float64, and a bound on the float error of the
        // kernel's own (kc fused multiply-adds, then alpha).
        std::vector<double> t(static_cast<size_t>(rows * cols)), tError(t.size());
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < cols; ++j) {
            double acc = 0, size = 0;
            for (int64_t k = 0; k < kc; ++k) {
              acc += double(kRows[i * lda + k]) * q[k * kt.nr + j];
              size += std::fabs(double(kRows[i * lda + k]) * q[k * kt.nr + j]);
            }
            t[i * cols + j] = alpha * acc;
            tError[i * cols + j] = (kc + 1) * std::ldexp(alpha * size, -24);
          }
        auto call = [&](std::vector<float>& c, std::vector<float>& shift, std::vector<float>& sum, bool setShift) {
          return kt.scoresExp2Tile(kc, packed ? sliver.data() : kRows.data(), packed ? 1 : lda, packed ? kt.mr : 1,
                                   q.data(), c.data(), ldc, alpha, 0.0f, rows, cols, shift.data(), setShift, sum.data());
        };
        // Checks c, shift and sum after a successful call against float64.
        auto checkExps = [&](const std::vector<float>& c, const std::vector<float>& shift,
                             const std::vector<float>& sum) {
          for (int j = 0; j < kt.nr; ++j) {
            if (j >= cols) {
              CHECK_MSG(shift[j] == unset && sum[j] == sumStart, where + ": a lane past cols was written");
              continue;
            }
            float tileSum = 0.0f;  // the exps as stored, added in row order, then into the sum
            for (int i = 0; i < rows; ++i) {
              // The exp's own error (3 ulp), plus the float errors of its
              // argument: the score's, and the subtraction's (up to 56 from
              // zero in the second call), each scaled by ln 2.
              const double arg = t[i * cols + j] - shift[j], e = std::exp2(arg - kScoresExp2ShiftMargin);
              const double argError = tError[i * cols + j] + std::ldexp(std::fabs(arg), -24);
              tileSum += c[i * ldc + j];
              CHECK_MSG(std::fabs(c[i * ldc + j] - e) <= (4e-7 + 0.7 * argError) * e,
                        where + ": exp at (" + std::to_string(i) + ", " + std::to_string(j) + "): " +
                            std::to_string(c[i * ldc + j] / e - 1) + " relative");
            }
            CHECK_MSG(sum[j] == sumStart + tileSum, where + ": column sum " + std::to_string(j));
          }
          for (int i = 0; i < rows; ++i)
            for (int j = cols; j < ldc; ++j) CHECK_MSG(std::isnan(c[i * ldc + j]), where + ": wrote past cols");
        };

        // The first tile of a column sets its shift: the largest score.
        std::vector<float> c = poisoned(static_cast<size_t>(rows * ldc));
        std::vector<float> shift(static_cast<size_t>(kt.nr), unset), sum(static_cast<size_t>(kt.nr), sumStart);
        CHECK_MSG(call(c, shift, sum, true), where + ": setShift must succeed on finite scores");
        for (int j = 0; j < cols; ++j) {
          double top = -INFINITY;
          for (int i = 0; i < rows; ++i) top = std::max(top, t[i * cols + j]);
          CHECK_MSG(std::fabs(shift[j] - top) <= 1e-5 * (1 + std::fabs(top)), where + ": shift " + std::to_string(j));
        }
        checkExps(c, shift, sum);

        // A given shift up to the headroom below the scores: exps up to 2^8.
        for (int j = 0; j < cols; ++j) shift[j] -= kScoresExp2ShiftMargin + kScoresExp2Headroom - 0.5f;
        std::fill(sum.begin(), sum.end(), sumStart);
        c = poisoned(c.size());
        CHECK_MSG(call(c, shift, sum, false), where + ": within the headroom must succeed");
        checkExps(c, shift, sum);

        // One column further below: the raw tile, shift and sum as they were.
        const std::vector<float> sumBefore = sum;
        shift[cols - 1] -= 2.0f;
        const float lowered = shift[cols - 1];
        c = poisoned(c.size());
        CHECK_MSG(!call(c, shift, sum, false), where + ": past the headroom must fail");
        CHECK_MSG(shift[cols - 1] == lowered && sum == sumBefore, where + ": a failed tile changed shift or sum");
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < ldc; ++j) {
            const float got = c[i * ldc + j];
            if (j >= cols) {
              CHECK_MSG(std::isnan(got), where + ": wrote past cols");
              continue;
            }
            const double want = t[i * cols + j];
            CHECK_MSG(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)), where + ": raw score");
          }
      }
    }
}

// The tile's general-path exits for values no finite score takes: a column
// whose shift is -inf (its scores so far all -inf) and a NaN score must leave
// the raw tile and return false (unordered compare), and a +inf score too.
// And absMaxRows, V's range check: every tail width, NaN ignored.
TEST(scores_exp2_tile_nonfinite_and_abs_max) {
  const KernelTable& kt = kernels();
  if (!kt.scoresExp2Tile) return;
  const int64_t kc = 3;
  std::vector<float> sliver(static_cast<size_t>(kc * kt.mr), 0.5f), q(static_cast<size_t>(kc * kt.nr), 0.25f);
  // Scores are 0.375 unless row 2 is made special (its K value at depth 1).
  struct Case {
    const char* what;
    float rowTwo;  // K's value that row 2 gets (0.5: none)
    float shiftValue;
    bool setShift;
    bool allRowsNegInf;
  };
  const Case cases[] = {
      {"finite scores under a -inf shift", 0.5f, -INFINITY, false, false},
      {"a NaN score", NAN, 0.0f, false, false},
      {"a +inf score", INFINITY, 0.0f, false, false},
      {"a first tile of only -inf", 0.5f, 0.0f, true, true},
      {"a NaN score in a first tile", NAN, 0.0f, true, false},
  };
  for (const Case& t : cases) {
    std::vector<float> k = sliver;
    k[1 * kt.mr + 2] = t.rowTwo;
    if (t.allRowsNegInf)
      for (int i = 0; i < kt.mr; ++i) k[i] = -INFINITY;
    std::vector<float> c = poisoned(static_cast<size_t>(kt.mr * kt.nr));
    std::vector<float> shift(static_cast<size_t>(kt.nr), t.shiftValue), sum(static_cast<size_t>(kt.nr), 1.0f);
    const std::vector<float> shiftBefore = shift, sumBefore = sum;
    const bool ok = kt.scoresExp2Tile(kc, k.data(), 1, kt.mr, q.data(), c.data(), kt.nr, 1.0f, 0.0f, kt.mr, kt.nr,
                                      shift.data(), t.setShift, sum.data());
    CHECK_MSG(!ok, std::string(t.what) + ": should take the general path");
    CHECK_MSG(shift == shiftBefore && sum == sumBefore, std::string(t.what) + ": a failed tile changed shift or sum");
  }
  // A -inf score under a finite shift is just a zero term.
  {
    std::vector<float> k = sliver;
    k[2] = -INFINITY;
    std::vector<float> c = poisoned(static_cast<size_t>(kt.mr * kt.nr)), shift(static_cast<size_t>(kt.nr), 0.0f),
                       sum(static_cast<size_t>(kt.nr), 0.0f);
    CHECK(kt.scoresExp2Tile(kc, k.data(), 1, kt.mr, q.data(), c.data(), kt.nr, 1.0f, 0.0f, kt.mr, kt.nr, shift.data(), false,
                            sum.data()));
    for (int j = 0; j < kt.nr; ++j) CHECK(c[2 * kt.nr + j] == 0.0f && std::isfinite(sum[j]));
  }
  std::mt19937_64 rng(testSeed() + 37);
  for (int64_t cols : {1, 15, 16, 17, 33, 64}) {
    const int64_t rows = 5, ld = cols + 7;
    auto x = randomFloats(rng, static_cast<size_t>(rows * ld), -3, 3);
    x[static_cast<size_t>(rows * ld - 1)] = 1e30f;  // past the last row's cols: must not be seen
    x[3] = NAN;
    float want = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!std::isnan(x[i * ld + j])) want = std::max(want, std::fabs(x[i * ld + j]));
    CHECK_MSG(kt.absMaxRows(x.data(), rows, cols, ld) == want, "absMaxRows cols " + std::to_string(cols));
  }
  CHECK(kt.absMaxRows(nullptr, 0, 16, 16) == 0.0f);
}

// The row pieces of softmax (kernels().rowMax and expSubSum, intrinsics on
// AVX2 and AVX-512): every tail length up to 33 and a long row, the exact
// maximum, exp within 3 ulp of float64 over the range softmax feeds it, the
// returned sum, and a sentinel past the end that must stay unwritten.
TEST(row_max_and_exp_sub_sum_tails) {
  const KernelTable& kt = kernels();
  const float sentinel = -12345.0f;
  for (int64_t n = 1; n <= 1000; n = n < 33 ? n + 1 : n * 3) {
    const std::string at = std::string(kt.name) + ", n=" + std::to_string(n);
    std::vector<float> x(static_cast<size_t>(n) + 1), y(static_cast<size_t>(n) + 1);
    auto spread = [&](float lo, float hi) {
      for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>((i * 7919) % n) / static_cast<float>(n);
      x[n] = 1e30f;  // past the end: a maximum that must not be seen
    };
    auto rowMax = [&] {
      float want = -INFINITY;
      for (int64_t i = 0; i < n; ++i) want = std::max(want, x[i]);
      CHECK_MSG(kt.rowMax(x.data(), n) == want, "rowMax, " + at);
      return want;
    };
    // `slack`: ulps allowed per unit of |x - shift| on top of exp's own 3,
    // for rows where forming x - shift rounds (|arg| * 2^-24 in the argument
    // is |arg| / 2 ulp of exp).
    auto check = [&](float shift, double slack) {
      std::fill(y.begin(), y.end(), sentinel);
      const float sum = kt.expSubSum(x.data(), y.data(), n, shift);
      double wantSum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double arg = static_cast<double>(x[i]) - shift;
        wantSum += y[i];
        if (arg < -87.33654475 - 1e-4) {
          CHECK_MSG(y[i] == 0.0f, "exp(" + std::to_string(arg) + ") not 0, " + at);
          continue;
        }
        const double ref = std::exp(arg);
        const double ulps = std::fabs(y[i] - ref) / std::ldexp(1.0, std::ilogb(ref) - 23);
        CHECK_MSG(ulps <= 3.0 + slack * std::fabs(arg),
                  "exp(" + std::to_string(arg) + ") off by " + std::to_string(ulps) + " ulp, " + at);
      }
      CHECK_MSG(std::isfinite(sum) && std::fabs(sum - wantSum) <= 1e-5 * wantSum, "sum, " + at);
      CHECK_MSG(y[n] == sentinel, "wrote past the end, " + at);
    };
    spread(-100.0f, 0.0f);  // shift 0: exact arguments down to past the zero cut-off
    rowMax();
    check(0.0f, 0.0);
    spread(-90.0f, 80.0f);  // shifted by the row's max, as softmax calls it
    check(rowMax(), 1.0);
    // Far below zero: the lanes past n in a masked tail see 0 - shift = +1e30,
    // which must reach neither y nor the sum.
    spread(-2e30f, -1e30f);
    check(rowMax(), 0.0);
  }
}

#if defined(__unix__) || defined(__APPLE__)
namespace {

// n floats ending right before an unreadable page: a kernel that reads one
// float past its operand faults (AddressSanitizer does not see inside the
// AVX2 table's inline assembly, avx2_asm_tile.h). Unmapped when destroyed.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (n * sizeof(float) + page - 1) / page * page + page;
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(base_ != MAP_FAILED);
    mprotect(static_cast<char*>(base_) + bytes_ - page, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(static_cast<char*>(base_) + bytes_ - page) - n;
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() { return data_; }

 private:
  void* base_;
  size_t bytes_;
  float* data_;
};

}  // namespace

// The micro-kernels (packed and direct forms) of the table in use, every
// row count, edge and full column counts, depths around the assembly tiles'
// passes (avx2_asm_tile.h: 8 k steps, 4 with a strided A), A's k steps 1x
// and 3x mr apart, each operand ending at an unreadable page. The SIMD
// tables sum each element with one FMA per k step in k order, then scale,
// add c and the bias as separate roundings (kernel_table.h): exactly what
// the scalar reference below computes, so they must match it bit for bit.
TEST(micro_kernels_exact_sums_and_operand_bounds) {
  const KernelTable& kt = kernels();
  const std::string name = kt.name;
  const bool exact = name == "avx2" || name == "avx512";
  const int mr = kt.mr, nr = kt.nr;
  std::mt19937_64 rng(testSeed());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto fill = [&](float* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = dist(rng);
  };
  const int64_t ldc = nr + 3;
  for (int64_t kc : {1, 7, 8, 15, 16, 17, 23, 24, 31, 63, 64, 65, 197})
    for (int64_t aStep : {int64_t{mr}, int64_t{3 * mr}})
      for (int rows = 1; rows <= mr; ++rows)
        for (int cols : {1, nr - 1, nr})
          for (int variant = 0; variant < 4; ++variant) {
            const bool accumulate = variant & 1, withBias = variant & 2;
            const float alpha = variant == 3 ? 0.37f : 1.0f;
            const std::string where = name + " kc " + std::to_string(kc) + " aStep " + std::to_string(aStep) +
                                      " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                      " variant " + std::to_string(variant);
            const size_t aFloats = static_cast<size_t>((kc - 1) * aStep + mr);
            const size_t bFloats = static_cast<size_t>(kc * nr);
            GuardedFloats a(aFloats), b(bFloats), bias(static_cast<size_t>(cols)),
                c(static_cast<size_t>((rows - 1) * ldc + cols)), c2(static_cast<size_t>((rows - 1) * ldc + cols));
            fill(a.data(), aFloats);
            fill(b.data(), bFloats);
            fill(bias.data(), static_cast<size_t>(cols));
            fill(c.data(), static_cast<size_t>((rows - 1) * ldc + cols));
            std::copy(c.data(), c.data() + (rows - 1) * ldc + cols, c2.data());
            std::vector<float> want(static_cast<size_t>(rows * cols));
            for (int i = 0; i < rows; ++i)
              for (int j = 0; j < cols; ++j) {
                float s = 0.0f;
                for (int64_t k = 0; k < kc; ++k) s = std::fma(a.data()[k * aStep + i], b.data()[k * nr + j], s);
                float v = alpha * s;
                if (accumulate) v = v + c.data()[i * ldc + j];
                if (withBias) v = v + bias.data()[j];
                want[static_cast<size_t>(i * cols + j)] = v;
              }
            const float* biasPtr = withBias ? bias.data() : nullptr;
            // The packed form (a prefetch request for a line of B when aStep is mr, as gemmMacroKernel makes).
            kt.microKernel(kc, a.data(), aStep, b.data(), nr, c.data(), ldc, alpha, accumulate, rows, cols, biasPtr,
                           aStep == mr ? b.data() : nullptr);
            // The direct form: A's rows in place (row i at a + i * lda), B's rows nr floats apart.
            const int64_t lda = kc + 2;
            GuardedFloats ad(static_cast<size_t>((rows - 1) * lda + kc));
            for (int i = 0; i < rows; ++i)
              for (int64_t k = 0; k < kc; ++k) ad.data()[i * lda + k] = a.data()[k * aStep + i];
            kt.microKernelDirect(kc, ad.data(), lda, b.data(), nr, c2.data(), ldc, alpha, accumulate, rows, cols,
                                 biasPtr);
            bool same = true, close = true;
            for (int i = 0; i < rows; ++i)
              for (int j = 0; j < cols; ++j) {
                const float w = want[static_cast<size_t>(i * cols + j)];
                for (const float got : {c.data()[i * ldc + j], c2.data()[i * ldc + j]}) {
                  same = same && got == w;
                  close = close && std::fabs(got - w) <= 1e-5f * (1.0f + std::fabs(w)) * static_cast<float>(kc);
                }
              }
            CHECK_MSG(exact ? same : close, where);
          }
}

// The table's LayerNorm row (KernelTable::layerNormRow, through layerNormRow)
// at every tail length of its vectors and beyond, with and without weight and
// bias, each operand ending at an unreadable page: masked tails must not read
// or write past n. Against float64 (layerNormReference), per row.
TEST(layernorm_row_tails_and_operand_bounds) {
  const KernelTable& kt = kernels();
  std::mt19937_64 rng(testSeed() + 91);
  std::vector<int64_t> dims;
  for (int64_t n = 1; n <= 40; ++n) dims.push_back(n);
  for (int64_t n : {63, 64, 65, 768, 1000}) dims.push_back(n);
  for (const int64_t n : dims)
    for (int affine = 0; affine < 4; ++affine) {
      const bool withWeight = affine & 1, withBias = affine & 2;
      const size_t count = static_cast<size_t>(n);
      GuardedFloats x(count), y(count), w(count), b(count);
      const auto xs = randomFloats(rng, n, -2.0f, 2.0f), ws = randomFloats(rng, n, 0.5f, 2.0f),
                 bs = randomFloats(rng, n);
      std::copy(xs.begin(), xs.end(), x.data());
      std::copy(ws.begin(), ws.end(), w.data());
      std::copy(bs.begin(), bs.end(), b.data());
      std::fill(y.data(), y.data() + n, std::numeric_limits<float>::quiet_NaN());
      layerNormRow(kt, x.data(), y.data(), n, withWeight ? w.data() : nullptr, withBias ? b.data() : nullptr, 1e-5f);
      const auto ref = layerNormReference(xs, n, withWeight ? ws : std::vector<float>(count, 1.0f),
                                          withBias ? bs : std::vector<float>(count, 0.0f), 1e-5);
      const double err = relativeError(std::vector<float>(y.data(), y.data() + n), ref);
      CHECK_MSG(err < 1e-5, std::string(kt.name) + " layerNorm row n " + std::to_string(n) + " affine " +
                                std::to_string(affine) + " error " + std::to_string(err));
    }
}
#endif
