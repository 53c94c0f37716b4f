#include "partition/bytegnn.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gnncore {

namespace {

NodeId checked_num_nodes(Span<int64_t> indptr, size_t nnz) {
  if (indptr.size == 0 || indptr[0] != 0 || indptr[indptr.size - 1] != static_cast<int64_t>(nnz))
    throw std::invalid_argument("indptr is malformed (must start at 0 and end at len(indices))");
  for (size_t v = 0; v + 1 < indptr.size; ++v)
    if (indptr[v] > indptr[v + 1]) throw std::invalid_argument("indptr is not non-decreasing");
  return static_cast<NodeId>(indptr.size - 1);
}

template <typename IndexT>
int64_t neighbour(Span<IndexT> indices, int64_t j, NodeId v, NodeId n) {
  const int64_t u = static_cast<int64_t>(indices[static_cast<size_t>(j)]);
  if (u < 0 || u >= n)
    throw std::out_of_range("neighbour " + std::to_string(u) + " of node " + std::to_string(v) +
                            " is outside [0, " + std::to_string(n) + ")");
  return u;
}

}  // namespace

template <typename IndexT>
void bytegnn_blocks(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> centres,
                    int64_t hops, MutSpan<int64_t> block, MutSpan<int64_t> level) {
  const NodeId n = checked_num_nodes(indptr, indices.size);
  if (hops < 0) throw std::invalid_argument("hops must be non-negative");
  if (block.size != static_cast<size_t>(n) || level.size != static_cast<size_t>(n))
    throw std::invalid_argument("block and level must have one entry per node");
  std::fill(block.begin(), block.end(), -1);
  std::fill(level.begin(), level.end(), -1);
  std::vector<NodeId> frontier, next;
  frontier.reserve(centres.size);
  for (NodeId c : centres) {
    if (c < 0 || c >= n)
      throw std::out_of_range("centre " + std::to_string(c) + " is outside [0, " +
                              std::to_string(n) + ")");
    if (level[static_cast<size_t>(c)] == 0)
      throw std::invalid_argument("centre " + std::to_string(c) + " is repeated");
    block[static_cast<size_t>(c)] = c;
    level[static_cast<size_t>(c)] = 0;
    frontier.push_back(c);
  }
  for (int64_t l = 1; l <= hops && !frontier.empty(); ++l) {
    next.clear();
    for (NodeId u : frontier) {
      const int64_t bu = block[static_cast<size_t>(u)];
      for (int64_t j = indptr[u]; j < indptr[u + 1]; ++j) {
        const size_t w = static_cast<size_t>(neighbour(indices, j, u, n));
        if (level[w] == -1) {
          level[w] = l;
          block[w] = bu;
          next.push_back(static_cast<NodeId>(w));
        } else if (level[w] == l && bu < block[w]) {
          block[w] = bu;
        }
      }
    }
    frontier.swap(next);
  }
  for (NodeId v = 0; v < n; ++v)
    if (level[static_cast<size_t>(v)] == -1) block[static_cast<size_t>(v)] = v;
}

namespace {

// The assignment state: part sizes, split counts and balance scores.
struct Parts {
  int64_t parts, capacity;
  std::array<double, 3> weights, expected;  // expected[x] = C(x) = |V(x)|/p
  std::vector<int64_t> size;
  std::vector<std::array<int64_t, 3>> split;
  std::vector<double> bs, score;

  Parts(int64_t parts_, int64_t capacity_, std::array<double, 3> w, std::array<int64_t, 3> total)
      : parts(parts_), capacity(capacity_), weights(w),
        size(static_cast<size_t>(parts_), 0),
        split(static_cast<size_t>(parts_), std::array<int64_t, 3>{0, 0, 0}),
        bs(static_cast<size_t>(parts_), 1.0), score(static_cast<size_t>(parts_), 0.0) {
    for (int x = 0; x < 3; ++x)
      expected[x] = static_cast<double>(total[x]) / static_cast<double>(parts_);
  }

  void refresh(size_t j) {
    double b = 1.0;
    for (int x = 0; x < 3; ++x) {
      const double term =
          expected[x] > 0 ? weights[x] * (static_cast<double>(split[j][x]) / expected[x]) : 0.0;
      b = b - term;
    }
    bs[j] = b;
  }

  // Orders `candidates` best first by Algorithm 2's score with the guards;
  // only the first is needed unless `all` (a block being split).
  void rank(std::vector<int64_t>& candidates, const std::vector<int64_t>& ce, bool all) {
    bool guard = false, all_zero = true;
    for (int64_t j : candidates) {
      const size_t i = static_cast<size_t>(j);
      if (size[i] == 0) {
        guard = true;
        break;
      }
      score[i] = (static_cast<double>(ce[i]) / static_cast<double>(size[i])) * bs[i];
      if (score[i] != 0.0) all_zero = false;
    }
    guard = guard || all_zero;
    auto better = [&](int64_t a, int64_t b) {
      const size_t ia = static_cast<size_t>(a), ib = static_cast<size_t>(b);
      if (!guard && score[ia] != score[ib]) return score[ia] > score[ib];
      return size[ia] != size[ib] ? size[ia] < size[ib] : a < b;
    };
    if (all) {
      std::sort(candidates.begin(), candidates.end(), better);
    } else {
      auto best = std::min_element(candidates.begin(), candidates.end(), better);
      std::iter_swap(candidates.begin(), best);
    }
  }
};

}  // namespace

