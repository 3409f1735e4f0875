// attention through prepareAttention/runCall against a float64 reference:
// every layout, causal, masks, key padding, GQA, a different V head dim,
// returned weights, and key counts beyond one online-softmax block.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "../kernels/bf16.h"
#include "../kernels/gemm_int8.h"
#include "../kernels/kernel_table.h"

#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

struct Case {
  int layout;  // 0 bhsd, 1 bshd, 2 bhds
  int64_t batch, heads, kvHeads, seqQ, seqKV, dim, dimV;
  bool causal, mask, padding, weights;
  double softcap = 0;                         // 0: none
  int64_t windowLeft = -1, windowRight = -1;  // -1: unlimited
  bool sinks = false;
  // keyLengths: entry 0 has every key, entry 1 none, the others a random count;
  // the keys past an entry's length are NaN, so reading one shows.
  bool ragged = false;
  bool bf16 = false;  // k and v in bf16 (kvBf16); the reference uses the same rounded values
  bool int8 = false;  // k and v in int8 with row scales (kvInt8); the reference uses the dequantized values
  // int8 only: key 7's V row holds a NaN, so its scale is NaN. Where its weight is 0 (the mask's
  // -inf at query row 0) it is not read; elsewhere that query's output is NaN.
  bool nanValueRow = false;
};

std::string describe(const Case& c) {
  return "layout " + std::to_string(c.layout) + " B" + std::to_string(c.batch) + " H" + std::to_string(c.heads) +
         "/" + std::to_string(c.kvHeads) + " Sq" + std::to_string(c.seqQ) + " Skv" + std::to_string(c.seqKV) +
         " D" + std::to_string(c.dim) + "/" + std::to_string(c.dimV) + (c.causal ? " causal" : "") +
         (c.mask ? " mask" : "") + (c.padding ? " padding" : "") + (c.weights ? " weights" : "") +
         (c.softcap ? " softcap " + std::to_string(c.softcap) : "") +
         (c.windowLeft >= 0 || c.windowRight >= 0
              ? " window " + std::to_string(c.windowLeft) + "," + std::to_string(c.windowRight)
              : "") +
         (c.sinks ? " sinks" : "") + (c.ragged ? " keyLengths" : "") + (c.bf16 ? " bf16" : "") + (c.int8 ? " int8" : "") + " seed " +
         std::to_string(testSeed());
}

// Shape in the layout's order, and the flat index of logical (b, h, s, d).
Shape layoutShape(int layout, int64_t b, int64_t h, int64_t s, int64_t d) {
  if (layout == 1) return {b, s, h, d};
  if (layout == 2) return {b, h, d, s};
  return {b, h, s, d};
}
int64_t at(int layout, const Shape& sh, int64_t b, int64_t h, int64_t s, int64_t d) {
  if (layout == 1) return ((b * sh[1] + s) * sh[2] + h) * sh[3] + d;
  if (layout == 2) return ((b * sh[1] + h) * sh[2] + d) * sh[3] + s;
  return ((b * sh[1] + h) * sh[2] + s) * sh[3] + d;
}

// A query row as the integer decode path holds it, written from its
// definition (gemm_int8.h, quantizeQueryInt16): int16 values, max|q| at the
// largest level whose sums against d int8 values fit int32, times the scale.
void asInt16Query(float* q, int64_t d) {
  float most = 0.0f;
  for (int64_t e = 0; e < d; ++e) most = std::max(most, std::fabs(q[e]));
  if (most == 0.0f) return;
  const float levels = static_cast<float>(std::min<int64_t>(32767, 2147483647 / (127 * d)));
  const float scale = most / 127.0f * (127.0f / levels), inverse = 127.0f / most * (levels / 127.0f);
  for (int64_t e = 0; e < d; ++e) q[e] = std::clamp(std::nearbyint(q[e] * inverse), -levels, levels) * scale;
}

