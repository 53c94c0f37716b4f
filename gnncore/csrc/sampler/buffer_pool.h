// Recycled output buffers of the DENSE sampler.
//
// A batch's outputs (node, row, col, edge: 4 arrays of 4 MiB each for 1,000
// targets with fanouts 15,10,5) are handed to Python and freed when the batch
// is dropped. Freed, such large blocks go back to the kernel (glibc maps
// them on their own), so the next batch takes page faults on ~16 MiB of
// fresh pages and zeroes them: about 3,600 faults per batch. The pool keeps a
// few freed buffers with their pages mapped and gives them to the next
// batch instead. It holds at most kMaxBuffers buffers and kMaxBytes bytes;
// buffers under kMinBytes are not kept.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace gnncore::sampling {

class BufferPool {
 public:
  static constexpr size_t kMaxBuffers = 8;
  static constexpr size_t kMaxBytes = size_t{128} << 20;
  static constexpr size_t kMinBytes = size_t{1} << 20;

  // The process's pool (never destroyed: arrays freed at exit still return
  // their buffers to it; a forked child starts with an empty one).
  static BufferPool& instance() {
    static const bool made = [] {
      current() = new BufferPool;
#if defined(__linux__)
      pthread_atfork(nullptr, nullptr, [] { current() = new BufferPool; });
#endif
      return true;
    }();
    (void)made;
    return *current();
  }

  // A vector with capacity for at least `n` entries: the smallest kept
  // buffer that is large enough, with the size and contents of its last use
  // (so that growing it again within that size writes no zeros), else a new,
  // empty one. Callers set the size and every entry they use.
  std::vector<int64_t> take(size_t n) {
    std::vector<int64_t> out;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].capacity() >= n &&
            (best == free_.size() || free_[i].capacity() < free_[best].capacity()))
          best = i;
      if (best < free_.size()) {
        out.swap(free_[best]);
        free_[best].swap(free_.back());
        free_.pop_back();
        bytes_ -= out.capacity() * sizeof(int64_t);
      }
    }
    out.reserve(n);
    return out;
  }

  // Keeps `v` (its memory and its size) for a later take() when it is large
  // enough and there is room; frees it otherwise. Never throws.
  void give(std::vector<int64_t>&& v) noexcept {
    const size_t bytes = v.capacity() * sizeof(int64_t);
    if (bytes < kMinBytes) return;
    std::vector<int64_t> dropped;  // freed outside the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.size() < kMaxBuffers && bytes_ + bytes <= kMaxBytes) {
        free_.push_back(std::move(v));  // no allocation: reserved to kMaxBuffers
        bytes_ += bytes;
        return;
      }
      dropped.swap(v);
    }
  }

  // Buffers kept now (for tests and benchmarks).
  size_t buffers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
  }

 private:
  BufferPool() { free_.reserve(kMaxBuffers); }
  static BufferPool*& current() {
    static BufferPool* pool = nullptr;
    return pool;
  }
  std::mutex mutex_;
  std::vector<std::vector<int64_t>> free_;
  size_t bytes_ = 0;
};

}  // namespace gnncore::sampling
