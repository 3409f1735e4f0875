// libFuzzer harness for the native entry points: the bytes choose an op, a
// descriptor of shapes/flags/scalars (mostly plausible values, sometimes NaN,
// huge, negative or fractional ones, sometimes too short or too long) and the
// buffers' lengths (usually what the shapes imply, sometimes off by one,
// absent, or aliasing out). Whatever prepare*() accepts is then run, so
// AddressSanitizer sees any read or write outside the buffers the checks let
// through, and UBSan any overflow in the size arithmetic.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "../ops/calls.h"
#include "../ops/descriptor_layouts.h"

namespace {

using namespace mhsa;

// Hands out the fuzzer's bytes; zeros once they run out.
class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double pickSpecial(uint8_t b, const double* table, size_t n) { return table[b % n]; }

double rankValue(ByteSource& in) {
  static const double special[] = {kNan, -1, 33, 2.5, 1e300, kInf, 32, 6, 5, -0.0};
  const uint8_t b = in.next();
  return b < 240 ? b % 5 : pickSpecial(b, special, std::size(special));
}

double dimValue(ByteSource& in) {
  static const double special[] = {0, 1, 2147483648.0, 4294967296.0, 4294967295.0, 9007199254740992.0,
                                   9007199254740994.0, -1, kNan, 0.5, 1e300, kInf, 4096, 65536, 1000, 197};
  const uint8_t b = in.next();
  return b < 224 ? b % 48 : pickSpecial(b, special, std::size(special));
}

double numberValue(ByteSource& in) {
  static const double special[] = {kNan, kInf, -kInf, 0, 1, -0.0, 1e39, 1e-45, 3.4e38, -3.4e38, 0.125, 2};
  const uint8_t b = in.next();
  return b < 200 ? (b - 100) / 16.0 : pickSpecial(b, special, std::size(special));
}

double flagValue(ByteSource& in) {
  static const double special[] = {2, -1, kNan, 0.5, 1e300, kInf};
  const uint8_t b = in.next();
  return b < 250 ? b & 1 : pickSpecial(b, special, std::size(special));
}

// Descriptor layouts, as lib/native.ts writes them: S shape, N number, F flag.
enum Op { Matmul, Softmax, Attention, LayerNorm, PackMatrix, PackedSize, LayerNormMatmul, Rope, CacheAppend, OpCount };
// (layerNormMatmul's is matmul's plus eps, appended in the Matmul case.)
// C: a softcap, mostly 0 (none) or small; W: a window side, mostly -1 (none) or small.
constexpr const char* kLayout[OpCount] = {"SSSSFFNNFFF", "SSN", "NSSSSFNFSCWWFF", "SSNF", "SFFF", "SFF", "", "NSSNNFNS", ""};

// Each layout has as many slots as descriptor_layouts.h has fields: a field
// added there and not here left every descriptor one short, and the fuzzer
// then reached no matmul past the descriptor check.
constexpr size_t slotCount(const char* layout) {
  size_t n = 0;
  while (layout[n] != 0) ++n;
  return n;
}
#define MHSA_COUNT_FIELD(kind, member, name) +1
static_assert(slotCount(kLayout[Matmul]) == 0 MHSA_MATMUL_FIELDS(MHSA_COUNT_FIELD), "matmul's fields");
static_assert(slotCount(kLayout[Softmax]) == 0 MHSA_SOFTMAX_FIELDS(MHSA_COUNT_FIELD), "softmax's fields");
static_assert(slotCount(kLayout[Attention]) == 0 MHSA_ATTENTION_FIELDS(MHSA_COUNT_FIELD), "attention's fields");
static_assert(slotCount(kLayout[LayerNorm]) == 0 MHSA_LAYER_NORM_FIELDS(MHSA_COUNT_FIELD), "layerNorm's fields");
static_assert(slotCount(kLayout[PackMatrix]) == 0 MHSA_PACK_MATRIX_FIELDS(MHSA_COUNT_FIELD), "packMatrix's fields");
static_assert(slotCount(kLayout[PackedSize]) == 0 MHSA_PACKED_SIZE_FIELDS(MHSA_COUNT_FIELD), "packedSize's fields");
static_assert(slotCount(kLayout[Rope]) == 0 MHSA_ROPE_FIELDS(MHSA_COUNT_FIELD), "rope's fields");
#undef MHSA_COUNT_FIELD

struct Decoded {
  std::vector<double> values;
  std::vector<Shape> shapes;   // each S slot, as read (empty when it was not a valid shape)
  std::vector<double> scalars;  // each N or F slot
  bool hasStrides = false;          // attention's optional strides of q, k and v
  double strides[3][3] = {};
};

Decoded decodeDescriptor(Op op, ByteSource& in) {
  Decoded d;
  for (const char* c = kLayout[op]; *c; ++c) {
    if (*c == 'S') {
      const double rank = rankValue(in);
      d.values.push_back(rank);
      Shape s;
      bool valid = rank >= 0 && rank <= 32 && std::floor(rank) == rank;
      const int count = valid ? static_cast<int>(rank) : 0;
      for (int i = 0; i < count; ++i) {
        const double dim = dimValue(in);
        d.values.push_back(dim);
        if (dim >= 0 && dim <= 9007199254740991.0 && std::floor(dim) == dim)
          s.push_back(static_cast<int64_t>(dim));
        else
          valid = false;
      }
      d.shapes.push_back(valid ? s : Shape{});
    } else if (*c == 'C' || *c == 'W') {
      const uint8_t pick = in.next();
      const double x = pick < 128 ? (*c == 'C' ? 0.0 : -1.0) : pick < 220 ? (pick % 8) * (*c == 'C' ? 0.75 : 1.0) : numberValue(in);
      d.values.push_back(x);
      d.scalars.push_back(x);
    } else {
      const double x = *c == 'N' ? numberValue(in) : flagValue(in);
      d.values.push_back(x);
      d.scalars.push_back(x);
    }
  }
  // Attention's optional trailing group, now and then: strides of q, k and v,
  // contiguous, a fused QKV's token stride, a cache's longer rows, or special.
  if (op == Attention && in.next() % 4 == 0) {
    d.hasStrides = true;
    for (int t = 0; t < 3; ++t) {
      const Shape& s = t + 1 < static_cast<int>(d.shapes.size()) ? d.shapes[t + 1] : Shape{};
      const int64_t cap = int64_t{1} << 40;
      const int64_t d1 = s.size() == 4 ? std::min(s[1], cap) : 1, d2 = s.size() == 4 ? std::min(s[2], cap) : 1,
                    d3 = s.size() == 4 ? std::min(s[3], cap) : 1;
      const uint8_t pick = in.next();
      double* st = d.strides[t];
      switch (pick % 4) {
        case 0: st[2] = d3, st[1] = static_cast<double>(d2) * d3, st[0] = st[1] * d1; break;
        case 1: st[2] = d3, st[1] = 3.0 * d2 * d3, st[0] = st[1] * d1; break;
        case 2: st[2] = d3, st[1] = static_cast<double>(d2 + pick / 4 % 4) * d3, st[0] = st[1] * d1; break;
        default: for (int a = 0; a < 3; ++a) st[a] = numberValue(in); break;
      }
      for (int a = 0; a < 3; ++a) d.values.push_back(st[a]);
    }
  }
  switch (in.next() % 8) {  // now and then a descriptor of the wrong length
    case 6: if (!d.values.empty()) d.values.pop_back(); break;
    case 7: d.values.push_back(numberValue(in)); break;
    default: break;
  }
  return d;
}

// Buffers stay at most this many elements, so every accepted call is small.
constexpr int64_t kMaxBufferElements = 1 << 14;

int64_t countOf(const Shape& s) {
  const int64_t n = elementCount(s);
  return n < 0 ? -1 : n;
}

// The length a buffer gets: what the op expects, nearly that, none, or noise.
struct BufferPlan {
  bool present = true;
  int64_t length = 0;
};

BufferPlan planBuffer(ByteSource& in, int64_t expected, bool optional) {
  const uint8_t mode = in.next();
  BufferPlan b;
  int64_t len = expected >= 0 ? expected : in.next();
  switch (mode % 8) {
    case 5: len += 1; break;
    case 6: len = len > 0 ? len - 1 : 0; break;
    case 7:
      if (optional) b.present = false;
      else len = in.next() * 16;
      break;
    default: break;
  }
  b.length = std::min(len, kMaxBufferElements + 1);
  return b;
}

// Logical [batch, heads, seq] of an attention tensor in the given layout.
bool attentionDims(double layout, const Shape& s, int64_t* b, int64_t* h, int64_t* seq) {
  if (s.size() != 4) return false;
  if (layout == 1) { *b = s[0]; *seq = s[1]; *h = s[2]; return true; }
  if (layout == 2) { *b = s[0]; *h = s[1]; *seq = s[3]; return true; }
  *b = s[0]; *h = s[1]; *seq = s[2];
  return true;
}

// Owns the buffers of one call. Each lives in its own allocation, so ASan
// catches the first element past the end, except when out deliberately
// aliases the first input (then both share one region).
struct Buffers {
  std::vector<std::vector<float>> floats;
  std::vector<uint8_t> bytes;
  std::vector<int32_t> ints;
  std::vector<BufferArg> args;
};

BufferArg floatBuffer(Buffers& bufs, const BufferPlan& p) {
  if (!p.present) return {};
  bufs.floats.emplace_back(static_cast<size_t>(p.length), 0.25f);
  return {bufs.floats.back().data(), p.length, true};
}

// A Uint16Array of bf16 values (a matrix packed in bf16) of p.length elements.
BufferArg bf16Buffer(Buffers& bufs, const BufferPlan& p) {
  if (!p.present) return {};
  bufs.floats.emplace_back(static_cast<size_t>((p.length + 1) / 2), 0.25f);
  // An odd length starts one value in, so the buffer ends where the allocation does (ASan sees a read past it).
  BufferArg arg{reinterpret_cast<uint16_t*>(bufs.floats.back().data()) + (p.length & 1), p.length, true};
  arg.bf16 = true;
  return arg;
}

// An Int8Array (a matrix packed in int8, or an already-quantized weight) of
// p.length bytes, each 1 (a quantized weight may not hold -128).
BufferArg int8Buffer(Buffers& bufs, const BufferPlan& p) {
  if (!p.present) return {};
  bufs.floats.emplace_back(static_cast<size_t>((p.length + 3) / 4), 0.0f);
  // Placed so the buffer ends where the allocation does (ASan sees a read past it).
  int8_t* data = reinterpret_cast<int8_t*>(bufs.floats.back().data()) + (4 - p.length % 4) % 4;
  if (p.length > 0) std::memset(data, 1, static_cast<size_t>(p.length));
  BufferArg arg{data, p.length, true};
  arg.int8 = true;
  return arg;
}

void aliasOut(ByteSource& in, Buffers& bufs, BufferArg* input, BufferArg* out) {
  const uint8_t mode = in.next() % 8;
  if (mode < 6 || !input->present || !out->present) return;
  const int64_t shift = mode == 6 ? 0 : 1;
  const int64_t size = std::max(input->length, out->length + shift);
  bufs.floats.emplace_back(static_cast<size_t>(size), 0.5f);
  float* base = bufs.floats.back().data();
  *input = {base, input->length, true};
  *out = {base + shift, out->length, true};
}

// How many inputs reached each op's kernels (printed at exit when
// MHSA_FUZZ_STATS is set), to see that the harness gets past the checks.
struct Stats {
  long tried[OpCount] = {};
  long ran[OpCount] = {};
  ~Stats() {
    if (!std::getenv("MHSA_FUZZ_STATS")) return;
    static const char* const names[OpCount] = {"matmul", "softmax", "attention", "layerNorm", "packMatrix",
                                               "packedSize", "lnMatmul", "rope", "cacheAppend"};
    for (int i = 0; i < OpCount; ++i) std::fprintf(stderr, "%-10s tried %8ld ran %8ld\n", names[i], tried[i], ran[i]);
  }
};
Stats stats;

// Rough flops of an accepted call; the biggest are skipped to keep runs fast.
constexpr double kMaxWork = 3e7;

// The first byte picks one of the first kByteOps ops, as it did before
// layerNormMatmul existed, so the saved corpus and regressions keep their ops;
// a matmul input becomes a layerNormMatmul by a byte after its buffers (an
// input that ends before it stays a matmul).
constexpr int kByteOps = LayerNormMatmul;

// rope(x, out, positions?), reached after a packedSize call (see fuzzOne).
void fuzzRope(ByteSource& in) {
  ++stats.tried[Rope];
  // Mostly plausible values (rope has more constraints than random bytes meet
  // in a short run), now and then the generic special ones.
  Decoded d;
  auto number = [&](double plausible) {
    const double v = in.next() < 232 ? plausible : numberValue(in);
    d.values.push_back(v);
  };
  auto shape = [&](const Shape* like) {
    const uint8_t mode = in.next();
    Shape s;
    if (like && mode < 192) {
      s = *like;
    } else {
      const double rank = mode < 224 ? 4 : rankValue(in);
      const bool whole = rank >= 0 && rank <= 32 && std::floor(rank) == rank;
      for (int i = 0; whole && i < static_cast<int>(rank); ++i) {
        const uint8_t b = in.next();
        s.push_back(b < 236 ? b % 9 : static_cast<int64_t>(b) << 20);
      }
      if (!whole) {
        d.values.push_back(rank);
        d.shapes.push_back({});
        return;
      }
    }
    d.values.push_back(static_cast<double>(s.size()));
    for (int64_t dim : s) d.values.push_back(static_cast<double>(dim));
    d.shapes.push_back(s);
  };
  number(in.next() % 2);
  shape(nullptr);
  const Shape xs = d.shapes.back();
  shape(&xs);
  number(2.0 * (in.next() % 6));
  number(in.next() % 4 == 0 ? 0.5 : 10000);
  number(in.next() % 2);
  number(in.next() % 4 == 0 ? 0 : in.next());
  if (in.next() % 2 == 0) {
    d.values.push_back(0);  // no positions
    d.shapes.push_back({});
  } else {
    const Shape ps = xs.size() == 4 ? (in.next() % 2 ? Shape{xs[0], xs[1]} : Shape{xs[2]}) : Shape{1};
    shape(&ps);
  }
  const Descriptor desc{d.values.data(), d.values.size()};
  auto shapeAt = [&](size_t i) { return i < d.shapes.size() ? d.shapes[i] : Shape{}; };
  Buffers bufs;
  bufs.floats.reserve(4);
  BufferArg x = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(0)), false));
  BufferArg out = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(1)), false));
  aliasOut(in, bufs, &x, &out);
  // Positions without a shape, or a shape without positions, only now and then.
  const bool noShape = shapeAt(2).empty();
  const BufferPlan posPlan = planBuffer(in, noShape ? -1 : countOf(shapeAt(2)), true);
  BufferArg positions;
  if (posPlan.present && (!noShape || in.next() % 8 == 0)) {
    bufs.ints.assign(static_cast<size_t>(posPlan.length), 0);
    for (size_t i = 0; i < bufs.ints.size(); ++i) bufs.ints[i] = in.next() < 250 ? in.next() * 257 : -1;
    positions = {bufs.ints.data(), posPlan.length, true};
  }
  // Strides (rope in place on a view) came later: chosen by a byte read after all the others, so
  // older saved inputs keep their meaning.
  Descriptor ropeDesc = desc;
  if (in.next() % 4 == 3) {
    const double dims[4] = {xs.size() == 4 ? double(xs[1]) : 1, xs.size() == 4 ? double(xs[2]) : 1, xs.size() == 4 ? double(xs[3]) : 1, 1};
    d.values.push_back(dims[0] * dims[1] * dims[2] + in.next() % 3);
    d.values.push_back(dims[1] * dims[2] + in.next() % 3);
    d.values.push_back(in.next() < 240 ? dims[2] : numberValue(in));
    ropeDesc = {d.values.data(), d.values.size()};
    if (in.next() % 8 != 7) out = x;
  }
  RopeCall call;
  if (!prepareRope(ropeDesc, x, out, positions, &call).ok()) return;
  const RopeProblem& p = call.problem;
  if (static_cast<double>(p.batch) * p.seq * (p.heads * p.headDim + p.rotaryDim) > kMaxWork) return;
  runCall(call);
  ++stats.ran[Rope];
}

