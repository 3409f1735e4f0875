// The int8 tile on AVX2, where VPMADDUBSW multiplies unsigned by signed bytes
// and adds pairs into int16 with saturation. Both operands are quantized to
// [-127, 127], so |a| (VPSIGNB of a by itself) times b with a's sign (VPSIGNB
// of b by a) gives the same products as unsigned bytes at most 127: a pair
// sums to at most 2 * 127 * 127 = 32258, never saturating. VPMADDWD by ones
// then adds the pairs into int32. Up to 2 rows x 32 columns: 8 accumulators,
// 4 vectors of the sliver, and the temporaries fit the 16 registers.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gemm_int8.h"

namespace mhsa {
namespace {

constexpr int kMr = 2;

template <int R>
void tileRows(int64_t groups, const int8_t* ap, const int8_t* bp, int32_t* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum[R][4];  // rows unrolled, so the array stays in registers
#pragma GCC unroll 2
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 4; ++v) sum[i][v] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i b[4];
    for (int v = 0; v < 4; ++v) b[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32 * v));
#pragma GCC unroll 2
    for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, ap + 4 * i, 4);
      const __m256i a = _mm256_set1_epi32(word);
      const __m256i magnitude = _mm256_sign_epi8(a, a);
      for (int v = 0; v < 4; ++v) {
        const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(b[v], a));
        sum[i][v] = _mm256_add_epi32(sum[i][v], _mm256_madd_epi16(pairs, ones));
      }
    }
    ap += 4 * kMr;
    bp += 128;
  }
#pragma GCC unroll 2
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 32 * i + 8 * v), sum[i][v]);
}

void tile(int64_t groups, const int8_t* ap, int rows, const int8_t* bp, int32_t* acc) {
  if (rows == 2)
    tileRows<2>(groups, ap, bp, acc);
  else
    tileRows<1>(groups, ap, bp, acc);
}

const Int8Kernels kKernels = {"avx2", kMr, false, tile, nullptr, nullptr, nullptr};

}  // namespace

const Int8Kernels& avx2Int8Kernels() { return kKernels; }

}  // namespace mhsa
