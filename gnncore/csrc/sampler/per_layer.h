// Per-layer multi-hop sampling (the DGL / classic PyG scheme that DENSE is
// compared with in thesis §3.3, Table 3.5), over a CSR (homogeneous graphs).
//
// Row v of the CSR lists the nodes whose messages flow into v. Hop h (0-based)
// samples up to fanouts[h] entries of the row of *every* node known before
// the hop -- the unique seeds and all nodes reached at hops 0..h-1 -- so a node
// reached earlier is sampled again at each later hop (DENSE and
// sample_neighbors sample each node once). Each sampled entry j of row v
// emits one edge (row = local id of indices[j], col = local id of v,
// edge = j); new nodes get local ids in first-seen order, so the node list is
// duplicate-free and its hop-h block holds the nodes first reached at hop h.
// The same CSR entry may be emitted at several hops (once per hop at most
// without replacement).
//
// The draws for the node with local id i at hop h come from
// sampling::node_rng(seed, h, i): the output is deterministic given `seed`
// and independent of the number of threads.
#pragma once
#include <cstdint>
#include <vector>

#include "sampler/neighbor.h"
#include "types.h"

namespace gnncore {

// Samples `fanouts.size()` hops from `seeds` (duplicates dropped, first
// occurrence kept) into PyG's layout: node = [seeds, new at hop 0, ...],
// edges grouped by hop (within a hop by target in local-id order),
// num_sampled_nodes = [unique seeds, new at hop 0, ...], num_sampled_edges =
// edges per hop. Without replacement a node of degree d contributes
// min(d, fanout) distinct entries per hop; with replacement `fanout` uniform
// draws (none when d == 0); fanout -1 takes the whole row. `num_threads` <= 0
// uses the OpenMP default. Throws std::invalid_argument for a malformed indptr
// or a fanout below -1 and std::out_of_range for a seed or neighbour id
// outside [0, N).
template <typename IndexT>
NeighborSample sample_per_layer(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> seeds,
                                const std::vector<int64_t>& fanouts, uint64_t seed,
                                bool replace, int num_threads = 0);

}  // namespace gnncore
