// One JS thread's share of the result pool's free blocks in its engine's
// external-memory count (docs/design/result-pool.md, "V8's external-memory
// count").
//
// V8 counts a result while it is alive, and starts a full collection once
// the count has grown 64 MiB since the last one. A loop that drops a 64 MiB
// result per call reaches that every call or two, because V8 counts the next
// result before it has let go of the last. The pool's free blocks are memory
// too, so each thread adds to its count the blocks of results it made that
// have come back free, and takes a block off again when it reuses one: reusing a block then
// leaves the count where it was while results keep one size. When sizes
// change, a take-off lowers V8's reference level and the next credit counts
// as growth (result-pool.md, "What it cannot remove").
//
// The amount a thread adds never goes negative. Its count is therefore never
// below what V8 itself will subtract for the buffers it holds: newer V8
// aborts the process if that count would underflow.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mhsa {

class ResultLedger {
 public:
  // Held by its JS thread until the thread ends, and by each result it made.
  ResultLedger() = default;
  ResultLedger(const ResultLedger&) = delete;
  ResultLedger& operator=(const ResultLedger&) = delete;
  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Deletes the ledger once nothing holds it.
  void release();

  // From any thread: a result this ledger's thread made was freed, and the
  // pool kept its block of blockBytes.
  void returned(size_t blockBytes) { returned_.fetch_add(blockBytes, std::memory_order_relaxed); }

  // On the JS thread, each time it takes a result block: `taken` bytes of free
  // block reused (0 for new memory), with `held` bytes of free blocks left in
  // the pool. Returns the change to make to the engine's count. The amount
  // added stays between 0 and `held` as of this call: blocks another thread
  // reused, or the pool evicted, are no longer free memory.
  int64_t settle(size_t taken, size_t held);

  // The bytes this ledger has added to its engine's count.
  size_t addedBytes() const { return added_; }

 private:
  ~ResultLedger() = default;
  std::atomic<size_t> returned_{0};
  std::atomic<int> refs_{1};
  size_t added_ = 0;  // JS thread only
};

}  // namespace mhsa
