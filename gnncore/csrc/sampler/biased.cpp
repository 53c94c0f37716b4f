#include "sampler/biased.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "parallel.h"
#include "sampler/uniform.h"

namespace gnncore {

using sampling::node_rng;
using sampling::Rng;

namespace {

void validate_options(const BiasOptions& o, size_t hops, int64_t num_nodes) {
  const size_t n = static_cast<size_t>(num_nodes);
  if (!o.boost.empty() && o.boost.size() != hops)
    throw std::invalid_argument("boost has " + std::to_string(o.boost.size()) +
                                " masks for " + std::to_string(hops) +
                                " hops; pass one per hop (an empty one for none) or none");
  for (size_t h = 0; h < o.boost.size(); ++h)
    if (o.boost[h].size != 0 && o.boost[h].size != n)
      throw std::invalid_argument("boost[" + std::to_string(h) + "] has " +
                                  std::to_string(o.boost[h].size) + " entries, expected N = " +
                                  std::to_string(n) + " (or 0 for none)");
  if (!std::isfinite(o.scale) || o.scale < 1.0) {
    std::ostringstream msg;
    msg << "scale must be finite and >= 1, got " << o.scale;
    throw std::invalid_argument(msg.str());
  }
  if (o.remote.size != 0 && o.remote.size != n)
    throw std::invalid_argument("remote has " + std::to_string(o.remote.size) +
                                " entries, expected N = " + std::to_string(n) +
                                " (or 0 for none)");
  if (!o.theta.empty() && o.theta.size() != hops)
    throw std::invalid_argument("theta has " + std::to_string(o.theta.size()) + " entries for " +
                                std::to_string(hops) + " hops");
  for (size_t h = 0; h < o.theta.size(); ++h)
    if (o.theta[h] < -1)
      throw std::invalid_argument("theta[" + std::to_string(h) + "] = " +
                                  std::to_string(o.theta[h]) +
                                  " is below -1; use -1 for no pruning");
}

// Uniform double in [0, 1).
inline double unit(Rng& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

// Exact inclusion probabilities of a draw of k entries from a row whose
// entries fall into `groups` classes, class g holding count[g] entries of
// weight wt[g] > 0, with k < sum(count): pi[g] = min(1, k' wt[g] / W'), capped
// iteratively: a class whose probability reaches 1 is taken with certainty and
// the k' slots left are spread over the other classes in proportion to their
// weights W' (repeated until no new class is capped), so that
// sum_g count[g] pi[g] = k.
void capped_inclusion(const double* wt, const int64_t* count, int groups, int64_t k, double* pi) {
  for (int g = 0; g < groups; ++g) pi[g] = count[g] > 0 ? -1.0 : 0.0;  // -1: not capped
  double left = static_cast<double>(k), total = 0.0;
  for (bool capped = true; capped;) {
    capped = false;
    total = 0.0;
    for (int g = 0; g < groups; ++g)
      if (pi[g] < 0.0) total += wt[g] * static_cast<double>(count[g]);
    const double slots = left;
    for (int g = 0; g < groups; ++g)
      if (pi[g] < 0.0 && slots * wt[g] >= total) {
        pi[g] = 1.0;
        left -= static_cast<double>(count[g]);
        capped = true;
      }
  }
  for (int g = 0; g < groups; ++g)
    if (pi[g] < 0.0) pi[g] = left * wt[g] / total;
}

// The options of one hop.
struct HopBias {
  const uint8_t* boost = nullptr;   // nullptr: no boosting at this hop
  double scale = 1.0;
  const uint8_t* remote = nullptr;  // nullptr: every list local
  int64_t theta = -1;               // window of remote lists, -1: whole list
};

// Entries of v's row that expanding it reads: `deg`, or theta for a remote
// list longer than theta.
inline int64_t window_length(const HopBias& b, NodeId v, int64_t deg) {
  if (b.remote != nullptr && b.remote[v] != 0 && b.theta >= 0 && deg > b.theta) return b.theta;
  return deg;
}

// One hop of biased sampling (the counterpart of sampling::draw_hop without
// replacement): `offset` points at n + 1 entries whose first holds the start
// in `pos`; `pos`, `nbr` and `weight` are resized to offset[n]. Adds the
// hop's remote lists and ids read to `remote_lists` / `remote_ids`.
template <typename IndexT>
void draw_biased_hop(Span<int64_t> indptr, Span<IndexT> indices, int64_t num_nodes,
                     const NodeId* frontier, size_t n, int64_t fanout, uint64_t seed, size_t hop,
                     [[maybe_unused]] int threads, const HopBias& bias, int64_t* offset,
                     std::vector<int64_t>& pos, std::vector<int64_t>& nbr,
                     std::vector<float>& weight, int64_t& remote_lists, int64_t& remote_ids) {
  const int64_t num_edges = static_cast<int64_t>(indices.size);
  for (size_t i = 0; i < n; ++i) {  // serial: validate rows, size each block, count reads
    const NodeId v = frontier[i];
    const int64_t lo = indptr[static_cast<size_t>(v)], hi = indptr[static_cast<size_t>(v) + 1];
    if (lo < 0 || hi < lo || hi > num_edges)
      throw std::invalid_argument("indptr is not non-decreasing within [0, " +
                                  std::to_string(num_edges) + "] at row " + std::to_string(v));
    const int64_t deg = hi - lo;
    if (bias.remote != nullptr && bias.remote[v] != 0) {
      ++remote_lists;
      remote_ids += bias.theta >= 0 ? std::min(deg, bias.theta) : deg;
    }
    const int64_t w = window_length(bias, v, deg);
    const int64_t count = fanout < 0 ? w : std::min(w, fanout);
    offset[i + 1] = offset[i] + count;
  }
  pos.resize(static_cast<size_t>(offset[n]));
  nbr.resize(pos.size());
  weight.resize(pos.size());
  const bool boosting = bias.boost != nullptr && bias.scale != 1.0;
  const int64_t n_i = static_cast<int64_t>(n);
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && n >= 256)
#endif
  {
    std::vector<int64_t> scratch, perm;
    std::vector<uint8_t> chosen;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 64)
#endif
    for (int64_t ii = 0; ii < n_i; ++ii) {  // parallel: each node's block
      const size_t i = static_cast<size_t>(ii);
      if (ii + sampling::kPtrAhead < n_i)
        __builtin_prefetch(&indptr[static_cast<size_t>(frontier[i + sampling::kPtrAhead])]);
      if (ii + sampling::kRowAhead < n_i)
        sampling::prefetch_row(indptr, indices, frontier[i + sampling::kRowAhead]);
      const NodeId v = frontier[i];
      const int64_t lo = indptr[static_cast<size_t>(v)];
      const int64_t deg = indptr[static_cast<size_t>(v) + 1] - lo;
      const int64_t count = offset[i + 1] - offset[i];
      if (count == 0) continue;
      const int64_t w = window_length(bias, v, deg);
      int64_t* block = pos.data() + offset[i];
      float* wblock = weight.data() + offset[i];
      std::fill(wblock, wblock + count, 1.0f);
      Rng rng = node_rng(seed, hop, i);
      // Entry t of the window is row entry (start + t) mod deg.
      const int64_t start = w < deg ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(deg))) : 0;
      auto at = [&](int64_t t) {
        const int64_t k = start + t;
        return lo + (k >= deg ? k - deg : k);
      };
      auto boosted = [&](int64_t p) {
        const int64_t u = static_cast<int64_t>(indices[static_cast<size_t>(p)]);
        return u >= 0 && u < num_nodes && bias.boost[u] != 0;
      };
      bool sort_block = w < deg;  // a wrapped window is out of CSR order
      double pi[2] = {1.0, 1.0};    // inclusion probability of a plain / boosted entry
      double q = 0.0;               // > 0: the draw was weighted, c_j = q / pi_j
      if (count == w) {  // the whole window: every entry with probability 1
        for (int64_t t = 0; t < count; ++t) block[t] = at(t);
      } else {
        int64_t b = 0;
        if (boosting)
          for (int64_t t = 0; t < w; ++t) b += boosted(at(t)) ? 1 : 0;
        if (b == 0 || b == w) {  // equal weights: uniform, as the DENSE kernel
          sampling::sample_without_replacement(rng, w, count, block, scratch);
          for (int64_t t = 0; t < count; ++t) block[t] = at(block[t]);
        } else {  // systematic PPS with the exact (capped) inclusion probabilities
          const double wt[2] = {1.0, bias.scale};
          const int64_t classes[2] = {w - b, b};
          capped_inclusion(wt, classes, 2, count, pi);
          // Certain entries are taken; the others, in an order drawn from the
          // node's generator, are cut by the k' points u, u + 1, ..., u + k' - 1
          // on the running sum of their probabilities (sum: k').
          int64_t taken = 0;
          perm.clear();  // 2 t + class of the uncertain entries t
          for (int64_t t = 0; t < w; ++t) {
            const int64_t cls = boosted(at(t)) ? 1 : 0;
            if (pi[cls] >= 1.0)
              block[taken++] = t;
            else
              perm.push_back(2 * t + cls);
          }
          const size_t m = perm.size();
          for (size_t j = m; j > 1; --j)  // Fisher-Yates
            std::swap(perm[j - 1], perm[static_cast<size_t>(rng.below(j))]);
          const int64_t left = count - taken;
          const double u = unit(rng);
          double total = 0.0;  // renormalise the running sum to exactly k'
          for (size_t j = 0; j < m; ++j) total += pi[perm[j] & 1];
          const double norm = static_cast<double>(left) / total;
          chosen.assign(m, 0);
          double run = 0.0;
          int64_t next = 0;  // points crossed so far
          for (size_t j = 0; j < m && next < left; ++j) {
            run += pi[perm[j] & 1] * norm;
            const double c = j + 1 == m ? static_cast<double>(left)
                                        : std::min(run, static_cast<double>(left));
            if (u + static_cast<double>(next) < c) {  // at most one point per entry
              chosen[j] = 1;
              block[taken++] = perm[j] >> 1;
              ++next;
            }
          }
          // Floating-point guard (an interval rounded to length >= 1 holding two
          // points): top up with the first entries not chosen. Unreachable in
          // exact arithmetic, where every interval is shorter than 1.
          for (size_t j = 0; j < m && next < left; ++j)
            if (chosen[j] == 0) {
              block[taken++] = perm[j] >> 1;
              ++next;
            }
          for (int64_t t = 0; t < count; ++t) block[t] = at(block[t]);
          sort_block = true;
          q = static_cast<double>(count) / static_cast<double>(w);  // the plain sampler's
        }
      }
      if (sort_block) std::sort(block, block + count);
      if (q > 0.0)  // Horvitz-Thompson: c_j = q_j / pi_j
        for (int64_t t = 0; t < count; ++t)
          wblock[t] = static_cast<float>(q / pi[boosted(block[t]) ? 1 : 0]);
      for (int64_t t = 0; t < count; ++t)
        nbr[static_cast<size_t>(offset[i] + t)] =
            static_cast<int64_t>(indices[static_cast<size_t>(block[t])]);
    }
  }
}

}  // namespace

