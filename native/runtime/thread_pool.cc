#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mhsa {
namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  void resize(int n) {
    std::lock_guard<std::mutex> region(regionMutex_);
    stopHelpers();
    // Each helper starts from the current generation, so it cannot mistake a
    // region that began before it first took the lock for one it has done.
    const uint64_t gen = generation_;
    for (int i = 1; i < n; ++i) helpers_.emplace_back([this, gen] { helperLoop(gen); });
  }

  void run(int64_t numTasks, const TaskFn& fn) {
    if (numTasks <= 0) return;
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
      busyHelpers_ = static_cast<int>(helpers_.size());
      ++generation_;
    }
    wake_.notify_all();
    workOnTasks();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busyHelpers_ == 0; });
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

  void helperLoop(uint64_t seen) {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      workOnTasks();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busyHelpers_ == 0) done_.notify_one();
    }
  }

  void stopHelpers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
    helpers_.clear();
    stop_ = false;
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
  int busyHelpers_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
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

void setNumThreads(int n) { pool().resize(std::max(1, n)); }

}  // namespace mhsa
