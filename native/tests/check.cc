#include "check.h"

#include <cstdlib>
#include <cstring>

#include "../kernels/kernel_table.h"
#include "../runtime/cpu_features.h"
#include "../runtime/thread_pool.h"

namespace mhsa_test {
namespace {

constexpr int kSkippedExitCode = 77;  // native/tests/CMakeLists.txt: SKIP_RETURN_CODE
int failures = 0;
const char* currentTest = "";

}  // namespace

std::vector<TestCase>& registry() {
  static std::vector<TestCase> r;
  return r;
}

void recordFailure(const char* file, int line, const std::string& what) {
  ++failures;
  if (failures <= 50) std::fprintf(stderr, "FAIL %s (%s:%d): %s\n", currentTest, file, line, what.c_str());
}

}  // namespace mhsa_test

// Usage: mhsa_native_tests [substring]  — runs the tests whose name contains it.
int main(int argc, char** argv) {
  using namespace mhsa_test;
  const char* filter = argc > 1 ? argv[1] : "";
  // MHSA_ISA never raises the table above what the CPU runs: asked for a table
  // this CPU lacks, the run would test a lower one under the higher one's
  // name. Report it to ctest as skipped instead (SKIP_RETURN_CODE), and an
  // unknown value as an error (the runtime would quietly take the best table).
  if (const char* wanted = std::getenv("MHSA_ISA"); wanted != nullptr && *wanted != '\0') {
    mhsa::Isa asked;
    if (!mhsa::isaFromName(wanted, &asked)) {
      std::fprintf(stderr, "mhsa native tests: MHSA_ISA=%s is not one of avx512, avx2, portable\n", wanted);
      return EXIT_FAILURE;
    }
    if (asked != mhsa::selectedIsa()) {
      std::printf("mhsa native tests: skipped: MHSA_ISA=%s, but this CPU runs at most the %s table\n", wanted,
                  mhsa::kernels().name);
      return kSkippedExitCode;
    }
  }
#if defined(MHSA_EMULATED_AVX512)
  const bool emulated = mhsa::selectedIsa() == mhsa::Isa::Avx512;
#else
  const bool emulated = false;
#endif
  std::printf("mhsa native tests: isa %s%s, %d threads\n", mhsa::kernels().name,
              emulated ? " (emulated on AVX2 by SIMDe)" : "", mhsa::numThreads());
  int run = 0;
  for (const TestCase& t : registry()) {
    if (std::strstr(t.name, filter) == nullptr) continue;
    currentTest = t.name;
    const int before = failures;
    t.fn();
    ++run;
    std::printf("%s %s\n", failures == before ? "ok  " : "FAIL", t.name);
  }
  std::printf("%d tests, %d failed checks\n", run, failures);
  return failures == 0 && run > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