// cacheAppend(k, v, keys, values, starts, counts), reached after a packedSize
// call (see fuzzOne): small plausible sizes and strides mostly, special
// numbers now and then, ragged and out-of-range starts and counts, and now and
// then a k that lies inside the storage it is copied to.
void fuzzCacheAppend(ByteSource& in) {
  ++stats.tried[CacheAppend];
  std::vector<double> values;
  auto number = [&](double plausible) {
    const double v = in.next() < 232 ? plausible : numberValue(in);
    values.push_back(v);
    return v;
  };
  const double batch = number(in.next() % 4), kvHeads = number(in.next() % 4), maxLength = number(in.next() % 9);
  const double n = number(in.next() % 5), headDim = number(in.next() % 9), valueDim = number(in.next() % 9);
  const double rowK = kvHeads * headDim, rowV = kvHeads * valueDim;
  const double ks[3] = {number(n * rowK), number(rowK + in.next() % 2), number(headDim)};
  const double vs[3] = {number(n * rowV), number(rowV + in.next() % 2), number(valueDim)};
  const bool bf16 = number(in.next() % 2) == 1;
  const bool int8 = number(in.next() % 3 == 0) == 1;
  auto span = [&](const double (&s)[3], double dim) -> int64_t {
    for (double x : {batch, kvHeads, n, dim, s[0], s[1], s[2]})
      if (!(x >= 0 && x <= 64) || std::floor(x) != x) return -1;
    if (batch == 0 || n == 0 || kvHeads == 0 || dim == 0) return 0;
    return static_cast<int64_t>((batch - 1) * s[0] + (n - 1) * s[1] + (kvHeads - 1) * s[2] + dim);
  };
  auto storage = [&](double dim) -> int64_t {
    const double x = batch * kvHeads * maxLength * dim;
    return x >= 0 && x <= 65536 && std::floor(x) == x ? static_cast<int64_t>(x) : -1;
  };
  Buffers bufs;
  bufs.floats.reserve(4);
  BufferArg k = floatBuffer(bufs, planBuffer(in, span(ks, headDim), false));
  BufferArg v = floatBuffer(bufs, planBuffer(in, span(vs, valueDim), false));
  const bool storageBf16 = in.next() % 8 == 7 ? !bf16 : bf16;
  const bool storageInt8 = !storageBf16 && (in.next() % 8 == 7 ? !int8 : int8);
  auto store = [&](double dim) {
    const BufferPlan p = planBuffer(in, storage(dim), false);
    return storageBf16 ? bf16Buffer(bufs, p) : storageInt8 ? int8Buffer(bufs, p) : floatBuffer(bufs, p);
  };
  BufferArg keys = store(headDim), valuesArg = store(valueDim);
  // int8 storage's row scales (one per row), now and then missing or the wrong length.
  BufferArg keyScales = floatBuffer(bufs, planBuffer(in, storageInt8 ? storage(1) : -1, true));
  BufferArg valueScales = floatBuffer(bufs, planBuffer(in, storageInt8 ? storage(1) : -1, true));
  if (k.present && keys.present && !keys.bf16 && in.next() % 8 == 7) k = {keys.data, std::min(k.length, keys.length), true};
  const int64_t entries = batch >= 0 && batch <= 8 && std::floor(batch) == batch ? static_cast<int64_t>(batch) : 1;
  const BufferPlan listPlan = planBuffer(in, entries, false);
  const int64_t listLength = listPlan.present ? std::min<int64_t>(listPlan.length, 16) : 0;
  bufs.ints.assign(static_cast<size_t>(2 * listLength), 0);
  for (auto& x : bufs.ints) x = in.next() < 248 ? in.next() % 10 : -static_cast<int32_t>(in.next());
  const BufferArg starts{bufs.ints.data(), listLength, listPlan.present};
  const BufferArg counts{bufs.ints.data() + listLength, listLength, listPlan.present};
  const Descriptor desc{values.data(), values.size()};
  CacheAppendCall call;
  if (!prepareCacheAppend(desc, k, v, keys, valuesArg, starts, counts, &call, keyScales, valueScales).ok()) return;
  runCall(call);
  ++stats.ran[CacheAppend];
}

