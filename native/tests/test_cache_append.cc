// cacheAppend (a KV cache's append): each entry's last counts[b] positions of
// strided k and v land at its own length in [batch, kvHeads, maxLength, dim]
// storage, rounded as floatToBf16 rounds them in a bf16 cache, or quantized
// per row with the row's scale beside them in an int8 cache; nothing else in
// the storage changes; bad arguments are refused before anything is written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "../kernels/bf16.h"
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

namespace {

struct Case {
  int64_t batch, kvHeads, maxLength, n, headDim, valueDim;
  bool bshd, bf16;
  bool int8 = false;
};

DescBuilder descriptor(const Case& c, const int64_t (&ks)[3], const int64_t (&vs)[3]) {
  DescBuilder d;
  d.number(static_cast<double>(c.batch)).number(static_cast<double>(c.kvHeads)).number(static_cast<double>(c.maxLength));
  d.number(static_cast<double>(c.n)).number(static_cast<double>(c.headDim)).number(static_cast<double>(c.valueDim));
  for (int64_t s : ks) d.number(static_cast<double>(s));
  for (int64_t s : vs) d.number(static_cast<double>(s));
  d.flag(c.bf16).flag(c.int8);
  return d;
}

// Strides of a dense [batch, n, kvHeads, dim] ('bshd') or [batch, kvHeads, n, dim] source, in (batch, position, head) order.
void denseStrides(const Case& c, int64_t dim, int64_t (&s)[3]) {
  s[0] = c.n * c.kvHeads * dim;
  s[1] = c.bshd ? c.kvHeads * dim : dim;
  s[2] = c.bshd ? dim : c.n * dim;
}

// What storage element e of head row (b, h, position) should hold after the append, or the poison.
template <typename T>
int wrongValues(const Case& c, int64_t dim, const std::vector<float>& src, const int64_t (&s)[3],
                const std::vector<int32_t>& starts, const std::vector<int32_t>& counts, const std::vector<T>& storage,
                T poison) {
  int wrong = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.kvHeads; ++h)
      for (int64_t pos = 0; pos < c.maxLength; ++pos)
        for (int64_t e = 0; e < dim; ++e) {
          const int64_t i = pos - starts[b];
          T want = poison;
          if (i >= 0 && i < counts[b]) {
            const float x = src[b * s[0] + (c.n - counts[b] + i) * s[1] + h * s[2] + e];
            if constexpr (sizeof(T) == 2) {
              want = floatToBf16(x);
            } else {
              want = x;
            }
          }
          const T got = storage[((b * c.kvHeads + h) * c.maxLength + pos) * dim + e];
          wrong += std::memcmp(&got, &want, sizeof(T)) != 0;
        }
  return wrong;
}

}  // namespace

