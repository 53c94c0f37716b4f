// ByteGNN's block partitioner (Liang 2024 §4.2.3, "Algorithm 2"; decisions in
// ALGORITHMS.md §2) over a symmetric CSR.
//
// Step 1, blocks. A level-synchronous multi-source BFS of `hops` levels
// starts from every centre (train/val/test node), each owning the block whose
// id is its own node id. At level l every node first reached at level l
// takes the smallest block id among its neighbours of level l − 1 (the first
// id wins; ties go to the smaller centre id). Nodes no BFS reaches are
// singleton blocks whose id is their own node id (never a centre's id).
//
// Step 2, assignment. Blocks are visited by descending max(|train|, |val|,
// |test|), then descending size, then ascending block id. With ce_j the edges
// between the block and the nodes already in part j, and
//   BS_j = 1 − w_0·|P_j(train)|/C(train) − w_1·|P_j(val)|/C(val)
//            − w_2·|P_j(test)|/C(test),   C(x) = |V(x)|/p (a term is 0 when
//            C(x) = 0),
// the parts are ranked by (ce_j/|P_j|)·BS_j descending, then |P_j| ascending,
// then id. Guards: if some candidate part is empty, or every candidate's
// score is exactly 0, the ranking is by |P_j| ascending, then id (the least
// loaded part). Candidates are the parts with room for the whole block under
// the node cap; the block goes to the first of them. If no part has room
// (only possible near the end, when parts are nearly full), the block is
// split: its nodes, ordered by BFS level and then id (centre first), fill the
// parts with any room in the same ranking order, each up to the cap.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// Block id and BFS level of every node (level -1 for unreached singletons).
// `centres` must hold distinct ids in [0, N). Throws std::invalid_argument or
// std::out_of_range for malformed input.
template <typename IndexT>
void bytegnn_blocks(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> centres,
                    int64_t hops, MutSpan<int64_t> block, MutSpan<int64_t> level);

// Assigns the blocks (step 2). `split_of[v]` is 0/1/2 for train/val/test and
// -1 otherwise; `weights` are w_0..w_2; `capacity` is the node cap
// (capacity · parts >= N). Returns int64[N] with values in [0, parts).
template <typename IndexT>
std::vector<int64_t> bytegnn_assign(Span<int64_t> indptr, Span<IndexT> indices,
                                    Span<int64_t> block, Span<int64_t> level,
                                    Span<int8_t> split_of, int64_t parts, int64_t capacity,
                                    std::array<double, 3> weights);

}  // namespace gnncore
