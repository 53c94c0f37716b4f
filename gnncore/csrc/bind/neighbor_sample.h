// A NeighborSample as the tuple the Python samplers read.
#pragma once
#include "bind/common.h"
#include "sampler/neighbor.h"

namespace gnncore::bind {

// ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``: four numpy
// arrays (moved, not copied) and two lists; needs the GIL.
inline nb::tuple sample_tuple(NeighborSample&& s) {
  nb::list nodes_per_hop = int_list(s.num_sampled_nodes);
  nb::list edges_per_hop = int_list(s.num_sampled_edges);
  return nb::make_tuple(to_numpy(std::move(s.node)), to_numpy(std::move(s.row)),
                        to_numpy(std::move(s.col)), to_numpy(std::move(s.edge)),
                        nodes_per_hop, edges_per_hop);
}

}  // namespace gnncore::bind
