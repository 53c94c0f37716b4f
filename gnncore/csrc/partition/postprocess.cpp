#include "partition/postprocess.h"

#include <stdexcept>
#include <string>

#include "partition/split_balancer.h"

namespace gnncore {

namespace {

// Checks the CSR, the assignment and every neighbour id once, so the loops
// below can index without checks.
template <typename IndexT>
NodeId check_graph(Span<int64_t> indptr, Span<IndexT> indices, Span<int64_t> assignment,
                   int64_t parts) {
  if (indptr.size == 0 || indptr[0] != 0 ||
      indptr[indptr.size - 1] != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr is malformed (must start at 0 and end at len(indices))");
  for (size_t v = 0; v + 1 < indptr.size; ++v)
    if (indptr[v] > indptr[v + 1]) throw std::invalid_argument("indptr is not non-decreasing");
  const NodeId n = static_cast<NodeId>(indptr.size - 1);
  for (size_t j = 0; j < indices.size; ++j) {
    const int64_t u = static_cast<int64_t>(indices[j]);
    if (u < 0 || u >= n)
      throw std::out_of_range("neighbour id " + std::to_string(u) + " at CSR position " +
                              std::to_string(j) + " is outside [0, " + std::to_string(n) + ")");
  }
  if (parts < 1) throw std::invalid_argument("parts must be >= 1");
  if (assignment.size != static_cast<size_t>(n))
    throw std::invalid_argument("assignment must have one entry per node");
  for (size_t v = 0; v < assignment.size; ++v)
    if (assignment[v] < 0 || assignment[v] >= parts)
      throw std::out_of_range("node " + std::to_string(v) + " is assigned to part " +
                              std::to_string(assignment[v]) + ", outside [0, " +
                              std::to_string(parts) + ")");
  return n;
}

}  // namespace

template <typename IndexT>
Halos halo_nodes(Span<int64_t> indptr, Span<IndexT> indices, Span<int64_t> assignment,
                 int64_t parts) {
  const NodeId n = check_graph(indptr, indices, assignment, parts);
  std::vector<std::vector<NodeId>> per(static_cast<size_t>(parts));
  std::vector<NodeId> mark(static_cast<size_t>(parts), -1);
  for (NodeId w = 0; w < n; ++w) {
    const int64_t aw = assignment[static_cast<size_t>(w)];
    for (int64_t j = indptr[w]; j < indptr[w + 1]; ++j) {
      const size_t pv = static_cast<size_t>(assignment[static_cast<size_t>(indices[j])]);
      if (static_cast<int64_t>(pv) != aw && mark[pv] != w) {
        mark[pv] = w;
        per[pv].push_back(w);
      }
    }
  }
  Halos out;
  out.offsets.assign(static_cast<size_t>(parts) + 1, 0);
  for (size_t i = 0; i < per.size(); ++i)
    out.offsets[i + 1] = out.offsets[i] + static_cast<int64_t>(per[i].size());
  out.nodes.reserve(static_cast<size_t>(out.offsets.back()));
  for (auto& h : per) out.nodes.insert(out.nodes.end(), h.begin(), h.end());
  return out;
}

template <typename IndexT>
SplitBalance balance_splits(Span<int64_t> indptr, Span<IndexT> indices,
                            Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                            std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                            int64_t capacity) {
  const NodeId n = check_graph(indptr, indices, assignment, parts);
  if (split_of.size != static_cast<size_t>(n))
    throw std::invalid_argument("split_of must have one entry per node");
  for (size_t v = 0; v < split_of.size; ++v)
    if (split_of[v] < -1 || split_of[v] > 2)
      throw std::invalid_argument("split_of must hold -1, 0, 1 or 2");
  if (capacity < (n + parts - 1) / parts)
    throw std::invalid_argument("capacity · parts must cover every node");
  SpanRows<IndexT> rows{indptr, indices};
  return balance_splits_over(rows, assignment, split_of, parts, lo, hi, capacity);
}

template Halos halo_nodes<int32_t>(Span<int64_t>, Span<int32_t>, Span<int64_t>, int64_t);
template Halos halo_nodes<int64_t>(Span<int64_t>, Span<int64_t>, Span<int64_t>, int64_t);
template SplitBalance balance_splits<int32_t>(Span<int64_t>, Span<int32_t>, Span<int64_t>,
                                              Span<int8_t>, int64_t, std::array<int64_t, 3>,
                                              std::array<int64_t, 3>, int64_t);
template SplitBalance balance_splits<int64_t>(Span<int64_t>, Span<int64_t>, Span<int64_t>,
                                              Span<int8_t>, int64_t, std::array<int64_t, 3>,
                                              std::array<int64_t, 3>, int64_t);

}  // namespace gnncore
