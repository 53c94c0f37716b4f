// GREM — Greedy plus Refinement for Edge-cut Minimization (ALGORITHMS.md §1,
// thesis §4.1 Alg. 4–5): one streaming bisection over a chunked edge file,
// optional restreaming refinement passes, and the split of the edge file into
// one file per side for the next recursion level. The recursion and the seed
// of the first chunk are driven from Python (gnncore/partition/grem.py).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/edge_file.h"
#include "types.h"

namespace gnncore {

// A read-only array of integers in one of two widths, `Narrow` or int64, read
// as int64: the arrays Python hands over stay in their own width.
template <typename Narrow>
struct WidthSpan {
  const Narrow* narrow = nullptr;
  const int64_t* wide = nullptr;
  size_t size = 0;

  static WidthSpan of(Span<Narrow> s) { return {s.data, nullptr, s.size}; }
  static WidthSpan of(Span<int64_t> s) { return {nullptr, s.data, s.size}; }
  int64_t operator[](size_t i) const {
    return narrow ? static_cast<int64_t>(narrow[i]) : wide[i];
  }

  struct iterator {
    const WidthSpan* span;
    size_t i;
    int64_t operator*() const { return (*span)[i]; }
    iterator& operator++() {
      ++i;
      return *this;
    }
    bool operator!=(const iterator& other) const { return i != other.i; }
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size}; }
};

struct BisectConfig {
  NodeId num_nodes = 0;        // id space: the whole graph's node count
  int64_t chunk_rows = 1;      // edges per chunk (fixed across recursion levels)
  int64_t capacity[2] = {0, 0};  // P of each side: nodes it may hold at most
  int64_t weight[2] = {1, 1};    // target shares (final parts q0 : q1 each side will hold)
  bool refine = true;          // GREM (true) or streaming greedy with fixed labels (false)
  int passes = 0;              // restreaming refinement passes after the GREM pass
  std::string out_path[2];     // per-side edge files to write ("" = none)
};

// A sub-problem's nodes: the ids in `list` (distinct, in [0, num_nodes)), or,
// when `all`, every id in [0, num_nodes) in increasing order (`list` empty):
// the recursion numbers each sub-problem's nodes 0..n-1, so its arrays are
// sized by the sub-problem, not by the whole graph.
struct Members {
  WidthSpan<int32_t> list;
  bool all = false;
};

struct BisectResult {
  std::vector<int8_t> side;           // side of each member (in the order listed)
  int64_t sizes[2] = {0, 0};
  int64_t rows_written[2] = {0, 0};
  int64_t num_chunks = 0;
  int64_t first_chunk_nodes = 0;
  int64_t isolated = 0;               // members never seen in any chunk
  int64_t reassigned = 0;             // label changes during the streaming pass
  std::vector<int64_t> moves;         // nodes moved by each restreaming pass run
  double seconds_grem = 0;            // wall time of the GREM pass (and isolated nodes)
  std::vector<double> seconds_passes; // wall time of each restreaming pass run
  double seconds_split = 0;           // wall time of the split into per-side files
};

// Runs one bisection of the sub-problem whose nodes are `members` and whose
// edges, in stream order, are the rows of `edges` (both endpoints must be
// members). The first chunk's nodes get the
// labels `seed_sides[i]` for `seed_nodes[i]` (exactly the nodes of the first
// chunk, each once). The arrays come in their caller's width (int32 ids and
// int8 sides for graphs whose ids fit, no widened copies). Throws
// std::invalid_argument / std::out_of_range on bad input and std::runtime_error
// on I/O errors.
//
// The per-side edge files hold each side's own numbering: a node's id there is
// its rank among the members of its side in increasing id order (for members
// listed in increasing order, its index in the side's member list), so the
// next level's bisections work in ids 0..n-1 of their own sub-problem.
//
// Memory: O(num_nodes) arrays (during the GREM pass each node's state in one
// packed entry: running estimates, 16 B, chunk-local id, the id width, side,
// 1 B; then the sides, 1 B, and the refinement passes' side-and-gain words, 4 B
// below 2^30 rows; during the split each node's new id and side in one word of
// the id width) plus one chunk: its rows and adjacency (2 · 2 ids per row), the
// next chunk's rows (read on a thread meanwhile: 2 ids per row) and per chunk
// node its id, offset and side.
BisectResult grem_bisect(const EdgeFile& edges, const BisectConfig& config,
                         const Members& members, WidthSpan<int32_t> seed_nodes,
                         WidthSpan<int8_t> seed_sides);

