// Bindings for partition post-processing: halos and split rebalancing (with
// the CSR in memory, or its indices read from their file row by row).
#include <nanobind/stl/string.h>

#include <array>
#include <string>

#include "bind/common.h"
#include "partition/postprocess.h"
#include "partition/postprocess_stream.h"

namespace gnncore::bind {

// The options of balance_splits; validate() runs on construction and on every use.
struct SplitBalanceOptions {
  int64_t parts = 1;
  std::array<int64_t, 3> lo{0, 0, 0};
  std::array<int64_t, 3> hi{0, 0, 0};
  int64_t capacity = 0;

  void validate() const {
    static const char* cls = "SplitBalanceOptions";
    check_field(parts >= 1, cls, "parts", ">= 1", parts);
    for (int x = 0; x < 3; ++x) {
      const std::string i = "[" + std::to_string(x) + "]";
      check_field(lo[x] >= 0, cls, "lo" + i, ">= 0", lo[x]);
      check_field(hi[x] >= lo[x], cls, "hi" + i, ">= lo" + i, hi[x]);
    }
    check_field(capacity >= 0, cls, "capacity", ">= 0", capacity);
  }
};

// What balance_splits did.
struct SplitBalanceResult {
  OutArray<int64_t> assignment;
  int64_t split_moves = 0;
  int64_t evictions = 0;
  bool satisfied = true;
  int64_t rows_read = 0;
};

template <typename IndexT>
static ArrayPair<int64_t> halo_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                         InArray<int64_t> assignment, int64_t parts) {
  Halos h;
  {
    nb::gil_scoped_release release;
    h = halo_nodes<IndexT>(span_of(indptr), span_of(indices), span_of(assignment), parts);
  }
  return ArrayPair<int64_t>(to_numpy(std::move(h.offsets)), to_numpy(std::move(h.nodes)));
}

template <typename IndexT>
static SplitBalanceResult balance_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                     InArray<int64_t> assignment, InArray<int8_t> split_of,
                                     const SplitBalanceOptions& o) {
  o.validate();
  SplitBalance r;
  {
    nb::gil_scoped_release release;
    r = balance_splits<IndexT>(span_of(indptr), span_of(indices), span_of(assignment),
                               span_of(split_of), o.parts, o.lo, o.hi, o.capacity);
  }
  return SplitBalanceResult{to_numpy(std::move(r.assignment)), r.split_moves, r.evictions,
                            r.satisfied, 0};
}

static SplitBalanceResult balance_file(InArray<int64_t> indptr, const std::string& indices_path,
                                       int64_t indices_offset, bool int64_indices,
                                       InArray<int64_t> assignment, InArray<int8_t> split_of,
                                       const SplitBalanceOptions& o) {
  o.validate();
  SplitBalance r;
  int64_t rows_read = 0;
  {
    nb::gil_scoped_release release;
    r = balance_splits_file(span_of(indptr), indices_path, indices_offset, int64_indices,
                            span_of(assignment), span_of(split_of), o.parts, o.lo, o.hi,
                            o.capacity, &rows_read);
  }
  return SplitBalanceResult{to_numpy(std::move(r.assignment)), r.split_moves, r.evictions,
                            r.satisfied, rows_read};
}

void bind_postprocess(nb::module_& m) {
  nb::class_<SplitBalanceOptions> options(m, "SplitBalanceOptions",
                                  R"doc(Options of ``balance_splits``.

Checked when built and again by ``balance_splits``: a bad value raises
``ValueError`` naming the field, e.g. ``SplitBalanceOptions.hi[1] must be
>= lo[1], got 3``.)doc");
  options
      .def(
          "__init__",
          [](SplitBalanceOptions* self, int64_t parts, TupleOf<int64_t, 3> lo,
             TupleOf<int64_t, 3> hi, int64_t capacity) {
            SplitBalanceOptions o{parts, as_array<int64_t>(lo), as_array<int64_t>(hi), capacity};
            o.validate();
            new (self) SplitBalanceOptions(o);
          },
          nb::kw_only(), nb::arg("parts"), nb::arg("lo"), nb::arg("hi"), nb::arg("capacity"))
      .def_rw("parts", &SplitBalanceOptions::parts, "Number of parts (>= 1).")
      .def_rw("capacity", &SplitBalanceOptions::capacity,
              "Node cap per part, never exceeded by a move (>= 0).");
  def_tuple_rw(options, "lo", &SplitBalanceOptions::lo,
               "Least nodes of split x (train, val, test) each part should hold (>= 0).");
  def_tuple_rw(options, "hi", &SplitBalanceOptions::hi,
               "Most nodes of split x each part should hold (>= lo[x]).");

  nb::class_<SplitBalanceResult>(m, "SplitBalanceResult", "What ``balance_splits`` did.")
      .def_ro("assignment", &SplitBalanceResult::assignment, nb::rv_policy::reference,
              "The new int64[N] assignment.")
      .def_ro("split_moves", &SplitBalanceResult::split_moves,
              "Split nodes moved to fix a split count.")
      .def_ro("evictions", &SplitBalanceResult::evictions,
              "Nodes moved out of a part at the cap (swaps).")
      .def_ro("satisfied", &SplitBalanceResult::satisfied,
              "Whether every count ended inside its band.")
      .def_ro("rows_read", &SplitBalanceResult::rows_read,
              "CSR rows read from the indices file (``balance_splits_file``; 0 for "
              "``balance_splits``).");

  m.def("halo_nodes", &halo_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("parts"));
  m.def("halo_nodes", &halo_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("parts"),
        R"doc(1-hop halos over a symmetric CSR: part i's halo is every node outside
part i with a neighbour in it, ascending. Returns ``(offsets int64[parts + 1],
nodes int64[...])``; part i's halo is ``nodes[offsets[i]:offsets[i + 1]]``.)doc");
  m.def("balance_splits", &balance_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("split_of"), nb::arg("options"));
  m.def("balance_splits", &balance_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("assignment"), nb::arg("split_of"), nb::arg("options"),
        R"doc(Move nodes so every part holds between ``options.lo[x]`` and
``options.hi[x]`` nodes of split x (``split_of`` int8[N]: 0/1/2, -1 for
none), greedily by least cut cost, never growing a part past
``options.capacity`` (a full part takes a node only by evicting another: a
non-split node or one of a split that stays in its band, else one of a split
balanced later). Returns a ``SplitBalanceResult``. Releases the GIL.)doc");
  m.def("balance_splits_file", &balance_file, nb::arg("indptr"), nb::arg("indices_path"),
        nb::arg("indices_offset"), nb::arg("int64_indices"), nb::arg("assignment"),
        nb::arg("split_of"), nb::arg("options"),
        R"doc(``balance_splits`` with the symmetric CSR's indices left in their file
(``indices_path``: int32, or int64 with ``int64_indices``, from byte
``indices_offset``, e.g. a .npy file's data offset): each row the greedy
visits is read with one ``pread``, nothing is mapped, so memory is
``indptr`` and O(|V|) state whatever the edge count. Same moves and result as
``balance_splits`` over the same CSR; rows are read only when a split count
is outside its band (``rows_read``). Releases the GIL.)doc");
}

}  // namespace gnncore::bind
