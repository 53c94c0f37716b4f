// Bindings for CSR construction and validation.
#include <stdexcept>

#include "bind/common.h"
#include "graph/csr.h"

namespace gnncore::bind {

template <typename IndexT>
static nb::tuple build_csr_as(InArray<NodeId> src, InArray<NodeId> dst, NodeId num_nodes,
                              bool sort_rows) {
  if (num_nodes < 0) throw std::invalid_argument("num_nodes must be non-negative");
  if (src.shape(0) != dst.shape(0)) throw std::invalid_argument("src and dst differ in length");
  std::vector<int64_t> indptr(static_cast<size_t>(num_nodes) + 1);
  std::vector<IndexT> indices(src.shape(0));
  std::vector<EdgeId> eid(src.shape(0));
  {
    nb::gil_scoped_release release;
    build_csr<IndexT>(span_of(src), span_of(dst), num_nodes, sort_rows,
                      MutSpan<int64_t>{indptr.data(), indptr.size()},
                      MutSpan<IndexT>{indices.data(), indices.size()},
                      MutSpan<EdgeId>{eid.data(), eid.size()});
  }
  return nb::make_tuple(to_numpy(std::move(indptr)), to_numpy(std::move(indices)),
                        to_numpy(std::move(eid)));
}

template <typename IndexT>
static int64_t find_invalid_row(InArray<int64_t> indptr, InArray<IndexT> indices,
                                NodeId num_nodes, bool strict) {
  nb::gil_scoped_release release;
  return find_invalid_csr_row<IndexT>(span_of(indptr), span_of(indices), num_nodes, strict);
}

void bind_graph(nb::module_& m) {
  m.def(
      "build_csr",
      [](InArray<NodeId> src, InArray<NodeId> dst, NodeId num_nodes, bool int32_indices,
         bool sort_rows) {
        return int32_indices ? build_csr_as<int32_t>(src, dst, num_nodes, sort_rows)
                             : build_csr_as<int64_t>(src, dst, num_nodes, sort_rows);
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("num_nodes"), nb::arg("int32_indices") = false,
      nb::arg("sort_rows") = true,
      R"doc(Build a CSR by stable counting sort.

Row ``v`` lists ``dst[e]`` for every ``e`` with ``src[e] == v``, sorted by
neighbour id when ``sort_rows`` (else in input order). Returns
``(indptr int64[num_nodes + 1], indices int32|int64[E], eid int64[E])`` where
``eid[j]`` is the input position of entry ``j``. Raises ``IndexError`` naming
the first edge with an id outside ``[0, num_nodes)``.)doc");
  m.def("find_invalid_csr_row", &find_invalid_row<int32_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("num_nodes"), nb::arg("strict") = true);
  m.def("find_invalid_csr_row", &find_invalid_row<int64_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("num_nodes"), nb::arg("strict") = true,
        "First row whose neighbours are unsorted (or repeated, when strict) or out of "
        "range; 0 if indptr is malformed; -1 if valid.");
}

}  // namespace gnncore::bind