void runCase(const Case& c, std::mt19937_64& rng) {
  const Shape qs = layoutShape(c.layout, c.batch, c.heads, c.seqQ, c.dim);
  const Shape ks = layoutShape(c.layout, c.batch, c.kvHeads, c.seqKV, c.dim);
  const Shape vs = layoutShape(c.layout, c.batch, c.kvHeads, c.seqKV, c.dimV);
  const Shape os = layoutShape(c.layout, c.batch, c.heads, c.seqQ, c.dimV);
  auto q = randomFloats(rng, elementCount(qs), -2, 2);
  auto k = randomFloats(rng, elementCount(ks), -2, 2);
  auto v = randomFloats(rng, elementCount(vs));
  std::vector<int32_t> lengths(c.batch, static_cast<int32_t>(c.seqKV));
  if (c.ragged)
    for (int64_t b = 0; b < c.batch; ++b) {
      lengths[b] = b == 0 ? static_cast<int32_t>(c.seqKV) : b == 1 ? 0 : static_cast<int32_t>(rng() % (c.seqKV + 1));
      for (int64_t g = 0; g < c.kvHeads; ++g)
        for (int64_t j = lengths[b]; j < c.seqKV; ++j) {
          for (int64_t e = 0; e < c.dim; ++e) k[at(c.layout, ks, b, g, j, e)] = NAN;
          for (int64_t e = 0; e < c.dimV; ++e) v[at(c.layout, vs, b, g, j, e)] = NAN;
        }
    }
  std::vector<uint16_t> kHalves, vHalves;
  if (c.bf16) {
    for (auto* x : {&k, &v})
      for (float& e : *x) e = roundToBf16(e);
    for (float e : k) kHalves.push_back(floatToBf16(e));
    for (float e : v) vHalves.push_back(floatToBf16(e));
  }
  // int8: each row (contiguous in layouts 0 and 1) quantized, and the reference's
  // values replaced by what the rows hold: value times scale, as the tiled path widens them.
  std::vector<int8_t> kBytes, vBytes;
  std::vector<float> kScales, vScales;
  auto quantizeRows = [](std::vector<float>& x, int64_t width, std::vector<int8_t>& bytes, std::vector<float>& scales) {
    bytes.assign(x.size(), 0);
    scales.assign(width == 0 ? 0 : x.size() / static_cast<size_t>(width), 0.0f);
    for (size_t r = 0; r < scales.size(); ++r) {
      scales[r] = quantizeInt8(x.data() + r * width, width, bytes.data() + r * width);
      for (int64_t e = 0; e < width; ++e) x[r * width + e] = static_cast<float>(bytes[r * width + e]) * scales[r];
    }
  };
  if (c.nanValueRow && c.seqKV > 7)
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t g = 0; g < c.kvHeads; ++g) v[at(c.layout, vs, b, g, 7, c.dimV / 2)] = NAN;
  if (c.int8) {
    quantizeRows(k, c.dim, kBytes, kScales);
    quantizeRows(v, c.dimV, vBytes, vScales);
    // Where the decode path takes integer dots (Int8Kernels::decodeScores), it holds each query
    // row in int16: the reference takes those values too.
    if (int8Kernels().decodeScores && c.seqQ <= kAttentionDecodeMaxQueries)
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.heads; ++h)
          for (int64_t i = 0; i < c.seqQ; ++i) asInt16Query(&q[at(c.layout, qs, b, h, i, 0)], c.dim);
  }
  auto kvArg = [&](const std::vector<float>& f, const std::vector<uint16_t>& h) {
    if (c.int8) {
      const std::vector<int8_t>& bytes = &f == &k ? kBytes : vBytes;
      BufferArg a{bytes.data(), static_cast<int64_t>(bytes.size()), true};
      a.int8 = true;
      return a;
    }
    if (!c.bf16) return buf(f);
    BufferArg a{h.data(), static_cast<int64_t>(h.size()), true};
    a.bf16 = true;
    return a;
  };
  // Mask [seqQ, seqKV], broadcast over batch and heads; some -inf entries.
  std::vector<float> mask = randomFloats(rng, c.seqQ * c.seqKV, -3, 1);
  for (size_t i = 0; i < mask.size(); i += 7) mask[i] = -INFINITY;
  std::vector<uint8_t> pad(c.batch * c.seqKV);
  for (size_t i = 0; i < pad.size(); ++i) pad[i] = (i % 5 == 3) ? 1 : 0;
  auto out = poisoned(elementCount(os));
  auto weights = poisoned(c.batch * c.heads * c.seqQ * c.seqKV);

  DescBuilder d;
  d.number(c.layout).shape(qs).shape(ks).shape(vs).shape(os).flag(false).number(0).flag(c.causal);
  d.shape(c.mask ? Shape{c.seqQ, c.seqKV} : Shape{});
  d.number(c.softcap).number(static_cast<double>(c.windowLeft)).number(static_cast<double>(c.windowRight));
  d.flag(c.bf16).flag(c.int8);
  const auto sinks = randomFloats(rng, c.heads, -1, 3);
  AttentionCall call;
  const Status st = prepareAttention(d.done(), buf(q), kvArg(k, kHalves), kvArg(v, vHalves), buf(out), c.mask ? buf(mask) : none(),
                                     c.padding ? bytes(pad) : none(), c.weights ? buf(weights) : none(),
                                     c.sinks ? buf(sinks) : none(),
                                     c.ragged ? BufferArg{lengths.data(), c.batch, true} : none(), &call,
                                     c.int8 ? buf(kScales) : none(), c.int8 ? buf(vScales) : none());
  CHECK_MSG(st.ok(), describe(c) + ": " + st.message);
  if (!st.ok()) return;
  runCall(call);

  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const int64_t group = c.heads / c.kvHeads;
  std::vector<double> ref(out.size()), refW(weights.size());
  std::vector<double> p(c.seqKV);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.seqQ; ++i) {
        const int64_t g = h / group;
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.seqKV; ++j) {
          if (j >= lengths[b]) {
            p[j] = -INFINITY;
            continue;
          }
          double s = 0;
          for (int64_t e = 0; e < c.dim; ++e)
            s += static_cast<double>(q[at(c.layout, qs, b, h, i, e)]) * k[at(c.layout, ks, b, g, j, e)];
          s *= scale;
          if (c.softcap) s = c.softcap * std::tanh(s / c.softcap);
          if (c.mask) s += mask[i * c.seqKV + j];
          if (c.padding && pad[b * c.seqKV + j]) s = -INFINITY;
          const int64_t pos = i + (lengths[b] - c.seqQ);
          if (c.causal && j > pos) s = -INFINITY;
          if (c.windowLeft >= 0 && j < pos - c.windowLeft) s = -INFINITY;
          if (c.windowRight >= 0 && j > pos + c.windowRight) s = -INFINITY;
          p[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.seqKV; ++j) sum += (p[j] = mx == -INFINITY ? 0 : std::exp(p[j] - mx));
        if (c.sinks && mx != -INFINITY) sum += std::exp(sinks[h] - mx);  // the sink's share of the weight goes nowhere
        for (int64_t j = 0; j < c.seqKV; ++j) {
          p[j] = sum > 0 ? p[j] / sum : 0;  // a fully masked row gives zeros
          refW[((b * c.heads + h) * c.seqQ + i) * c.seqKV + j] = p[j];
        }
        for (int64_t e = 0; e < c.dimV; ++e) {
          double o = 0;
          for (int64_t j = 0; j < lengths[b]; ++j)
            if (p[j] != 0) o += p[j] * v[at(c.layout, vs, b, g, j, e)];  // a weight of 0 reads nothing
          ref[at(c.layout, os, b, h, i, e)] = o;
        }
      }
  // Where the reference is NaN (nanValueRow) the output must be NaN; the rest is compared.
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i]) != std::isnan(out[i])) {
      CHECK_MSG(false, describe(c) + ": output " + std::to_string(i) + " is " + std::to_string(out[i]) + ", reference " +
                           std::to_string(ref[i]));
      return;
    }
    if (std::isnan(ref[i])) ref[i] = out[i] = 0;
  }
  // Where the decode path accumulates V in integers (Int8Kernels::decodeAccumulate), each weight
  // times its row's scale is held in int16 against the largest such product of its block of 32
  // keys: off by at most 1/65534 of that largest (rounding to nearest), which multiplies the row's
  // int8 values. The blocks start where the kernel's share of the keys does, so a key's block
  // largest is bounded by the largest product within 31 keys of it. Each output is held to the sum
  // of those bounds, plus 1e-5 of its size (or of a value's, 1/sqrt(3)) for the float steps.
  const bool integerV = c.int8 && int8Kernels().decodeAccumulate && c.seqQ <= kAttentionDecodeMaxQueries;
  if (integerV) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < c.seqQ; ++i) {
          const double* w = &refW[((b * c.heads + h) * c.seqQ + i) * c.seqKV];
          auto rowScale = [&](int64_t j) { return static_cast<double>(vScales[at(c.layout, vs, b, h / group, j, 0) / c.dimV]); };
          std::vector<double> most(c.seqKV, 0.0);
          for (int64_t j = 0; j < c.seqKV; ++j)
            for (int64_t t = std::max<int64_t>(0, j - 31); t <= std::min(c.seqKV - 1, j + 31); ++t)
              most[j] = std::max(most[j], w[t] * rowScale(t));
          for (int64_t e = 0; e < c.dimV; ++e) {
            double bound = 0;
            for (int64_t j = 0; j < lengths[b]; ++j)
              if (w[j] != 0) bound += most[j] / 65534.0 * std::fabs(static_cast<double>(vBytes[at(c.layout, vs, b, h / group, j, e)]));
            const int64_t o = at(c.layout, os, b, h, i, e);
            bound += 1e-5 * (std::fabs(ref[o]) + 1 / std::sqrt(3.0));
            if (!(std::fabs(out[o] - ref[o]) <= bound)) {
              CHECK_MSG(false, describe(c) + ": output " + std::to_string(o) + " is " + std::to_string(out[o]) +
                                   ", reference " + std::to_string(ref[o]) + ", bound " + std::to_string(bound));
              return;
            }
          }
        }
  } else {
    const double err = relativeError(out, ref);
    CHECK_MSG(err < 1e-5, describe(c) + ": output relative error " + std::to_string(err));
  }
  if (c.weights) {
    const double werr = relativeError(weights, refW);
    CHECK_MSG(werr < 1e-5, describe(c) + ": weights relative error " + std::to_string(werr));
  }
}

}  // namespace

