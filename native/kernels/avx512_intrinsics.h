// <immintrin.h> for the files compiled with the AVX-512 flags, with one GCC 12
// false positive silenced: _mm512_min_ps, _mm512_max_ps and _mm512_reduce_*
// pass _mm512_undefined_ps() through an inlined mask form, which
// -Wmaybe-uninitialized reports (GCC bug 105593). Deliberately for the rest
// of the including file, as each of these files had it before.
#pragma once

#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cstdint>

namespace mhsa {

// The mask of lanes [0, n) of a 16-float vector, for n of any size (all lanes
// from 16 up, none at 0 or below): a row's ragged tail.
inline __mmask16 lowLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

}  // namespace mhsa
