// Bindings for the vertex-stream partitioners (LDG, Fennel).
#include "bind/common.h"
#include "partition/vertex_stream.h"

namespace gnncore::bind {

template <typename IndexT>
static OutArray<int64_t> ldg_as(InArray<int64_t> indptr, InArray<IndexT> indices, int64_t parts,
                                int64_t capacity, nb::int_ seed) {
  const uint64_t s = seed_of(seed);
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = ldg_partition<IndexT>(span_of(indptr), span_of(indices), parts, capacity, s);
  }
  return to_numpy(std::move(out));
}

template <typename IndexT>
static OutArray<int64_t> fennel_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                   int64_t parts, int64_t capacity, double alpha, double gamma,
                                   nb::int_ seed) {
  const uint64_t s = seed_of(seed);
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = fennel_partition<IndexT>(span_of(indptr), span_of(indices), parts, capacity, alpha,
                                   gamma, s);
  }
  return to_numpy(std::move(out));
}

void bind_vertex_stream(nb::module_& m) {
  m.def(
      "stream_order",
      [](NodeId num_nodes, nb::int_ seed) {
        const uint64_t s = seed_of(seed);
        std::vector<NodeId> out;
        {
          nb::gil_scoped_release release;
          out = stream_order(num_nodes, s);
        }
        return to_numpy(std::move(out));
      },
      nb::arg("num_nodes"), nb::arg("seed"),
      "The nodes sorted by their splitmix64 key ``stream(seed, v)``: the seeded random "
      "order in which LDG and Fennel visit them.");
  // int64 first: an array that needs converting is copied to int64, not narrowed.
  m.def("ldg_partition", &ldg_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("seed"));
  m.def("ldg_partition", &ldg_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("seed"),
        R"doc(LDG over a symmetric CSR: node v (in ``stream_order``) goes to
argmax_i |P_i ∩ N(v)|·(1 − |P_i|/capacity) among parts below ``capacity``;
ties to the least loaded part, then the lowest id. Returns int64[N].)doc");
  m.def("fennel_partition", &fennel_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("alpha"), nb::arg("gamma"),
        nb::arg("seed"));
  m.def("fennel_partition", &fennel_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("alpha"), nb::arg("gamma"),
        nb::arg("seed"),
        R"doc(Fennel over a symmetric CSR: node v (in ``stream_order``) goes to
argmax_i |P_i ∩ N(v)| − alpha·gamma·|P_i|^(gamma−1) among parts below
``capacity``; ties to the least loaded part, then the lowest id. Returns
int64[N].)doc");
}

}  // namespace gnncore::bind