TEST(attention_awkward_sizes_each_layout) {
  std::mt19937_64 rng(testSeed() + 10);
  const int64_t seqs[] = {1, 3, 17, 65, 197};
  for (int layout = 0; layout < 3; ++layout)
    for (int64_t sq : seqs)
      for (int64_t skv : seqs) runCase({layout, 1, 2, 2, sq, skv, 17, 17, false, false, false, false}, rng);
}

TEST(attention_options) {
  std::mt19937_64 rng(testSeed() + 11);
  runCase({0, 2, 4, 4, 63, 63, 64, 64, true, false, false, false}, rng);
  runCase({1, 2, 4, 2, 17, 197, 32, 48, true, true, true, true}, rng);   // GQA, dimV != dim
  runCase({2, 1, 3, 1, 65, 33, 16, 8, false, true, false, true}, rng);   // MQA, tokens as columns
  runCase({0, 3, 2, 2, 4, 1000, 64, 64, false, false, true, false}, rng); // decode path
  runCase({0, 1, 8, 8, 1, 1000, 128, 128, true, true, false, false}, rng);
}

// softcap, sliding windows and sinks, alone and together, on both paths
// (decode: up to 4 queries) and with the options they compose with.
TEST(attention_generation_options) {
  std::mt19937_64 rng(testSeed() + 14);
  auto run = [&](Case c, double softcap, int64_t left, int64_t right, bool sinks) {
    c.softcap = softcap;
    c.windowLeft = left;
    c.windowRight = right;
    c.sinks = sinks;
    runCase(c, rng);
  };
  const Case tiled{0, 2, 4, 2, 97, 97, 32, 32, true, false, false, false};
  const Case decode{0, 1, 8, 2, 3, 1000, 64, 64, true, false, false, false};
  for (const Case& base : {tiled, decode}) {
    run(base, 2.5, -1, -1, false);
    run(base, 30, -1, -1, true);
    for (int64_t left : {0, 1, 17, 2000}) run(base, 0, left, -1, false);
    run(base, 0, 5, 3, false);
    Case open = base;
    open.causal = false;
    run(open, 0, -1, 0, false);
    run(open, 0, 7, 2, true);
    run(open, 0, 1200, 1200, false);
    run(base, 4, 33, -1, true);
  }
  // With the mask, padding, returned weights, GQA, each layout, and keys over several blocks.
  run({1, 2, 4, 2, 17, 197, 32, 48, true, true, true, true}, 3, 20, -1, true);
  run({2, 1, 3, 1, 65, 33, 16, 8, false, true, false, true}, 1.5, 4, 4, true);
  run({0, 1, 4, 1, 4, 1601, 64, 64, false, true, true, true}, 10, 300, 0, true);
  run({0, 1, 2, 2, 1000, 1000, 64, 64, true, false, false, false}, 0, 511, -1, false);
  run({1, 1, 2, 1, 1000, 1601, 64, 64, true, false, false, false}, 20, 900, -1, true);
  run({0, 1, 2, 2, 197, 197, 64, 64, false, false, false, true}, 0, 63, 63, false);
  run({0, 1, 1, 1, 63, 63, 1, 1, true, false, false, false}, 0, 3, -1, true);
}

