// Bindings for DENSE sampling.
#include <nanobind/stl/vector.h>

#include "bind/common.h"
#include "bind/neighbor_sample.h"
#include "sampler/buffer_pool.h"
#include "sampler/dense.h"

namespace gnncore::bind {

// The DENSE layout ``(node_ids, node_id_offsets, nbrs, nbr_offsets, repr, nbr_edges)``.
using DenseTuple = std::tuple<OutArray<int64_t>, OutArray<int64_t>, OutArray<int64_t>,
                              OutArray<int64_t>, OutArray<int64_t>, OutArray<int64_t>>;

template <typename IndexT>
static DenseTuple sample_dense_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                 InArray<NodeId> targets, const std::vector<int64_t>& fanouts,
                                 nb::int_ seed, int num_threads) {
  const uint64_t seed64 = seed_of(seed);
  DenseSample s;
  {
    nb::gil_scoped_release release;
    s = sample_dense<IndexT>(span_of(indptr), span_of(indices), span_of(targets), fanouts,
                             seed64, num_threads);
  }
  return DenseTuple(to_numpy(std::move(s.node_ids)), to_numpy(std::move(s.node_id_offsets)),
                    to_numpy(std::move(s.nbrs)), to_numpy(std::move(s.nbr_offsets)),
                    to_numpy(std::move(s.repr)), to_numpy(std::move(s.nbr_edges)));
}

// `v` as a numpy array that gives its buffer back to the sampler's buffer
// pool (sampling::BufferPool) when it is freed, for the next batch's outputs.
static OutArray<int64_t> pooled_numpy(std::vector<int64_t>&& v) {
  auto* owned = new std::vector<int64_t>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept {
    auto* buffer = static_cast<std::vector<int64_t>*>(p);
    sampling::BufferPool::instance().give(std::move(*buffer));
    delete buffer;
  });
  return OutArray<int64_t>(owned->data(), {owned->size()}, owner);
}

template <typename IndexT>
static SampleTuple sample_dense_pyg_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                     InArray<NodeId> targets, const std::vector<int64_t>& fanouts,
                                     nb::int_ seed, int num_threads) {
  const uint64_t seed64 = seed_of(seed);
  NeighborSample s;
  {
    nb::gil_scoped_release release;
    s = sample_dense_pyg<IndexT>(span_of(indptr), span_of(indices), span_of(targets), fanouts,
                                 seed64, num_threads);
  }
  return SampleTuple(pooled_numpy(std::move(s.node)), pooled_numpy(std::move(s.row)),
                     pooled_numpy(std::move(s.col)), pooled_numpy(std::move(s.edge)),
                     std::move(s.num_sampled_nodes), std::move(s.num_sampled_edges));
}

static std::vector<int64_t> copy_of(const InArray<int64_t>& a) {
  return std::vector<int64_t>(a.data(), a.data() + a.shape(0));
}

static SampleTuple dense_to_pyg_py(InArray<NodeId> node_ids, InArray<int64_t> node_id_offsets,
                                 InArray<NodeId> nbrs, InArray<int64_t> nbr_offsets,
                                 InArray<int64_t> repr, InArray<EdgeId> nbr_edges,
                                 int num_threads) {
  DenseSample d{copy_of(node_ids), copy_of(node_id_offsets), copy_of(nbrs),
                copy_of(nbr_offsets),  copy_of(repr),          copy_of(nbr_edges)};
  NeighborSample s;
  {
    nb::gil_scoped_release release;
    s = dense_to_pyg(d, num_threads);
  }
  return sample_tuple(std::move(s));
}

void bind_dense(nb::module_& m) {
  // int64 first: an array that needs converting is copied to int64, not narrowed.
  m.def("sample_dense", &sample_dense_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"), nb::arg("num_threads") = 0);
  m.def("sample_dense", &sample_dense_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"), nb::arg("num_threads") = 0,
        R"doc(DENSE multi-hop sampling (thesis §3.3 Alg. 1): each node's neighbours once per batch.

Row ``v`` of the CSR (``indptr`` int64[N+1], ``indices`` int32|int64[E])
lists the nodes whose messages flow into ``v``. Hop ``h`` samples up to
``fanouts[h]`` (-1: all) entries of the row of every node of the delta
``Δ_h`` (``Δ_0``: the unique targets) uniformly without replacement; the next
delta holds the neighbours not seen before, in first-seen order.

Returns the DENSE layout ``(node_ids, node_id_offsets, nbrs, nbr_offsets,
repr, nbr_edges)`` (int64 arrays): ``node_ids = [Δ_k, ..., Δ_1, targets]``,
``node_id_offsets`` the k + 1 block starts, ``nbrs`` the sampled neighbours
of ``node_ids[node_id_offsets[1]:]`` grouped per node with CSR offsets
``nbr_offsets``, ``repr`` the index of each neighbour in ``node_ids`` and
``nbr_edges`` its CSR position. Deterministic given ``seed`` and independent
of ``num_threads``. Raises ``IndexError``/``ValueError`` as sample_neighbors.)doc");
  m.def("sample_dense_pyg", &sample_dense_pyg_as<int64_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("num_threads") = 0);
  m.def("sample_dense_pyg", &sample_dense_pyg_as<int32_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("num_threads") = 0,
        R"doc(``dense_to_pyg(*sample_dense(...))`` without building the DENSE layout.

Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)`` like
``sample_neighbors``: ``node = [targets, Δ_1, ..., Δ_k]``, edges grouped by hop.)doc");
  m.def("dense_to_pyg", &dense_to_pyg_py, nb::arg("node_ids"), nb::arg("node_id_offsets"),
        nb::arg("nbrs"), nb::arg("nbr_offsets"), nb::arg("repr"), nb::arg("nbr_edges"),
        nb::arg("num_threads") = 0,
        R"doc(The PyG layout of a DENSE sample (the tuple ``sample_dense`` returns).

Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``:
``node = [targets, Δ_1, ..., Δ_k]``; hop ``h`` edges (the neighbours of
``Δ_{h-1}``) come before hop ``h + 1`` edges, so ``num_sampled_edges`` can
drive ``trim_to_layer``. Raises ``ValueError`` for an inconsistent layout.)doc");
}

}  // namespace gnncore::bind
