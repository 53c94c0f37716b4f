#include "sampler/dense.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <stdexcept>

#include "parallel.h"
#include "sampler/buffer_pool.h"
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
// With `with_col`, col[t] is the hop-order id of the node edge t was drawn
// for (the PyG layout's col), written by the drawing threads.
struct HopOrder {
  std::vector<NodeId> node;
  std::vector<int64_t> block_start;
  std::vector<int64_t>& off = sampling::thread_scratch().offset;
  std::vector<int64_t> pos;
  std::vector<int64_t>& nbr = sampling::thread_scratch().nbr;
  std::vector<int64_t> local;
  bool with_col = false;
  std::vector<int64_t> col;
};

// An upper bound on the edges a DENSE sample of `num_targets` targets draws,
// or 0 when it is too large to reserve (a fanout of -1, or above 2^23 entries:
// the vectors then grow hop by hop). Every node's row is drawn at most once
// per batch, so the edges are also at most the graph's.
inline size_t reserved_edges(size_t num_targets, const std::vector<int64_t>& fanouts,
                             size_t num_edges) {
  constexpr double kMaxReserve = double(size_t{1} << 23);
  double frontier = static_cast<double>(num_targets), total = 0;
  for (int64_t f : fanouts) {
    if (f < 0) return 0;
    frontier *= static_cast<double>(f);  // the edges of this hop bound the next delta
    total += frontier;
  }
  total = std::min(total, static_cast<double>(num_edges));
  return total > kMaxReserve ? 0 : static_cast<size_t>(total);
}

// One hop's draws, sized by size_rows (hop 0) or dedup_edges: `n` frontier nodes (hop-order
// ids first, first + 1, ...) whose blocks start at offset[i] in HopOrder::pos.
template <typename IndexT>
struct HopDraw {
  Span<int64_t> indptr;
  Span<IndexT> indices;
  const NodeId* frontier;
  size_t n;
  int64_t fanout;
  uint64_t seed;
  size_t hop;
  const int64_t* offset;
  int64_t first;

  void nodes(size_t i0, size_t i1, HopOrder& h, std::vector<int64_t>& scratch) const {
    i1 = std::min(n, i1);
    sampling::draw_nodes(indptr, indices, frontier, n, i0, i1, fanout, false, seed, hop, offset,
                         h.pos.data(), h.nbr.data(), scratch);
    if (!h.with_col) return;
    for (size_t i = i0; i < i1; ++i)
      std::fill(h.col.data() + offset[i], h.col.data() + offset[i + 1],
                first + static_cast<int64_t>(i));
  }
};

// The next hop's draws of frontier node u (the sizing of size_hop, one
// node): up to `fanout`, all when fanout = -1 or the degree is smaller, none
// for an empty row. Throws std::invalid_argument for a malformed indptr row.
inline int64_t draws_of(Span<int64_t> indptr, int64_t num_edges, NodeId u, int64_t fanout) {
  const int64_t lo = indptr[static_cast<size_t>(u)], hi = indptr[static_cast<size_t>(u) + 1];
  if (lo < 0 || hi < lo || hi > num_edges)
    throw std::invalid_argument("indptr is not non-decreasing within [0, " +
                                std::to_string(num_edges) + "] at row " + std::to_string(u));
  const int64_t deg = hi - lo;
  return fanout < 0 ? deg : std::min(deg, fanout);
}

// Local ids of the sampled edges [t0, t1) in order, appending the nodes
// first seen to h.node (the next delta, in first-seen order). With
// `next_fanout` >= -1 (the next delta will be expanded) it also sizes the
// next hop: h.off[m + 1] = h.off[m] + the draws of new node m (draws_of),
// so no separate pass reads `indptr` at the nodes of the next delta.
inline void dedup_edges(HopOrder& h, sampling::LocalIds& local_of, int64_t num_nodes, size_t t0,
                        size_t t1, Span<int64_t> indptr, int64_t next_fanout) {
  constexpr size_t kAhead = 16;  // the look-ups are random: fetch them ahead
  const int64_t* nbr = h.nbr.data();
  if (next_fanout < -1) {
    for (size_t t = t0; t < std::min(t0 + kAhead, t1); ++t) local_of.prefetch(nbr[t]);
    for (size_t t = t0; t < t1; ++t) {
      if (t + kAhead < t1) local_of.prefetch(nbr[t + kAhead]);
      h.local[t] = sampling::neighbor_local_id(local_of, h.node, nbr[t], h.pos[t], num_nodes);
    }
    return;
  }
  const int64_t num_edges = indptr[indptr.size - 1];  // validated: len(indices)
  int64_t* off = h.off.data();
  auto ahead = [&](size_t t) {
    local_of.prefetch(nbr[t]);
    __builtin_prefetch(indptr.data + nbr[t]);  // read if nbr[t] is new
  };
  for (size_t t = t0; t < std::min(t0 + kAhead, t1); ++t) ahead(t);
  for (size_t t = t0; t < t1; ++t) {
    if (t + kAhead < t1) ahead(t + kAhead);
    const size_t m = h.node.size();
    h.local[t] = sampling::neighbor_local_id(local_of, h.node, nbr[t], h.pos[t], num_nodes);
    if (h.node.size() != m) off[m + 1] = off[m] + draws_of(indptr, num_edges, nbr[t], next_fanout);
  }
}