// The decode kernels' tiles: query groups of 1-9 rows (tiles of up to 4 and
// their remainders), key counts off the 4- and 32-key blocks, head sizes off
// the 16-float vectors, and zero weights (mask, padding, causal rows) beside
// non-zero ones in one tile.
TEST(attention_decode_tiles) {
  std::mt19937_64 rng(testSeed() + 15);
  const int64_t dims[][2] = {{17, 17}, {128, 80}, {64, 136}};
  int variant = 0;
  for (int64_t groups : {1, 2, 3, 5, 7, 9})
    for (int64_t seqKV : {1, 3, 17, 65, 1001})
      for (const auto& d : dims) {
        const bool masked = ++variant % 2 == 0;
        runCase({0, 1, groups, 1, 1, seqKV, d[0], d[1], false, masked, masked, false}, rng);
      }
  runCase({0, 2, 6, 2, 3, 203, 32, 32, true, false, true, true}, rng);  // 9 rows per group, causal
  runCase({1, 1, 8, 1, 2, 1001, 128, 128, true, true, false, false}, rng);
}

namespace {

bool sameBits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// The table's decode kernels over float or bf16 rows (T), for one call.
void decodeScoresOf(const KernelTable& kt, const float* q, int64_t queries, int64_t d, const float* k, int64_t n,
                    float* s) {
  kt.decodeScores(q, queries, d, k, d, n, 0.125f, s);
}
void decodeScoresOf(const KernelTable& kt, const float* q, int64_t queries, int64_t d, const uint16_t* k, int64_t n,
                    float* s) {
  kt.decodeScoresBf16(q, queries, d, k, d, n, 0.125f, s);
}
void decodeAccumulateOf(const KernelTable& kt, const float* p, int64_t queries, int64_t n, const float* v, int64_t dv,
                        float* acc) {
  kt.decodeAccumulate(p, queries, n, v, dv, dv, acc, dv + 2);
}
void decodeAccumulateOf(const KernelTable& kt, const float* p, int64_t queries, int64_t n, const uint16_t* v,
                        int64_t dv, float* acc) {
  kt.decodeAccumulateBf16(p, queries, n, v, dv, dv, acc, dv + 2);
}

float valueOf(float x) { return x; }
float valueOf(uint16_t x) { return bf16ToFloat(x); }

template <class T>
std::vector<T> rowsOf(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, float>) {
    return values;
  } else {
    std::vector<uint16_t> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = floatToBf16(values[i]);
    return out;
  }
}

// Each key's score from a full tile of keys (a tile of its own for d 64 and
// 128) is the score it gets alone (a one-key tile, d at run time): the same
// sums in the same order, so the same bits.
template <class T>
void checkScoresAgainstSingleKeys(const KernelTable& kt, int64_t queries, int64_t d, std::mt19937_64& rng) {
  const int64_t n = 70;  // full tiles, a partial one, and rows far enough ahead to be prefetched
  const auto q = randomFloats(rng, static_cast<size_t>(queries * d), -2, 2);
  const auto k = rowsOf<T>(randomFloats(rng, static_cast<size_t>(n * d), -2, 2));
  auto tiled = poisoned(static_cast<size_t>(queries * n));
  decodeScoresOf(kt, q.data(), queries, d, k.data(), n, tiled.data());
  int wrong = 0;
  for (int64_t j = 0; j < n; ++j) {
    auto alone = poisoned(static_cast<size_t>(queries));
    decodeScoresOf(kt, q.data(), queries, d, k.data() + j * d, 1, alone.data());
    for (int64_t u = 0; u < queries; ++u) wrong += !sameBits(tiled[u * n + j], alone[u]);
  }
  CHECK_MSG(wrong == 0, std::string(kt.name) + (sizeof(T) == 2 ? " bf16" : " float") + " scores, queries " +
                            std::to_string(queries) + " d " + std::to_string(d) + ": " + std::to_string(wrong) +
                            " scores differ from the key's own");
}

// acc[u] += sum_j p[u][j] * v[j] against float64, for chunks of V wholly
// below dv and masked ones, and the two floats past each accumulator row
// (a query state's next m and sum) left as they were.
template <class T>
void checkAccumulate(const KernelTable& kt, int64_t queries, int64_t n, int64_t dv, std::mt19937_64& rng) {
  auto p = randomFloats(rng, static_cast<size_t>(queries * n), 0, 1);
  if (n > 2) p[1] = 0.0f;  // a zero weight takes the sparse path for its block
  const auto v = rowsOf<T>(randomFloats(rng, static_cast<size_t>(n * dv), -2, 2));
  const int64_t stride = dv + 2;
  auto acc = randomFloats(rng, static_cast<size_t>(queries * stride), -1, 1);
  const auto before = acc;
  decodeAccumulateOf(kt, p.data(), queries, n, v.data(), dv, acc.data());
  int wrong = 0;
  for (int64_t u = 0; u < queries; ++u) {
    for (int64_t e = 0; e < dv; ++e) {
      double ref = before[u * stride + e], scale = std::fabs(ref);
      for (int64_t j = 0; j < n; ++j) {
        ref += static_cast<double>(p[u * n + j]) * valueOf(v[j * dv + e]);
        scale += std::fabs(static_cast<double>(p[u * n + j]) * valueOf(v[j * dv + e]));
      }
      wrong += !(std::fabs(acc[u * stride + e] - ref) <= 1e-6 * scale);
    }
    for (int64_t e = dv; e < stride; ++e) wrong += !sameBits(acc[u * stride + e], before[u * stride + e]);
  }
  CHECK_MSG(wrong == 0, std::string(kt.name) + (sizeof(T) == 2 ? " bf16" : " float") + " accumulate, queries " +
                            std::to_string(queries) + " keys " + std::to_string(n) + " dv " + std::to_string(dv) +
                            ": " + std::to_string(wrong) + " values wrong");
}

}  // namespace

