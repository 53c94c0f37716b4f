#include "sampler/neighbor.h"

#include "parallel.h"
#include "random.h"
#include "sampler/uniform.h"

#include <algorithm>
#include <stdexcept>
#include <string>


namespace gnncore {

using sampling::IdMap;
using sampling::node_rng;
using sampling::Rng;
using sampling::sample_without_replacement;

template <typename IndexT>
NeighborSample sample_neighbors(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> seeds, const std::vector<int64_t>& fanouts,
                                uint64_t seed, bool replace, int num_threads) {
  const int64_t num_nodes = sampling::validate_csr_and_seeds(indptr, indices.size, seeds);
  const int64_t num_edges = static_cast<int64_t>(indices.size);
  sampling::validate_fanouts(fanouts);

  NeighborSample out;
  IdMap local_of(seeds.size * 4);
  out.node.reserve(seeds.size);
  bool inserted = false;
  for (size_t i = 0; i < seeds.size; ++i) {
    local_of.get_or_insert(seeds[i], static_cast<int64_t>(out.node.size()), &inserted);
    if (inserted) out.node.push_back(seeds[i]);
  }
  out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size()));

  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  std::vector<int64_t> offset;  // per frontier node: start of its block in `pos`
  std::vector<int64_t> pos;     // sampled CSR positions, grouped per frontier node
  std::vector<int64_t> nbr;     // indices[pos], read in the parallel pass
  size_t begin = 0;
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const size_t end = out.node.size();
    const size_t frontier = end - begin;
    const int64_t fanout = fanouts[hop];

    // Serial pass: validate rows and size each node's block.
    offset.assign(frontier + 1, 0);
    for (size_t i = 0; i < frontier; ++i) {
      const NodeId v = out.node[begin + i];
      const int64_t lo = indptr[static_cast<size_t>(v)], hi = indptr[static_cast<size_t>(v) + 1];
      if (lo < 0 || hi < lo || hi > num_edges)
        throw std::invalid_argument("indptr is not non-decreasing within [0, " +
                                    std::to_string(num_edges) + "] at row " +
                                    std::to_string(v));
      const int64_t deg = hi - lo;
      int64_t count = 0;
      if (deg > 0) {
        if (fanout < 0) count = deg;
        else if (replace) count = fanout;
        else count = std::min(deg, fanout);
      }
      offset[i + 1] = offset[i] + count;
    }
    pos.resize(static_cast<size_t>(offset[frontier]));
    nbr.resize(pos.size());

    // Parallel pass: draw each node's block from its own generator.
    const int64_t frontier_i = static_cast<int64_t>(frontier);
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && frontier >= 256)
#endif
    {
      std::vector<int64_t> scratch;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 64)
#endif
      for (int64_t ii = 0; ii < frontier_i; ++ii) {
        const size_t i = static_cast<size_t>(ii);
        const NodeId v = out.node[begin + i];
        const int64_t lo = indptr[static_cast<size_t>(v)];
        const int64_t deg = indptr[static_cast<size_t>(v) + 1] - lo;
        const int64_t count = offset[i + 1] - offset[i];
        int64_t* block = pos.data() + offset[i];
        if (count == 0) continue;
        if (count == deg && (fanout < 0 || !replace)) {
          for (int64_t t = 0; t < count; ++t) block[t] = lo + t;
          continue;
        }
        Rng rng = node_rng(seed, hop, i);
        if (replace) {
          for (int64_t t = 0; t < count; ++t)
            block[t] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(deg)));
          std::sort(block, block + count);
        } else {
          sample_without_replacement(rng, deg, count, block, scratch);
        }
        for (int64_t t = 0; t < count; ++t) block[t] += lo;
      }
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(static)
#endif
      for (int64_t t = 0; t < static_cast<int64_t>(pos.size()); ++t)
        nbr[static_cast<size_t>(t)] =
            static_cast<int64_t>(indices[static_cast<size_t>(pos[static_cast<size_t>(t)])]);
    }

    // Serial pass: assign local ids in frontier order, prefetching the hash
    // slots a few edges ahead.
    const size_t emitted = pos.size();
    constexpr size_t kAhead = 8;
    for (size_t t = 0; t < std::min(kAhead, emitted); ++t) local_of.prefetch(nbr[t]);
    out.row.reserve(out.row.size() + emitted);
    out.col.reserve(out.col.size() + emitted);
    out.edge.reserve(out.edge.size() + emitted);
    for (size_t i = 0; i < frontier; ++i) {
      const int64_t target = static_cast<int64_t>(begin + i);
      for (int64_t t = offset[i]; t < offset[i + 1]; ++t) {
        const size_t ts = static_cast<size_t>(t);
        if (ts + kAhead < emitted) local_of.prefetch(nbr[ts + kAhead]);
        const int64_t j = pos[ts];
        const int64_t u = nbr[ts];
        if (u < 0 || u >= num_nodes)
          throw std::out_of_range("indices[" + std::to_string(j) + "] = " + std::to_string(u) +
                                  " is outside [0, " + std::to_string(num_nodes) + ")");
        const int64_t local =
            local_of.get_or_insert(u, static_cast<int64_t>(out.node.size()), &inserted);
        if (inserted) out.node.push_back(u);
        out.row.push_back(local);
        out.col.push_back(target);
        out.edge.push_back(j);
      }
    }
    out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size() - end));
    out.num_sampled_edges.push_back(static_cast<int64_t>(emitted));
    begin = end;
  }
  return out;
}

template NeighborSample sample_neighbors<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);
template NeighborSample sample_neighbors<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);

}  // namespace gnncore
