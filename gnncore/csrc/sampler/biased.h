// Biased DENSE sampling: the DENSE kernel (sampler/dense.h) with two planning
// features as options.
//
// * Locality-aware sampling (LAS, Song & Jiang 2022, §4): at hop h a boost mask
//   Q_h (a byte per node, non-zero = boosted) and a scale s >= 1. Expanding
//   target v, entry j of its (possibly windowed) row of d entries gets the
//   weight w_j = s if Q_h[indices[j]] else 1, and k = min(fanout, d) entries
//   are drawn without replacement with the exact inclusion probabilities
//   pi_j = min(1, k w_j / W), capped iteratively (entries whose pi reaches 1
//   are taken with certainty, the k' slots left are spread over the others in
//   proportion to w, until no new cap), so sum_j pi_j = k. The draw is
//   systematic PPS sampling (Madow): the uncertain entries are shuffled with
//   the node's generator, their pi laid end to end on [0, k') (the running sum
//   renormalised to k'), and one u ~ U[0, 1) selects the entry under each of
//   u, u + 1, ..., u + k' - 1; every entry's interval is shorter than 1, so
//   the k entries are distinct and entry j is included with probability pi_j.
//   Each sampled edge carries the Horvitz-Thompson weight c_j = q_j / pi_j,
//   q_j = k / d the plain sampler's inclusion probability, so that
//   E[sum_{j in S} c_j x_j / k] = sum_j x_j / d exactly. Uncapped, pi_j is the
//   paper's q_new_j = w_j q_j M (formula (8), M = sum q / sum w q); pi caps it
//   at 1 where q_new would exceed 1.
//   c_j = 1 for every entry when s = 1, when the row holds no boosted entry
//   or only boosted ones (all weights equal), and when the whole row is taken
//   (d <= fanout or fanout = -1: every entry is included with probability 1).
//   In all those cases the draws are uniform without replacement from the same
//   generator as the plain DENSE kernel, so without windows the sample equals
//   sample_dense_pyg's for the same seed.
//
// * HDR threshold pruning (HyDRA, Xia et al. 2024, "Threshold Pruning"): a
//   remote mask (a byte per node, non-zero = v's neighbour list is remote) and
//   a threshold theta_h per hop (-1: no pruning at that hop). Expanding a
//   remote v with deg(v) > theta_h reads only the theta_h entries of its row
//   starting at a uniformly random offset (wrapping around) and samples from
//   that window (d = theta_h above). Per hop the kernel counts the remote lists
//   expanded and the neighbour ids read from them (min(deg, theta_h), or deg
//   when theta_h = -1).
//
// Node i of the delta at hop h draws from sampling::node_rng(seed, h, i), as
// the DENSE kernel does: the result is deterministic given `seed` and
// independent of the number of threads.
#pragma once
#include <cstdint>
#include <vector>

#include "sampler/neighbor.h"
#include "types.h"

namespace gnncore {

struct BiasOptions {
  // Per hop (empty: no boosting at any hop); an empty span: none at that hop.
  // Otherwise N bytes, non-zero = boosted neighbour at that hop.
  std::vector<Span<uint8_t>> boost;
  double scale = 1.0;  // s >= 1, finite
  // Empty: every list is local. Otherwise N bytes, non-zero = remote list.
  Span<uint8_t> remote;
  // Per hop (empty: no pruning): window length of remote lists, -1 = whole list.
  std::vector<int64_t> theta;
};

struct BiasedSample {
  NeighborSample sample;              // the PyG layout, as sample_dense_pyg
  std::vector<float> weight;          // c_j per sampled edge (edge order)
  std::vector<int64_t> remote_lists;  // per hop: remote lists expanded
  std::vector<int64_t> remote_ids;    // per hop: neighbour ids read from them
};

// DENSE sampling of `fanouts.size()` hops from `targets` with the options
// above; the PyG layout of sample_dense_pyg plus the per-edge weights and
// the remote-read counters. Throws std::invalid_argument for malformed CSR,
// fanouts or options (the message names the argument) and std::out_of_range
// for a target or sampled neighbour id outside [0, N).
template <typename IndexT>
BiasedSample sample_biased_pyg(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                               const std::vector<int64_t>& fanouts, uint64_t seed,
                               const BiasOptions& options, int num_threads = 0);

}  // namespace gnncore