// The decode kernels of the table in use, directly: the tiles for the head
// sizes that have their own (64, 128) against one-key tiles, and the V pass
// (chunks with and without masks, dv on both sides of the vector widths)
// against float64, for float and bf16 rows.
TEST(attention_decode_kernels) {
  std::mt19937_64 rng(testSeed() + 41);
  const KernelTable& kt = kernels();
  for (int64_t queries : {1, 2, 3, 4, 5})
    for (int64_t d : {16, 29, 64, 128}) {
      checkScoresAgainstSingleKeys<float>(kt, queries, d, rng);
      checkScoresAgainstSingleKeys<uint16_t>(kt, queries, d, rng);
    }
  for (int64_t queries : {1, 3, 4, 6})
    for (int64_t n : {1, 5, 33, 100})
      for (int64_t dv : {1, 7, 15, 16, 17, 29, 63, 64, 65, 80, 128, 136}) {
        checkAccumulate<float>(kt, queries, n, dv, rng);
        checkAccumulate<uint16_t>(kt, queries, n, dv, rng);
      }
}

// keyLengths (a ragged batch) on both paths, with causal, windows, GQA,
// padding, masks, softcap, sinks, returned weights and every layout.
TEST(attention_key_lengths) {
  std::mt19937_64 rng(testSeed() + 16);
  auto run = [&](Case c, bool causal, int64_t left, int64_t right) {
    c.ragged = true;
    c.causal = causal;
    c.windowLeft = left;
    c.windowRight = right;
    runCase(c, rng);
  };
  for (int64_t seqQ : {1, 3, 17, 197})
    for (int64_t seqKV : {1, 65, 1001}) {
      run({0, 4, 4, 2, seqQ, seqKV, 32, 32, false, false, false, true}, false, -1, -1);
      run({1, 3, 2, 1, seqQ, seqKV, 17, 24, false, true, true, false}, true, -1, -1);
      run({2, 3, 2, 2, seqQ, seqKV, 16, 16, false, false, false, true}, true, 9, -1);
      Case capped{0, 5, 8, 2, seqQ, seqKV, 64, 64, false, false, false, false};
      capped.softcap = 20;
      capped.sinks = true;
      run(capped, false, 40, 2);
    }
}

TEST(attention_keys_beyond_one_block) {
  std::mt19937_64 rng(testSeed() + 12);
  // 768-key online-softmax blocks: 1000 and 1601 keys take several.
  runCase({0, 1, 2, 2, 97, 1601, 64, 64, false, true, true, false}, rng);
  runCase({1, 1, 1, 1, 1000, 1000, 64, 64, true, false, false, false}, rng);
}

namespace {

// q, k and v read in place from one fused projection output [B, S, 3 * H * D]
// (token stride 3 * H * D) must give exactly what contiguous copies give: the
// kernel sees the same values through different strides.
void runFusedQkv(int64_t B, int64_t H, int64_t S, int64_t D, bool causal, bool weights, std::mt19937_64& rng) {
  const int64_t row = H * D, stride = 3 * row;
  const auto qkv = randomFloats(rng, B * S * stride, -2, 2);
  std::vector<float> q(B * S * row), k(q.size()), v(q.size());
  for (int64_t t = 0; t < B * S; ++t)
    for (int64_t e = 0; e < row; ++e) {
      q[t * row + e] = qkv[t * stride + e];
      k[t * row + e] = qkv[t * stride + row + e];
      v[t * row + e] = qkv[t * stride + 2 * row + e];
    }
  const Shape s4{B, S, H, D};
  auto expected = poisoned(q.size()), got = poisoned(q.size());
  auto wExpected = poisoned(B * H * S * S), wGot = poisoned(B * H * S * S);
  DescBuilder plain;
  plain.number(1).shape(s4).shape(s4).shape(s4).shape(s4).flag(false).number(0).flag(causal).shape({});
  plain.number(0).number(-1).number(-1).flag(false).flag(false);
  DescBuilder strided = plain;
  for (int t = 0; t < 3; ++t)  // [batch, seq, heads] strides of each view
    strided.number(static_cast<double>(S * stride)).number(static_cast<double>(stride)).number(static_cast<double>(D));
  const int64_t span = (B * S - 1) * stride + row;
  const BufferArg qv{qkv.data(), span, true}, kv{qkv.data() + row, span, true}, vv{qkv.data() + 2 * row, span, true};
  AttentionCall a, b;
  CHECK(prepareAttention(plain.done(), buf(q), buf(k), buf(v), buf(expected), none(), none(),
                         weights ? buf(wExpected) : none(), none(), &a).ok());
  const Status st = prepareAttention(strided.done(), qv, kv, vv, buf(got), none(), none(), weights ? buf(wGot) : none(), none(), &b);
  CHECK_MSG(st.ok(), st.message);
  if (!st.ok()) return;
  runCall(a);
  runCall(b);
  CHECK_MSG(std::equal(expected.begin(), expected.end(), got.begin()),
            "fused-QKV strides change the output, B" + std::to_string(B) + " S" + std::to_string(S));
  if (weights) CHECK(std::equal(wExpected.begin(), wExpected.end(), wGot.begin()));
}

}  // namespace

TEST(attention_fused_qkv_token_strides) {
  std::mt19937_64 rng(testSeed() + 11);
  runFusedQkv(1, 3, 17, 8, false, false, rng);
  runFusedQkv(2, 2, 65, 16, true, true, rng);
  runFusedQkv(1, 12, 197, 64, false, false, rng);
  runFusedQkv(3, 1, 1, 5, false, true, rng);
}

