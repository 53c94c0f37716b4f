// A fixed-size array of trivially copyable values for per-node state read at
// random over a whole graph: from 4 MiB up it is 2 MiB-aligned and advised
// MADV_HUGEPAGE before its first touch, so the kernel backs it with huge pages
// (this machine's transparent huge pages are "madvise"). At 100M nodes a 2 GiB
// array holds 2^19 pages of 4 KiB, and each random read past the TLB costs a
// page walk whose own entries miss the caches; with 2 MiB pages the TLB holds
// the whole array. std::vector cannot be given the alignment or the advice.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gnncore {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// At least `bytes` (one huge page at the least) of memory 2 MiB-aligned and
// advised MADV_HUGEPAGE before anything touches it; `*rounded` receives the
// size allocated (whole huge pages). Free it with std::free.
inline void* huge_page_alloc(size_t bytes, size_t* rounded) {
  *rounded = std::max<size_t>((bytes + kHugePageBytes - 1) / kHugePageBytes, 1) * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, *rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, *rounded, MADV_HUGEPAGE);  // advisory: the memory works without it
#endif
  return p;
}

template <typename T>
class HugeArray {
  static_assert(std::is_trivially_copyable<T>::value, "HugeArray holds plain values");

 public:
  static constexpr size_t kHugeFrom = 2 * kHugePageBytes;  // smaller arrays: 4 KiB pages

  HugeArray() = default;
  // n values of `fill`.
  HugeArray(size_t n, const T& fill) : HugeArray(n) { std::fill_n(data_, n, fill); }
  // n values left unset, for a caller that writes every one before reading it.
  explicit HugeArray(size_t n) : size_(n) {
    const size_t want = std::max<size_t>(n * sizeof(T), 1);
    size_t bytes = (want + 63) / 64 * 64;
    void* p = want >= kHugeFrom ? huge_page_alloc(want, &bytes) : std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
  }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  ~HugeArray() { std::free(data_); }

  // Frees the memory now (the array is empty after).
  void reset() {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gnncore
