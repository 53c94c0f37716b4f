// Access-frequency estimators of feature placement (ALGORITHMS.md §4): how
// often a sampler reading `layers` hops from the training nodes touches each
// node. Row t of the CSR (`indptr` int64[N+1], `indices` int32|int64[E]) lists
// the nodes a sampler reads when it expands t (PyG CSC: the sources of the
// edges into t).
#pragma once
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// f[j] = number of distinct training nodes t with j within `layers` hops of t
// along rows (t -> row t -> rows of those -> ...), distance 0 included.
// Duplicate ids in `train` count once. Exact: one bounded BFS per distinct
// training node, in parallel; the integer counts do not depend on the thread
// count. Throws std::invalid_argument for a malformed CSR, an id outside
// [0, N) or `layers` < 0.
template <typename IndexT>
std::vector<int64_t> access_reach(Span<int64_t> indptr, Span<IndexT> indices,
                                  Span<NodeId> train, int64_t layers, int num_threads);

// Path counts x_L, x_0 = indicator of the training nodes (duplicates once),
// x_{l+1} = (A + I)·x_l with A[j, t] = occurrences of j in row t. Computed by
// pulling over the transposed CSR (each transposed row in ascending t), so
// every output is one thread's sum in a fixed order: the result does not
// depend on the thread count. Throws as access_reach.
template <typename IndexT>
std::vector<double> access_spmv(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> train,
                                int64_t layers, int num_threads);

}  // namespace gnncore