// Frontier nodes per unit of work of draw_and_dedup.
constexpr size_t kPipeChunk = 4 * sampling::kDrawGroup;

// Draws one hop and maps its edges to local ids. The mapping must run in
// edge order on one thread (first-seen order), so with several threads it
// is pipelined with the draws: thread 0 maps each chunk of frontier nodes as
// soon as it is drawn, and draws a chunk itself whenever the next one is not
// ready; the other threads only draw. Same result for any thread count.
template <typename IndexT>
void draw_and_dedup(const HopDraw<IndexT>& draw, HopOrder& h, sampling::LocalIds& local_of,
                    int64_t num_nodes, int64_t next_fanout, [[maybe_unused]] int threads) {
  const size_t base = static_cast<size_t>(draw.offset[0]);
  std::vector<int64_t> scratch;
#ifdef GNNCORE_WITH_OPENMP
  if (threads > 1 && draw.n >= 4 * kPipeChunk) {
    const size_t chunks = (draw.n + kPipeChunk - 1) / kPipeChunk;
    std::unique_ptr<std::atomic<bool>[]> drawn(new std::atomic<bool>[chunks]);
    for (size_t c = 0; c < chunks; ++c) drawn[c].store(false, std::memory_order_relaxed);
    std::atomic<size_t> next{0};  // the first chunk nobody has taken
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    auto draw_chunk = [&](size_t c, std::vector<int64_t>& buf) {
      draw.nodes(c * kPipeChunk, (c + 1) * kPipeChunk, h, buf);
      drawn[c].store(true, std::memory_order_release);
    };
#pragma omp parallel num_threads(threads)
    {
      std::vector<int64_t> buf;
      try {
        if (omp_get_thread_num() != 0) {
          for (size_t c; !failed.load(std::memory_order_relaxed) &&
                         (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
            draw_chunk(c, buf);
        } else {
          for (size_t c = 0; c < chunks && !failed.load(std::memory_order_relaxed); ++c) {
            while (!drawn[c].load(std::memory_order_acquire)) {
              if (failed.load(std::memory_order_relaxed)) break;  // a drawer threw
              const size_t mine = next.fetch_add(1, std::memory_order_relaxed);
              if (mine < chunks) draw_chunk(mine, buf);
              else sampling::cpu_relax();
            }
            if (!drawn[c].load(std::memory_order_acquire)) break;
            const size_t i1 = std::min(draw.n, (c + 1) * kPipeChunk);
            dedup_edges(h, local_of, num_nodes, static_cast<size_t>(draw.offset[c * kPipeChunk]),
                        static_cast<size_t>(draw.offset[i1]), draw.indptr, next_fanout);
          }
        }
      } catch (...) {
#pragma omp critical(gnncore_dense_error)
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  draw.nodes(0, draw.n, h, scratch);
  dedup_edges(h, local_of, num_nodes, base, static_cast<size_t>(draw.offset[draw.n]),
              draw.indptr, next_fanout);
}

template <typename IndexT>
HopOrder sample_hop_order(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                          const std::vector<int64_t>& fanouts, uint64_t seed, int threads,
                          bool with_col) {
  const int64_t num_nodes = sampling::validate_csr_and_seeds(indptr, indices.size, targets);
  sampling::validate_fanouts(fanouts);
  HopOrder h;
  h.with_col = with_col;
  std::vector<NodeId>& node = h.node;
  std::vector<int64_t>& block_start = h.block_start;
  std::vector<int64_t>& off = h.off;  // per expanded node: start in pos
  std::vector<int64_t>& pos = h.pos;  // sampled CSR positions
  std::vector<int64_t>& nbr = h.nbr;  // indices[pos]
  std::vector<int64_t>& local = h.local;  // hop-order id of nbr
  // Reserve for the worst case once (untouched pages cost nothing) rather
  // than growing, and copying, the outputs at every hop; the outputs come
  // from the buffer pool, whose pages earlier batches already mapped.
  const size_t bound = reserved_edges(targets.size, fanouts, indices.size);
  if (bound > 0) {
    sampling::BufferPool& pool = sampling::BufferPool::instance();
    pos = pool.take(bound);
    local = pool.take(bound);
    nbr.reserve(bound);
    if (with_col) h.col = pool.take(bound);
    node = pool.take(targets.size + bound);
    node.clear();  // filled by push_back; the others are sized below
  }
  block_start.push_back(0);
  sampling::LocalIds local_of(num_nodes, targets.size * 4);
  local_of.reserve(node.capacity());
  sampling::add_seed_nodes(targets, local_of, node);
  block_start.push_back(static_cast<int64_t>(node.size()));

  // off is indexed by hop-order id: hop 0 sizes the targets here, and the
  // mapping of hop h sizes the delta it finds (dedup_edges), so it must hold
  // an entry past every node `node` can hold. It only grows (thread scratch).
  off.resize(std::max(off.size(), node.size() + 1));
  off[0] = 0;
  if (!fanouts.empty())
    sampling::size_rows(indptr, indices, node.data(), node.size(), fanouts[0], false,
                        off.data());
  // The edge arrays only grow during the hops, and are cut to the sample's
  // edges at the end: a recycled buffer keeps its last batch's size, so
  // growing it within that size writes no zeros (about 17 MB per batch of
  // 1,000 targets at 15,10,5, written on one thread between the hops).
  auto grow = [](std::vector<int64_t>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const size_t begin = static_cast<size_t>(block_start[hop]);
    const size_t delta = node.size() - begin;
    const size_t base = static_cast<size_t>(off[begin]);  // the hop's first edge
    const size_t total = static_cast<size_t>(off[begin + delta]);
    grow(pos, total);
    grow(nbr, total);
    grow(local, total);
    if (with_col) grow(h.col, total);
    // At most one new node per sampled edge: no reallocation during the hop
    // (draw_and_dedup reads the frontier through a pointer into `node`).
    node.reserve(node.size() + (total - base));
    local_of.reserve(node.capacity());
    if (off.size() < node.capacity() + 1) off.resize(node.capacity() + 1);
    const HopDraw<IndexT> draw{indptr, indices, node.data() + begin, delta, fanouts[hop], seed,
                               hop, off.data() + begin, static_cast<int64_t>(begin)};
    // -2: the next delta is the last one, never expanded, so not sized
    const int64_t next_fanout = hop + 1 < fanouts.size() ? fanouts[hop + 1] : -2;
    draw_and_dedup(draw, h, local_of, num_nodes, next_fanout, threads);
    block_start.push_back(static_cast<int64_t>(node.size()));
  }
  const size_t edges = static_cast<size_t>(off[static_cast<size_t>(block_start[fanouts.size()])]);
  pos.resize(edges);  // shrinking writes nothing
  local.resize(edges);
  if (with_col) h.col.resize(edges);
  return h;
}

}  // namespace

template <typename IndexT>
DenseSample sample_dense(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> targets,
                         const std::vector<int64_t>& fanouts, uint64_t seed,
                         int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  HopOrder h = sample_hop_order(indptr, indices, targets, fanouts, seed, threads, false);
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
  sampling::BufferPool& pool = sampling::BufferPool::instance();
  pool.give(std::move(h.node));
  pool.give(std::move(h.pos));
  pool.give(std::move(h.local));
  return out;
}

template <typename IndexT>
NeighborSample sample_dense_pyg(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> targets, const std::vector<int64_t>& fanouts,
                                uint64_t seed, int num_threads) {
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  HopOrder h = sample_hop_order(indptr, indices, targets, fanouts, seed, threads, true);
  const size_t k = fanouts.size();
  NeighborSample out;
  for (size_t b = 0; b <= k; ++b)
    out.num_sampled_nodes.push_back(h.block_start[b + 1] - h.block_start[b]);
  for (size_t b = 0; b < k; ++b)
    out.num_sampled_edges.push_back(h.off[static_cast<size_t>(h.block_start[b + 1])] -
                                    h.off[static_cast<size_t>(h.block_start[b])]);
  out.node = std::move(h.node);
  out.row = std::move(h.local);
  out.edge = std::move(h.pos);
  out.col = std::move(h.col);
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