template <typename IndexT>
BiasedSample sample_biased_pyg(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                               const std::vector<int64_t>& fanouts, uint64_t seed,
                               const BiasOptions& options, int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  const int64_t num_nodes = sampling::validate_csr_and_seeds(indptr, indices.size, targets);
  sampling::validate_fanouts(fanouts);
  const size_t k = fanouts.size();
  validate_options(options, k, num_nodes);

  BiasedSample out;
  NeighborSample& s = out.sample;
  std::vector<NodeId>& node = s.node;
  std::vector<int64_t> block_start{0};
  sampling::LocalIds local_of(num_nodes, targets.size * 4);
  sampling::add_seed_nodes(targets, local_of, node);
  block_start.push_back(static_cast<int64_t>(node.size()));

  std::vector<int64_t> off(1, 0);  // per expanded node (hop order): start in pos
  std::vector<int64_t> pos, nbr, local;
  out.remote_lists.assign(k, 0);
  out.remote_ids.assign(k, 0);
  for (size_t hop = 0; hop < k; ++hop) {
    const size_t begin = static_cast<size_t>(block_start[hop]);
    const size_t end = node.size();
    const size_t delta = end - begin;
    const size_t base = pos.size();
    HopBias bias;
    if (!options.boost.empty() && options.boost[hop].size != 0) bias.boost = options.boost[hop].data;
    bias.scale = options.scale;
    if (options.remote.size != 0) bias.remote = options.remote.data;
    if (!options.theta.empty()) bias.theta = options.theta[hop];

    off.resize(begin + delta + 1);
    draw_biased_hop(indptr, indices, num_nodes, node.data() + begin, delta, fanouts[hop], seed,
                    hop, threads, bias, off.data() + begin, pos, nbr, out.weight,
                    out.remote_lists[hop], out.remote_ids[hop]);
    const size_t total = pos.size();
    local.resize(total);
    node.reserve(node.size() + (total - base));
    local_of.reserve(node.capacity());
    // Serial: the next delta, in first-seen order.
    for (size_t t = base; t < total; ++t)
      local[t] = sampling::neighbor_local_id(local_of, node, nbr[t], pos[t], num_nodes);
    block_start.push_back(static_cast<int64_t>(node.size()));
  }

  const int64_t num_expanded = block_start[k];
  s.col.resize(pos.size());
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && num_expanded >= 1024) \
    schedule(static)
#endif
  for (int64_t i = 0; i < num_expanded; ++i)
    std::fill(s.col.begin() + off[static_cast<size_t>(i)],
              s.col.begin() + off[static_cast<size_t>(i) + 1], i);
  for (size_t b = 0; b <= k; ++b) s.num_sampled_nodes.push_back(block_start[b + 1] - block_start[b]);
  for (size_t b = 0; b < k; ++b)
    s.num_sampled_edges.push_back(off[static_cast<size_t>(block_start[b + 1])] -
                                  off[static_cast<size_t>(block_start[b])]);
  s.row = std::move(local);
  s.edge = std::move(pos);
  return out;
}

template BiasedSample sample_biased_pyg<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                 const std::vector<int64_t>&, uint64_t,
                                                 const BiasOptions&, int);
template BiasedSample sample_biased_pyg<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                 const std::vector<int64_t>&, uint64_t,
                                                 const BiasOptions&, int);

}  // namespace gnncore
