#include "graph/csr.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <string>

namespace gnncore {

void count_degrees(Span<NodeId> src, Span<NodeId> dst, NodeId num_nodes,
                   MutSpan<int64_t> degree) {
  if (src.size != dst.size) throw std::invalid_argument("src and dst differ in length");
  for (size_t i = 0; i < degree.size; ++i) degree[i] = 0;
  for (size_t e = 0; e < src.size; ++e) {
    const NodeId s = src[e], d = dst[e];
    if (s < 0 || s >= num_nodes || d < 0 || d >= num_nodes)
      throw std::out_of_range("edge " + std::to_string(e) + " (" + std::to_string(s) + ", " +
                              std::to_string(d) + ") is outside [0, " +
                              std::to_string(num_nodes) + ")");
    ++degree[static_cast<size_t>(s)];
  }
}

template <typename IndexT>
void build_csr(Span<NodeId> src, Span<NodeId> dst, NodeId num_nodes, bool sort_rows,
               MutSpan<int64_t> indptr, MutSpan<IndexT> indices, MutSpan<EdgeId> eid) {
  if (indptr.size != static_cast<size_t>(num_nodes) + 1 || indices.size != src.size ||
      eid.size != src.size)
    throw std::invalid_argument("output arrays have the wrong size");
  std::vector<int64_t> degree(static_cast<size_t>(num_nodes));
  count_degrees(src, dst, num_nodes, MutSpan<int64_t>{degree.data(), degree.size()});
  indptr[0] = 0;
  for (size_t v = 0; v < degree.size(); ++v) indptr[v + 1] = indptr[v] + degree[v];
  std::vector<int64_t> cursor(indptr.begin(), indptr.end() - 1);
  for (size_t e = 0; e < src.size; ++e) {
    const size_t j = static_cast<size_t>(cursor[static_cast<size_t>(src[e])]++);
    indices[j] = static_cast<IndexT>(dst[e]);
    eid[j] = static_cast<EdgeId>(e);
  }
  if (!sort_rows) return;
  std::vector<std::pair<IndexT, EdgeId>> row;
  for (NodeId v = 0; v < num_nodes; ++v) {
    const int64_t lo = indptr[v], hi = indptr[v + 1];
    bool sorted = true;
    for (int64_t j = lo + 1; j < hi && sorted; ++j) sorted = indices[j - 1] <= indices[j];
    if (sorted) continue;  // eids within a row are increasing, so ties are ordered
    row.clear();
    for (int64_t j = lo; j < hi; ++j) row.emplace_back(indices[j], eid[j]);
    std::sort(row.begin(), row.end());
    for (int64_t j = lo; j < hi; ++j) {
      indices[j] = row[static_cast<size_t>(j - lo)].first;
      eid[j] = row[static_cast<size_t>(j - lo)].second;
    }
  }
}

template <typename IndexT>
int64_t find_invalid_csr_row(Span<int64_t> indptr, Span<IndexT> indices, NodeId num_nodes,
                             bool strict) {
  if (indptr.size != static_cast<size_t>(num_nodes) + 1) return 0;
  if (indptr[0] != 0 || indptr[indptr.size - 1] != static_cast<int64_t>(indices.size)) return 0;
  for (NodeId v = 0; v < num_nodes; ++v) {
    const int64_t lo = indptr[v], hi = indptr[v + 1];
    if (lo > hi) return v;
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t u = static_cast<int64_t>(indices[j]);
      if (u < 0 || u >= num_nodes) return v;
      if (j > lo) {
        const int64_t prev = static_cast<int64_t>(indices[j - 1]);
        if (prev > u || (strict && prev == u)) return v;
      }
    }
  }
  return -1;
}

template void build_csr<int32_t>(Span<NodeId>, Span<NodeId>, NodeId, bool, MutSpan<int64_t>,
                                 MutSpan<int32_t>, MutSpan<EdgeId>);
template void build_csr<int64_t>(Span<NodeId>, Span<NodeId>, NodeId, bool, MutSpan<int64_t>,
                                 MutSpan<int64_t>, MutSpan<EdgeId>);
template int64_t find_invalid_csr_row<int32_t>(Span<int64_t>, Span<int32_t>, NodeId, bool);
template int64_t find_invalid_csr_row<int64_t>(Span<int64_t>, Span<int64_t>, NodeId, bool);

}  // namespace gnncore