TEST(cache_append_places_each_entrys_rows) {
  std::mt19937_64 rng(testSeed() + 41);
  const Case cases[] = {{1, 1, 5, 1, 1, 1, true, false},   {2, 3, 9, 4, 17, 5, true, false},
                        {3, 2, 17, 3, 64, 64, false, false}, {2, 3, 9, 4, 17, 5, true, true},
                        {3, 2, 17, 3, 63, 65, false, true},  {1, 8, 4, 1, 128, 128, true, true}};
  for (const Case& c : cases) {
    int64_t ks[3], vs[3];
    denseStrides(c, c.headDim, ks);
    denseStrides(c, c.valueDim, vs);
    auto k = randomFloats(rng, static_cast<size_t>(c.batch * c.n * c.kvHeads * c.headDim), -3, 3);
    auto v = randomFloats(rng, static_cast<size_t>(c.batch * c.n * c.kvHeads * c.valueDim), -3, 3);
    k[0] = NAN;
    std::vector<int32_t> starts(c.batch), counts(c.batch);
    for (int64_t b = 0; b < c.batch; ++b) {
      counts[b] = static_cast<int32_t>((c.n + b) % (c.n + 1));  // ragged: 0..n
      starts[b] = static_cast<int32_t>(std::min<int64_t>(b, c.maxLength - counts[b]));
    }
    const int64_t rows = c.batch * c.kvHeads * c.maxLength;
    const std::string label = "batch " + std::to_string(c.batch) + " kvHeads " + std::to_string(c.kvHeads) + " n " +
                              std::to_string(c.n) + (c.bf16 ? " bf16" : " float32") + (c.bshd ? " bshd" : " bhsd");
    CacheAppendCall call;
    const BufferArg startArg{starts.data(), c.batch, true}, countArg{counts.data(), c.batch, true};
    if (c.bf16) {
      std::vector<uint16_t> keys(static_cast<size_t>(rows * c.headDim), 0xFFFF), values(static_cast<size_t>(rows * c.valueDim), 0xFFFF);
      const Status st = prepareCacheAppend(descriptor(c, ks, vs).done(), buf(k), buf(v),
                                           BufferArg{keys.data(), static_cast<int64_t>(keys.size()), true, true},
                                           BufferArg{values.data(), static_cast<int64_t>(values.size()), true, true},
                                           startArg, countArg, &call);
      CHECK_MSG(st.ok(), st.message);
      if (!st.ok()) continue;
      runCall(call);
      CHECK_MSG(wrongValues<uint16_t>(c, c.headDim, k, ks, starts, counts, keys, 0xFFFF) == 0, label + ": keys");
      CHECK_MSG(wrongValues<uint16_t>(c, c.valueDim, v, vs, starts, counts, values, 0xFFFF) == 0, label + ": values");
    } else {
      auto keys = poisoned(static_cast<size_t>(rows * c.headDim)), values = poisoned(static_cast<size_t>(rows * c.valueDim));
      const Status st = prepareCacheAppend(descriptor(c, ks, vs).done(), buf(k), buf(v),
                                           BufferArg{keys.data(), static_cast<int64_t>(keys.size()), true},
                                           BufferArg{values.data(), static_cast<int64_t>(values.size()), true},
                                           startArg, countArg, &call);
      CHECK_MSG(st.ok(), st.message);
      if (!st.ok()) continue;
      runCall(call);
      const float nan = poisoned(1)[0];
      CHECK_MSG(wrongValues<float>(c, c.headDim, k, ks, starts, counts, keys, nan) == 0, label + ": keys");
      CHECK_MSG(wrongValues<float>(c, c.valueDim, v, vs, starts, counts, values, nan) == 0, label + ": values");
    }
  }
}

// An int8 row as the scheme defines it (gemm_int8.h), written out here from
// the definition: scale max|x| / 127, values round-to-even(x * 127 / max|x|).
float referenceQuantize(const float* x, int64_t n, int8_t* out) {
  float most = 0.0f;
  bool finite = true;
  for (int64_t e = 0; e < n; ++e) {
    finite = finite && std::isfinite(x[e]);
    most = std::max(most, std::fabs(x[e]));
  }
  if (!finite) return std::numeric_limits<float>::quiet_NaN();
  const float inverse = most == 0.0f ? 0.0f : 127.0f / most;
  for (int64_t e = 0; e < n; ++e) out[e] = static_cast<int8_t>(std::clamp(std::nearbyint(x[e] * inverse), -127.0f, 127.0f));
  return most == 0.0f ? 0.0f : most / 127.0f;
}

