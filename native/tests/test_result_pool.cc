// The result pool (runtime/result_pool.h): size classes, reuse of the most
// recently given back block, the limit with eviction of the oldest blocks,
// and blocks given back from many threads at once. And a thread's ledger of
// the pool's free blocks in its engine's count (runtime/result_ledger.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "../runtime/result_ledger.h"
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
  bool reused = true;
  void* a = acquireResultBlock(kMiB, &reused);
  CHECK(!reused);
  void* b = acquireResultBlock(kMiB);
  void* c = acquireResultBlock(2 * kMiB);
  CHECK(a != nullptr && b != nullptr && c != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0 && reinterpret_cast<uintptr_t>(c) % 64 == 0);
  std::memset(a, 1, kMiB);  // the whole block is usable
  CHECK(resultPoolStats().misses == s0.misses + 3);
  CHECK(resultPoolStats().liveBytes == s0.liveBytes + 4 * kMiB);
  CHECK(releaseResultBlock(a, kMiB));
  CHECK(releaseResultBlock(c, 2 * kMiB));
  CHECK(releaseResultBlock(b, kMiB));
  CHECK(resultPoolStats().heldBytes == 4 * kMiB);
  CHECK(resultPoolStats().liveBytes == s0.liveBytes);
  // A size of the same class takes the most recently given back block of it.
  CHECK(acquireResultBlock(kMiB - 4096, &reused) == b);
  CHECK(reused);
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
  CHECK(!releaseResultBlock(big, 4 * kMiB));
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

namespace {

// An engine's count of external memory as V8 keeps it: it adds a buffer when
// it is made and subtracts it when it is freed, and newer V8 aborts if the
// count would go below zero. `ledger` is what the binding adds.
struct EngineCount {
  int64_t count = 0;
  int64_t liveBuffers = 0;
  void change(int64_t bytes) { count += bytes; }
  void made(size_t bytes) {
    count += static_cast<int64_t>(bytes);
    liveBuffers += static_cast<int64_t>(bytes);
  }
  void freed(size_t bytes) {
    count -= static_cast<int64_t>(bytes);
    liveBuffers -= static_cast<int64_t>(bytes);
  }
};

// What result_binding.cc does for one pooled result.
void* makeResult(ResultLedger& ledger, EngineCount& engine, size_t bytes) {
  bool reused = false;
  void* memory = acquireResultBlock(bytes, &reused);
  if (memory == nullptr) return nullptr;
  engine.change(ledger.settle(resultBlockBytes(bytes), reused, resultPoolStats().heldBytes));
  engine.made(bytes);
  return memory;
}

void freeResult(ResultLedger& ledger, EngineCount& engine, void* memory, size_t bytes) {
  engine.freed(bytes);
  if (releaseResultBlock(memory, bytes)) ledger.returned(resultBlockBytes(bytes));
}

}  // namespace

TEST(result_ledger_reusing_a_block_leaves_the_count_alone) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(64 * kMiB);
  auto* ledger = new ResultLedger();
  EngineCount engine;
  void* a = makeResult(*ledger, engine, kMiB);
  void* b = makeResult(*ledger, engine, kMiB);
  CHECK(engine.count == static_cast<int64_t>(2 * kMiB));  // new memory counts
  // Another thread's free block, of another class: not this ledger's to count.
  void* foreign = acquireResultBlock(2 * kMiB);
  releaseResultBlock(foreign, 2 * kMiB);
  freeResult(*ledger, engine, a, kMiB);
  freeResult(*ledger, engine, b, kMiB);
  // c reuses one of the two blocks; the other stays counted as free memory.
  void* c = makeResult(*ledger, engine, kMiB);
  CHECK(ledger->addedBytes() == kMiB);
  const int64_t before = engine.count;
  CHECK(before == static_cast<int64_t>(2 * kMiB));
  // d, made while c is alive, reuses the other block: the count does not grow.
  void* d = makeResult(*ledger, engine, kMiB);
  CHECK(engine.count == before);
  CHECK(ledger->addedBytes() == 0);
  // A third needs new memory, and counts.
  void* e = makeResult(*ledger, engine, kMiB);
  CHECK(engine.count == before + static_cast<int64_t>(kMiB));
  for (void* p : {c, d, e}) freeResult(*ledger, engine, p, kMiB);
  // The pool's limit drops to one block: the settled count is only what it still holds.
  setResultPoolLimit(kMiB);
  engine.change(ledger->bound(resultPoolStats().heldBytes));
  CHECK(ledger->addedBytes() == kMiB);
  CHECK(engine.count == static_cast<int64_t>(kMiB));
  ledger->release();
  resetPool(limitBefore);
}

