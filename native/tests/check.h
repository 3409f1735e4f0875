// A minimal test runner for the native kernels: TEST(name) registers a
// function, CHECK* record failures without stopping the test. Enough for
// ctest under sanitizers, with no dependency to install.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace mhsa_test {

struct TestCase {
  const char* name;
  std::function<void()> fn;
};

std::vector<TestCase>& registry();
void recordFailure(const char* file, int line, const std::string& what);

struct Registrar {
  Registrar(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

}  // namespace mhsa_test

#define MHSA_CONCAT2(a, b) a##b
#define MHSA_CONCAT(a, b) MHSA_CONCAT2(a, b)
#define TEST(name)                                                                   \
  static void MHSA_CONCAT(test_, name)();                                            \
  static mhsa_test::Registrar MHSA_CONCAT(registrar_, name)(#name, MHSA_CONCAT(test_, name)); \
  static void MHSA_CONCAT(test_, name)()

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) mhsa_test::recordFailure(__FILE__, __LINE__, "CHECK(" #cond ")");   \
  } while (0)

#define CHECK_MSG(cond, msg)                                                         \
  do {                                                                               \
    if (!(cond)) mhsa_test::recordFailure(__FILE__, __LINE__, std::string(msg));     \
  } while (0)
