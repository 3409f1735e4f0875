// A persistent pool of compute threads shared by every op in the process.
//
// parallelFor() splits work into tasks claimed from an atomic counter; the
// calling thread takes part, so a pool of N threads has N-1 helpers. Only one
// parallel region runs at a time: a caller that finds the pool busy (another
// JS thread, or a sync call while an async op computes) runs its tasks alone
// rather than waiting, so the number of compute threads stays bounded and no
// caller blocks behind another's work. A region ends when its tasks are done,
// not when every helper has checked in: a helper the OS has not scheduled yet
// (the machine busy with other processes) costs the caller nothing. Idle
// helpers spin for at most 2 ms (kSpinMicros), then sleep on a condition variable.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>

namespace mhsa {

using TaskFn = std::function<void(int64_t task)>;

// Runs fn(0..numTasks-1), each exactly once, and returns when all are done.
// The first exception thrown by any task is rethrown here after the rest finish.
void parallelFor(int64_t numTasks, const TaskFn& fn);

// Runs fn(0..numTasks-1) in order on the calling thread; as in parallelFor,
// the first exception is rethrown after the rest have run.
inline void runTasksInline(int64_t numTasks, const TaskFn& fn) {
  std::exception_ptr firstError;
  for (int64_t t = 0; t < numTasks; ++t) {
    try {
      fn(t);
    } catch (...) {
      if (!firstError) firstError = std::current_exception();
    }
  }
  if (firstError) std::rethrow_exception(firstError);
}

// Number of compute threads used by parallelFor (the caller included).
int numThreads();

// Sets the number of compute threads (>= 1). Blocks until no region runs.
void setNumThreads(int n);

// Statistics of the threads executing mhsa's kernels: the pool's helpers, the
// thread that drives a region (the async dispatcher, or a JS thread in a sync
// call), and callers that found the pool busy and compute alone.
struct PoolStats {
  int threads;            // numThreads()
  int activeThreads;      // computing right now
  int peakActiveThreads;  // most at once since start or the last setNumThreads
};
PoolStats poolStats();

// Counts the calling thread as computing while alive (nested scopes count once).
class ComputeScope {
 public:
  ComputeScope();
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;
};

// Default thread count: MHSA_NUM_THREADS if set to a positive integer,
// otherwise the number of hardware threads.
int defaultNumThreads();

}  // namespace mhsa
