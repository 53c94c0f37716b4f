// Bindings for ByteGNN's block partitioner.
#include <stdexcept>

#include "bind/common.h"
#include "partition/bytegnn.h"

namespace gnncore::bind {

template <typename IndexT>
static nb::tuple blocks_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                           InArray<NodeId> centres, int64_t hops) {
  if (indptr.shape(0) == 0) throw std::invalid_argument("indptr must have N + 1 entries");
  const size_t n = indptr.shape(0) - 1;
  std::vector<int64_t> block(n), level(n);
  {
    nb::gil_scoped_release release;
    bytegnn_blocks<IndexT>(span_of(indptr), span_of(indices), span_of(centres), hops,
                           MutSpan<int64_t>{block.data(), n}, MutSpan<int64_t>{level.data(), n});
  }
  return nb::make_tuple(to_numpy(std::move(block)), to_numpy(std::move(level)));
}

template <typename IndexT>
static OutArray<int64_t> assign_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                   InArray<int64_t> block, InArray<int64_t> level,
                                   InArray<int8_t> split_of, int64_t parts, int64_t capacity,
                                   double w_train, double w_val, double w_test) {
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = bytegnn_assign<IndexT>(span_of(indptr), span_of(indices), span_of(block),
                                 span_of(level), span_of(split_of), parts, capacity,
                                 {w_train, w_val, w_test});
  }
  return to_numpy(std::move(out));
}

void bind_bytegnn(nb::module_& m) {
  m.def("bytegnn_blocks", &blocks_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("centres"), nb::arg("hops"));
  m.def("bytegnn_blocks", &blocks_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("centres"), nb::arg("hops"),
        R"doc(ByteGNN blocks: a level-synchronous BFS of ``hops`` levels from every
centre (distinct ids); a node first reached at level l takes the smallest
block id among its level l − 1 neighbours; a centre's block id is its own id;
unreached nodes are singleton blocks with their own id. Returns
``(block int64[N], level int64[N])`` with level -1 for unreached nodes.)doc");
  m.def("bytegnn_assign", &assign_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("block"), nb::arg("level"), nb::arg("split_of"), nb::arg("parts"),
        nb::arg("capacity"), nb::arg("w_train"), nb::arg("w_val"), nb::arg("w_test"));
  m.def("bytegnn_assign", &assign_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("block"), nb::arg("level"), nb::arg("split_of"), nb::arg("parts"),
        nb::arg("capacity"), nb::arg("w_train"), nb::arg("w_val"), nb::arg("w_test"),
        R"doc(ByteGNN Algorithm 2 over the blocks of ``bytegnn_blocks``: blocks by
descending max split count, size, then ascending id; each to the part (with
room under ``capacity``) maximising (crossing edges/|P_j|)·BS_j, the least
loaded when a part is empty or all scores are 0; a block no part has room for
is split over the parts in the same order. ``split_of`` is int8[N]: 0/1/2 for
train/val/test, -1 otherwise. Returns int64[N].)doc");
}

}  // namespace gnncore::bind