namespace {

// Views of a KV cache's storage [batch, heads, maxLength, dim] holding
// `length` positions: batch and head strides over maxLength rows give exactly
// what contiguous copies give, on the decode path and the tiled one.
// With bf16, the storage holds bf16 values and the contiguous copies their
// widened floats: the decode path (Sq <= 4) must give the same bits, the tiled
// path (packing from widened rows, where float may read in place) the same
// values to rounding.
void runCacheView(int64_t B, int64_t Hkv, int64_t groups, int64_t Sq, int64_t length, int64_t maxLength, int64_t D,
                  std::mt19937_64& rng, bool bf16 = false) {
  const int64_t H = Hkv * groups;
  auto storageK = randomFloats(rng, B * Hkv * maxLength * D, -2, 2);
  auto storageV = randomFloats(rng, B * Hkv * maxLength * D);
  std::vector<uint16_t> halvesK, halvesV;
  if (bf16)
    for (int64_t i = 0; i < static_cast<int64_t>(storageK.size()); ++i) {
      halvesK.push_back(floatToBf16(storageK[i]));
      halvesV.push_back(floatToBf16(storageV[i]));
      storageK[i] = bf16ToFloat(halvesK[i]);
      storageV[i] = bf16ToFloat(halvesV[i]);
    }
  std::vector<float> k(B * Hkv * length * D), v(k.size());
  for (int64_t bh = 0; bh < B * Hkv; ++bh)
    for (int64_t e = 0; e < length * D; ++e) {
      k[bh * length * D + e] = storageK[bh * maxLength * D + e];
      v[bh * length * D + e] = storageV[bh * maxLength * D + e];
    }
  const auto q = randomFloats(rng, B * H * Sq * D, -2, 2);
  const Shape qs{B, H, Sq, D}, kvs{B, Hkv, length, D};
  auto expected = poisoned(q.size()), got = poisoned(q.size());
  DescBuilder plain;
  plain.number(0).shape(qs).shape(kvs).shape(kvs).shape(qs).flag(false).number(0).flag(true).shape({});
  plain.number(0).number(-1).number(-1).flag(false).flag(false);
  DescBuilder strided;
  strided.number(0).shape(qs).shape(kvs).shape(kvs).shape(qs).flag(false).number(0).flag(true).shape({});
  strided.number(0).number(-1).number(-1).flag(bf16).flag(false);
  strided.number(static_cast<double>(H * Sq * D)).number(static_cast<double>(Sq * D)).number(static_cast<double>(D));
  for (int t = 0; t < 2; ++t)
    strided.number(static_cast<double>(Hkv * maxLength * D)).number(static_cast<double>(maxLength * D))
        .number(static_cast<double>(D));
  const int64_t span = (B * Hkv - 1) * maxLength * D + length * D;
  BufferArg storedK{storageK.data(), span, true}, storedV{storageV.data(), span, true};
  if (bf16) {
    storedK = {halvesK.data(), span, true, true};
    storedV = {halvesV.data(), span, true, true};
  }
  AttentionCall a, b;
  CHECK(prepareAttention(plain.done(), buf(q), buf(k), buf(v), buf(expected), none(), none(), none(), none(), &a).ok());
  const Status st = prepareAttention(strided.done(), buf(q), storedK, storedV, buf(got), none(), none(), none(), none(), &b);
  CHECK_MSG(st.ok(), st.message);
  if (!st.ok()) return;
  runCall(a);
  runCall(b);
  const std::string what = std::string(bf16 ? "bf16 " : "") + "cache-view strides change the output, Sq" +
                           std::to_string(Sq) + " length " + std::to_string(length) + " D" + std::to_string(D);
  if (bf16 && Sq > kAttentionDecodeMaxQueries) {
    const std::vector<double> ref(expected.begin(), expected.end());
    const double err = relativeError(got, ref);
    CHECK_MSG(err < 1e-6, what + ": relative error " + std::to_string(err));
  } else {
    CHECK_MSG(std::equal(expected.begin(), expected.end(), got.begin(), sameBits), what);
  }
}

}  // namespace

TEST(attention_cache_view_strides) {
  std::mt19937_64 rng(testSeed() + 15);
  runCacheView(1, 2, 4, 1, 17, 64, 32, rng);
  runCacheView(2, 2, 2, 3, 1000, 1100, 64, rng);
  runCacheView(2, 1, 3, 65, 197, 300, 16, rng);
  runCacheView(1, 3, 1, 1, 1, 5, 8, rng);
  // The head sizes with tiles of their own (64 and 128), with 1 to 4 queries per kv head.
  for (int64_t groups : {1, 2, 3, 4}) {
    runCacheView(1, 2, groups, 1, 300, 320, 128, rng);
    runCacheView(1, 2, groups, 1, 300, 320, 128, rng, true);
    runCacheView(1, 1, groups, 1, 150, 160, 64, rng, true);
  }
}

