#include "result_pool.h"

#include <cstdlib>
#include <cstring>
#include "mutex.h"
#include <new>
#include <vector>

namespace mhsa {
namespace {

constexpr size_t kBlockAlignment = 64;
constexpr size_t kDefaultLimitBytes = size_t{256} << 20;
// Bounds the scan in acquire(): a pool of 256 MiB holds at most 4096 blocks of 64 KiB anyway.
constexpr size_t kMaxHeldBlocks = 4096;

struct Block {
  void* memory;
  size_t bytes;
};

void freeBlock(const Block& b) { ::operator delete(b.memory, std::align_val_t(kBlockAlignment)); }

// MHSA_RESULT_POOL_BYTES, read once per process (every worker shares the pool), else 256 MiB.
size_t initialLimit() {
  const char* env = std::getenv("MHSA_RESULT_POOL_BYTES");
  if (env == nullptr || *env == '\0' || std::strspn(env, "0123456789") != std::strlen(env) || std::strlen(env) > 15)
    return kDefaultLimitBytes;
  return static_cast<size_t>(std::strtoull(env, nullptr, 10));
}

class Pool {
 public:
  void* acquire(size_t bytes, bool* reused) {
    *reused = false;
    {
      std::lock_guard<Mutex> lock(mutex_);
      if (limit_ == 0) return nullptr;
      for (size_t i = free_.size(); i-- > 0;) {
        if (free_[i].bytes != bytes) continue;
        void* memory = free_[i].memory;
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        held_ -= bytes;
        live_ += bytes;
        ++hits_;
        *reused = true;
        return memory;
      }
      ++misses_;
      live_ += bytes;
    }
    void* memory = ::operator new(bytes, std::align_val_t(kBlockAlignment), std::nothrow);
    if (memory == nullptr) {
      std::lock_guard<Mutex> lock(mutex_);
      live_ -= bytes;
    }
    return memory;
  }

  // Whether the block was kept.
  bool release(void* memory, size_t bytes, bool keep = true) {
    std::vector<Block> evicted;
    bool kept = false;
    {
      std::lock_guard<Mutex> lock(mutex_);
      live_ -= bytes;
      if (!keep || bytes > limit_) {
        evicted.push_back({memory, bytes});
      } else {
        size_t drop = 0;
        while (drop < free_.size() && (held_ + bytes > limit_ || free_.size() - drop >= kMaxHeldBlocks)) {
          held_ -= free_[drop].bytes;
          evicted.push_back(free_[drop++]);
        }
        free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(drop));
        free_.push_back({memory, bytes});
        held_ += bytes;
        kept = true;
      }
    }
    // Freed outside the lock: returning large blocks to the OS takes a while.
    for (const Block& b : evicted) freeBlock(b);
    return kept;
  }

  void setLimit(size_t bytes) {
    std::vector<Block> evicted;
    {
      std::lock_guard<Mutex> lock(mutex_);
      limit_ = bytes;
      size_t drop = 0;
      while (held_ > limit_) {
        held_ -= free_[drop].bytes;
        evicted.push_back(free_[drop++]);
      }
      free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(drop));
    }
    for (const Block& b : evicted) freeBlock(b);
  }

  bool serves(size_t bytes) {
    std::lock_guard<Mutex> lock(mutex_);
    return bytes <= limit_;
  }

  ResultPoolStats stats() {
    std::lock_guard<Mutex> lock(mutex_);
    return {limit_, held_, free_.size(), live_, hits_, misses_};
  }

 private:
  Mutex mutex_;
  std::vector<Block> free_;  // oldest given back first
  size_t limit_ = initialLimit();
  size_t held_ = 0;
  size_t live_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

// Never destroyed: V8 gives blocks back from its sweeper threads and while
// the process exits, possibly after static destructors have run.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

}  // namespace

size_t resultBlockBytes(size_t bytes) {
  if (bytes == 0 || bytes > (SIZE_MAX >> 2)) return 0;
  if (bytes <= 8) return 8;
  size_t step = 1;  // 1/8 of the largest power of two <= bytes
  while ((step << 4) <= bytes) step <<= 1;
  return (bytes + step - 1) & ~(step - 1);
}

bool resultPoolServes(size_t bytes) {
  if (bytes < kMinPooledResultBytes) return false;
  const size_t block = resultBlockBytes(bytes);
  return block != 0 && pool().serves(block);
}

void* acquireResultBlock(size_t bytes, bool* reused) {
  bool fromFreeList = false;
  void* memory = nullptr;
  if (bytes >= kMinPooledResultBytes) {
    const size_t block = resultBlockBytes(bytes);
    if (block != 0) memory = pool().acquire(block, &fromFreeList);
  }
  if (reused != nullptr) *reused = fromFreeList;
  return memory;
}

bool releaseResultBlock(void* memory, size_t bytes) { return pool().release(memory, resultBlockBytes(bytes)); }

void freeResultBlock(void* memory, size_t bytes) {
  pool().release(memory, resultBlockBytes(bytes), /*keep=*/false);
}

void setResultPoolLimit(size_t bytes) { pool().setLimit(bytes); }

ResultPoolStats resultPoolStats() { return pool().stats(); }

}  // namespace mhsa
