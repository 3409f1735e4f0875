// One JS thread's share of the result pool's free blocks in its engine's
// external-memory count (docs/design/result-pool.md, "V8's external-memory
// count").
//
// V8 counts a result while it is alive, and starts a full collection once
// the count has grown 64 MiB past its lowest point since the last one. A loop
// that drops a 64 MiB result per call reaches that every call or two, because
// V8 counts the next result before it has let go of the last. The pool's free
// blocks are memory too, so a thread adds to its count the blocks of results
// it made that have come back free, and takes a block off again when it
// reuses one: reusing a block then leaves the count where it was, while
// results keep one size.
//
// Only blocks of the size class the thread is making now are credited. A
// take-off lowers V8's lowest point, and a credit for a block of another size
// would then count as growth: in a loop whose result sizes change, crediting
// every class took a mark-compact on almost every call. Credits of earlier
// classes stay counted, unchanged, until the pool no longer holds that much;
// a block of an earlier class reused later is then counted as free and as
// live at once, an over-count bounded by the pool's free bytes.
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
  // pool kept its block of blockBytes. Counted if the thread is making blocks
  // of that size now. A block given back as the thread changes size may be
  // credited to the new size; the clamp to the pool's free bytes still holds.
  void returned(size_t blockBytes);

  // On the JS thread, each time it takes a result block of blockBytes, reused
  // (a free block) or new, with `held` bytes of free blocks left in the pool.
  // Returns the change to make to the engine's count. The amount added stays
  // between 0 and `held` as of this call: blocks another thread reused, or the
  // pool evicted, are no longer free memory.
  int64_t settle(size_t blockBytes, bool reused, size_t held);

  // On the JS thread, after the pool's limit moved: counts the blocks given
  // back since the last call and keeps the amount added within `held`.
  // Returns the change to make to the engine's count.
  int64_t bound(size_t held);

  // The bytes this ledger has added to its engine's count.
  size_t addedBytes() const { return earlier_ + current_; }

 private:
  ~ResultLedger() = default;
  // Keeps what is added within `held`; returns the change from `before`.
  int64_t within(size_t held, size_t before);
  std::atomic<size_t> returned_{0};
  std::atomic<size_t> class_{0};  // the block size the thread is making now
  std::atomic<int> refs_{1};
  // JS thread only: what is added for blocks of class_, and for earlier classes.
  size_t current_ = 0;
  size_t earlier_ = 0;
};

}  // namespace mhsa
