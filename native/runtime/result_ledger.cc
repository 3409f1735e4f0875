#include "result_ledger.h"

#include <algorithm>

namespace mhsa {

void ResultLedger::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

int64_t ResultLedger::settle(size_t taken, size_t held) {
  const size_t back = returned_.exchange(0, std::memory_order_relaxed);
  const size_t free = added_ + back;
  const size_t now = std::min(free > taken ? free - taken : 0, held);
  const int64_t change = static_cast<int64_t>(now) - static_cast<int64_t>(added_);
  added_ = now;
  return change;
}

}  // namespace mhsa
