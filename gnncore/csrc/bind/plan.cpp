// Bindings for the planning kernels: access-frequency estimators, feature
// cache placement and the degree-balanced greedy assignment.
#include <nanobind/stl/optional.h>

#include <optional>

#include "bind/common.h"
#include "plan/estimators.h"
#include "plan/placement.h"

namespace gnncore::bind {

namespace {

// A row-major 2-d result, typed ``NDArray[..., shape=(None, None)]`` in the stubs.
template <typename T>
using OutMatrix2 = nb::ndarray<nb::numpy, T, nb::ndim<2>>;

// Moves a row-major std::vector into a rows × cols numpy array; needs the GIL.
template <typename T>
OutMatrix2<T> to_numpy_2d(std::vector<T>&& v, size_t rows, size_t cols) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return OutMatrix2<T>(owned->data(), {rows, cols}, owner);
}

template <typename IndexT>
OutArray<int64_t> reach_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                           InArray<int64_t> train, int64_t layers, int num_threads) {
  std::vector<int64_t> f;
  {
    nb::gil_scoped_release release;
    f = access_reach<IndexT>(span_of(indptr), span_of(indices), span_of(train), layers,
                             num_threads);
  }
  return to_numpy(std::move(f));
}

template <typename IndexT>
OutArray<double> spmv_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                         InArray<int64_t> train, int64_t layers, int num_threads) {
  std::vector<double> x;
  {
    nb::gil_scoped_release release;
    x = access_spmv<IndexT>(span_of(indptr), span_of(indices), span_of(train), layers,
                            num_threads);
  }
  return to_numpy(std::move(x));
}

OutMatrix2<int64_t> place_features_py(InArray<double> p, int64_t devices, int64_t slots,
                                      double alpha) {
  CacheLayout b;
  {
    nb::gil_scoped_release release;
    b = place_features(span_of(p), devices, slots, alpha);
  }
  return to_numpy_2d(std::move(b.nodes), static_cast<size_t>(b.devices),
                     static_cast<size_t>(b.width));
}

OutArray<int64_t> degree_greedy_py(InArray<int64_t> degree, int64_t parts, int64_t group_size,
                                   std::optional<InArray<uint8_t>> skip) {
  if (skip && skip->shape(0) != degree.shape(0))
    throw std::invalid_argument("skip must have one entry per node (" +
                                std::to_string(degree.shape(0)) + "), got " +
                                std::to_string(skip->shape(0)));
  const Span<uint8_t> mask = skip ? span_of(*skip) : Span<uint8_t>{};
  std::vector<int64_t> owner;
  {
    nb::gil_scoped_release release;
    owner = degree_greedy_assign(span_of(degree), parts, group_size, mask);
  }
  return to_numpy(std::move(owner));
}

}  // namespace

void bind_plan(nb::module_& m) {
  // int64 first: an array that needs converting is copied to int64, not narrowed.
  m.def("access_reach", &reach_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("train"), nb::arg("layers"), nb::arg("num_threads") = 0);
  m.def("access_reach", &reach_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("train"), nb::arg("layers"), nb::arg("num_threads") = 0,
        R"doc(Exact access counts: ``f[j]`` = the number of distinct training nodes within
``layers`` hops of which ``j`` lies (distance 0 included: a training node
counts itself).

Row ``t`` of the CSR (``indptr`` int64[N+1], ``indices`` int32|int64[E])
lists the nodes a sampler reads when it expands ``t`` (PyG CSC: the sources
of the edges into ``t``); hops follow rows. ``train`` (int64[T]) may repeat
ids: each counts once. One bounded BFS per training node, so meant for small
graphs and tests (``access_spmv`` is the cheap estimate). Returns int64[N].
Releases the GIL; ``num_threads`` OpenMP threads (0: the default) and the
result does not depend on them. Raises ``ValueError`` for a malformed
``indptr``, an id outside ``[0, N)`` in ``indices`` or ``train``, or
``layers < 0``.)doc");
  m.def("access_spmv", &spmv_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("train"), nb::arg("layers"), nb::arg("num_threads") = 0);
  m.def("access_spmv", &spmv_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("train"), nb::arg("layers"), nb::arg("num_threads") = 0,
        R"doc(Path-count access estimate ``x_L = (A + I)^L · 1_train`` (float64[N]).

``A[j, t]`` is the number of times ``j`` occurs in row ``t`` of the CSR
(``indptr`` int64[N+1], ``indices`` int32|int64[E]; row ``t`` lists the
nodes a sampler reads when expanding ``t``), so ``x_L[j]`` counts the walks
of at most ``layers`` steps from a training node to ``j``. ``1_train`` is the
indicator of ``train`` (int64[T]; repeated ids count once); ``layers = 0``
returns it. Each step pulls over the transposed CSR in a fixed order, so the
result is bit-identical for every ``num_threads`` (0: OpenMP's default).
Releases the GIL. Raises ``ValueError`` as ``access_reach``.)doc");
  m.def("place_features", &place_features_py, nb::arg("p"), nb::arg("devices"),
        nb::arg("slots"), nb::arg("alpha"),
        R"doc(Feature caches of ``devices`` fully connected GPUs (Song & Jiang, Algorithm 1
as corrected in ALGORITHMS.md §4). Returns int64[devices, min(slots, N)]:
row ``d`` lists the nodes device ``d`` caches.

``p`` (float64[N]) is each node's access probability. Let ``V`` be the nodes
by ``p`` descending (ties: smaller id) and ``BSIZE = min(slots, N)``. Every
device starts with ``V[:BSIZE]``. Then, for the slots ``BSIZE-1, ..., 0`` in
turn, the devices ordered by their sum of swapped-in ``p`` (ascending, ties:
smaller index), all but the last each replace that slot's node ``old`` with
the next uncached ``V[nxt]`` while ``p[V[nxt]] > alpha · p[old]``; the first
failure, or ``min(N, devices · BSIZE)`` nodes cached, ends it. With one
device this is the top ``BSIZE``. Releases the GIL. Raises ``ValueError`` for
``devices < 1``, ``slots < 0``, ``alpha`` not finite and >= 0, or a ``p``
entry not finite and >= 0.)doc");
  m.def("degree_greedy_assign", &degree_greedy_py, nb::arg("degree"), nb::arg("parts"),
        nb::arg("group_size"), nb::arg("skip") = nb::none(),
        R"doc(HyDRA's degree-balanced greedy assignment (ALGORITHMS.md §3). Returns int64[N].

The nodes ``v`` with ``skip[v] == 0`` (all of them when ``skip`` is None;
``skip`` is uint8[N]) in descending ``degree`` order (int64[N], ties:
smaller id) are cut into consecutive groups of ``group_size`` (the last may
be shorter). Each group goes to the part with the smallest sum of degrees so
far (ties: smaller part index), whose sum grows by the group's degree sum.
Skipped nodes get -1. Releases the GIL. Raises ``ValueError`` for
``parts < 1``, ``group_size < 1``, a negative degree or a ``skip`` of the
wrong length.)doc");
}

}  // namespace gnncore::bind
