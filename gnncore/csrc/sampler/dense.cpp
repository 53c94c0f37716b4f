#include "sampler/dense.h"

#include <algorithm>
#include <stdexcept>

#include "parallel.h"
#include "sampler/uniform.h"

namespace gnncore {

using sampling::node_rng;
using sampling::Rng;
using sampling::sample_without_replacement;

namespace {

// A DENSE sample in hop order: node = [targets, Δ_1, ..., Δ_k] with block
// starts block_start (k + 2 entries); the neighbours of the expanded nodes
// node[0 : block_start[k]] form a CSR (off, pos, nbr, local). `off` and
// `nbr` are the calling thread's scratch buffers (valid until its next call).
struct HopOrder {
  std::vector<NodeId> node;
  std::vector<int64_t> block_start;
  std::vector<int64_t>& off = sampling::thread_scratch().offset;
  std::vector<int64_t> pos;
  std::vector<int64_t>& nbr = sampling::thread_scratch().nbr;
  std::vector<int64_t> local;
};

template <typename IndexT>
HopOrder sample_hop_order(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                          const std::vector<int64_t>& fanouts, uint64_t seed,
                          [[maybe_unused]] int threads) {
  const int64_t num_nodes = sampling::validate_csr_and_seeds(indptr, indices.size, targets);
  sampling::validate_fanouts(fanouts);
  HopOrder h;
  std::vector<NodeId>& node = h.node;
  std::vector<int64_t>& block_start = h.block_start;
  block_start.push_back(0);
  sampling::LocalIds local_of(num_nodes, targets.size * 4);
  sampling::add_seed_nodes(targets, local_of, node);
  block_start.push_back(static_cast<int64_t>(node.size()));

  std::vector<int64_t>& off = h.off;  // per expanded node: start in pos
  std::vector<int64_t>& pos = h.pos;  // sampled CSR positions
  std::vector<int64_t>& nbr = h.nbr;  // indices[pos]
  std::vector<int64_t>& local = h.local;  // hop-order id of nbr
  off.assign(1, 0);
  nbr.clear();
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const size_t begin = static_cast<size_t>(block_start[hop]);
    const size_t end = node.size();
    const size_t delta = end - begin;
    const int64_t fanout = fanouts[hop];
    const size_t base = pos.size();

    off.resize(begin + delta + 1);
    sampling::draw_hop(indptr, indices, node.data() + begin, delta, fanout, false, seed, hop, threads,
             off.data() + begin, pos, nbr);
    const size_t total = pos.size();
    local.resize(total);
    // At most one new node per sampled edge: one reallocation per hop.
    node.reserve(node.size() + (total - base));
    local_of.reserve(node.capacity());

    // Serial: the next delta, in first-seen order.
    constexpr size_t kAhead = 8;
    for (size_t t = base; t < std::min(base + kAhead, total); ++t) local_of.prefetch(nbr[t]);
    for (size_t t = base; t < total; ++t) {
      if (t + kAhead < total) local_of.prefetch(nbr[t + kAhead]);
      local[t] = sampling::neighbor_local_id(local_of, node, nbr[t], pos[t], num_nodes);
    }
    block_start.push_back(static_cast<int64_t>(node.size()));
  }
  return h;
}

}  // namespace

template <typename IndexT>
DenseSample sample_dense(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                         const std::vector<int64_t>& fanouts, uint64_t seed,
                         int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  const HopOrder h =
      sample_hop_order(indptr, indices, targets, fanouts, seed, threads);
  const std::vector<NodeId>& node = h.node;
  const std::vector<int64_t>& block_start = h.block_start;
  const std::vector<int64_t>& off = h.off;

  // DENSE layout: blocks outermost first. Block b (hop order) of size n_b
  // starts at S_b in hop order and at D_b = N - S_b - n_b in node_ids.
  const size_t k = fanouts.size();
  const int64_t n = static_cast<int64_t>(node.size());
  std::vector<int64_t> dense_of(node.size());  // hop-order id -> node_ids index
  DenseSample out;
  out.node_ids.resize(node.size());
  for (size_t b = 0; b <= k; ++b) {
    const int64_t s = block_start[b], e = block_start[b + 1];
    std::copy(node.begin() + s, node.begin() + e, out.node_ids.begin() + (n - e));
    for (int64_t i = s; i < e; ++i) dense_of[static_cast<size_t>(i)] = n - e + (i - s);
    out.node_id_offsets.push_back(n - e);
  }
  std::reverse(out.node_id_offsets.begin(), out.node_id_offsets.end());
  const size_t total = h.pos.size();
  out.nbrs.resize(total);
  out.repr.resize(total);
  out.nbr_edges.resize(total);
  out.nbr_offsets.assign(1, 0);
  out.nbr_offsets.reserve(static_cast<size_t>(block_start[k]) + 1);
  size_t written = 0;
  for (size_t b = k; b-- > 0;) {  // expanded blocks k-1, ..., 0
    const int64_t s = block_start[b], e = block_start[b + 1];
    const int64_t t0 = off[static_cast<size_t>(s)], t1 = off[static_cast<size_t>(e)];
    for (int64_t i = s; i < e; ++i)
      out.nbr_offsets.push_back(static_cast<int64_t>(written) +
                                off[static_cast<size_t>(i) + 1] - t0);
    const int64_t count = t1 - t0;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && count >= 4096) schedule(static)
#endif
    for (int64_t t = 0; t < count; ++t) {
      const size_t src = static_cast<size_t>(t0 + t), dst = written + static_cast<size_t>(t);
      out.nbrs[dst] = h.nbr[src];
      out.repr[dst] = dense_of[static_cast<size_t>(h.local[src])];
      out.nbr_edges[dst] = h.pos[src];
    }
    written += static_cast<size_t>(count);
  }
  return out;
}

