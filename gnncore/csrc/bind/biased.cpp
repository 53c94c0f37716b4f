// Bindings for biased DENSE sampling (locality-aware boosting, threshold pruning).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <tuple>
#include <vector>

#include "bind/common.h"
#include "sampler/biased.h"

namespace gnncore::bind {

// ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges, weight,
// remote_lists, remote_ids)``.
using BiasedTuple =
    std::tuple<OutArray<int64_t>, OutArray<int64_t>, OutArray<int64_t>, OutArray<int64_t>,
               std::vector<int64_t>, std::vector<int64_t>, OutArray<float>,
               std::vector<int64_t>, std::vector<int64_t>>;

using MaybeMask = std::optional<InArray<uint8_t>>;

template <typename IndexT>
static BiasedTuple sample_biased_pyg_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                        InArray<NodeId> targets,
                                        const std::vector<int64_t>& fanouts, nb::int_ seed,
                                        const std::vector<MaybeMask>& boost, double scale,
                                        MaybeMask remote, const std::vector<int64_t>& theta,
                                        int num_threads) {
  const uint64_t seed64 = seed_of(seed);
  BiasOptions options;
  for (const MaybeMask& mask : boost)
    options.boost.push_back(mask ? span_of(*mask) : Span<uint8_t>{});
  options.scale = scale;
  if (remote) options.remote = span_of(*remote);
  options.theta = theta;
  BiasedSample s;
  {
    nb::gil_scoped_release release;
    s = sample_biased_pyg<IndexT>(span_of(indptr), span_of(indices), span_of(targets), fanouts,
                                  seed64, options, num_threads);
  }
  NeighborSample& n = s.sample;
  return BiasedTuple(to_numpy(std::move(n.node)), to_numpy(std::move(n.row)),
                     to_numpy(std::move(n.col)), to_numpy(std::move(n.edge)),
                     std::move(n.num_sampled_nodes), std::move(n.num_sampled_edges),
                     to_numpy(std::move(s.weight)), std::move(s.remote_lists),
                     std::move(s.remote_ids));
}

void bind_biased(nb::module_& m) {
  // int64 first: an array that needs converting is copied to int64, not narrowed.
  m.def("sample_biased_pyg", &sample_biased_pyg_as<int64_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("boost") = std::vector<MaybeMask>{}, nb::arg("scale") = 1.0,
        nb::arg("remote") = nb::none(), nb::arg("theta") = std::vector<int64_t>{},
        nb::arg("num_threads") = 0);
  m.def("sample_biased_pyg", &sample_biased_pyg_as<int32_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("targets"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("boost") = std::vector<MaybeMask>{}, nb::arg("scale") = 1.0,
        nb::arg("remote") = nb::none(), nb::arg("theta") = std::vector<int64_t>{},
        nb::arg("num_threads") = 0,
        R"doc(DENSE sampling with locality-aware boosting and threshold pruning (PyG layout).

As ``sample_dense_pyg`` (each node's neighbours sampled once per batch, hop
``h`` expanding the nodes new at hop ``h - 1``), with two options:

* ``boost``: per hop (or empty), ``None`` or a uint8[N] mask; with
  ``scale`` s >= 1, entry ``j`` of the row of a node expanded at hop ``h``
  weighs s if ``boost[h][indices[j]]`` else 1, and k = ``min(fanout, d)``
  distinct entries are drawn by systematic PPS sampling (random order) with
  the exact inclusion probabilities ``pi_j = min(1, k w_j / W)``, capped
  iteratively so that they sum to k. Equal weights (s = 1, no or only
  boosted entries) draw uniformly, exactly as ``sample_dense_pyg`` with the
  same seed.
* ``remote`` (uint8[N] or None) and ``theta`` (per hop or empty; -1: whole
  list): a remote row longer than ``theta[h]`` is read as a window of
  ``theta[h]`` entries at a uniformly random offset (wrapping around) and
  sampled from that window (``d = theta[h]``).

Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges,
weight, remote_lists, remote_ids)``: the first six as ``sample_dense_pyg``;
``weight`` float32 per edge, the Horvitz-Thompson ``c_j = (k / d) / pi_j``
(Song & Jiang's q_j / q_new_j with q_new capped at 1: the weighted mean over
the k sampled entries is unbiased) when the node's draw was weighted, else
1; ``remote_lists`` / ``remote_ids`` per hop: remote lists expanded and ids
read from them (``min(deg, theta[h])``, ``deg`` when -1). Deterministic given ``seed`` and
independent of ``num_threads``. Raises ``ValueError`` naming a bad argument
(``boost``, ``scale``, ``remote``, ``theta``, ``fanouts``, ``indptr``) and
``IndexError`` for an id outside ``[0, N)``.)doc");
}

}  // namespace gnncore::bind
