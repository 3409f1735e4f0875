#include "gemm_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../runtime/cpu_features.h"
#include "../runtime/thread_pool.h"
#include "kernel_math.h"
#include "kernel_table.h"
#include "scratch.h"

namespace mhsa {
namespace {

constexpr int64_t kSliverBytes = kInt8SliverColumns * kInt8DepthGroup;  // one group of one sliver

int64_t groupsOf(int64_t k) { return (k + kInt8DepthGroup - 1) / kInt8DepthGroup; }
int64_t paddedColumns(int64_t n) { return roundUp(n, kInt8SliverColumns); }

// Round to nearest even by the float32 adder: exact for |v| < 2^22, the
// same in every build (no dependence on SSE4.1's roundps or libm's
// nearbyintf), and vectorized by the compiler. Without -ffast-math the sum is
// never folded back to v.
inline float roundEven(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

// The quantizer of n values, stride apart (int8QuantizerOf).
Int8Quantizer quantizerOf(const float* v, int64_t n, int64_t stride) {
  float lanes[8] = {};
  bool finite = true;
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) {
        const float x = std::fabs(v[i + l]);
        finite = finite && x <= std::numeric_limits<float>::max();
        lanes[l] = x > lanes[l] ? x : lanes[l];
      }
  }
  for (; i < n; ++i) {
    const float x = std::fabs(v[i * stride]);
    finite = finite && x <= std::numeric_limits<float>::max();
    lanes[0] = x > lanes[0] ? x : lanes[0];
  }
  float most = 0.0f;
  for (float l : lanes) most = l > most ? l : most;
  return int8QuantizerOf(most, finite);
}

inline int8_t quantize(float v, float inverse) {
  const float r = roundEven(v * inverse);
  return static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, r)));
}

}  // namespace

float quantizeInt8(const float* v, int64_t n, int8_t* out) {
  const Int8Quantizer q = quantizerOf(v, n, 1);
  for (int64_t i = 0; i < n; ++i) out[i] = quantize(v[i], q.inverse);
  return q.scale;
}

float quantizeQueryInt16(const float* q, int64_t d, int64_t padded, int16_t* out) {
  // |sum| <= most * 127 * d must stay below 2^31.
  const float most = static_cast<float>(std::min<int64_t>(32767, 2147483647 / (127 * std::max<int64_t>(d, 1))));
  const Int8Quantizer unit = quantizerOf(q, d, 1);  // max|q| / 127 and its inverse
  const float scale = unit.scale * (127.0f / most), inverse = unit.inverse * (most / 127.0f);
  for (int64_t e = 0; e < d; ++e) out[e] = static_cast<int16_t>(std::min(most, std::max(-most, roundEven(q[e] * inverse))));
  for (int64_t e = d; e < padded; ++e) out[e] = 0;
  return scale;
}

int64_t packedInt8Bytes(int64_t k, int64_t n) {
  const int64_t cols = paddedColumns(n);
  return cols * groupsOf(k) * kInt8DepthGroup + cols * 4 + cols * 4;
}

PackedInt8View packedInt8View(const int8_t* packed, int64_t k, int64_t n) {
  const int64_t cols = paddedColumns(n), groups = groupsOf(k);
  const int8_t* sums = packed + cols * groups * kInt8DepthGroup;
  return {packed, sums, sums + cols * 4, groups};
}

namespace {

// Fills the slivers, sums and scales of a packed matrix column by column:
// column(j, put) stores column j's values through put(depth, value) and
// returns its scale.
template <typename Column>
void packColumns(int64_t k, int64_t n, int8_t* packed, Column column) {
  const int64_t cols = paddedColumns(n), groups = groupsOf(k);
  // Sums and scales are stored as bytes: a raw call's out need not be 4-byte aligned.
  int8_t* sums = packed + cols * groups * kInt8DepthGroup;
  int8_t* scales = sums + cols * 4;
  parallelFor(cols / kInt8SliverColumns, [&](int64_t s) {
    int8_t* sliver = packed + s * groups * kSliverBytes;
    std::memset(sliver, 0, static_cast<size_t>(groups * kSliverBytes));
    for (int64_t c = 0; c < kInt8SliverColumns; ++c) {
      const int64_t j = s * kInt8SliverColumns + c;
      int32_t sum = 0;
      auto put = [&](int64_t d, int8_t v) {
        sliver[(d / kInt8DepthGroup) * kSliverBytes + c * kInt8DepthGroup + d % kInt8DepthGroup] = v;
        sum += v;
      };
      const float scale = j < n ? column(j, put) : 0.0f;
      std::memcpy(scales + 4 * j, &scale, 4);
      std::memcpy(sums + 4 * j, &sum, 4);
    }
  });
}

}  // namespace