// The cases narrow keys and values (bf16, int8) run: against float64 over the
// values they hold, on both paths, with the head sizes off every vector width
// (the tails of the widening loads), the layouts that have contiguous rows
// (all three for bf16; int8 rows need their dim contiguous) and the options.
void runNarrowKVCases(std::mt19937_64& rng, void (*narrow)(Case&), int layouts) {
  auto run = [&](Case c) {
    narrow(c);
    runCase(c, rng);
  };
  const int64_t dims[][2] = {{1, 1}, {3, 3}, {17, 17}, {63, 65}, {128, 80}, {197, 197}};
  // (A single output element, one head of dim 1, can cancel to near zero, where float32's
  // 1e-7 of the terms passes 1e-5 of the result: the tiny head dims get 3 heads and more.)
  for (int64_t groups : {1, 3, 5, 9})
    for (int64_t seqKV : {1, 3, 65, 1000})
      for (const auto& d : dims)
        if (groups > 1 || d[1] > 3) run({0, 1, groups, 1, 1, seqKV, d[0], d[1], groups % 2 == 0, groups == 5, false, false});
  for (int layout = 0; layout < layouts; ++layout)
    for (int64_t sq : {1, 4, 17, 197})
      run({layout, 2, 4, 2, sq, 197, 17, 24, true, false, false, true});
  run({1, 2, 4, 2, 17, 197, 32, 48, true, true, true, true});
  run({0, 1, 2, 2, 97, 1601, 64, 64, false, true, true, false});  // several key blocks
  for (int layout = 0; layout < 2; ++layout) {
    Case gen{layout, 2, 8, 2, 3, 1001, 64, 64, true, false, false, true};
    gen.softcap = 20;
    gen.windowLeft = 300;
    gen.sinks = true;
    gen.ragged = true;
    run(gen);
    gen.seqQ = 65;
    run(gen);
  }
}

// bf16 keys and values (kvBf16), and a bf16 cache's views giving the bits
// that float copies of its values give.
TEST(attention_bf16_keys_and_values) {
  std::mt19937_64 rng(testSeed() + 17);
  runNarrowKVCases(rng, [](Case& c) { c.bf16 = true; }, 3);
  for (int64_t sq : {1, 3, 65}) {
    runCacheView(1, 2, 4, sq, 17, 64, 32, rng, true);
    runCacheView(2, 2, 2, sq, 1000, 1100, 64, rng, true);
    runCacheView(1, 3, 1, sq, 197, 200, 17, rng, true);
  }
}

// int8 keys and values with row scales (kvInt8), against the dequantized
// values: the decode path applies the scales to the scores and the weights,
// the tiled path widens the rows.
TEST(attention_int8_keys_and_values) {
  std::mt19937_64 rng(testSeed() + 19);
  runNarrowKVCases(rng, [](Case& c) { c.int8 = true; }, 2);
  // A V row with a NaN scale: not read where its weight is 0 (query row 0, masked), NaN where it is
  // read (rows 1 and 2), on the decode path, whose integer V kernel declines such weights.
  for (int64_t seqQ : {1, 3}) {
    Case c{0, 2, 8, 2, seqQ, 1000, 64, 64, false, true, false, false};  // 1000: row 0 masks keys 0, 7, ..., rows 1, 2 others
    c.int8 = true;
    c.nanValueRow = true;
    runCase(c, rng);
  }
}

// int8 k and v need kvInt8, both, and their scales, reaching their last row;
// no transposed layout; nothing else may be int8.
TEST(attention_int8_arguments_rejected) {
  std::vector<float> x(24, 1.0f), scales(8, 0.5f);
  std::vector<int8_t> bytes(24, 3);
  auto out = poisoned(24);
  auto attempt = [&](double layout, bool flag, bool kInt8, bool vInt8, bool qInt8, int64_t kScaleCount, int64_t vScaleCount) {
    const Shape s{1, 2, 4, 3};  // bhsd: 8 rows of 3; bhds: rows are not contiguous
    DescBuilder d;
    d.number(layout).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(0).number(-1).number(-1).flag(false).flag(flag);
    auto arg = [&](bool int8) {
      if (!int8) return buf(x);
      BufferArg a{bytes.data(), 24, true};
      a.int8 = true;
      return a;
    };
    auto scaleArg = [&](int64_t n) { return n < 0 ? none() : BufferArg{scales.data(), n, true}; };
    AttentionCall call;
    return prepareAttention(d.done(), arg(qInt8), arg(kInt8), arg(vInt8), buf(out), none(), none(), none(), none(),
                            none(), &call, scaleArg(kScaleCount), scaleArg(vScaleCount));
  };
  CHECK(attempt(0, true, true, true, false, 8, 8).ok());
  CHECK(attempt(1, true, true, true, false, 8, 8).ok());
  const std::pair<Status, Status::Kind> refused[] = {
      {attempt(0, true, true, true, false, 7, 8), Status::Kind::Range},    // k's scales one short
      {attempt(0, true, true, true, false, 8, -1), Status::Kind::Type},    // no v scales
      {attempt(0, false, true, true, false, 8, 8), Status::Kind::Type},    // int8 without kvInt8
      {attempt(0, false, false, false, false, 8, 8), Status::Kind::Type},  // scales without kvInt8
      {attempt(0, true, true, false, false, 8, 8), Status::Kind::Type},    // float v
      {attempt(0, true, true, true, true, 8, 8), Status::Kind::Type},      // int8 q
      {attempt(2, true, true, true, false, 8, 8), Status::Kind::Range},    // bhds: rows not contiguous
  };
  for (const auto& r : refused) CHECK_MSG(!r.first.ok() && r.first.kind == r.second, r.first.message);
  CHECK(std::all_of(out.begin(), out.end(), [](float y) { return std::isnan(y); }));
}

TEST(attention_bf16_buffer_types_rejected) {
  std::vector<float> x(24, 1.0f);
  std::vector<uint16_t> h(24, 0x3F80);
  auto out = poisoned(24);
  const Shape s{1, 2, 4, 3};
  auto attempt = [&](bool flag, bool kHalf, bool vHalf, bool qHalf) {
    DescBuilder d;
    d.number(0).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(0).number(-1).number(-1).flag(flag).flag(false);
    auto arg = [&](bool half) { return half ? BufferArg{h.data(), 24, true, true} : buf(x); };
    AttentionCall call;
    return prepareAttention(d.done(), arg(qHalf), arg(kHalf), arg(vHalf), buf(out), none(), none(), none(), none(), &call);
  };
  CHECK(attempt(true, true, true, false).ok());
  CHECK(attempt(false, false, false, false).ok());
  for (const Status& st : {attempt(true, false, true, false), attempt(true, true, false, false),
                           attempt(false, true, true, false), attempt(true, true, true, true)}) {
    CHECK(!st.ok() && st.kind == Status::Kind::Type);
  }
  CHECK(std::all_of(out.begin(), out.end(), [](float y) { return std::isnan(y); }));
}

