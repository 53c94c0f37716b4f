#include "partition/vertex_stream.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "random.h"

namespace gnncore {

std::vector<NodeId> stream_order(NodeId num_nodes, uint64_t seed) {
  if (num_nodes < 0) throw std::invalid_argument("num_nodes must be non-negative");
  std::vector<std::pair<uint64_t, NodeId>> keyed(static_cast<size_t>(num_nodes));
  for (NodeId v = 0; v < num_nodes; ++v)
    keyed[static_cast<size_t>(v)] = {stream(seed, static_cast<uint64_t>(v)), v};
  std::sort(keyed.begin(), keyed.end());
  std::vector<NodeId> order(keyed.size());
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

namespace {

void check_inputs(Span<int64_t> indptr, size_t nnz, int64_t parts, int64_t capacity) {
  if (indptr.size == 0 || indptr[0] != 0 || indptr[indptr.size - 1] != static_cast<int64_t>(nnz))
    throw std::invalid_argument("indptr is malformed (must start at 0 and end at len(indices))");
  for (size_t v = 0; v + 1 < indptr.size; ++v)
    if (indptr[v] > indptr[v + 1]) throw std::invalid_argument("indptr is not non-decreasing");
  const int64_t n = static_cast<int64_t>(indptr.size - 1);
  if (parts < 1) throw std::invalid_argument("parts must be >= 1");
  if (capacity < (n + parts - 1) / parts)
    throw std::invalid_argument("capacity · parts must cover every node (capacity " +
                                std::to_string(capacity) + ", parts " + std::to_string(parts) +
                                ", nodes " + std::to_string(n) + ")");
}

// Runs the stream: `rule.choose(count, size)` returns the part for the
// arriving node among parts with size < capacity; `rule.placed(i, size_i)`
// is told the new size of the part that grew.
template <typename IndexT, typename Rule>
std::vector<int64_t> run_stream(Span<int64_t> indptr, Span<IndexT> indices, int64_t parts,
                                int64_t capacity, uint64_t seed, Rule& rule) {
  check_inputs(indptr, indices.size, parts, capacity);
  const NodeId n = static_cast<NodeId>(indptr.size - 1);
  std::vector<int64_t> part(static_cast<size_t>(n), -1);
  std::vector<int64_t> size(static_cast<size_t>(parts), 0);
  std::vector<int64_t> count(static_cast<size_t>(parts), 0);
  std::vector<int64_t> touched;
  for (NodeId v : stream_order(n, seed)) {
    for (int64_t j = indptr[v]; j < indptr[v + 1]; ++j) {
      const int64_t u = static_cast<int64_t>(indices[j]);
      if (u < 0 || u >= n)
        throw std::out_of_range("neighbour " + std::to_string(u) + " of node " +
                                std::to_string(v) + " is outside [0, " + std::to_string(n) +
                                ")");
      const int64_t p = part[static_cast<size_t>(u)];
      if (p >= 0 && count[static_cast<size_t>(p)]++ == 0) touched.push_back(p);
    }
    const int64_t best = rule.choose(count, size, capacity);
    part[static_cast<size_t>(v)] = best;
    rule.placed(best, ++size[static_cast<size_t>(best)]);
    for (int64_t p : touched) count[static_cast<size_t>(p)] = 0;
    touched.clear();
  }
  return part;
}

struct LdgRule {
  // k_i · (1 − |P_i|/C) ranks parts like k_i · (C − |P_i|), which is exact in
  // integers (k_i ≤ degree and C < 2N, so the product fits in int64).
  int64_t choose(const std::vector<int64_t>& count, const std::vector<int64_t>& size,
                 int64_t capacity) const {
    int64_t best = -1, best_score = 0;
    for (size_t i = 0; i < size.size(); ++i) {
      if (size[i] >= capacity) continue;
      const int64_t s = count[i] * (capacity - size[i]);
      if (best < 0 || s > best_score ||
          (s == best_score && size[i] < size[static_cast<size_t>(best)])) {
        best = static_cast<int64_t>(i);
        best_score = s;
      }
    }
    return best;
  }
  void placed(int64_t, int64_t) {}
};

struct FennelRule {
  double alpha, gamma;
  std::vector<double> penalty;  // α·γ·|P_i|^(γ−1) for the current |P_i|

  FennelRule(int64_t parts, double alpha_, double gamma_)
      : alpha(alpha_), gamma(gamma_), penalty(static_cast<size_t>(parts), cost(0)) {}

  double cost(int64_t size) const {
    return alpha * gamma * std::pow(static_cast<double>(size), gamma - 1.0);
  }
  int64_t choose(const std::vector<int64_t>& count, const std::vector<int64_t>& size,
                 int64_t capacity) const {
    int64_t best = -1;
    double best_score = 0.0;
    for (size_t i = 0; i < size.size(); ++i) {
      if (size[i] >= capacity) continue;
      const double s = static_cast<double>(count[i]) - penalty[i];
      if (best < 0 || s > best_score ||
          (s == best_score && size[i] < size[static_cast<size_t>(best)])) {
        best = static_cast<int64_t>(i);
        best_score = s;
      }
    }
    return best;
  }
  void placed(int64_t part, int64_t new_size) {
    penalty[static_cast<size_t>(part)] = cost(new_size);
  }
};

}  // namespace

template <typename IndexT>
std::vector<int64_t> ldg_partition(Span<int64_t> indptr, Span<IndexT> indices, int64_t parts,
                                   int64_t capacity, uint64_t seed) {
  LdgRule rule;
  return run_stream(indptr, indices, parts, capacity, seed, rule);
}

template <typename IndexT>
std::vector<int64_t> fennel_partition(Span<int64_t> indptr, Span<IndexT> indices,
                                      int64_t parts, int64_t capacity, double alpha,
                                      double gamma, uint64_t seed) {
  if (!(gamma >= 1.0) || !std::isfinite(gamma))
    throw std::invalid_argument("gamma must be a finite number >= 1");
  if (!(alpha >= 0.0) || !std::isfinite(alpha))
    throw std::invalid_argument("alpha must be a finite number >= 0");
  if (parts < 1) throw std::invalid_argument("parts must be >= 1");
  FennelRule rule(parts, alpha, gamma);
  return run_stream(indptr, indices, parts, capacity, seed, rule);
}

template std::vector<int64_t> ldg_partition<int32_t>(Span<int64_t>, Span<int32_t>, int64_t,
                                                     int64_t, uint64_t);
template std::vector<int64_t> ldg_partition<int64_t>(Span<int64_t>, Span<int64_t>, int64_t,
                                                     int64_t, uint64_t);
template std::vector<int64_t> fennel_partition<int32_t>(Span<int64_t>, Span<int32_t>, int64_t,
                                                        int64_t, double, double, uint64_t);
template std::vector<int64_t> fennel_partition<int64_t>(Span<int64_t>, Span<int64_t>, int64_t,
                                                        int64_t, double, double, uint64_t);

}  // namespace gnncore