TEST(cache_append_quantizes_int8_rows) {
  std::mt19937_64 rng(testSeed() + 43);
  const Case cases[] = {{1, 1, 5, 1, 1, 1, true, false, true},   {2, 3, 9, 4, 17, 5, true, false, true},
                        {3, 2, 17, 3, 63, 65, false, false, true}, {1, 8, 4, 1, 128, 128, true, false, true}};
  for (const Case& c : cases) {
    int64_t ks[3], vs[3];
    denseStrides(c, c.headDim, ks);
    denseStrides(c, c.valueDim, vs);
    auto k = randomFloats(rng, static_cast<size_t>(c.batch * c.n * c.kvHeads * c.headDim), -3, 3);
    auto v = randomFloats(rng, static_cast<size_t>(c.batch * c.n * c.kvHeads * c.valueDim), -3, 3);
    k[0] = NAN;  // its row's scale is NaN
    if (c.valueDim > 1) std::fill(v.begin(), v.begin() + c.valueDim, 0.0f);  // an all-zero row: scale 0
    std::vector<int32_t> starts(c.batch), counts(c.batch);
    for (int64_t b = 0; b < c.batch; ++b) {
      counts[b] = static_cast<int32_t>((c.n + b) % (c.n + 1));
      starts[b] = static_cast<int32_t>(std::min<int64_t>(b, c.maxLength - counts[b]));
    }
    const int64_t rows = c.batch * c.kvHeads * c.maxLength;
    // -128 is never written (|values| <= 127): it marks storage left alone.
    std::vector<int8_t> keys(static_cast<size_t>(rows * c.headDim), -128), values(static_cast<size_t>(rows * c.valueDim), -128);
    auto keyScales = poisoned(static_cast<size_t>(rows)), valueScales = poisoned(static_cast<size_t>(rows));
    auto bytesArg = [](std::vector<int8_t>& x) {
      BufferArg a{x.data(), static_cast<int64_t>(x.size()), true};
      a.int8 = true;
      return a;
    };
    CacheAppendCall call;
    const Status st = prepareCacheAppend(descriptor(c, ks, vs).done(), buf(k), buf(v), bytesArg(keys), bytesArg(values),
                                         BufferArg{starts.data(), c.batch, true}, BufferArg{counts.data(), c.batch, true},
                                         &call, buf(keyScales), buf(valueScales));
    CHECK_MSG(st.ok(), st.message);
    if (!st.ok()) continue;
    runCall(call);
    const float poison = poisoned(1)[0];
    auto check = [&](const char* name, int64_t dim, const std::vector<float>& src, const int64_t (&s)[3],
                     const std::vector<int8_t>& storage, const std::vector<float>& scales) {
      int wrong = 0;
      std::vector<int8_t> want(static_cast<size_t>(dim));
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.kvHeads; ++h)
          for (int64_t pos = 0; pos < c.maxLength; ++pos) {
            const int64_t row = (b * c.kvHeads + h) * c.maxLength + pos, i = pos - starts[b];
            float wantScale = poison;
            std::fill(want.begin(), want.end(), int8_t(-128));
            if (i >= 0 && i < counts[b])
              wantScale = referenceQuantize(src.data() + b * s[0] + (c.n - counts[b] + i) * s[1] + h * s[2], dim, want.data());
            const bool appended = i >= 0 && i < counts[b];
            if (appended && std::isnan(wantScale)) {  // a non-finite row: its scale is NaN, its values unspecified
              wrong += !std::isnan(scales[row]);
              continue;
            }
            wrong += std::memcmp(&scales[row], &wantScale, 4) != 0;
            wrong += std::memcmp(storage.data() + row * dim, want.data(), static_cast<size_t>(dim)) != 0;
          }
      CHECK_MSG(wrong == 0, std::string(name) + ": " + std::to_string(wrong) + " rows or scales wrong, batch " +
                                std::to_string(c.batch) + " n " + std::to_string(c.n) + " dim " + std::to_string(dim));
    };
    check("keys", c.headDim, k, ks, keys, keyScales);
    check("values", c.valueDim, v, vs, values, valueScales);
  }
}