TEST(attention_strides_rejected) {
  const Shape s4{1, 4, 2, 3};  // bshd, row = 6 floats; contiguous strides [24, 6, 3]
  std::vector<float> big(200, 1.0f);
  auto out = poisoned(24);
  auto attempt = [&](int layout, double s0, double s1, double s2, int64_t length) {
    DescBuilder d;
    const Shape s = layout == 1 ? s4 : Shape{1, 2, 4, 3};
    d.number(layout).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(0).number(-1).number(-1).flag(false).flag(false);
    d.number(s0).number(s1).number(s2);
    for (int t = 0; t < 2; ++t) d.number(layout == 1 ? 24 : 24).number(layout == 1 ? 6 : 12).number(3);
    AttentionCall call;
    return prepareAttention(d.done(), BufferArg{big.data(), length, true}, BufferArg{big.data(), 24, true},
                            BufferArg{big.data(), 24, true}, buf(out), none(), none(), none(), none(), &call);
  };
  CHECK(attempt(1, 72, 18, 3, 3 * 18 + 6).ok());
  CHECK(attempt(1, 20, 5, 3, 3 * 5 + 6).ok());        // rows overlap: read-only views may
  CHECK(attempt(0, 100, 40, 5, 40 + 3 * 5 + 3).ok());  // bhsd with head and seq strides
  CHECK(!attempt(1, 72, 18, 3, 3 * 18 + 7).ok());     // one float too many
  CHECK(!attempt(1, 72, 18, 3, 3 * 18 + 5).ok());     // one too few
  CHECK(!attempt(1, 72, 18.5, 3, 3 * 18 + 6).ok());   // not an integer
  CHECK(!attempt(1, 72, -18, 3, 3 * 18 + 6).ok());
  CHECK(!attempt(1, 72, NAN, 3, 3 * 18 + 6).ok());
  CHECK(!attempt(1, 72, 1e300, 3, 3 * 18 + 6).ok());
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
  // Sizes whose products overflow int64 (a zero dim keeps the element count at 0; a huge stride
  // over many rows) are refused or accepted without undefined behaviour (UBSan runs this).
  auto huge = [&](const Shape& s, double stride, int64_t length) {
    DescBuilder d;
    d.number(1).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(0).number(-1).number(-1).flag(false).flag(false);
    for (int t = 0; t < 3; ++t) d.number(stride).number(stride).number(stride);
    AttentionCall call;
    const BufferArg x{big.data(), length, true};
    return prepareAttention(d.done(), x, x, x, buf(out), none(), none(), none(), none(), &call);
  };
  const int64_t two32 = int64_t{1} << 32;
  CHECK(!huge({0, 1, two32, two32}, 18, 0).ok());
  CHECK(!huge({two32 / 2, 1, 1, 1}, 9007199254740991.0, 24).ok());
  CHECK(!huge({1, 5, 2, 3}, 9007199254740991.0, 24).ok());

  // An empty strided view (headDim 0) accepts any stride, so the stride must not reach the
  // kernel's index arithmetic: 1152 * (2^53 - 1) would overflow (UBSan runs this).
  {
    std::vector<float> vData = {3.5f}, o = poisoned(1200);
    DescBuilder d;
    d.number(1).shape({1, 1200, 1, 0}).shape({1, 1, 1, 0}).shape({1, 1, 1, 1}).shape({1, 1200, 1, 1});
    d.flag(false).number(0).flag(false).shape({}).number(0).number(-1).number(-1).flag(false).flag(false);
    d.number(9007199254740991.0).number(9007199254740991.0).number(9007199254740991.0);
    d.number(0).number(0).number(0).number(1).number(1).number(1);
    AttentionCall call;
    const Status st = prepareAttention(d.done(), BufferArg{big.data(), 0, true}, BufferArg{big.data(), 0, true},
                                       buf(vData), buf(o), none(), none(), none(), none(), &call);
    CHECK_MSG(st.ok(), st.message);
    if (st.ok()) runCall(call);
    CHECK(std::all_of(o.begin(), o.end(), [](float x) { return x == 3.5f; }));  // one key: out = v
  }
}

TEST(attention_generation_options_rejected) {
  std::vector<float> x(24, 1.0f), sinks(3, 0.0f);
  auto out = poisoned(24);
  auto attempt = [&](double softcap, double left, double right, int64_t sinkCount) {
    DescBuilder d;
    const Shape s{1, 2, 4, 3};
    d.number(0).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(softcap).number(left).number(right).flag(false).flag(false);
    AttentionCall call;
    return prepareAttention(d.done(), buf(x), buf(x), buf(x), buf(out), none(), none(), none(),
                            sinkCount < 0 ? none() : BufferArg{sinks.data(), sinkCount, true}, &call);
  };
  CHECK(attempt(0, -1, -1, -1).ok());
  CHECK(attempt(50, 0, 0, 2).ok());
  CHECK(!attempt(-1, -1, -1, -1).ok());
  CHECK(!attempt(NAN, -1, -1, -1).ok());
  CHECK(!attempt(1e39, -1, -1, -1).ok());  // not a finite float32
  CHECK(!attempt(0, -2, -1, -1).ok());
  CHECK(!attempt(0, 1.5, -1, -1).ok());
  CHECK(!attempt(0, -1, NAN, -1).ok());
  CHECK(!attempt(0, -1, -1, 3).ok());  // sinks must have one per query head
  CHECK(!attempt(0, -1, -1, 1).ok());
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
}
