// Degree-corrected planted-partition graphs and class-conditional features.
//
// Every random number is a pure function of (seed, position): edge e draws
// from splitmix64 counters e * 16 + t and feature row r from counters keyed by
// r, so any chunking of the edge stream or of the feature rows, and any number
// of threads, gives the same output.
#pragma once
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// Streams the undirected edges of a degree-corrected planted-partition model.
// Edge e picks src with probability proportional to theta; with probability
// `intra_fraction` it picks dst proportionally to theta among src's
// community, otherwise among the nodes of the other communities (community
// chosen by its total theta, then node by theta). A dst equal to src is
// redrawn up to three times, so self-loops are rare; repeated edges are not
// removed.
class PlantedPartition {
 public:
  // `community[v]` is in [0, num_communities); theta is non-negative, finite,
  // with a positive total; 1 <= num_communities <= num_nodes < 2**32. Throws
  // std::invalid_argument (sizes, fractions, theta) or std::out_of_range
  // (community ids).
  PlantedPartition(Span<int64_t> community, Span<double> theta, int64_t num_communities,
                   double intra_fraction, uint64_t seed);

  int64_t num_nodes() const { return static_cast<int64_t>(members_.size()); }
  int64_t num_communities() const { return static_cast<int64_t>(member_offset_.size()) - 1; }

  // Writes edges [first, first + src.size) of the stream; num_threads <= 0
  // uses the OpenMP default.
  void generate(int64_t first, MutSpan<NodeId> src, MutSpan<NodeId> dst,
                int num_threads = 0) const;

 private:
  // Nodes are handled by their position in `members_` (grouped by community),
  // so the community of a position is a search over the C + 1 offsets.
  uint32_t community_of(uint64_t pos) const;
  // Community that attempt `t` of a dst draw targets, for src community c.
  uint32_t target_community(uint64_t t, uint32_t c, bool intra) const;
  // Position drawn inside community c by the alias table of its members.
  uint64_t draw_in_community(uint32_t c, uint64_t r_index, uint64_t r_coin) const;

  uint64_t key_;
  double intra_fraction_;
  std::vector<int64_t> member_offset_;   // community c owns positions [off[c], off[c+1])
  std::vector<uint32_t> members_;        // position -> node, grouped by community
  std::vector<uint64_t> global_alias_;   // over all positions: (threshold << 32) | alias
  std::vector<uint64_t> member_alias_;   // per-community alias tables over local positions
  std::vector<double> community_cum_;    // cumulative community weights, size C + 1
};

// Class-conditional Gaussian features: for rows r in [start_row, start_row +
// out.size / num_features), out[r - start_row, f] = centroids[labels[r], f] +
// noise * z(r, f) where z is a standard normal drawn from counters keyed by
// (seed, r), so a row does not depend on which chunk writes it. `labels` holds
// every node's class; `centroids` is num_classes x num_features, row-major.
// Throws std::invalid_argument (sizes) or std::out_of_range (rows, labels).
void fill_features(Span<float> centroids, int64_t num_classes, int64_t num_features,
                   Span<int64_t> labels, int64_t start_row, uint64_t seed, double noise,
                   MutSpan<float> out, int num_threads = 0);

}  // namespace gnncore
