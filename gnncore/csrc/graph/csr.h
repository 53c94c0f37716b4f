// Compressed sparse row construction and validation over plain arrays.
#pragma once
#include <vector>
#include "types.h"

namespace gnncore {

// Counts of each source id: degree[v] = #{e : src[e] == v}. Throws
// std::out_of_range naming the first offending position if an id is outside
// [0, num_nodes).
void count_degrees(Span<NodeId> src, Span<NodeId> dst, NodeId num_nodes,
                   MutSpan<int64_t> degree);

// Builds CSR by a stable counting sort: row v holds dst[e] for every e with
// src[e] == v. `eid[j]` is the input position e of CSR entry j. With
// `sort_rows`, each row is ordered by neighbour id (ties by input position),
// otherwise rows keep input order. `indptr` has num_nodes + 1 entries;
// `indices` and `eid` have src.size entries; IndexT is int32_t or int64_t.
template <typename IndexT>
void build_csr(Span<NodeId> src, Span<NodeId> dst, NodeId num_nodes, bool sort_rows,
               MutSpan<int64_t> indptr, MutSpan<IndexT> indices, MutSpan<EdgeId> eid);

// Returns the first row whose neighbour list is unsorted (or, with `strict`,
// holds a repeated neighbour) or holds an id outside [0, num_nodes); returns
// -1 when the CSR is valid and 0 when indptr itself is malformed.
template <typename IndexT>
int64_t find_invalid_csr_row(Span<int64_t> indptr, Span<IndexT> indices,
                             NodeId num_nodes, bool strict);

}  // namespace gnncore