TEST(cache_append_refuses_bad_arguments_before_writing) {
  // batch 2, kvHeads 2, maxLength 4, n 2, dims 3: 'bshd' sources of 2·2·2·3 = 24 floats.
  const Case c{2, 2, 4, 2, 3, 3, true, false};
  std::vector<float> k(24, 1.0f), v(24, 2.0f), keys(48, -1.0f), values(48, -1.0f);
  std::vector<int32_t> starts{0, 2}, counts{2, 2};
  int64_t ks[3], vs[3];
  denseStrides(c, 3, ks);
  denseStrides(c, 3, vs);
  auto attempt = [&](DescBuilder d, BufferArg kArg, BufferArg keysArg, std::vector<int32_t> s, std::vector<int32_t> n) {
    CacheAppendCall call;
    return prepareCacheAppend(d.done(), kArg, buf(v), keysArg, buf(values), BufferArg{s.data(), static_cast<int64_t>(s.size()), true},
                              BufferArg{n.data(), static_cast<int64_t>(n.size()), true}, &call);
  };
  const auto good = [&] { return descriptor(c, ks, vs); };
  CHECK(attempt(good(), buf(k), buf(keys), starts, counts).ok());
  CHECK(!attempt(good(), buf(k), buf(keys), {0, 3}, counts).ok());             // entry 1 past maxLength
  CHECK(!attempt(good(), buf(k), buf(keys), {-1, 0}, counts).ok());            // a negative start
  CHECK(!attempt(good(), buf(k), buf(keys), starts, {3, 0}).ok());             // more than n
  CHECK(!attempt(good(), buf(k), buf(keys), starts, {-1, 0}).ok());            // a negative count
  CHECK(!attempt(good(), buf(k), buf(keys), {0}, {1}).ok());                   // one entry short
  CHECK(!attempt(good(), BufferArg{k.data(), 23, true}, buf(keys), starts, counts).ok());   // k one float short
  CHECK(!attempt(good(), buf(k), BufferArg{keys.data(), 47, true}, starts, counts).ok());   // storage short
  CHECK(!attempt(good(), buf(k), BufferArg{keys.data(), 48, true, true}, starts, counts).ok());  // bf16 keys, float values
  CHECK(!attempt(good(), BufferArg{keys.data(), 24, true}, buf(keys), starts, counts).ok());  // k inside the storage
  DescBuilder huge = good();
  huge.values()[6] = 1e300;                                                     // k.strides[0]
  CHECK(!attempt(huge, buf(k), buf(keys), starts, counts).ok());
  DescBuilder fractional = good();
  fractional.values()[2] = 3.5;                                                 // maxLength
  CHECK(!attempt(fractional, buf(k), buf(keys), starts, counts).ok());
  DescBuilder shortDesc = good();
  shortDesc.values().pop_back();
  CHECK(!attempt(shortDesc, buf(k), buf(keys), starts, counts).ok());
  // int8 storage: its scales must come with it (one per row: 2 * 2 * 4), and only with it.
  std::vector<int8_t> keys8(48, -128), values8(48, -128);
  std::vector<float> keyScales(16, -1.0f), valueScales(16, -1.0f);
  auto attempt8 = [&](bool int8Flag, bool int8Values, BufferArg ksArg, BufferArg vsArg) {
    Case cc = c;
    cc.int8 = int8Flag;
    BufferArg k8{keys8.data(), 48, true}, v8{values8.data(), 48, true};
    k8.int8 = true;
    v8.int8 = int8Values;
    CacheAppendCall call;
    return prepareCacheAppend(descriptor(cc, ks, vs).done(), buf(k), buf(v), k8, int8Values ? v8 : buf(values),
                              BufferArg{starts.data(), 2, true}, BufferArg{counts.data(), 2, true}, &call, ksArg, vsArg);
  };
  CHECK(attempt8(true, true, buf(keyScales), buf(valueScales)).ok());
  CHECK(!attempt8(true, true, none(), buf(valueScales)).ok());                        // no key scales
  CHECK(!attempt8(true, true, BufferArg{keyScales.data(), 15, true}, buf(valueScales)).ok());  // one short
  CHECK(!attempt8(true, false, buf(keyScales), buf(valueScales)).ok());               // float values
  CHECK(!attempt8(false, true, buf(keyScales), buf(valueScales)).ok());               // int8 without the flag
  CHECK(!attempt8(true, true, buf(keyScales), buf(keyScales)).ok());                  // both scales in one array
  CHECK(!attempt8(true, true, buf(keyScales), BufferArg{k.data(), 16, true}).ok());   // scales inside k
  CHECK(std::all_of(keys8.begin(), keys8.end(), [](int8_t x) { return x == -128; }));
  CHECK(std::all_of(keyScales.begin(), keyScales.end(), [](float x) { return x == -1.0f; }));

  CHECK(std::all_of(keys.begin(), keys.end(), [](float x) { return x == -1.0f; }));
  CHECK(std::all_of(values.begin(), values.end(), [](float x) { return x == -1.0f; }));
}
