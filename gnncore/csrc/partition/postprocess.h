// DistDGL-style post-processing of any node assignment over a symmetric CSR:
// 1-hop halos and the rebalancing of train/val/test counts per part.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// Halo of part i: every node outside part i with a neighbour inside it, in
// increasing id order. Returned flat: the halo of part i is
// nodes[offsets[i]:offsets[i + 1]].
struct Halos {
  std::vector<int64_t> offsets;  // parts + 1 entries
  std::vector<NodeId> nodes;
};

template <typename IndexT>
Halos halo_nodes(Span<int64_t> indptr, Span<IndexT> indices, Span<int64_t> assignment,
                 int64_t parts);

struct SplitBalance {
  std::vector<int64_t> assignment;
  int64_t split_moves = 0;  // split nodes moved to fix a split count
  int64_t evictions = 0;    // nodes moved out of a part at the cap (swaps)
  bool satisfied = true;    // every count ended inside its band
};

// Moves nodes so that, for every split x with any node, each part holds
// between lo[x] and hi[x] nodes of x (`split_of[v]` is 0/1/2, or -1 for none).
//
// Per split, greedy stages with fixed roles (a role only ever shrinks):
//   1. parts above hi[x] give to parts below lo[x];
//   2. parts still above hi[x] give to parts below hi[x];
//   3. parts still below lo[x] take from parts above lo[x].
//
// Each move takes the split-x node of a giving part and the taking part that
// cost the least cut: max gain = (neighbours in target) − (neighbours in
// source), ties by the target's smaller split count then id, nodes by id.
// Gains are kept in a max-heap, refreshed for a node's neighbours when it
// moves and re-checked when popped. Splits are balanced in the order train,
// val, test; a move of a split-x node changes no other split's count.
//
// Node cap. A part holding `capacity` nodes takes a node only by evicting
// one, so no part ever grows past the cap (a part above it in the input is
// kept from growing, not shrunk). The evicted node is the one with the best
// exit gain to a part below the cap, among, in this order of preference:
//   strict:  non-split nodes, and nodes of another split y whose count stays
//            >= lo[y] in the part left and <= hi[y] in the part joined (so a
//            split already balanced stays balanced);
//   relaxed: if no strict candidate exists, nodes of a split balanced later
//            (y > x) to any part below the cap; their own stage repairs them.
// If no node may leave, the move is undone and the part takes no more nodes
// in this stage. `satisfied` reports whether every count ended in its band.
template <typename IndexT>
SplitBalance balance_splits(Span<int64_t> indptr, Span<IndexT> indices,
                            Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                            std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                            int64_t capacity);

}  // namespace gnncore