template <typename IndexT>
std::vector<int64_t> bytegnn_assign(Span<int64_t> indptr, Span<IndexT> indices,
                                    Span<int64_t> block, Span<int64_t> level,
                                    Span<int8_t> split_of, int64_t parts, int64_t capacity,
                                    std::array<double, 3> weights) {
  const NodeId n = checked_num_nodes(indptr, indices.size);
  const size_t un = static_cast<size_t>(n);
  if (block.size != un || level.size != un || split_of.size != un)
    throw std::invalid_argument("block, level and split_of must have one entry per node");
  if (parts < 1) throw std::invalid_argument("parts must be >= 1");
  if (capacity < (n + parts - 1) / parts)
    throw std::invalid_argument("capacity · parts must cover every node");

  // Group the nodes by block id; inside a block order them by (level, id).
  std::vector<int64_t> start(un + 1, 0);
  std::array<int64_t, 3> total{0, 0, 0};
  for (size_t v = 0; v < un; ++v) {
    if (block[v] < 0 || block[v] >= n)
      throw std::out_of_range("block id of node " + std::to_string(v) + " is outside [0, N)");
    if (split_of[v] < -1 || split_of[v] > 2)
      throw std::invalid_argument("split_of must hold -1, 0, 1 or 2");
    ++start[static_cast<size_t>(block[v]) + 1];
    if (split_of[v] >= 0) ++total[static_cast<size_t>(split_of[v])];
  }
  for (size_t b = 0; b < un; ++b) start[b + 1] += start[b];
  std::vector<NodeId> member(un);
  {
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (size_t v = 0; v < un; ++v)
      member[static_cast<size_t>(cursor[static_cast<size_t>(block[v])]++)] =
          static_cast<NodeId>(v);
  }
  struct BlockKey {
    int64_t max_split, size, id;
  };
  std::vector<BlockKey> blocks;
  for (size_t b = 0; b < un; ++b) {
    const int64_t lo = start[b], hi = start[b + 1];
    if (lo == hi) continue;
    std::sort(member.begin() + lo, member.begin() + hi, [&](NodeId x, NodeId y) {
      const int64_t lx = level[static_cast<size_t>(x)], ly = level[static_cast<size_t>(y)];
      return lx != ly ? lx < ly : x < y;
    });
    std::array<int64_t, 3> c{0, 0, 0};
    for (int64_t i = lo; i < hi; ++i) {
      const int8_t s = split_of[static_cast<size_t>(member[static_cast<size_t>(i)])];
      if (s >= 0) ++c[static_cast<size_t>(s)];
    }
    blocks.push_back({std::max({c[0], c[1], c[2]}), hi - lo, static_cast<int64_t>(b)});
  }
  std::sort(blocks.begin(), blocks.end(), [](const BlockKey& a, const BlockKey& b) {
    if (a.max_split != b.max_split) return a.max_split > b.max_split;
    if (a.size != b.size) return a.size > b.size;
    return a.id < b.id;
  });

  Parts state(parts, capacity, weights, total);
  std::vector<int64_t> part(un, -1), ce(static_cast<size_t>(parts), 0), candidates;
  auto place = [&](NodeId v, int64_t j) {
    part[static_cast<size_t>(v)] = j;
    ++state.size[static_cast<size_t>(j)];
    const int8_t s = split_of[static_cast<size_t>(v)];
    if (s >= 0) ++state.split[static_cast<size_t>(j)][static_cast<size_t>(s)];
  };
  for (const BlockKey& b : blocks) {
    const int64_t lo = start[static_cast<size_t>(b.id)], hi = start[static_cast<size_t>(b.id) + 1];
    std::fill(ce.begin(), ce.end(), 0);
    for (int64_t i = lo; i < hi; ++i) {
      const NodeId v = member[static_cast<size_t>(i)];
      for (int64_t j = indptr[v]; j < indptr[v + 1]; ++j) {
        const int64_t p = part[static_cast<size_t>(neighbour(indices, j, v, n))];
        if (p >= 0) ++ce[static_cast<size_t>(p)];
      }
    }
    candidates.clear();
    for (int64_t j = 0; j < parts; ++j)
      if (state.size[static_cast<size_t>(j)] + b.size <= capacity) candidates.push_back(j);
    const bool split = candidates.empty();
    if (split)
      for (int64_t j = 0; j < parts; ++j)
        if (state.size[static_cast<size_t>(j)] < capacity) candidates.push_back(j);
    state.rank(candidates, ce, split);
    size_t c = 0;
    for (int64_t i = lo; i < hi; ++i) {
      while (split && state.size[static_cast<size_t>(candidates[c])] >= capacity) ++c;
      place(member[static_cast<size_t>(i)], candidates[c]);
    }
    for (size_t k = 0; k <= c; ++k) state.refresh(static_cast<size_t>(candidates[k]));
  }
  return part;
}

template void bytegnn_blocks<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>, int64_t,
                                      MutSpan<int64_t>, MutSpan<int64_t>);
template void bytegnn_blocks<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>, int64_t,
                                      MutSpan<int64_t>, MutSpan<int64_t>);
template std::vector<int64_t> bytegnn_assign<int32_t>(Span<int64_t>, Span<int32_t>,
                                                      Span<int64_t>, Span<int64_t>, Span<int8_t>,
                                                      int64_t, int64_t, std::array<double, 3>);
template std::vector<int64_t> bytegnn_assign<int64_t>(Span<int64_t>, Span<int64_t>,
                                                      Span<int64_t>, Span<int64_t>, Span<int8_t>,
                                                      int64_t, int64_t, std::array<double, 3>);

}  // namespace gnncore
