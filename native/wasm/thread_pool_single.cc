// runtime/thread_pool.h for the WebAssembly build, which has one thread
// (docs/design/wasm.md): every parallel region runs its tasks in turn on the
// calling thread, and the pool's size stays 1 whatever setNumThreads asks.
#include "../runtime/thread_pool.h"

namespace mhsa {
namespace {

int computeDepth = 0;
int activeThreads = 0;
int peakActiveThreads = 0;

}  // namespace

void parallelFor(int64_t numTasks, const TaskFn& fn) {
  ComputeScope computing;
  runTasksInline(numTasks, fn);
}

int numThreads() { return 1; }

void setNumThreads(int) { peakActiveThreads = activeThreads; }

int defaultNumThreads() { return 1; }

ComputeScope::ComputeScope() {
  if (computeDepth++ > 0) return;
  activeThreads = 1;
  peakActiveThreads = 1;
}

ComputeScope::~ComputeScope() {
  if (--computeDepth == 0) activeThreads = 0;
}

PoolStats poolStats() { return {1, activeThreads, peakActiveThreads}; }

}  // namespace mhsa
