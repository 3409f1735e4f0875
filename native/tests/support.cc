#include "support.h"

#include <cstdlib>

namespace mhsa_test {

uint64_t testSeed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("MHSA_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(s, nullptr, 10));
    return static_cast<uint64_t>(std::random_device{}());
  }();
  return seed;
}

}  // namespace mhsa_test