void packWholeBInt8(const StridedMatrix& b, int64_t k, int64_t n, int8_t* packed) {
  packColumns(k, n, packed, [&](int64_t j, auto& put) {
    if (k == 0) return 0.0f;  // no column to address (b.data may be null)
    const float* column = b.data + j * b.colStride;
    const Int8Quantizer q = quantizerOf(column, k, b.rowStride);
    for (int64_t d = 0; d < k; ++d) put(d, quantize(column[d * b.rowStride], q.inverse));
    return q.scale;
  });
}

void packWholeBQuantized(const StridedInt8Matrix& b, int64_t k, int64_t n, const float* scales, int8_t* packed) {
  packColumns(k, n, packed, [&](int64_t j, auto& put) {
    for (int64_t d = 0; d < k; ++d) put(d, b.data[d * b.rowStride + j * b.colStride]);
    return scales[j];
  });
}

namespace {

// The portable tile: plain int32 loops.
void portableTile(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc, int mr) {
  for (int i = 0; i < rows; ++i)
    for (int64_t j = 0; j < kInt8SliverColumns; ++j) acc[i * kInt8SliverColumns + j] = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* a = ap + g * mr * kInt8DepthGroup;
    const int8_t* b = bp + g * kSliverBytes;
    for (int i = 0; i < rows; ++i) {
      int32_t* row = acc + i * kInt8SliverColumns;
      const int8_t* ai = a + i * kInt8DepthGroup;
      for (int64_t j = 0; j < kInt8SliverColumns; ++j) {
        const int8_t* bj = b + j * kInt8DepthGroup;
        row[j] += ai[0] * bj[0] + ai[1] * bj[1] + ai[2] * bj[2] + ai[3] * bj[3];
      }
    }
  }
}

constexpr int kPortableMr = 4;
void portableTile4(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc) {
  portableTile(groups, ap, rows, bp, acc, kPortableMr);
}
const Int8Kernels kPortableInt8 = {"portable", kPortableMr, false, portableTile4, nullptr, nullptr, nullptr};

// Rows [r0, r1) of a (at most mr) quantized into the packed A tile at dst
// (per group: mr rows x 4 bytes; rows past r1 and depths past k are zero),
// with each row's scale.
void packATile(const GemmProblem& p, const Int8Kernels& kk, int64_t r0, int64_t r1, int64_t groups, int8_t* dst,
               float* scales) {
  std::memset(dst, 0, static_cast<size_t>(groups * kk.mr * kInt8DepthGroup));
  const int8_t bias = kk.unsignedA ? int8_t(-128) : int8_t(0);  // + 128 as a u8 is a flip of the sign bit
  const int64_t groupStride = kk.mr * kInt8DepthGroup;
  for (int64_t i = r0; i < r1; ++i) {
    const float* row = p.a.data + i * p.a.rowStride;
    int8_t* out = dst + (i - r0) * kInt8DepthGroup;
    if (kk.quantizeRow && p.a.colStride == 1) {
      scales[i - r0] = kk.quantizeRow(row, p.k, out, groupStride, bias);
    } else {
      const Int8Quantizer q = quantizerOf(row, p.k, p.a.colStride);
      scales[i - r0] = q.scale;
      for (int64_t d = 0; d < p.k; ++d)
        out[(d / kInt8DepthGroup) * groupStride + d % kInt8DepthGroup] =
            static_cast<int8_t>(quantize(row[d * p.a.colStride], q.inverse) ^ bias);
    }
    if (kk.unsignedA)  // the padding depths hold 0 + 128 too: their B bytes are 0
      for (int64_t d = p.k; d < groups * kInt8DepthGroup; ++d)
        out[(d / kInt8DepthGroup) * groupStride + d % kInt8DepthGroup] = bias;
  }
}

}  // namespace

