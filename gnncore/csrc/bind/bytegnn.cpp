// Bindings for ByteGNN's block partitioner: typed blocks, structured assignment options.

#include <array>
#include <stdexcept>
#include <string>

#include "bind/common.h"
#include "partition/bytegnn.h"

namespace gnncore::bind {

// The blocks of bytegnn_blocks.
struct ByteGnnBlocks {
  OutArray<int64_t> block, level;
};

// The options of bytegnn_assign; validate() runs on construction and on every use.
struct ByteGnnAssignOptions {
  int64_t parts = 1;
  int64_t capacity = 0;
  std::array<double, 3> weights{1.0 / 3, 1.0 / 3, 1.0 / 3};

  void validate() const {
    static const char* cls = "ByteGnnAssignOptions";
    check_field(parts >= 1, cls, "parts", ">= 1", parts);
    check_field(capacity >= 0, cls, "capacity", ">= 0", capacity);
    for (int x = 0; x < 3; ++x)
      check_field(finite_at_least(weights[x], 0.0), cls,
                  "weights[" + std::to_string(x) + "]", "a finite number >= 0", weights[x]);
  }
};

template <typename IndexT>
static ByteGnnBlocks blocks_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                               InArray<NodeId> centres, int64_t hops) {
  if (indptr.shape(0) == 0) throw std::invalid_argument("indptr must have N + 1 entries");
  const size_t n = indptr.shape(0) - 1;
  std::vector<int64_t> block(n), level(n);
  {
    nb::gil_scoped_release release;
    bytegnn_blocks<IndexT>(span_of(indptr), span_of(indices), span_of(centres), hops,
                           MutSpan<int64_t>{block.data(), n}, MutSpan<int64_t>{level.data(), n});
  }
  return ByteGnnBlocks{to_numpy(std::move(block)), to_numpy(std::move(level))};
}

template <typename IndexT>
static OutArray<int64_t> assign_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                   InArray<int64_t> block, InArray<int64_t> level,
                                   InArray<int8_t> split_of, const ByteGnnAssignOptions& o) {
  o.validate();
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = bytegnn_assign<IndexT>(span_of(indptr), span_of(indices), span_of(block),
                                 span_of(level), span_of(split_of), o.parts, o.capacity,
                                 o.weights);
  }
  return to_numpy(std::move(out));
}

void bind_bytegnn(nb::module_& m) {
  nb::class_<ByteGnnBlocks>(m, "ByteGnnBlocks", "The blocks of ``bytegnn_blocks``.")
      .def_ro("block", &ByteGnnBlocks::block, nb::rv_policy::reference,
              "Block id of each node (int64[N]): a centre's id, or its own id when unreached.")
      .def_ro("level", &ByteGnnBlocks::level, nb::rv_policy::reference,
              "BFS level of each node (int64[N]), -1 when unreached.");

  nb::class_<ByteGnnAssignOptions> options(m, "ByteGnnAssignOptions",
                                   R"doc(Options of ``bytegnn_assign`` (ByteGNN Algorithm 2).

Checked when built and again by ``bytegnn_assign``: a bad value raises
``ValueError`` naming the field, e.g. ``ByteGnnAssignOptions.parts must be
>= 1, got 0``.)doc");
  options
      .def(
          "__init__",
          [](ByteGnnAssignOptions* self, int64_t parts, int64_t capacity,
             TupleOf<double, 3> weights) {
            ByteGnnAssignOptions o{parts, capacity, as_array<double>(weights)};
            o.validate();
            new (self) ByteGnnAssignOptions(o);
          },
          nb::kw_only(), nb::arg("parts"), nb::arg("capacity"),
          nb::arg("weights") = std::make_tuple(1.0 / 3, 1.0 / 3, 1.0 / 3))
      .def_rw("parts", &ByteGnnAssignOptions::parts, "Number of parts (>= 1).")
      .def_rw("capacity", &ByteGnnAssignOptions::capacity,
              "Node cap per part; ``capacity · parts`` must cover every node.");
  def_tuple_rw(options, "weights", &ByteGnnAssignOptions::weights,
               "Balance-score weights ``(w_train, w_val, w_test)`` (finite, >= 0).");

  m.def("bytegnn_blocks", &blocks_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("centres"), nb::arg("hops"));
  m.def("bytegnn_blocks", &blocks_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("centres"), nb::arg("hops"),
        R"doc(ByteGNN blocks: a level-synchronous BFS of ``hops`` levels from every
centre (distinct ids); a node first reached at level l takes the smallest
block id among its level l − 1 neighbours; a centre's block id is its own id;
unreached nodes are singleton blocks with their own id. Returns a
``ByteGnnBlocks`` (``block``, ``level`` with -1 for unreached nodes).)doc");
  m.def("bytegnn_assign", &assign_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("block"), nb::arg("level"), nb::arg("split_of"), nb::arg("options"));
  m.def("bytegnn_assign", &assign_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("block"), nb::arg("level"), nb::arg("split_of"), nb::arg("options"),
        R"doc(ByteGNN Algorithm 2 over the blocks of ``bytegnn_blocks``: blocks by
descending max split count, size, then ascending id; each to the part (with
room under ``options.capacity``) maximising (crossing edges/|P_j|)·BS_j, the
least loaded when a part is empty or all scores are 0; a block no part has
room for is split over the parts in the same order. ``split_of`` is int8[N]:
0/1/2 for train/val/test, -1 otherwise. Returns int64[N].)doc");
}

}  // namespace gnncore::bind
