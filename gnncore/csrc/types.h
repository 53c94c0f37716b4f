// Boundary types of the C++ core: node and edge ids are int64_t (torch.long).
// On-disk column indices may be int32 when the node count allows; kernels that
// read them are templated on the index type.
#pragma once
#include <cstdint>
#include <cstddef>

namespace gnncore {

using NodeId = int64_t;
using EdgeId = int64_t;

// A read-only view of contiguous memory (C++17 has no std::span).
template <typename T>
struct Span {
  const T* data = nullptr;
  size_t size = 0;
  const T& operator[](size_t i) const { return data[i]; }
  const T* begin() const { return data; }
  const T* end() const { return data + size; }
};

template <typename T>
struct MutSpan {
  T* data = nullptr;
  size_t size = 0;
  T& operator[](size_t i) const { return data[i]; }
  T* begin() const { return data; }
  T* end() const { return data + size; }
};

}  // namespace gnncore
