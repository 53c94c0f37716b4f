// DENSE multi-hop sampling (thesis §3.3, Alg. 1): every node's one-hop
// neighbours are sampled once per batch, hop by hop from the targets outward.
//
// Row v of the CSR lists the nodes whose messages flow into v. Hop h (0-based)
// samples up to fanouts[h] entries of the row of every node of the delta
// Δ_h (Δ_0: the unique targets), uniformly without replacement (all of them
// when the row is shorter, or when fanouts[h] == -1); the next delta Δ_{h+1}
// holds the sampled neighbours not seen before, in first-seen order. A node
// reached again at a deeper hop is not sampled again.
//
// The draws for the node at position i of Δ_h come from
// sampling::node_rng(seed, h, i), so the result is deterministic given `seed`
// and independent of the number of threads (and equals sample_neighbors with
// replace = false for the same seed).
#pragma once
#include <cstdint>
#include <vector>

#include "sampler/neighbor.h"
#include "types.h"

namespace gnncore {

// The DENSE layout. With k = fanouts.size() hops the nodes form k + 1 blocks,
// stored outermost first: node_ids = [Δ_k, Δ_{k-1}, ..., Δ_1, targets].
struct DenseSample {
  std::vector<NodeId> node_ids;
  // k + 1 block starts into node_ids: [start of Δ_k, ..., start of targets].
  std::vector<int64_t> node_id_offsets;
  // Sampled neighbours (global ids) of node_ids[node_id_offsets[1]:] (every
  // node but the outermost delta), grouped per node in node_ids order.
  std::vector<NodeId> nbrs;
  // CSR over node_ids[node_id_offsets[1]:]: the neighbours of node
  // node_ids[node_id_offsets[1] + p] are nbrs[nbr_offsets[p] : nbr_offsets[p + 1]].
  // Length node_ids.size() - node_id_offsets[1] + 1 (1 when k == 0).
  std::vector<int64_t> nbr_offsets;
  std::vector<int64_t> repr;       // index of nbrs[t] in node_ids
  std::vector<EdgeId> nbr_edges;   // CSR position of nbrs[t]
};

// Samples `fanouts.size()` hops from `targets` (duplicates are dropped, first
// occurrence kept). `num_threads` <= 0 uses the OpenMP default. Throws
// std::invalid_argument for a malformed indptr or a fanout below -1 and
// std::out_of_range for a target or neighbour id outside [0, N).
template <typename IndexT>
DenseSample sample_dense(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                         const std::vector<int64_t>& fanouts, uint64_t seed,
                         int num_threads = 0);

// The PyG layout of a DENSE sample: node = [targets, Δ_1, ..., Δ_k]; edges
// grouped by hop (hop h: the neighbours of Δ_{h-1}, in node order), with
// row = local id of the neighbour, col = local id of the node it was sampled
// for, edge = CSR position; num_sampled_nodes = block sizes from the targets
// outward, num_sampled_edges = edges per hop. Throws std::invalid_argument for
// an inconsistent layout.
NeighborSample dense_to_pyg(const DenseSample& s, int num_threads = 0);

// dense_to_pyg(sample_dense(...)) without building the DENSE layout.
template <typename IndexT>
NeighborSample sample_dense_pyg(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> targets, const std::vector<int64_t>& fanouts,
                                uint64_t seed, int num_threads = 0);

}  // namespace gnncore