void fuzzOne(const uint8_t* data, size_t size) {
  ByteSource in(data, size);
  Op op = static_cast<Op>(in.next() % kByteOps);
  Decoded d = decodeDescriptor(op, in);
  const Descriptor desc{d.values.data(), d.values.size()};
  auto shapeAt = [&](size_t i) { return i < d.shapes.size() ? d.shapes[i] : Shape{}; };
  auto scalarAt = [&](size_t i) { return i < d.scalars.size() ? d.scalars[i] : 0.0; };
  Buffers bufs;
  bufs.floats.reserve(16);  // pointers into it must stay valid

  ++stats.tried[op];
  switch (op) {
    case Matmul: {
      const Shape bs = shapeAt(1);
      const bool packed = scalarAt(4) == 1;
      // bBf16, and (mostly, not always) a b buffer of the type it says.
      const bool bf16 = scalarAt(5) == 1, int8 = scalarAt(6) == 1;
      const bool bAsBf16 = in.next() % 8 == 7 ? !bf16 : bf16;
      int64_t bExpected = countOf(bs);
      if (packed && bs.size() == 2 && bExpected >= 0)
        bExpected = int8 ? packedInt8Bytes(bs[0], bs[1]) : bf16 ? packedBf16Size(bs[0], bs[1]) : packedBSize(bs[0], bs[1]);
      BufferArg a = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(0)), false));
      BufferArg b = int8 && !bAsBf16 ? int8Buffer(bufs, planBuffer(in, bExpected, false))
                    : bAsBf16        ? bf16Buffer(bufs, planBuffer(in, bExpected, false))
                                     : floatBuffer(bufs, planBuffer(in, bExpected, false));
      BufferArg c = floatBuffer(bufs, planBuffer(in, shapeAt(2).empty() ? -1 : countOf(shapeAt(2)), true));
      BufferArg out = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(3)), false));
      aliasOut(in, bufs, &a, &out);
      MatmulCall call;
      if (in.next() % 4 == 3) {  // layerNormMatmul: matmul's descriptor, then eps, then weight and bias
        op = LayerNormMatmul;
        ++stats.tried[op];
        d.values.push_back(numberValue(in));
        const Descriptor withEps{d.values.data(), d.values.size()};
        const int64_t k = shapeAt(0).empty() ? -1 : shapeAt(0).back();
        BufferArg weight = floatBuffer(bufs, planBuffer(in, k, true));
        BufferArg bias = floatBuffer(bufs, planBuffer(in, k, true));
        if (!prepareLayerNormMatmul(withEps, a, b, c, out, weight, bias, &call).ok()) return;
      } else if (!prepareMatmul(desc, a, b, c, out, &call).ok()) {
        return;
      }
      const MatmulPlan& p = call.plan;
      if (static_cast<double>(p.batchCount) * p.m * p.n * (p.k + 1) > kMaxWork) return;
      runCall(call);
      ++stats.ran[op];
      return;
    }
    case Softmax:
    case LayerNorm: {
      const Shape xs = shapeAt(0);
      BufferArg x = floatBuffer(bufs, planBuffer(in, countOf(xs), false));
      BufferArg out = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(1)), false));
      aliasOut(in, bufs, &x, &out);
      if (op == Softmax) {
        SoftmaxCall call;
        if (prepareSoftmax(desc, x, out, &call).ok()) runCall(call), ++stats.ran[op];
        return;
      }
      const int64_t dim = xs.empty() ? -1 : xs.back();
      BufferArg weight = floatBuffer(bufs, planBuffer(in, dim, true));
      BufferArg bias = floatBuffer(bufs, planBuffer(in, dim, true));
      LayerNormCall call;
      if (prepareLayerNorm(desc, x, out, weight, bias, &call).ok()) runCall(call), ++stats.ran[op];
      return;
    }
    case Attention: {
      const double layout = scalarAt(0);
      int64_t b = -1, h = -1, sq = -1, kb, kh, skv = -1;
      attentionDims(layout, shapeAt(0), &b, &h, &sq);
      attentionDims(layout, shapeAt(1), &kb, &kh, &skv);
      // With strides, a tensor's expected length is its strided span.
      auto expectedLength = [&](int t) {
        const Shape s = shapeAt(t);
        if (!d.hasStrides || s.size() != 4 || countOf(s) <= 0) return countOf(s);
        double span = static_cast<double>(s[3]);
        for (int a = 0; a < 3; ++a) {
          const double st = d.strides[t][a];
          if (!(st >= 0 && st <= 1e12) || st != std::floor(st)) return countOf(s);
          span += static_cast<double>(s[a] - 1) * st;
        }
        return span > kMaxBufferElements ? int64_t{-1} : static_cast<int64_t>(span);
      };
      // k and v in bf16 or int8 when the descriptor says so, mostly (kvBf16 and kvInt8, the last flags).
      const bool kvBf16 = scalarAt(7) == 1, kvInt8 = scalarAt(8) == 1;
      const uint8_t types = in.next();
      auto kvBuffer = [&](bool half, bool bytes, const BufferPlan& plan) {
        return half ? bf16Buffer(bufs, plan) : bytes ? int8Buffer(bufs, plan) : floatBuffer(bufs, plan);
      };
      BufferArg q = floatBuffer(bufs, planBuffer(in, expectedLength(0), false));
      BufferArg k = kvBuffer(types % 8 == 7 ? !kvBf16 : kvBf16, types % 8 == 5 ? !kvInt8 : kvInt8,
                             planBuffer(in, expectedLength(1), false));
      BufferArg v = kvBuffer(types % 8 == 6 ? !kvBf16 : kvBf16, types % 8 == 4 ? !kvInt8 : kvInt8,
                             planBuffer(in, expectedLength(2), false));
      // Their row scales: one per row of a dense k or v, now and then missing or the wrong length.
      auto rowsOf = [&](int t) {
        const Shape s = shapeAt(t);
        const int64_t n = countOf(s);
        return kvInt8 && s.size() == 4 && n >= 0 && s[3] > 0 ? n / s[3] : -1;
      };
      BufferArg kScales = floatBuffer(bufs, planBuffer(in, rowsOf(1), true));
      BufferArg vScales = floatBuffer(bufs, planBuffer(in, rowsOf(2), true));
      // Now and then q, k and v side by side in one buffer, as the fused QKV
      // output holds them (each view offset by the one before's row width).
      if (q.present && k.present && v.present && !k.bf16 && !v.bf16 && !k.int8 && !v.int8 && in.next() % 4 == 0) {
        const Shape qs = shapeAt(0), ks = shapeAt(1);
        // Row widths only from shapes whose element count is sane (a huge dim would overflow them).
        const int64_t qRow = qs.size() == 4 ? std::min(mulSat(qs[2], qs[3]), kMaxBufferElements) : 0;
        const int64_t kRow = ks.size() == 4 ? std::min(mulSat(ks[2], ks[3]), kMaxBufferElements) : 0;
        const int64_t size = std::max({q.length, qRow + k.length, qRow + kRow + v.length});
        bufs.floats.emplace_back(static_cast<size_t>(size), 0.75f);
        float* base = bufs.floats.back().data();
        q = {base, q.length, true};
        k = {base + qRow, k.length, true};
        v = {base + qRow + kRow, v.length, true};
      }
      BufferArg out = floatBuffer(bufs, planBuffer(in, countOf(shapeAt(3)), false));
      BufferArg mask = floatBuffer(bufs, planBuffer(in, shapeAt(4).empty() ? -1 : countOf(shapeAt(4)), true));
      const BufferPlan padPlan = planBuffer(in, b >= 0 && skv >= 0 ? countOf({b, skv}) : -1, true);
      BufferArg pad;
      if (padPlan.present) {
        bufs.bytes.assign(static_cast<size_t>(padPlan.length), 0);
        for (size_t i = 0; i < bufs.bytes.size(); ++i) bufs.bytes[i] = in.next() & 1;
        pad = {bufs.bytes.data(), padPlan.length, true};
      }
      const int64_t wExpected = b >= 0 && h >= 0 && sq >= 0 && skv >= 0 ? countOf({b, h, sq, skv}) : -1;
      BufferArg weights = floatBuffer(bufs, planBuffer(in, wExpected, true));
      BufferArg sinks = floatBuffer(bufs, planBuffer(in, h, true));
      // keyLengths: mostly within [0, seqKV], now and then past either end.
      const BufferPlan lengthsPlan = planBuffer(in, b, true);
      BufferArg keyLengths;
      if (lengthsPlan.present) {
        bufs.ints.assign(static_cast<size_t>(lengthsPlan.length), 0);
        for (size_t i = 0; i < bufs.ints.size(); ++i) {
          const uint8_t pick = in.next();
          const int64_t value = pick < 8 ? std::max<int64_t>(skv, 0) + pick - 4 : skv > 0 ? in.next() % (skv + 1) : 0;
          bufs.ints[i] = static_cast<int32_t>(std::clamp<int64_t>(value, INT32_MIN, INT32_MAX));
        }
        keyLengths = {bufs.ints.data(), lengthsPlan.length, true};
      }
      aliasOut(in, bufs, &q, &out);
      AttentionCall call;
      if (!prepareAttention(desc, q, k, v, out, mask, pad, weights, sinks, keyLengths, &call, kScales, vScales).ok())
        return;
      const AttentionProblem& p = call.problem;
      if (static_cast<double>(p.batch) * p.heads * p.seqQ * p.seqKV * (p.headDim + p.headDimV + 1) > kMaxWork)
        return;
      runCall(call);
      ++stats.ran[op];
      return;
    }
    case PackMatrix: {
      const Shape bs = shapeAt(0);
      int64_t expected = -1;
      const bool bf16 = scalarAt(1) == 1, int8 = scalarAt(2) == 1;
      const int64_t k = scalarAt(0) == 1 ? (bs.size() == 2 ? bs[1] : 0) : (bs.size() == 2 ? bs[0] : 0);
      const int64_t n = scalarAt(0) == 1 ? (bs.size() == 2 ? bs[0] : 0) : (bs.size() == 2 ? bs[1] : 0);
      if (bs.size() == 2 && countOf(bs) >= 0) expected = int8 ? packedInt8Bytes(k, n) : bf16 ? packedBf16Size(k, n) : packedBSize(k, n);
      // A float, an already-bf16 or an already-int8 source (with scales); an
      // out of the type the flags say, mostly.
      const uint8_t types = in.next();
      BufferArg b = types & 2   ? int8Buffer(bufs, planBuffer(in, countOf(bs), false))
                    : types & 1 ? bf16Buffer(bufs, planBuffer(in, countOf(bs), false))
                                : floatBuffer(bufs, planBuffer(in, countOf(bs), false));
      BufferArg scales = floatBuffer(bufs, planBuffer(in, types & 2 ? n : -1, true));
      const bool flip = types % 8 == 7;
      BufferArg out = (int8 != flip) ? int8Buffer(bufs, planBuffer(in, expected, false))
                      : (bf16 != flip) ? bf16Buffer(bufs, planBuffer(in, expected, false))
                                       : floatBuffer(bufs, planBuffer(in, expected, false));
      aliasOut(in, bufs, &b, &out);
      PackCall call;
      if (preparePackMatrix(desc, b, out, scales, &call).ok()) runCall(call), ++stats.ran[op];
      return;
    }
    case PackedSize: {
      int64_t floats = 0;
      if (preparePackedSize(desc, &floats).ok()) ++stats.ran[op];
      // rope came later: reached from here, so the saved inputs of every older op keep their meaning.
      if (in.next() % 2 == 1)
        fuzzRope(in);
      else if (in.next() % 2 == 1)
        fuzzCacheAppend(in);
      return;
    }
    case LayerNormMatmul:  // reached from the Matmul case only
    case Rope:             // reached from the PackedSize case only
    case CacheAppend:      // likewise
    case OpCount: return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzOne(data, size);
  return 0;
}
