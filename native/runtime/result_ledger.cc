#include "result_ledger.h"

#include <algorithm>

namespace mhsa {

void ResultLedger::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void ResultLedger::returned(size_t blockBytes) {
  if (blockBytes == class_.load(std::memory_order_relaxed)) returned_.fetch_add(blockBytes, std::memory_order_relaxed);
}

int64_t ResultLedger::settle(size_t blockBytes, bool reused, size_t held) {
  const size_t before = addedBytes();
  if (blockBytes != class_.load(std::memory_order_relaxed)) {
    class_.store(blockBytes, std::memory_order_relaxed);
    returned_.exchange(0, std::memory_order_relaxed);
    earlier_ += current_;
    current_ = 0;
  }
  current_ += returned_.exchange(0, std::memory_order_relaxed);
  if (reused) current_ -= std::min(current_, blockBytes);
  return within(held, before);
}

int64_t ResultLedger::bound(size_t held) {
  const size_t before = addedBytes();
  current_ += returned_.exchange(0, std::memory_order_relaxed);
  return within(held, before);
}

int64_t ResultLedger::within(size_t held, size_t before) {
  // Cut from earlier classes first: their blocks are the older ones, which the
  // pool evicts first.
  const size_t over = addedBytes() > held ? addedBytes() - held : 0;
  const size_t fromEarlier = std::min(over, earlier_);
  earlier_ -= fromEarlier;
  current_ -= over - fromEarlier;
  return static_cast<int64_t>(addedBytes()) - static_cast<int64_t>(before);
}

}  // namespace mhsa
