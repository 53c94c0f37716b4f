// Bindings for partition post-processing: halos and split rebalancing.
#include <nanobind/stl/array.h>

#include "bind/common.h"
#include "partition/postprocess.h"

namespace gnncore::bind {

template <typename IndexT>
static nb::tuple halo_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                         InArray<int64_t> assignment, int64_t parts) {
  Halos h;
  {
    nb::gil_scoped_release release;
    h = halo_nodes<IndexT>(span_of(indptr), span_of(indices), span_of(assignment), parts);
  }
  return nb::make_tuple(to_numpy(std::move(h.offsets)), to_numpy(std::move(h.nodes)));
}

template <typename IndexT>
static nb::tuple balance_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                            InArray<int64_t> assignment, InArray<int8_t> split_of,
                            int64_t parts, std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                            int64_t capacity) {
  SplitBalance r;
  {
    nb::gil_scoped_release release;
    r = balance_splits<IndexT>(span_of(indptr), span_of(indices), span_of(assignment),
                               span_of(split_of), parts, lo, hi, capacity);
  }
  return nb::make_tuple(to_numpy(std::move(r.assignment)), r.split_moves, r.evictions,
                        r.satisfied);
}

void bind_postprocess(nb::module_& m) {
  m.def("halo_nodes", &halo_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("parts"));
  m.def("halo_nodes", &halo_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("parts"),
        R"doc(1-hop halos over a symmetric CSR: part i's halo is every node outside
part i with a neighbour in it, ascending. Returns ``(offsets int64[parts + 1],
nodes int64[...])``; part i's halo is ``nodes[offsets[i]:offsets[i + 1]]``.)doc");
  m.def("balance_splits", &balance_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("split_of"), nb::arg("parts"), nb::arg("lo"),
        nb::arg("hi"), nb::arg("capacity"));
  m.def("balance_splits", &balance_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("split_of"), nb::arg("parts"), nb::arg("lo"),
        nb::arg("hi"), nb::arg("capacity"),
        R"doc(Move nodes so every part holds between ``lo[x]`` and ``hi[x]`` nodes of
split x (``split_of`` int8[N]: 0/1/2, -1 for none), greedily by least cut
cost, never growing a part past ``capacity`` (a full part takes a node only
by evicting another: a non-split node or one of a split that stays in its
band, else one of a split balanced later). Returns ``(assignment int64[N],
split_moves, evictions, satisfied)``.)doc");
}

}  // namespace gnncore::bind
