// The result pool (runtime/result_pool.h): size classes, reuse of the most
// recently given back block, the limit with eviction of the oldest blocks,
// and blocks given back from many threads at once.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "../runtime/result_pool.h"
#include "check.h"

using namespace mhsa;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Empties the pool and sets its limit; restored to the default by the caller.
void resetPool(size_t limit) {
  setResultPoolLimit(0);
  setResultPoolLimit(limit);
}

}  // namespace

TEST(result_pool_size_classes) {
  CHECK(resultBlockBytes(0) == 0);
  CHECK(resultBlockBytes(kMinPooledResultBytes) == kMinPooledResultBytes);
  CHECK(resultBlockBytes(kMinPooledResultBytes + 1) == kMinPooledResultBytes + kMinPooledResultBytes / 8);
  // Every size gets a block at least as large, at most 1/8 larger, from a class of 8 per power of two.
  for (size_t bytes : {size_t{65537}, size_t{197 * 1000 * 4}, size_t{6144 * 512 * 4}, size_t{4096 * 4096 * 4 - 4},
                       size_t{3} * kMiB + 17, size_t{1000003} * 4}) {
    const size_t block = resultBlockBytes(bytes);
    CHECK(block >= bytes);
    CHECK(block - bytes <= bytes / 8);
    CHECK(resultBlockBytes(block) == block);
  }
  CHECK(resultBlockBytes(SIZE_MAX) == 0);
}

TEST(result_pool_reuses_the_most_recent_block_of_a_class) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(64 * kMiB);
  CHECK(acquireResultBlock(kMinPooledResultBytes - 4) == nullptr);
  const ResultPoolStats s0 = resultPoolStats();
  void* a = acquireResultBlock(kMiB);
  void* b = acquireResultBlock(kMiB);
  void* c = acquireResultBlock(2 * kMiB);
  CHECK(a != nullptr && b != nullptr && c != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0 && reinterpret_cast<uintptr_t>(c) % 64 == 0);
  std::memset(a, 1, kMiB);  // the whole block is usable
  CHECK(resultPoolStats().misses == s0.misses + 3);
  CHECK(resultPoolStats().liveBytes == s0.liveBytes + 4 * kMiB);
  releaseResultBlock(a, kMiB);
  releaseResultBlock(c, 2 * kMiB);
  releaseResultBlock(b, kMiB);
  CHECK(resultPoolStats().heldBytes == 4 * kMiB);
  CHECK(resultPoolStats().liveBytes == s0.liveBytes);
  // A size of the same class takes the most recently given back block of it.
  CHECK(acquireResultBlock(kMiB - 4096) == b);
  CHECK(acquireResultBlock(kMiB) == a);
  CHECK(resultPoolStats().hits == s0.hits + 2);
  void* d = acquireResultBlock(kMiB);
  CHECK(d != a && d != b && d != c);
  CHECK(acquireResultBlock(2 * kMiB) == c);
  for (void* p : {a, b, d}) releaseResultBlock(p, kMiB);
  releaseResultBlock(c, 2 * kMiB);
  resetPool(limitBefore);
}

TEST(result_pool_keeps_within_its_limit) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(3 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(acquireResultBlock(kMiB));
  for (void* p : blocks) releaseResultBlock(p, kMiB);
  ResultPoolStats s = resultPoolStats();
  CHECK(s.heldBytes == 3 * kMiB && s.heldBlocks == 3);
  // The oldest went: the last three given back stay, newest first.
  CHECK(acquireResultBlock(kMiB) == blocks[4]);
  CHECK(acquireResultBlock(kMiB) == blocks[3]);
  CHECK(acquireResultBlock(kMiB) == blocks[2]);
  for (int i = 2; i < 5; ++i) releaseResultBlock(blocks[i], kMiB);
  // A block larger than the limit is freed at once.
  void* big = acquireResultBlock(4 * kMiB);
  releaseResultBlock(big, 4 * kMiB);
  CHECK(resultPoolStats().heldBytes == 3 * kMiB);
  // Lowering the limit frees the oldest blocks beyond it; 0 turns the pool off.
  setResultPoolLimit(kMiB + 1);
  s = resultPoolStats();
  CHECK(s.heldBytes == kMiB && s.heldBlocks == 1);
  setResultPoolLimit(0);
  CHECK(resultPoolStats().heldBytes == 0);
  CHECK(acquireResultBlock(kMiB) == nullptr);
  resetPool(limitBefore);
}

TEST(result_pool_blocks_given_back_from_many_threads) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(16 * kMiB);
  const ResultPoolStats s0 = resultPoolStats();
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t bytes = kMinPooledResultBytes * static_cast<size_t>(1 + (t + r) % 5);
        auto* p = static_cast<unsigned char*>(acquireResultBlock(bytes));
        if (p == nullptr) continue;
        p[0] = static_cast<unsigned char>(t);
        p[bytes - 1] = static_cast<unsigned char>(r);
        if (p[0] != t || p[bytes - 1] != static_cast<unsigned char>(r)) std::abort();  // shared with another thread
        releaseResultBlock(p, bytes);
      }
    });
  }
  for (auto& th : threads) th.join();
  const ResultPoolStats s = resultPoolStats();
  CHECK(s.liveBytes == s0.liveBytes);
  CHECK(s.heldBytes <= 16 * kMiB);
  CHECK(s.hits + s.misses == s0.hits + s0.misses + kThreads * kRounds);
  CHECK(s.hits > s0.hits);
  resetPool(limitBefore);
}
