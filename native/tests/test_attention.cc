// attention through prepareAttention/runCall against a float64 reference:
// every layout, causal, masks, key padding, GQA, a different V head dim,
// returned weights, and key counts beyond one online-softmax block.
#include <algorithm>
#include <string>

#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

struct Case {
  int layout;  // 0 bhsd, 1 bshd, 2 bhds
  int64_t batch, heads, kvHeads, seqQ, seqKV, dim, dimV;
  bool causal, mask, padding, weights;
};

std::string describe(const Case& c) {
  return "layout " + std::to_string(c.layout) + " B" + std::to_string(c.batch) + " H" + std::to_string(c.heads) +
         "/" + std::to_string(c.kvHeads) + " Sq" + std::to_string(c.seqQ) + " Skv" + std::to_string(c.seqKV) +
         " D" + std::to_string(c.dim) + "/" + std::to_string(c.dimV) + (c.causal ? " causal" : "") +
         (c.mask ? " mask" : "") + (c.padding ? " padding" : "") + (c.weights ? " weights" : "") + " seed " +
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

void runCase(const Case& c, std::mt19937_64& rng) {
  const Shape qs = layoutShape(c.layout, c.batch, c.heads, c.seqQ, c.dim);
  const Shape ks = layoutShape(c.layout, c.batch, c.kvHeads, c.seqKV, c.dim);
  const Shape vs = layoutShape(c.layout, c.batch, c.kvHeads, c.seqKV, c.dimV);
  const Shape os = layoutShape(c.layout, c.batch, c.heads, c.seqQ, c.dimV);
  const auto q = randomFloats(rng, elementCount(qs), -2, 2);
  const auto k = randomFloats(rng, elementCount(ks), -2, 2);
  const auto v = randomFloats(rng, elementCount(vs));
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
  AttentionCall call;
  const Status st = prepareAttention(d.done(), buf(q), buf(k), buf(v), buf(out), c.mask ? buf(mask) : none(),
                                     c.padding ? bytes(pad) : none(), c.weights ? buf(weights) : none(), &call);
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
          double s = 0;
          for (int64_t e = 0; e < c.dim; ++e)
            s += static_cast<double>(q[at(c.layout, qs, b, h, i, e)]) * k[at(c.layout, ks, b, g, j, e)];
          s *= scale;
          if (c.mask) s += mask[i * c.seqKV + j];
          if (c.padding && pad[b * c.seqKV + j]) s = -INFINITY;
          if (c.causal && j > i + (c.seqKV - c.seqQ)) s = -INFINITY;
          p[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.seqKV; ++j) sum += (p[j] = mx == -INFINITY ? 0 : std::exp(p[j] - mx));
        for (int64_t j = 0; j < c.seqKV; ++j) {
          p[j] = sum > 0 ? p[j] / sum : 0;  // a fully masked row gives zeros
          refW[((b * c.heads + h) * c.seqQ + i) * c.seqKV + j] = p[j];
        }
        for (int64_t e = 0; e < c.dimV; ++e) {
          double o = 0;
          for (int64_t j = 0; j < c.seqKV; ++j) o += p[j] * v[at(c.layout, vs, b, g, j, e)];
          ref[at(c.layout, os, b, h, i, e)] = o;
        }
      }
  const double err = relativeError(out, ref);
  CHECK_MSG(err < 1e-5, describe(c) + ": output relative error " + std::to_string(err));
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
  DescBuilder strided = plain;
  strided.number(static_cast<double>(stride)).number(static_cast<double>(stride)).number(static_cast<double>(stride));
  const int64_t span = (B * S - 1) * stride + row;
  const BufferArg qv{qkv.data(), span, true}, kv{qkv.data() + row, span, true}, vv{qkv.data() + 2 * row, span, true};
  AttentionCall a, b;
  CHECK(prepareAttention(plain.done(), buf(q), buf(k), buf(v), buf(expected), none(), none(),
                         weights ? buf(wExpected) : none(), &a).ok());
  const Status st = prepareAttention(strided.done(), qv, kv, vv, buf(got), none(), none(), weights ? buf(wGot) : none(), &b);
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

TEST(attention_token_strides_rejected) {
  const Shape s4{1, 4, 2, 3};  // row = 6 floats
  std::vector<float> big(200, 1.0f);
  auto out = poisoned(24);
  auto attempt = [&](int layout, double stride, int64_t length) {
    DescBuilder d;
    const Shape s = layout == 1 ? s4 : Shape{1, 2, 4, 3};
    d.number(layout).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(stride).number(0).number(0);
    AttentionCall call;
    return prepareAttention(d.done(), BufferArg{big.data(), length, true}, BufferArg{big.data(), 24, true},
                            BufferArg{big.data(), 24, true}, buf(out), none(), none(), none(), &call);
  };
  CHECK(attempt(1, 18, 3 * 18 + 6).ok());
  CHECK(!attempt(1, 5, 3 * 5 + 6).ok());       // rows would overlap
  CHECK(!attempt(1, 18, 3 * 18 + 7).ok());     // one float too many
  CHECK(!attempt(1, 18, 3 * 18 + 5).ok());     // one too few
  CHECK(!attempt(0, 18, 3 * 18 + 6).ok());     // bhsd has no token stride
  CHECK(!attempt(1, 18.5, 3 * 18 + 6).ok());   // not an integer
  CHECK(!attempt(1, -18, 3 * 18 + 6).ok());
  CHECK(!attempt(1, NAN, 3 * 18 + 6).ok());
  CHECK(!attempt(1, 1e300, 3 * 18 + 6).ok());
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
  // Sizes whose products overflow int64 (a zero dim keeps the element count at 0; a huge stride
  // over many rows) are refused or accepted without undefined behaviour (UBSan runs this).
  auto huge = [&](const Shape& s, double stride, int64_t length) {
    DescBuilder d;
    d.number(1).shape(s).shape(s).shape(s).shape(s).flag(false).number(0).flag(false).shape({});
    d.number(stride).number(stride).number(stride);
    AttentionCall call;
    const BufferArg x{big.data(), length, true};
    return prepareAttention(d.done(), x, x, x, buf(out), none(), none(), none(), &call);
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
    d.flag(false).number(0).flag(false).shape({});
    d.number(9007199254740991.0).number(0).number(0);
    AttentionCall call;
    const Status st = prepareAttention(d.done(), BufferArg{big.data(), 0, true}, BufferArg{big.data(), 0, true},
                                       buf(vData), buf(o), none(), none(), none(), &call);
    CHECK_MSG(st.ok(), st.message);
    if (st.ok()) runCall(call);
    CHECK(std::all_of(o.begin(), o.end(), [](float x) { return x == 3.5f; }));  // one key: out = v
  }
}
