// Conversions shared by the binding files: numpy arrays in, numpy arrays out.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vector>

#include "types.h"

namespace gnncore::bind {

namespace nb = nanobind;

template <typename T>
using InArray = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T>
using OutArray = nb::ndarray<nb::numpy, T, nb::ndim<1>>;

template <typename T>
Span<T> span_of(const InArray<T>& a) {
  return Span<T>{a.data(), a.shape(0)};
}

// Moves a std::vector into a numpy array without copying; needs the GIL.
template <typename T>
OutArray<T> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return OutArray<T>(owned->data(), {owned->size()}, owner);
}

}  // namespace gnncore::bind
