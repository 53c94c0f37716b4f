#include "sampler/per_layer.h"

#include <algorithm>

#include "parallel.h"
#include "sampler/uniform.h"

namespace gnncore {

template <typename IndexT>
NeighborSample sample_per_layer(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> seeds,
                                const std::vector<int64_t>& fanouts, uint64_t seed,
                                bool replace, int num_threads) {
  const int64_t num_nodes = sampling::validate_csr_and_seeds(indptr, indices.size, seeds);
  sampling::validate_fanouts(fanouts);

  NeighborSample out;
  sampling::LocalIds local_of(num_nodes, seeds.size * 4);
  sampling::add_seed_nodes(seeds, local_of, out.node);
  out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size()));

  const int threads = resolve_threads(num_threads);
  sampling::Scratch& scratch = sampling::thread_scratch();
  std::vector<int64_t>& offset = scratch.offset;  // per frontier node: start in `pos`
  std::vector<int64_t>& pos = scratch.pos;  // sampled CSR positions, per frontier node
  std::vector<int64_t>& nbr = scratch.nbr;  // indices[pos]
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const size_t frontier = out.node.size();  // every node known so far
    offset.assign(frontier + 1, 0);
    sampling::draw_hop(indptr, indices, out.node.data(), frontier, fanouts[hop], replace, seed,
                       hop, threads, offset.data(), pos, nbr);

    // Serial pass: local ids in frontier order, hash slots prefetched ahead.
    const size_t emitted = pos.size();
    // At most one new node per sampled edge: one reallocation per hop.
    out.node.reserve(out.node.size() + emitted);
    local_of.reserve(out.node.capacity());
    constexpr size_t kAhead = 8;
    for (size_t t = 0; t < std::min(kAhead, emitted); ++t) local_of.prefetch(nbr[t]);
    const size_t base = out.row.size();
    out.row.resize(base + emitted);
    out.col.resize(base + emitted);
    out.edge.insert(out.edge.end(), pos.begin(), pos.end());
    for (size_t i = 0; i < frontier; ++i) {
      const int64_t target = static_cast<int64_t>(i);
      for (int64_t t = offset[i]; t < offset[i + 1]; ++t) {
        const size_t ts = static_cast<size_t>(t);
        if (ts + kAhead < emitted) local_of.prefetch(nbr[ts + kAhead]);
        out.row[base + ts] =
            sampling::neighbor_local_id(local_of, out.node, nbr[ts], pos[ts], num_nodes);
        out.col[base + ts] = target;
      }
    }
    out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size() - frontier));
    out.num_sampled_edges.push_back(static_cast<int64_t>(emitted));
  }
  return out;
}

template NeighborSample sample_per_layer<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);
template NeighborSample sample_per_layer<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);

}  // namespace gnncore
