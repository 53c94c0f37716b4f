// GREM's final k-way refinement: size-constrained label propagation over the
// whole partition, streamed over the symmetric CSR one block of rows at a time
// (gnncore/partition/grem/refine.py reads the blocks; this moves the nodes).
//
// Header-only: the binding (bind/grem.cpp) is its one user.
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "types.h"

namespace gnncore {

struct KwayBlockStats {
  int64_t moves = 0;  // nodes that changed part
  int64_t gain = 0;   // cut edges removed (each undirected edge counted once)
};

// One label-propagation sweep over the rows [first_row, first_row + n) of a
// symmetric CSR, given as the block `indptr` (n + 1 offsets into `indices`,
// indptr[0] not necessarily 0: it is subtracted) and `indices` (global ids).
// Node v, in row order, counts its neighbours in each part and moves to the
// part q with the most of them among the parts with room (sizes[q] +
// weight(v) <= cap), when q holds more of its neighbours than its own part,
// or as many and q is at least two weights lighter (a free move that evens the
// sizes out). `labels` (every node's part, in [0, sizes.size)) and `sizes` are
// updated in place. A node never moves into a part it would overfill, so a
// partition within the cap stays within it, nor out of a part it would leave
// empty. O(parts) scratch.
//
// `edge_weight` (one per entry of `indices`) and `node_weight` (one per node)
// weigh the counts and the sizes; empty: all 1 (the graph's own CSR). The
// coarse level of the refinement uses them: clusters weighted by their nodes,
// edges by the graph edges between two clusters.
//
// Label is the labels' width: the node passes give them in the narrowest
// integer holding the parts (1 byte a node for up to 127 parts), so that at
// 100M nodes the random reads of the neighbours' labels span 100 MB, not 800.
template <typename Id, typename Label>
KwayBlockStats kway_lp_sweep(Span<int64_t> indptr, Span<Id> indices, Span<int64_t> edge_weight,
                             Span<int64_t> node_weight, int64_t first_row,
                             MutSpan<Label> labels, MutSpan<int64_t> sizes, int64_t cap) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold at least one offset");
  const int64_t rows = static_cast<int64_t>(indptr.size) - 1;
  const int64_t n = static_cast<int64_t>(labels.size);
  const int64_t parts = static_cast<int64_t>(sizes.size);
  const int64_t base = indptr[0];
  if (first_row < 0 || first_row + rows > n)
    throw std::out_of_range("the block's rows lie outside the labels");
  if (indptr[rows] - base != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr does not span indices");
  if (edge_weight.size != 0 && edge_weight.size != indices.size)
    throw std::invalid_argument("edge_weight must hold one weight per index");
  if (node_weight.size != 0 && static_cast<int64_t>(node_weight.size) != n)
    throw std::invalid_argument("node_weight must hold one weight per node");
  std::vector<int64_t> count(static_cast<size_t>(parts), 0);
  std::vector<int64_t> touched;
  touched.reserve(64);
  KwayBlockStats stats;
  constexpr int64_t kLabelsAhead = 16;  // entries between a label's prefetch and its read
  const int64_t entries = static_cast<int64_t>(indices.size);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t lo = indptr[r] - base, hi = indptr[r + 1] - base;
    if (lo == hi) continue;
    if (lo > hi) throw std::invalid_argument("indptr must be non-decreasing");
    const int64_t v = first_row + r;
    for (int64_t e = lo; e < hi; ++e) {
      if (e + kLabelsAhead < entries) {  // a later neighbour's label: a cache miss at scale
        const uint64_t y = static_cast<uint64_t>(indices[e + kLabelsAhead]);
        if (y < static_cast<uint64_t>(n)) __builtin_prefetch(&labels[y]);
      }
      const int64_t u = static_cast<int64_t>(indices[e]);
      if (u < 0 || u >= n) throw std::out_of_range("neighbour id outside the labels");
      if (u == v) continue;
      const int64_t q = labels[u];
      if (q < 0 || q >= parts) throw std::out_of_range("label outside [0, parts)");
      if (count[q] == 0) touched.push_back(q);
      count[q] += edge_weight.size ? edge_weight[e] : 1;
    }
    const int64_t own = labels[v];
    if (own < 0 || own >= parts) throw std::out_of_range("label outside [0, parts)");
    const int64_t w = node_weight.size ? node_weight[v] : 1;
    if (sizes[own] <= w) {  // the last of its part: moving would empty the part
      for (int64_t q : touched) count[q] = 0;
      touched.clear();
      continue;
    }
    int64_t best = own;
    for (int64_t q : touched) {
      if (q == own || sizes[q] + w > cap) continue;
      if (best == own || count[q] > count[best] ||
          (count[q] == count[best] && sizes[q] < sizes[best]))
        best = q;
    }
    if (best != own &&
        (count[best] > count[own] ||
         (count[best] == count[own] && sizes[best] + 2 * w <= sizes[own]))) {
      stats.gain += count[best] - count[own];
      ++stats.moves;
      sizes[own] -= w;
      sizes[best] += w;
      labels[v] = static_cast<Label>(best);
    }
    for (int64_t q : touched) count[q] = 0;
    touched.clear();
  }
  return stats;
}

