// Multi-hop uniform neighbour sampling over a CSR (homogeneous graphs).
//
// Row v of the CSR lists the nodes whose messages flow into v. Starting from
// the seeds, hop h expands every node first added in hop h - 1 (hop 0: the
// seeds) by sampling up to fanouts[h] entries of its row. Each sampled entry j
// of row v emits one edge (row = local id of indices[j], col = local id of v,
// edge = j); new nodes get local ids in first-seen order. The output is
// deterministic given `seed` and independent of the number of threads.
#pragma once
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

struct NeighborSample {
  std::vector<NodeId> node;                 // local id -> global id; seeds first
  std::vector<int64_t> row;                 // local id of the message source
  std::vector<int64_t> col;                 // local id of the message target
  std::vector<EdgeId> edge;                 // CSR position of the sampled entry
  std::vector<int64_t> num_sampled_nodes;   // [unique seeds, new at hop 0, ...]
  std::vector<int64_t> num_sampled_edges;   // edges emitted per hop
};

// Samples `fanouts.size()` hops from `seeds`. fanouts[h] == -1 takes every
// neighbour; otherwise it must be non-negative. Without replacement a node of
// degree d contributes min(d, fanout) distinct entries; with replacement it
// contributes `fanout` independent uniform draws (none when d == 0).
// `num_threads` <= 0 uses the OpenMP default; the result does not depend on it.
// Throws std::invalid_argument for malformed indptr or fanouts and
// std::out_of_range for a seed or neighbour id outside [0, indptr.size - 1).
template <typename IndexT>
NeighborSample sample_neighbors(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> seeds, const std::vector<int64_t>& fanouts,
                                uint64_t seed, bool replace, int num_threads = 0);

}  // namespace gnncore
