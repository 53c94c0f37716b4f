// A NeighborSample as the tuple the Python samplers read.
#pragma once
#include <nanobind/stl/vector.h>

#include <tuple>
#include <vector>

#include "bind/common.h"
#include "sampler/neighbor.h"

namespace gnncore::bind {

// ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``: four numpy
// arrays (moved, not copied) and two lists; needs the GIL.
// Typed ``tuple[NDArray[int64] x 4, list[int], list[int]]`` in the stubs.
using SampleTuple = std::tuple<OutArray<int64_t>, OutArray<int64_t>, OutArray<int64_t>,
                               OutArray<int64_t>, std::vector<int64_t>, std::vector<int64_t>>;

inline SampleTuple sample_tuple(NeighborSample&& s) {
  return SampleTuple(to_numpy(std::move(s.node)), to_numpy(std::move(s.row)),
                     to_numpy(std::move(s.col)), to_numpy(std::move(s.edge)),
                     std::move(s.num_sampled_nodes), std::move(s.num_sampled_edges));
}

}  // namespace gnncore::bind
