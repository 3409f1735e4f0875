// Allocation failure inside the kernels: operator new is replaced for this
// test binary so the n-th allocation from now throws std::bad_alloc. Every
// such failure must come out of runCall as that exception (the binding turns
// it into a RangeError), never terminate the process, and leave the runtime
// working: the next call on the same thread computes the right result.
#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "../runtime/thread_pool.h"
#include "check.h"
#include "support.h"

namespace {

// -1: never fail. n >= 0: the allocation after n more succeeds throws.
std::atomic<long> allocationsBeforeFailure{-1};

void* allocate(std::size_t n) {
  if (allocationsBeforeFailure.load(std::memory_order_relaxed) >= 0 &&
      allocationsBeforeFailure.fetch_sub(1) == 0)
    throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms (std::stable_sort's buffer, for one) must come from the
// same malloc, or the replaced delete frees what the sanitizer's new allocated.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace mhsa;
using namespace mhsa_test;

TEST(allocation_failure_in_kernels_is_an_exception_and_recoverable) {
  std::mt19937_64 rng(testSeed() + 40);
  const int64_t B = 1, H = 2, S = 300, D = 64;
  const auto q = randomFloats(rng, B * H * S * D), k = randomFloats(rng, B * H * S * D),
             v = randomFloats(rng, B * H * S * D);
  const auto a = randomFloats(rng, 200 * 300), b = randomFloats(rng, 300 * 150);
  std::vector<float> reference(B * H * S * D), mmReference(200 * 150);
  DescBuilder ad;
  ad.number(0).shape({B, H, S, D}).shape({B, H, S, D}).shape({B, H, S, D}).shape({B, H, S, D});
  ad.flag(false).number(0).flag(true).shape({}).number(0).number(-1).number(-1).flag(false).flag(false);
  DescBuilder md;
  md.shape({200, 300}).shape({300, 150}).shape({}).shape({200, 150}).flag(false).flag(false).number(1).number(0).flag(false).flag(false).flag(false);
  {
    AttentionCall call;
    CHECK(prepareAttention(ad.done(), buf(q), buf(k), buf(v), buf(reference), none(), none(), none(), none(), &call).ok());
    runCall(call);
    MatmulCall mc;
    CHECK(prepareMatmul(md.done(), buf(a), buf(b), none(), buf(mmReference), &mc).ok());
    runCall(mc);
  }
  int failures = 0, completions = 0;
  // Fresh threads have empty scratch buffers, so the kernels allocate again;
  // with 2 pool threads the failure lands in a helper's task now and then.
  for (long failAt = 0; failAt < 40; ++failAt) {
    std::thread caller([&] {
      std::vector<float> out = poisoned(reference.size()), mm = poisoned(mmReference.size());
      AttentionCall call;
      MatmulCall mc;
      const Status s1 = prepareAttention(ad.done(), buf(q), buf(k), buf(v), buf(out), none(), none(), none(), none(), &call);
      const Status s2 = prepareMatmul(md.done(), buf(a), buf(b), none(), buf(mm), &mc);
      const bool prepared = s1.ok() && s2.ok();
      allocationsBeforeFailure.store(failAt);
      try {
        runCall(call);
        runCall(mc);
        ++completions;
      } catch (const std::bad_alloc&) {
        ++failures;
      }
      allocationsBeforeFailure.store(-1);
      // Whatever happened, the same calls now succeed and are right.
      runCall(call);
      runCall(mc);
      CHECK_MSG(prepared, s1.message + s2.message);
      CHECK(out == reference);
      CHECK(mm == mmReference);
    });
    caller.join();
  }
  CHECK(failures > 0);
  std::printf("  allocation failure injected: %d calls threw std::bad_alloc, %d completed\n", failures, completions);
}
