// The shapes of the few-rows kernels (KernelTable::fewRowsPacked): one or two
// rows, one to four slivers, each a template instance of the ISA's tile.
#pragma once

#include <type_traits>

namespace mhsa {

// Calls f(rows, slivers) with both as std::integral_constant, for rows in
// {1, 2} and slivers in [1, 4] (more than 4 runs 4).
template <typename F>
inline void withFewRowsShape(int rows, int slivers, F&& f) {
  auto bySlivers = [&](auto r) {
    switch (slivers) {
      case 1: return f(r, std::integral_constant<int, 1>{});
      case 2: return f(r, std::integral_constant<int, 2>{});
      case 3: return f(r, std::integral_constant<int, 3>{});
      default: return f(r, std::integral_constant<int, 4>{});
    }
  };
  if (rows == 1)
    bySlivers(std::integral_constant<int, 1>{});
  else
    bySlivers(std::integral_constant<int, 2>{});
}

}  // namespace mhsa
