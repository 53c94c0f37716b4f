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

// Any Python int is a valid seed: it is reduced modulo 2**64.
inline uint64_t seed_of(const nb::int_& seed) {
  return nb::cast<uint64_t>(seed & nb::int_(static_cast<uint64_t>(0xffffffffffffffffULL)));
}

// A Python list of ints; needs the GIL.
inline nb::list int_list(const std::vector<int64_t>& v) {
  nb::list out;
  for (int64_t x : v) out.append(x);
  return out;
}

// Moves a std::vector into a numpy array without copying; needs the GIL.
template <typename T>
OutArray<T> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return OutArray<T>(owned->data(), {owned->size()}, owner);
}

}  // namespace gnncore::bind
