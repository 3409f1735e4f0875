// std::mutex, or in the WebAssembly build, which has one thread and no
// <mutex> types (MHSA_SINGLE_THREADED), a lock with nothing to exclude.
// std::lock_guard works with either.
#pragma once

#include <mutex>

namespace mhsa {

#if defined(MHSA_SINGLE_THREADED)
class Mutex {
 public:
  void lock() {}
  void unlock() {}
};
#else
using Mutex = std::mutex;
#endif

}  // namespace mhsa
