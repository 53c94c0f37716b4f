// Conversions shared by the binding files: numpy arrays in, numpy arrays out.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

#include <array>
#include <cmath>
#include <tuple>
#include <utility>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "types.h"

namespace gnncore::bind {

namespace nb = nanobind;

template <typename T>
using InArray = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Array fields of result classes are bound with rv_policy::reference: the array
// already owns its data (a capsule), so each access returns a view that keeps it alive.
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

// Options classes check their fields with these: a bad value raises ValueError
// ``"<Class>.<field> must be <rule>, got <value>"``, naming the field.
template <typename V>
[[noreturn]] void bad_field(const char* cls, const std::string& field, const std::string& rule,
                            const V& got) {
  std::ostringstream msg;
  msg << cls << "." << field << " must be " << rule << ", got " << got;
  throw std::invalid_argument(msg.str());
}

template <typename V>
void check_field(bool ok, const char* cls, const std::string& field, const std::string& rule,
                 const V& got) {
  if (!ok) bad_field(cls, field, rule, got);
}

// ``value`` is finite and at least ``lo``.
inline bool finite_at_least(double value, double lo) {
  return std::isfinite(value) && value >= lo;
}

// Fixed-size fields (a pair of capacities, three split weights) cross to Python
// as tuples, typed ``tuple[int, int]`` etc. in the stubs, and live as std::array.
template <typename T, size_t... I>
auto as_tuple_impl(const std::array<T, sizeof...(I)>& a, std::index_sequence<I...>) {
  return std::make_tuple(a[I]...);
}
template <typename T, size_t N>
auto as_tuple(const std::array<T, N>& a) {
  return as_tuple_impl(a, std::make_index_sequence<N>{});
}
template <typename T, size_t N>
using TupleOf = decltype(as_tuple(std::array<T, N>{}));
template <typename T, typename... U>
std::array<T, sizeof...(U)> as_array(const std::tuple<U...>& t) {
  return std::apply([](const auto&... x) { return std::array<T, sizeof...(U)>{x...}; }, t);
}

// A read-write tuple property over a std::array member.
template <typename C, typename T, size_t N>
void def_tuple_rw(nb::class_<C>& cls, const char* name, std::array<T, N> C::*member,
                  const char* doc) {
  cls.def_prop_rw(
      name, [member](const C& c) { return as_tuple(c.*member); },
      [member](C& c, const TupleOf<T, N>& t) { c.*member = as_array<T>(t); }, doc);
}

// A read-only tuple property over a std::array member.
template <typename C, typename T, size_t N>
void def_tuple_ro(nb::class_<C>& cls, const char* name, std::array<T, N> C::*member,
                  const char* doc) {
  cls.def_prop_ro(name, [member](const C& c) { return as_tuple(c.*member); }, doc);
}

// Two arrays, typed ``tuple[NDArray, NDArray]`` in the stubs.
template <typename T>
using ArrayPair = std::tuple<OutArray<T>, OutArray<T>>;

// Moves a std::vector into a numpy array without copying; needs the GIL.
template <typename T>
OutArray<T> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return OutArray<T>(owned->data(), {owned->size()}, owner);
}

}  // namespace gnncore::bind