// kway_lp_sweep over the graph's own CSR: every node and edge weighs 1.
template <typename Id, typename Label>
KwayBlockStats kway_lp_block(Span<int64_t> indptr, Span<Id> indices, int64_t first_row,
                             MutSpan<Label> labels, MutSpan<int64_t> sizes, int64_t cap) {
  if (sizes.size > static_cast<size_t>(std::numeric_limits<Label>::max()) + 1)
    throw std::invalid_argument("the labels' type cannot hold every part");
  return kway_lp_sweep(indptr, indices, Span<int64_t>{nullptr, 0}, Span<int64_t>{nullptr, 0},
                       first_row, labels, sizes, cap);
}

// One sweep of size-constrained label-propagation clustering inside the parts
// of a partition, over a CSR block as in kway_lp_sweep: node v joins the
// cluster holding most of its neighbours of its own part (labels[u] ==
// labels[v]) among the clusters below `max_weight` nodes, when that cluster
// holds more of them than v's own. Clusters never straddle two parts, so the
// partition is a partition of the clusters. `cluster` (ids in [0, N)) and
// `weight` (nodes per cluster id) are updated in place; `scratch` (N zeros)
// counts per cluster id and is left zero. Returns the moves.
template <typename Id>
int64_t kway_cluster_block(Span<int64_t> indptr, Span<Id> indices, int64_t first_row,
                           Span<int64_t> labels, MutSpan<int64_t> cluster,
                           MutSpan<int64_t> weight, int64_t max_weight,
                           MutSpan<int64_t> scratch) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold at least one offset");
  const int64_t rows = static_cast<int64_t>(indptr.size) - 1;
  const int64_t n = static_cast<int64_t>(labels.size);
  if (static_cast<int64_t>(cluster.size) != n || static_cast<int64_t>(weight.size) != n ||
      static_cast<int64_t>(scratch.size) != n)
    throw std::invalid_argument("cluster, weight and scratch must hold one entry per node");
  const int64_t base = indptr[0];
  if (first_row < 0 || first_row + rows > n)
    throw std::out_of_range("the block's rows lie outside the labels");
  if (indptr[rows] - base != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr does not span indices");
  std::vector<int64_t> touched;
  int64_t moves = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t lo = indptr[r] - base, hi = indptr[r + 1] - base;
    if (lo > hi) throw std::invalid_argument("indptr must be non-decreasing");
    const int64_t v = first_row + r;
    const int64_t own = cluster[v];
    if (own < 0 || own >= n) throw std::out_of_range("cluster id outside [0, N)");
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t u = static_cast<int64_t>(indices[e]);
      if (u < 0 || u >= n) throw std::out_of_range("neighbour id outside the labels");
      if (u == v || labels[u] != labels[v]) continue;
      const int64_t c = cluster[u];
      if (c < 0 || c >= n) throw std::out_of_range("cluster id outside [0, N)");
      if (scratch[c]++ == 0) touched.push_back(c);
    }
    int64_t best = own;
    for (int64_t c : touched) {
      if (c == own || weight[c] + 1 > max_weight) continue;
      if (best == own || scratch[c] > scratch[best] ||
          (scratch[c] == scratch[best] && weight[c] < weight[best]))
        best = c;
    }
    if (best != own && scratch[best] > scratch[own]) {
      --weight[own];
      ++weight[best];
      cluster[v] = best;
      ++moves;
    }
    for (int64_t c : touched) scratch[c] = 0;
    touched.clear();
  }
  return moves;
}

// The symmetric weighted CSR of a cluster graph given as pair keys a * k + b
// (a < b, as cluster_edges returns them) with their counts: row a holds b and
// row b holds a, each with the pair's count. A counting sort in two passes:
// the result (k + 1 offsets, 2 entries per pair) and a cursor per row.
struct CoarseCsr {
  std::vector<int64_t> indptr, heads, weights;
};
inline CoarseCsr coarse_csr(Span<int64_t> keys, Span<int64_t> counts, int64_t k) {
  if (keys.size != counts.size) throw std::invalid_argument("keys and counts differ in length");
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  CoarseCsr out;
  out.indptr.assign(static_cast<size_t>(k) + 1, 0);
  for (const int64_t key : keys) {
    const int64_t a = key / k, b = key % k;
    if (key < 0 || a >= k) throw std::out_of_range("pair key outside [0, k * k)");
    ++out.indptr[static_cast<size_t>(a) + 1];
    ++out.indptr[static_cast<size_t>(b) + 1];
  }
  for (size_t i = 1; i < out.indptr.size(); ++i) out.indptr[i] += out.indptr[i - 1];
  std::vector<int64_t> cursor(out.indptr.begin(), out.indptr.end() - 1);
  out.heads.resize(2 * keys.size);
  out.weights.resize(2 * keys.size);
  for (size_t i = 0; i < keys.size; ++i) {
    const int64_t a = keys[i] / k, b = keys[i] % k;
    const size_t pa = static_cast<size_t>(cursor[a]++), pb = static_cast<size_t>(cursor[b]++);
    out.heads[pa] = b;
    out.weights[pa] = counts[i];
    out.heads[pb] = a;
    out.weights[pb] = counts[i];
  }
  return out;
}

}  // namespace gnncore
