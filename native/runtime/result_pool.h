// Warm memory for the results ops allocate when the caller passes no `out`
// (docs/design/result-pool.md).
//
// A new result is otherwise fresh memory from the OS: the kernel's first
// writes fault its pages in and the OS zeroes them, which costs a softmax over
// 6144 x 512 more than the softmax. The pool keeps the blocks of collected
// results and hands them out again. It holds at most its limit of free blocks,
// across every JS thread of the process; blocks in use by JS are not counted
// against it (the per-call allocation limit bounds each of those).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mhsa {

// Results smaller than this come from the ordinary allocator: its free lists
// keep them warm already, and an external buffer costs more to set up.
constexpr size_t kMinPooledResultBytes = size_t{64} << 10;

struct ResultPoolStats {
  size_t limitBytes;
  size_t heldBytes;   // free blocks the pool keeps
  size_t heldBlocks;
  size_t liveBytes;   // blocks handed out and not yet given back
  uint64_t hits;      // results served from a free block
  uint64_t misses;    // results that needed new memory
};

// The bytes of the block that serves a result of `bytes`: rounded up to one of
// eight size classes per power of two, so at most 1/8 of a block goes unused
// and results of nearby sizes share blocks. 0 if `bytes` is 0 or too large.
size_t resultBlockBytes(size_t bytes);

// A 64-byte aligned block of resultBlockBytes(bytes): the most recently given
// back free block of that class, or new memory. nullptr if the pool is off
// (limit 0), bytes is below kMinPooledResultBytes, or allocation fails.
// *reused (if given) says whether the block came from the free blocks.
void* acquireResultBlock(size_t bytes, bool* reused = nullptr);

// Whether a result of `bytes` can come from the pool: large enough, and its
// block within the limit (a larger block could never be kept for reuse).
bool resultPoolServes(size_t bytes);

// Gives back a block that acquireResultBlock(bytes) returned, from any thread.
// It is kept if it fits the limit, evicting the least recently given back
// blocks as needed; otherwise it is freed. Returns whether it was kept.
bool releaseResultBlock(void* block, size_t bytes);

// Frees a block that acquireResultBlock(bytes) returned without keeping it.
void freeResultBlock(void* block, size_t bytes);

// Sets the most bytes of free blocks the pool keeps, freeing any beyond it.
// It starts at MHSA_RESULT_POOL_BYTES (read once per process), else 256 MiB.
void setResultPoolLimit(size_t bytes);

ResultPoolStats resultPoolStats();

}  // namespace mhsa