template <typename IndexT>
NeighborSample sample_dense_pyg(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> targets, const std::vector<int64_t>& fanouts,
                                uint64_t seed, int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  HopOrder h = sample_hop_order(indptr, indices, targets, fanouts, seed, threads);
  const size_t k = fanouts.size();
  NeighborSample out;
  const int64_t num_expanded = h.block_start[k];
  out.col.resize(h.pos.size());
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && num_expanded >= 1024) \
    schedule(static)
#endif
  for (int64_t i = 0; i < num_expanded; ++i)
    std::fill(out.col.begin() + h.off[static_cast<size_t>(i)],
              out.col.begin() + h.off[static_cast<size_t>(i) + 1], i);
  for (size_t b = 0; b <= k; ++b)
    out.num_sampled_nodes.push_back(h.block_start[b + 1] - h.block_start[b]);
  for (size_t b = 0; b < k; ++b)
    out.num_sampled_edges.push_back(h.off[static_cast<size_t>(h.block_start[b + 1])] -
                                    h.off[static_cast<size_t>(h.block_start[b])]);
  out.node = std::move(h.node);
  out.row = std::move(h.local);
  out.edge = std::move(h.pos);
  return out;
}

NeighborSample dense_to_pyg(const DenseSample& s, int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  const int64_t n = static_cast<int64_t>(s.node_ids.size());
  const std::vector<int64_t>& starts = s.node_id_offsets;
  if (starts.empty() || starts[0] != 0 || !std::is_sorted(starts.begin(), starts.end()) ||
      starts.back() > n)
    throw std::invalid_argument("node_id_offsets must be non-decreasing block starts from 0");
  const size_t k = starts.size() - 1;
  const int64_t expanded_begin = k > 0 ? starts[1] : n;
  const int64_t num_expanded = n - expanded_begin;
  const size_t total = s.nbrs.size();
  if (static_cast<int64_t>(s.nbr_offsets.size()) != num_expanded + 1 ||
      s.nbr_offsets.front() != 0 || s.nbr_offsets.back() != static_cast<int64_t>(total) ||
      s.repr.size() != total || s.nbr_edges.size() != total)
    throw std::invalid_argument("nbr_offsets, nbrs, repr and nbr_edges do not fit node_ids");
  if (!std::is_sorted(s.nbr_offsets.begin(), s.nbr_offsets.end()))
    throw std::invalid_argument("nbr_offsets must be non-decreasing");
  for (int64_t r : s.repr)
    if (r < 0 || r >= n) throw std::invalid_argument("repr is outside node_ids");

  // Dense block j (outermost first) is hop-order block b = k - j.
  auto block_end = [&](size_t j) { return j < k ? starts[j + 1] : n; };
  std::vector<int64_t> hop_of(static_cast<size_t>(n));  // node_ids index -> hop-order id
  NeighborSample out;
  out.node.resize(static_cast<size_t>(n));
  int64_t hop_start = 0;
  for (size_t b = 0; b <= k; ++b) {
    const size_t j = k - b;
    const int64_t d0 = starts[j], d1 = block_end(j);
    for (int64_t d = d0; d < d1; ++d) {
      hop_of[static_cast<size_t>(d)] = hop_start + (d - d0);
      out.node[static_cast<size_t>(hop_start + (d - d0))] = s.node_ids[static_cast<size_t>(d)];
    }
    out.num_sampled_nodes.push_back(d1 - d0);
    hop_start += d1 - d0;
  }
  out.row.resize(total);
  out.col.resize(total);
  out.edge.resize(total);
  size_t written = 0;
  for (size_t h = 1; h <= k; ++h) {  // hop h: the neighbours of hop-order block h - 1
    const size_t j = k - (h - 1);
    const int64_t p0 = starts[j] - expanded_begin, p1 = block_end(j) - expanded_begin;
    const int64_t t0 = s.nbr_offsets[static_cast<size_t>(p0)];
    const int64_t t1 = s.nbr_offsets[static_cast<size_t>(p1)];
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && p1 - p0 >= 1024) schedule(static)
#endif
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t target = hop_of[static_cast<size_t>(expanded_begin + p)];
      for (int64_t t = s.nbr_offsets[static_cast<size_t>(p)];
           t < s.nbr_offsets[static_cast<size_t>(p) + 1]; ++t) {
        const size_t ts = static_cast<size_t>(t);
        const size_t o = written + static_cast<size_t>(t - t0);
        out.row[o] = hop_of[static_cast<size_t>(s.repr[ts])];
        out.col[o] = target;
        out.edge[o] = s.nbr_edges[ts];
      }
    }
    out.num_sampled_edges.push_back(t1 - t0);
    written += static_cast<size_t>(t1 - t0);
  }
  return out;
}

template DenseSample sample_dense<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                           const std::vector<int64_t>&, uint64_t, int);
template DenseSample sample_dense<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                           const std::vector<int64_t>&, uint64_t, int);
template NeighborSample sample_dense_pyg<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, int);
template NeighborSample sample_dense_pyg<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, int);

}  // namespace gnncore
