// Bindings for neighbour sampling.
#include <nanobind/stl/vector.h>

#include "bind/common.h"
#include "bind/neighbor_sample.h"
#include "huge_array.h"
#include "sampler/neighbor.h"
#include "sampler/per_layer.h"
#include "sampler/uniform.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gnncore::bind {

// A copy of `a` in 2 MiB-aligned memory advised for transparent huge pages
// (MADV_HUGEPAGE, before the copy touches it, so the kernel backs it with
// huge pages where it can): the samplers' random reads of a CSR of many MiB
// then rarely miss the TLB, which a memory-mapped file's 4 KiB pages do
// (this kernel has no huge pages for file mappings).
template <typename T>
static OutArray<T> huge_page_copy(InArray<T> a) {
  const size_t n = a.shape(0);
  size_t bytes = 0;
  void* p = huge_page_alloc(n * sizeof(T), &bytes);
  {
    nb::gil_scoped_release release;
    if (n > 0) std::memcpy(p, a.data(), n * sizeof(T));
  }
  nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
  return OutArray<T>(static_cast<T*>(p), {n}, owner);
}

// One sampling kernel (sample_neighbors or sample_per_layer), run without the GIL.
template <typename IndexT,
          NeighborSample (*Kernel)(Span<int64_t>, Span<IndexT>, Span<NodeId>,
                                   const std::vector<int64_t>&, uint64_t, bool, int)>
static SampleTuple run_sampler(InArray<int64_t> indptr, InArray<IndexT> indices,
                               InArray<NodeId> seeds, const std::vector<int64_t>& fanouts,
                               nb::int_ seed, bool replace, int num_threads) {
  const uint64_t seed64 = seed_of(seed);
  NeighborSample s;
  {
    nb::gil_scoped_release release;
    s = Kernel(span_of(indptr), span_of(indices), span_of(seeds), fanouts, seed64, replace,
               num_threads);
  }
  return sample_tuple(std::move(s));
}

void bind_sampler(nb::module_& m) {
  // int64 first: an array that needs converting (non-contiguous, other dtype)
  // is then copied to int64 rather than narrowed to int32.
  m.def("sample_neighbors", &run_sampler<int64_t, sample_neighbors<int64_t>>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("seeds"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("replace") = false, nb::arg("num_threads") = 0);
  m.def("sample_neighbors", &run_sampler<int32_t, sample_neighbors<int32_t>>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("seeds"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("replace") = false, nb::arg("num_threads") = 0,
        R"doc(Multi-hop uniform neighbour sampling (PyG NeighborSampler semantics).

Row ``v`` of the CSR (``indptr`` int64[N+1], ``indices`` int32|int64[E])
lists the nodes whose messages flow into ``v``. ``node`` starts with the
unique ``seeds`` in order; hop ``h`` samples up to ``fanouts[h]`` entries
(-1: all) of the row of every node first added in hop ``h - 1`` (hop 0: the
seeds), without replacement unless ``replace``. Each sampled entry ``j`` of
row ``v`` emits ``row`` = local id of ``indices[j]`` (new nodes appended in
first-seen order), ``col`` = local id of ``v`` and ``edge`` = ``j``.

Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``: four
int64 arrays and two lists (``[unique seeds, new at hop 0, ...]`` and edges
per hop). Deterministic given ``seed`` (any int) and independent of
``num_threads`` (<= 0: the OpenMP default). Raises ``IndexError`` for a seed
or neighbour outside ``[0, N)`` and ``ValueError`` for a malformed ``indptr``
or a fanout below -1.)doc");

  m.def("huge_page_copy", &huge_page_copy<int64_t>, nb::arg("array"));
  m.def("huge_page_copy", &huge_page_copy<int32_t>, nb::arg("array"),
        R"doc(A copy of a 1-d int32/int64 array in memory backed by transparent huge pages.

The copy is 2 MiB-aligned and advised ``MADV_HUGEPAGE`` before it is
written, so the kernel backs it with 2 MiB pages where it can (THP mode
``always`` or ``madvise``); a sampler's random reads of a large CSR then
rarely miss the TLB. Costs one copy of the array in memory.)doc");
  m.def(
      "set_sampler_direct_map_limit",
      [](int64_t max_nodes) {
        return sampling::direct_map_max_nodes().exchange(max_nodes);
      },
      nb::arg("max_nodes"),
      R"doc(Sets the largest graph (in nodes) whose samplers map global to local ids
through a per-thread array of 4 bytes per node; larger graphs use a hash map.
The outputs do not depend on it. Returns the previous limit (default 2**26).)doc");
  m.def("sample_per_layer", &run_sampler<int64_t, sample_per_layer<int64_t>>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("seeds"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("replace") = false, nb::arg("num_threads") = 0);
  m.def("sample_per_layer", &run_sampler<int32_t, sample_per_layer<int32_t>>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("seeds"), nb::arg("fanouts"), nb::arg("seed"),
        nb::arg("replace") = false, nb::arg("num_threads") = 0,
        R"doc(Per-layer (DGL / classic PyG) multi-hop sampling: every layer re-samples every node.

Like ``sample_neighbors``, except that hop ``h`` samples up to ``fanouts[h]``
entries (-1: all) of the row of *every* node known before the hop (the unique
seeds and all nodes reached at hops ``0 .. h-1``), not only of the nodes first
reached at hop ``h - 1``; node ``i`` (local id) draws from its own generator
keyed by ``(seed, h, i)``. ``node`` stays duplicate-free (seeds first, then
the nodes new at each hop); edges are grouped by hop, so
``num_sampled_nodes`` / ``num_sampled_edges`` drive ``trim_to_layer``. A CSR
entry can be emitted at several hops.

Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``.
Deterministic given ``seed`` (any int) and independent of ``num_threads``.
Raises ``IndexError`` / ``ValueError`` as ``sample_neighbors``.)doc");
}

}  // namespace gnncore::bind
