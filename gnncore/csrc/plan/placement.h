// Placement kernels: feature caches across devices (Song & Jiang, ALGORITHMS.md
// §4 Rule 2) and HyDRA's degree-balanced greedy assignment (§3).
#pragma once
#include <cstdint>
#include <vector>

#include "types.h"

namespace gnncore {

// Row-major int64[devices, width], width = min(slots, N).
struct CacheLayout {
  std::vector<NodeId> nodes;
  int64_t devices = 0;
  int64_t width = 0;
};

// Algorithm 1 (corrected): every device starts with the `width` hottest nodes
// (p descending, ties by smaller id); then, from the coldest cached slot
// upwards, the devices other than the one with the largest cached sum (p_sum
// ascending, ties by smaller device index; the last keeps the old node) each
// replace that slot with the next hottest uncached node while its p exceeds
// alpha·p[old], until min(N, devices·width) distinct nodes are cached.
// Throws std::invalid_argument for devices < 1, slots < 0, alpha not finite or
// negative, or a p entry that is not finite or negative.
CacheLayout place_features(Span<double> p, int64_t devices, int64_t slots, double alpha);

// HyDRA's degree-balanced greedy: the nodes with skip[v] == 0 (all nodes when
// `skip` is empty), in descending degree order (ties: smaller id), are cut into
// consecutive groups of `group_size`; each group goes to the part with the
// smallest sum of degrees so far (ties: smaller part) and adds its degree sum
// to it. Skipped nodes get -1. Throws std::invalid_argument for parts < 1,
// group_size < 1, a negative degree or a skip mask of the wrong length.
std::vector<int64_t> degree_greedy_assign(Span<int64_t> degree, int64_t parts,
                                          int64_t group_size, Span<uint8_t> skip);

}  // namespace gnncore
