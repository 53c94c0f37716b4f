// GREM's final k-way refinement: size-constrained label propagation over the
// whole partition, streamed over the symmetric CSR one block of rows at a time
// (gnncore/partition/grem/refine.py reads the blocks; this moves the nodes).
//
// Header-only: the binding (bind/grem.cpp) is its one user.
#pragma once
#include <cstdint>
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
// part q with the most of them among the parts with room (sizes[q] < cap),
// when q holds more of its neighbours than its own part, or as many and q is
// at least two nodes lighter (a free move that evens the sizes out). `labels`
// (every node's part, in [0, sizes.size)) and `sizes` (the nodes of each part)
// are updated in place. A node never moves into a part at `cap`, so a
// partition within the cap stays within it. O(parts) scratch.
template <typename Id>
KwayBlockStats kway_lp_block(Span<int64_t> indptr, Span<Id> indices, int64_t first_row,
                             MutSpan<int64_t> labels, MutSpan<int64_t> sizes, int64_t cap) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold at least one offset");
  const int64_t rows = static_cast<int64_t>(indptr.size) - 1;
  const int64_t n = static_cast<int64_t>(labels.size);
  const int64_t parts = static_cast<int64_t>(sizes.size);
  const int64_t base = indptr[0];
  if (first_row < 0 || first_row + rows > n)
    throw std::out_of_range("the block's rows lie outside the labels");
  if (indptr[rows] - base != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr does not span indices");
  std::vector<int64_t> count(static_cast<size_t>(parts), 0);
  std::vector<int64_t> touched;
  touched.reserve(64);
  KwayBlockStats stats;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t lo = indptr[r] - base, hi = indptr[r + 1] - base;
    if (lo == hi) continue;
    if (lo > hi) throw std::invalid_argument("indptr must be non-decreasing");
    const int64_t v = first_row + r;
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t u = static_cast<int64_t>(indices[e]);
      if (u < 0 || u >= n) throw std::out_of_range("neighbour id outside the labels");
      if (u == v) continue;
      const int64_t q = labels[u];
      if (q < 0 || q >= parts) throw std::out_of_range("label outside [0, parts)");
      if (count[q]++ == 0) touched.push_back(q);
    }
    const int64_t own = labels[v];
    if (own < 0 || own >= parts) throw std::out_of_range("label outside [0, parts)");
    int64_t best = own;
    for (int64_t q : touched) {
      if (q == own || sizes[q] >= cap) continue;
      if (best == own || count[q] > count[best] ||
          (count[q] == count[best] && sizes[q] < sizes[best]))
        best = q;
    }
    if (best != own &&
        (count[best] > count[own] ||
         (count[best] == count[own] && sizes[best] + 2 <= sizes[own]))) {
      stats.gain += count[best] - count[own];
      ++stats.moves;
      --sizes[own];
      ++sizes[best];
      labels[v] = best;
    }
    for (int64_t q : touched) count[q] = 0;
    touched.clear();
  }
  return stats;
}

}  // namespace gnncore
