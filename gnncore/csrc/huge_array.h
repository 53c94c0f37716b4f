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

template <typename T>
class HugeArray {
  static_assert(std::is_trivially_copyable<T>::value, "HugeArray holds plain values");

 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kHugeFrom = size_t{4} << 20;  // smaller arrays: 4 KiB pages

  HugeArray() = default;
  // n values of `fill`.
  HugeArray(size_t n, const T& fill) : HugeArray(n) { std::fill_n(data_, n, fill); }
  // n values left unset, for a caller that writes every one before reading it.
  explicit HugeArray(size_t n) : size_(n) {
    const size_t want = std::max<size_t>(n * sizeof(T), 1);
    const bool huge = want >= kHugeFrom;
    const size_t align = huge ? kHugePage : 64;
    const size_t bytes = (want + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // advisory: the array works without it
#endif
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
