// One-pass vertex-stream partitioners over a symmetric CSR: LDG (Stanton &
// Kliot 2012) and Fennel (Tsourakakis et al. 2014).
//
// Visiting order. Nodes arrive in a seeded uniform random order: node v's key
// is stream(seed, v) (random.h) and nodes are visited by increasing key. The
// keys are distinct (splitmix64 is a bijection and (v + 1)·golden is distinct
// for distinct v), so the order is a permutation that needs no tie rule. A
// random order is the one the LDG/Fennel papers analyse; the id order of an
// ingested graph often follows crawl or file order and so would leak
// structure into the baseline.
//
// Placement of the arriving node v, with k_i = |P_i ∩ N(v)| over the nodes
// placed so far and |P_i| the size of part i before v:
//   LDG:    argmax_i k_i · (1 − |P_i|/C)          (compared exactly as
//           k_i · (C − |P_i|) in integers)
//   Fennel: argmax_i k_i − penalty_i, penalty_i = α·γ·|P_i|^(γ−1) in double,
//           recomputed only when |P_i| changes.
// C is a hard cap: parts holding C nodes are not candidates (C·p ≥ N, so a
// part with room always exists). Ties go to the least loaded part, then the
// lowest part id.
#pragma once
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// The order in which the stream partitioners visit the nodes (see above).
std::vector<NodeId> stream_order(NodeId num_nodes, uint64_t seed);

// LDG assignment (int64[num_nodes], values in [0, parts)). Throws
// std::invalid_argument if parts < 1, capacity · parts < num_nodes or indptr
// is malformed, and std::out_of_range for a neighbour id outside the graph.
template <typename IndexT>
std::vector<int64_t> ldg_partition(Span<int64_t> indptr, Span<IndexT> indices, int64_t parts,
                                   int64_t capacity, uint64_t seed);

// Fennel assignment with the given α and γ (same errors as ldg_partition).
template <typename IndexT>
std::vector<int64_t> fennel_partition(Span<int64_t> indptr, Span<IndexT> indices,
                                      int64_t parts, int64_t capacity, double alpha,
                                      double gamma, uint64_t seed);

}  // namespace gnncore