const Int8Kernels& int8Kernels() {
  static const Int8Kernels* const selected = [] {
    const Int8Kernels* list[3];
    return availableInt8Kernels(list, 3) > 0 ? list[0] : &kPortableInt8;
  }();
  return *selected;
}

int availableInt8Kernels(const Int8Kernels** list, int capacity) {
  int count = 0;
#if defined(MHSA_HAVE_X86_KERNELS)
  const Isa isa = selectedIsa();
#if !defined(MHSA_EMULATED_AVX512)
  if (count < capacity && isa == Isa::Avx512 && cpuHasAvx512Vnni()) list[count++] = &avx512VnniInt8Kernels();
#endif
  if (count < capacity && isa >= Isa::Avx2) list[count++] = &avx2Int8Kernels();
#endif
#if defined(__aarch64__)
  if (count < capacity && cpuHasDotProduct()) list[count++] = &neonDotInt8Kernels();
  if (count < capacity) list[count++] = &neonInt8Kernels();
#endif
  if (count < capacity) list[count++] = &kPortableInt8;
  return count;
}

void gemmInt8(const GemmProblem& p, const Int8Kernels& kk) {
  if (p.m <= 0 || p.n <= 0) return;
  const PackedInt8View b = packedInt8View(p.packedBInt8, p.k, p.n);
  const int64_t groups = b.groups, mr = kk.mr;
  const int64_t rowTiles = (p.m + mr - 1) / mr, slivers = paddedColumns(p.n) / kInt8SliverColumns;
  const int64_t tileBytes = groups * mr * kInt8DepthGroup;
  // The caller's scratch: the pool's threads use it only inside the parallelFor calls below.
  int8_t* aq = reinterpret_cast<int8_t*>(scratchFloats(ScratchSlot::Int8PackA, static_cast<size_t>((rowTiles * tileBytes + 3) / 4)));
  float* aScales = scratchFloats(ScratchSlot::Int8RowScales, static_cast<size_t>(rowTiles * mr));
  parallelFor(rowTiles, [&](int64_t t) {
    packATile(p, kk, t * mr, std::min(p.m, (t + 1) * mr), groups, aq + t * tileBytes, aScales + t * mr);
  });
  // A task is one sliver against every row tile: the sliver stays in L1 while
  // the packed A streams from L2.
  parallelFor(slivers, [&](int64_t s) {
    const int64_t j0 = s * kInt8SliverColumns, cols = std::min(kInt8SliverColumns, p.n - j0);
    // The sliver's sums and scales, copied as bytes: a forged Int8Array need not be 4-byte aligned.
    int32_t sums[kInt8SliverColumns];
    float sw[kInt8SliverColumns];
    std::memcpy(sums, b.sums + 4 * j0, static_cast<size_t>(cols) * 4);
    std::memcpy(sw, b.scales + 4 * j0, static_cast<size_t>(cols) * 4);
    for (int64_t t = 0; t < rowTiles; ++t) {
      const int rows = static_cast<int>(std::min(mr, p.m - t * mr));
      alignas(64) int32_t acc[16 * kInt8SliverColumns];
      kk.tile(groups, aq + t * tileBytes, rows, b.slivers + s * groups * kSliverBytes, acc);
      for (int i = 0; i < rows; ++i) {
        const float sa = aScales[t * mr + i];
        float* out = p.out + (t * mr + i) * p.outRowStride + j0;
        const int32_t* row = acc + i * kInt8SliverColumns;
        for (int64_t j = 0; j < cols; ++j) {
          // Wrapping arithmetic: exact for a matrix packWholeBInt8 made, and defined for a forged one.
          const int32_t sum =
              kk.unsignedA
                  ? static_cast<int32_t>(static_cast<uint32_t>(row[j]) - 128u * static_cast<uint32_t>(sums[j]))
                  : row[j];
          float r = p.alpha * (static_cast<float>(sum) * (sa * sw[j]));
          if (p.accumulate) r = r + out[j];
          if (p.bias) r = r + p.bias[j0 + j];
          out[j] = r;
        }
      }
      finishTile(kernels(), p, t * mr, rows, j0, cols);
    }
  });
}

}  // namespace mhsa
