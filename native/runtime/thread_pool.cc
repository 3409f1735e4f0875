#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "float_state.h"

namespace mhsa {
namespace {

std::atomic<int> activeThreads{0};
std::atomic<int> peakActiveThreads{0};
thread_local int computeDepth = 0;

// One parallel region: its tasks, the next unclaimed task and how many are
// done. Helpers take a reference to the current region when they wake, so a
// helper that wakes late (descheduled while the others finished) finds every
// task claimed and goes back to sleep; it never touches a later region's
// tasks, and the caller never waits for it.
struct Region {
  const TaskFn* fn = nullptr;
  int64_t numTasks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex errorMutex;
  std::exception_ptr firstError;

  // Claims and runs tasks until none is left; true if it ran the last one to finish.
  bool work() {
    bool finishedLast = false;
    for (;;) {
      const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= numTasks) return finishedLast;
      {
        // A helper counts as computing only while it runs a task, and stops
        // counting before the task counts as done: once the caller sees the
        // region finished, info().activeThreads no longer includes it (CI
        // once read 1 after every op had settled), and a helper that wakes
        // after every task was claimed is never counted at all.
        ComputeScope computing;
        try {
          (*fn)(t);
        } catch (...) {
          std::lock_guard<std::mutex> lock(errorMutex);
          if (!firstError) firstError = std::current_exception();
        }
      }
      finishedLast = done.fetch_add(1, std::memory_order_acq_rel) + 1 == numTasks;
    }
  }
  bool finished() const { return done.load(std::memory_order_acquire) == numTasks; }
};

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }

  // Read by any thread at any time, so kept apart from helpers_ (which only
  // resize() changes, under regionMutex_).
  int size() const { return size_.load(std::memory_order_acquire); }

  void resize(int n) {
    std::lock_guard<std::mutex> region(regionMutex_);
    stopHelpers();
    // Each helper starts from the current generation, so it cannot mistake a
    // region that began before it first took the lock for one it has done.
    const uint64_t gen = generation_.load();
    for (int i = 1; i < n; ++i) {
      try {
        helpers_.emplace_back([this, gen, state = currentFloatState()] {
          applyFloatState(state);
          helperLoop(gen);
        });
      } catch (const std::system_error&) {
        break;  // the OS refused another thread: carry on with the helpers we have
      }
    }
    size_.store(static_cast<int>(helpers_.size()) + 1, std::memory_order_release);
  }

  void run(int64_t numTasks, const TaskFn& fn) {
    if (numTasks <= 0) return;
    ComputeScope computing;
    // A task that itself calls parallelFor runs that inner loop alone: this
    // thread may already hold regionMutex_, and locking it again is undefined.
    if (ownsRegion) {
      runTasksInline(numTasks, fn);
      return;
    }
    std::unique_lock<std::mutex> regionLock(regionMutex_, std::try_to_lock);
    if (!regionLock.owns_lock() || helpers_.empty() || numTasks == 1) {
      regionLock = {};
      runTasksInline(numTasks, fn);
      return;
    }
    ownsRegion = true;
    struct ClearOwnership {
      ~ClearOwnership() { ownsRegion = false; }
    } clearOwnership;
    auto region = std::make_shared<Region>();
    region->fn = &fn;
    region->numTasks = numTasks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      region_ = region;
      // Published under the lock (no lost wake-up for a helper about to
      // sleep) and with release order (a spinning helper that sees the new
      // generation then finds region_ set under the same lock).
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    region->work();
    // Wait only for tasks that helpers claimed and are still running; they
    // usually end within microseconds, so spin briefly before sleeping.
    if (!spinUntil([&] { return region->finished(); })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return region->finished(); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      region_.reset();
    }
    if (region->firstError) std::rethrow_exception(region->firstError);
  }

 private:
  // Spins (pausing the core) until pred() holds or kSpinMicros pass; false on
  // timeout. Every 1024 pauses (~50 us where a pause takes ~140 cycles, a few
  // us on cores with a short pause) it yields, so a thread that shares this
  // CPU (the event loop, say) is not held off by the spin.
  template <typename Pred>
  static bool spinUntil(Pred pred) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      if (pred()) return true;
      cpuRelax();
      if ((i & 1023) == 0) std::this_thread::yield();
      if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > std::chrono::microseconds(kSpinMicros))
        return pred();
    }
  }

  static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void helperLoop(uint64_t seen) {
    for (;;) {
      // A region that follows the last within kSpinMicros (the common case
      // inside one op: a GEMM runs one or two regions per cache block) starts
      // without a sleep/wake round trip (15-40 us on a quiet Sapphire Rapids
      // VM, far more under steal time: docs/design/thread-pool.md).
      const bool next = spinUntil([&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      });
      std::shared_ptr<Region> region;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!next) wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        if (stop_.load()) return;
        seen = generation_.load();
        region = region_;  // null if that region already ended
      }
      if (!region) continue;
      const bool finishedLast = region->work();
      if (finishedLast) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  void stopHelpers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
    helpers_.clear();
    stop_.store(false);
  }

  std::mutex regionMutex_;  // held for a whole parallel region or a resize
  std::mutex mutex_;        // guards region_ and the condition variables' predicates
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> helpers_;
  std::shared_ptr<Region> region_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> size_{1};
  static thread_local bool ownsRegion;
  // How long an idle helper (or a caller waiting for helpers) spins before
  // sleeping. Bounded, so an idle pool costs nothing after this long. Long
  // enough to bridge the gaps between the regions of one op even when the
  // two threads' shares finish milliseconds apart: at 21 % steal time,
  // 2-thread GEMMs ran 1.5-2x slower with 50 us than with 2 ms (Sapphire
  // Rapids; docs/design/thread-pool.md).
  static constexpr int kSpinMicros = 2000;
};

thread_local bool ThreadPool::ownsRegion = false;

// Never destroyed: helpers may still sleep on its condition variables while
// the process exits, and joining threads from a static destructor can hang.
ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(defaultNumThreads());
  return *p;
}

}  // namespace

int defaultNumThreads() {
  if (const char* env = std::getenv("MHSA_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 1024) return static_cast<int>(v);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 1024u));
}

void parallelFor(int64_t numTasks, const TaskFn& fn) { pool().run(numTasks, fn); }

int numThreads() { return pool().size(); }

void setNumThreads(int n) {
  pool().resize(std::max(1, n));
  peakActiveThreads.store(activeThreads.load());
}

ComputeScope::ComputeScope() {
  if (computeDepth++ > 0) return;
  const int now = activeThreads.fetch_add(1) + 1;
  int peak = peakActiveThreads.load();
  while (now > peak && !peakActiveThreads.compare_exchange_weak(peak, now)) {
  }
}

ComputeScope::~ComputeScope() {
  if (--computeDepth == 0) activeThreads.fetch_sub(1);
}

PoolStats poolStats() { return {numThreads(), activeThreads.load(), peakActiveThreads.load()}; }

}  // namespace mhsa
