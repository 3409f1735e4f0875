#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mhsa {
namespace {

std::atomic<int> activeThreads{0};
std::atomic<int> peakActiveThreads{0};
thread_local int computeDepth = 0;

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  void resize(int n) {
    std::lock_guard<std::mutex> region(regionMutex_);
    stopHelpers();
    // Each helper starts from the current generation, so it cannot mistake a
    // region that began before it first took the lock for one it has done.
    const uint64_t gen = generation_.load();
    for (int i = 1; i < n; ++i) helpers_.emplace_back([this, gen] { helperLoop(gen); });
  }

  void run(int64_t numTasks, const TaskFn& fn) {
    if (numTasks <= 0) return;
    ComputeScope computing;
    std::unique_lock<std::mutex> region(regionMutex_, std::try_to_lock);
    if (!region.owns_lock() || helpers_.empty() || numTasks == 1) {
      for (int64_t t = 0; t < numTasks; ++t) fn(t);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      numTasks_ = numTasks;
      nextTask_.store(0);
      firstError_ = nullptr;
      busyHelpers_.store(static_cast<int>(helpers_.size()));
      // Published under the lock (no lost wake-up for a helper about to
      // sleep) and with release order (a spinning helper that sees the new
      // generation also sees fn_ and numTasks_).
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    workOnTasks();
    // Helpers usually finish within microseconds of the caller: spin briefly
    // before sleeping on the condition variable.
    if (!spinUntil([this] { return busyHelpers_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return busyHelpers_.load(std::memory_order_acquire) == 0; });
    }
    fn_ = nullptr;
    if (firstError_) std::rethrow_exception(firstError_);
  }

 private:
  void workOnTasks() {
    for (;;) {
      int64_t t = nextTask_.fetch_add(1);
      if (t >= numTasks_) return;
      try {
        (*fn_)(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!firstError_) firstError_ = std::current_exception();
      }
    }
  }

  // Spins (pausing the core) until pred() holds or kSpinMicros pass; false on timeout.
  template <typename Pred>
  static bool spinUntil(Pred pred) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      if (pred()) return true;
      cpuRelax();
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
      // without a sleep/wake round trip, which costs 15-40 us on this VM.
      const bool next = spinUntil([&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      });
      if (!next) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      {
        ComputeScope computing;
        workOnTasks();
      }
      if (busyHelpers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
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
  std::mutex mutex_;        // guards the fields below
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> helpers_;
  const TaskFn* fn_ = nullptr;
  int64_t numTasks_ = 0;
  std::atomic<int64_t> nextTask_{0};
  std::exception_ptr firstError_;
  std::atomic<int> busyHelpers_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  // How long an idle helper (or a caller waiting for helpers) spins before
  // sleeping. Bounded, so an idle pool costs nothing after this long.
  static constexpr int kSpinMicros = 50;
};

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