// Two JS threads, each with its own engine: a block one thread's result gave
// back is reused by the other. The reusing thread has credited nothing, so it
// takes nothing off; the first thread's credit drops out at its next result,
// once the pool no longer holds the block.
TEST(result_ledger_a_block_reused_by_another_thread) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(64 * kMiB);
  auto* first = new ResultLedger();
  auto* second = new ResultLedger();
  EngineCount firstEngine, secondEngine;
  // The first thread's two results come back; its third reuses one block and
  // counts the other as free memory.
  void* a1 = makeResult(*first, firstEngine, kMiB);
  void* a2 = makeResult(*first, firstEngine, kMiB);
  freeResult(*first, firstEngine, a1, kMiB);
  freeResult(*first, firstEngine, a2, kMiB);
  void* a3 = makeResult(*first, firstEngine, kMiB);
  CHECK(first->addedBytes() == kMiB);
  // The second thread reuses that free block: it credited nothing, so it takes nothing off.
  const uint64_t hits = resultPoolStats().hits;
  void* b = makeResult(*second, secondEngine, kMiB);
  CHECK(resultPoolStats().hits == hits + 1 && resultPoolStats().heldBytes == 0);
  CHECK(second->addedBytes() == 0);
  CHECK(secondEngine.count == secondEngine.liveBuffers);
  // At the first thread's next result the pool holds no free block: the credit
  // leaves the first thread's count as the new memory arrives in it.
  const int64_t before = firstEngine.count;
  void* a4 = makeResult(*first, firstEngine, kMiB);
  CHECK(firstEngine.count == before);
  CHECK(first->addedBytes() == 0);
  CHECK(firstEngine.count == firstEngine.liveBuffers);
  freeResult(*second, secondEngine, b, kMiB);
  for (void* p : {a3, a4}) freeResult(*first, firstEngine, p, kMiB);
  first->release();
  second->release();
  resetPool(limitBefore);
}

namespace {

// V8's count as its collector sees it: a full collection starts once the count
// has risen 64 MiB past its lowest point. `rise` is the most it has risen.
struct RisingCount {
  int64_t count = 0, low = 0, rise = 0;
  void change(int64_t bytes) {
    count += bytes;
    low = std::min(low, count);
    rise = std::max(rise, count - low);
  }
};

// A loop that drops each result, as V8 frees them: the pool gets the block
// back (and the ledger its credit) before V8 subtracts the buffer, and V8
// subtracts it only after it has counted the next one. Returns how far the
// count rose with the ledger's changes and without them.
std::pair<int64_t, int64_t> riseOfLoop(const std::vector<size_t>& sizes, int calls) {
  auto* ledger = new ResultLedger();
  RisingCount with, without;
  void* previous = nullptr;
  size_t previousBytes = 0;
  for (int call = 0; call < calls; ++call) {
    if (previous != nullptr && releaseResultBlock(previous, previousBytes))
      ledger->returned(resultBlockBytes(previousBytes));
    const size_t bytes = sizes[static_cast<size_t>(call) % sizes.size()];
    bool reused = false;
    void* memory = acquireResultBlock(bytes, &reused);
    with.change(ledger->settle(resultBlockBytes(bytes), reused, resultPoolStats().heldBytes));
    with.change(static_cast<int64_t>(bytes));
    without.change(static_cast<int64_t>(bytes));
    with.change(-static_cast<int64_t>(previousBytes));
    without.change(-static_cast<int64_t>(previousBytes));
    previous = memory;
    previousBytes = bytes;
  }
  if (releaseResultBlock(previous, previousBytes)) ledger->returned(resultBlockBytes(previousBytes));
  ledger->release();
  return {with.rise, without.rise};
}

}  // namespace

// Results whose size changes from call to call: what the ledger adds never
// makes V8's count rise further than the results alone do. Crediting a block
// of one size after taking off one of another did (docs/design/result-pool.md).
TEST(result_ledger_adds_no_rise_when_sizes_change) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(64 * kMiB);
  for (const std::vector<size_t>& sizes : {std::vector<size_t>{3 * kMiB, 2 * kMiB},
                                          std::vector<size_t>{2 * kMiB, 3 * kMiB, 5 * kMiB / 2, 4 * kMiB},
                                          std::vector<size_t>{3 * kMiB, 3 * kMiB, 2 * kMiB},
                                          std::vector<size_t>{3 * kMiB, 3 * kMiB, 2 * kMiB, 2 * kMiB, 3 * kMiB}}) {
    const auto [with, without] = riseOfLoop(sizes, 40);
    CHECK(with <= without);
  }
  resetPool(limitBefore);
}

// Random results of random sizes, kept and freed in random order, with the
// limit moving: the engine's count never goes below its own buffers, and what
// the ledger adds never exceeds the free blocks the pool holds.
TEST(result_ledger_never_takes_the_count_below_the_engines_buffers) {
  const size_t limitBefore = resultPoolStats().limitBytes;
  resetPool(8 * kMiB);
  auto* ledger = new ResultLedger();
  EngineCount engine;
  std::mt19937 rng(42);
  struct Live {
    void* memory;
    size_t bytes;
  };
  std::vector<Live> live;
  for (int step = 0; step < 5000; ++step) {
    const unsigned action = rng() % 10;
    if (action < 5 || live.empty()) {
      const size_t bytes = kMinPooledResultBytes + (rng() % 6) * (kMiB / 2) + (rng() % 3) * 4;
      if (void* p = makeResult(*ledger, engine, bytes)) live.push_back({p, bytes});
    } else if (action < 9) {
      const size_t i = rng() % live.size();
      freeResult(*ledger, engine, live[i].memory, live[i].bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      setResultPoolLimit((rng() % 4) * 4 * kMiB);
      engine.change(ledger->bound(resultPoolStats().heldBytes));
      CHECK(ledger->addedBytes() <= resultPoolStats().heldBytes);
    }
    CHECK(engine.count >= engine.liveBuffers);
    CHECK(engine.count == engine.liveBuffers + static_cast<int64_t>(ledger->addedBytes()));
  }
  for (const Live& r : live) freeResult(*ledger, engine, r.memory, r.bytes);
  CHECK(engine.count >= 0);
  // Results hold the ledger past its thread: the last release deletes it (the sanitizer build checks).
  ledger->retain();
  ledger->release();
  ledger->release();
  resetPool(limitBefore);
}