// Rows [begin, begin + count) of `edges` as (u0, v0, u1, v1, ...); fewer at the end.
std::vector<NodeId> read_edge_rows(const EdgeFile& edges, int64_t begin, int64_t count);
// The same rows in the file's own id width (Id: int32_t for int32 files,
// int64_t for int64 ones), read straight into the result.
template <typename Id>
std::vector<Id> read_edge_rows_raw(const EdgeFile& edges, int64_t begin, int64_t count);

// A chunk's graph over local ids, what the first-chunk seeds work on. Id is
// the width of the pairs given (int32 pairs: int32 nodes and local pairs).
template <typename Id>
struct ChunkLocal {
  std::vector<Id> nodes;        // global id of each local node
  std::vector<Id> local;        // the pairs over local ids (u0, v0, u1, v1, ...)
  std::vector<int64_t> indptr;  // symmetric CSR (empty unless asked for)
  std::vector<int64_t> indices;
};

// Renumbers the pairs `pairs` (u0, v0, ...; ids in [0, num_nodes)) to local
// ids 0..k-1: by first appearance (row by row, u before v) when
// `first_appearance`, else by increasing global id. Scratch: one O(num_nodes)
// array. With `csr`, also the symmetric CSR over the local ids, each row
// sorted by neighbour id (what METIS is given; the same as build_csr).
// Id: int32_t or int64_t.
template <typename Id>
ChunkLocal<Id> chunk_local(Span<Id> pairs, NodeId num_nodes, bool first_appearance, bool csr);

// The symmetric CSR of `local` pairs (int32_t or int64_t) over `n` local ids,
// rows sorted by neighbour id.
template <typename Id>
void chunk_csr(Span<Id> local, int64_t n, std::vector<int64_t>& indptr,
               std::vector<int64_t>& indices);

// The cluster graph of seed `clusters`, counted in one pass over `edges`,
// `chunk_rows` rows at a time: for every row whose endpoints both have a
// cluster (`cluster[x]` in [0, k); -1: none) in two different clusters a, b,
// one count for the key min(a, b) · k + max(a, b). Returns the distinct keys in
// increasing order with their counts; `internal` receives the rows inside one
// cluster. Memory: the distinct keys plus a buffer of at most
// max(buffer_keys, keys) raw keys, sorted and merged when full.
struct ClusterEdges {
  std::vector<int64_t> keys;
  std::vector<int64_t> counts;
  int64_t internal = 0;
};
ClusterEdges cluster_edges(const EdgeFile& edges, Span<int32_t> cluster, int64_t k,
                           int64_t chunk_rows, int64_t buffer_keys = int64_t{1} << 20);

// Majority labelling of seed `clusters`: in each of at most `rounds`
// synchronous rounds, every node x with side[x] < 0 counts its neighbours
// (over the pairs `local`, u0, v0, ...) labelled 0 and 1 in the previous
// round and takes the side with more of them (ties: stays unlabelled). Stops
// early when a round labels nothing. `side` (values -1, 0, 1) is updated.
// Id (the pairs' width): int32_t or int64_t; Side: int8_t or int64_t.
template <typename Id, typename Side>
void majority_rounds(Span<Id> local, MutSpan<Side> side, int rounds);

// The capacity repair's score of each of the n = sides.size local nodes of a
// chunk: its chunk neighbours on its own side minus those on the other side,
// over the pairs `local` (u0, v0, ...; Id int32_t or int64_t). O(n) memory.
template <typename Id>
std::vector<int64_t> side_scores(Span<Id> local, Span<int8_t> sides);

// Trees hanging off a graph (symmetric CSR, no self-loops or repeated
// neighbours): peels nodes of degree 1 until none is left (the 2-core stays)
// and returns root[x]: x for a node that stays, else the node that stays and
// whose hanging tree holds x (a tree component keeps one node, its last
// peeled). Keeping a tree on its root's side cuts none of its edges, so a
// partitioner can work on the remaining nodes, weighted by their tree sizes.
// A node is not peeled when its tree and its parent's would together hold
// more than `max_weight` nodes (a partitioner could not balance heavier ones).
std::vector<int64_t> tree_roots(Span<int64_t> indptr, Span<int64_t> indices,
                                int64_t max_weight);

// Linear Deterministic Greedy (Stanton & Kliot 2012) bisection of a small graph
// given as a symmetric CSR, nodes streamed in id order: v goes to
// argmax_s |N(v) ∩ side_s| · (1 − |side_s| / capacity_s) among sides with room;
// ties go to the side less full relative to `weight`, then side 0.
std::vector<int64_t> ldg_bisect(Span<int64_t> indptr, Span<int64_t> indices,
                                const int64_t capacity[2], const int64_t weight[2]);

}  // namespace gnncore
