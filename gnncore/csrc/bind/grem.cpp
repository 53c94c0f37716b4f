// Bindings for GREM: one streaming bisection, chunk reading and the LDG seed.
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>

#include "bind/common.h"
#include "partition/grem.h"

namespace gnncore::bind {

static EdgeFile edge_file(const std::string& path, int64_t offset, bool int64, int64_t rows) {
  if (offset < 0) throw std::invalid_argument("offset must be non-negative");
  if (rows < 0) throw std::invalid_argument("rows must be non-negative");
  return EdgeFile{path, offset, int64, rows};
}

template <typename T>
static nb::list list_of(const std::vector<T>& v) {
  nb::list out;
  for (const T& x : v) out.append(x);
  return out;
}

void bind_grem(nb::module_& m) {
  m.def(
      "grem_read_edges",
      [](const std::string& path, int64_t offset, bool int64, int64_t rows, int64_t begin,
         int64_t count) {
        const EdgeFile file = edge_file(path, offset, int64, rows);
        std::vector<NodeId> pairs;
        {
          nb::gil_scoped_release release;
          pairs = read_edge_rows(file, begin, count);
        }
        return to_numpy(std::move(pairs));
      },
      nb::arg("path"), nb::arg("offset"), nb::arg("int64"), nb::arg("rows"), nb::arg("begin"),
      nb::arg("count"),
      R"doc(Rows ``[begin, begin + count)`` of a binary edge file as flat int64
``(u0, v0, u1, v1, ...)`` (fewer rows at the end of the file).

The file holds ``rows`` rows of two int32 (or int64 when ``int64``) ids starting
at byte ``offset``.)doc");

  m.def(
      "grem_bisect",
      [](const std::string& path, int64_t offset, bool int64, int64_t rows, NodeId num_nodes,
         InArray<NodeId> members, InArray<NodeId> seed_nodes, InArray<int64_t> seed_sides,
         int64_t chunk_rows, int64_t capacity0, int64_t capacity1, int64_t weight0,
         int64_t weight1, bool refine, int passes, const std::string& out0,
         const std::string& out1) {
        const EdgeFile file = edge_file(path, offset, int64, rows);
        BisectConfig config;
        config.num_nodes = num_nodes;
        config.chunk_rows = chunk_rows;
        config.capacity[0] = capacity0;
        config.capacity[1] = capacity1;
        config.weight[0] = weight0;
        config.weight[1] = weight1;
        config.refine = refine;
        config.passes = passes;
        config.out_path[0] = out0;
        config.out_path[1] = out1;
        BisectResult r;
        {
          nb::gil_scoped_release release;
          r = grem_bisect(file, config, span_of(members), span_of(seed_nodes),
                          span_of(seed_sides));
        }
        nb::dict out;
        out["side"] = to_numpy(std::move(r.side));
        out["sizes"] = nb::make_tuple(r.sizes[0], r.sizes[1]);
        out["rows_written"] = nb::make_tuple(r.rows_written[0], r.rows_written[1]);
        out["num_chunks"] = r.num_chunks;
        out["first_chunk_nodes"] = r.first_chunk_nodes;
        out["isolated"] = r.isolated;
        out["reassigned"] = r.reassigned;
        out["moves"] = list_of(r.moves);
        nb::dict seconds;
        seconds["grem"] = r.seconds_grem;
        seconds["passes"] = list_of(r.seconds_passes);
        seconds["split"] = r.seconds_split;
        out["seconds"] = seconds;
        return out;
      },
      nb::arg("path"), nb::arg("offset"), nb::arg("int64"), nb::arg("rows"),
      nb::arg("num_nodes"), nb::arg("members"), nb::arg("seed_nodes"), nb::arg("seed_sides"),
      nb::arg("chunk_rows"), nb::arg("capacity0"), nb::arg("capacity1"), nb::arg("weight0") = 1,
      nb::arg("weight1") = 1, nb::arg("refine") = true, nb::arg("passes") = 0,
      nb::arg("out0") = "", nb::arg("out1") = "",
      R"doc(One GREM bisection (ALGORITHMS.md §1) streamed over a binary edge file.

``members`` (int64, distinct ids in ``[0, num_nodes)``) are the sub-problem's
nodes; every row of the file must join two members. ``seed_nodes`` /
``seed_sides`` label exactly the nodes of the first ``chunk_rows`` rows. Side
``s`` holds at most ``capacity<s>`` nodes; ``weight0 : weight1`` are the target
shares used when no neighbour count decides. ``refine=False`` is streaming
greedy (a node keeps its first label). ``passes`` restreaming refinement
passes follow. Edges with both endpoints on side ``s`` are written, in stream
order, to ``out<s>`` (raw rows of the input's id width) unless it is empty.

Returns a dict: ``side`` (int8, aligned with ``members``), ``sizes``,
``rows_written``, ``num_chunks``, ``first_chunk_nodes``, ``isolated``,
``reassigned`` (label changes in the streaming pass), ``moves`` (nodes
moved by each refinement pass run) and ``seconds`` (wall time of each phase:
``grem``, ``passes`` (a list) and ``split``). Releases the GIL.)doc");

  m.def(
      "grem_chunk_local",
      [](InArray<NodeId> pairs, NodeId num_nodes, bool first_appearance, bool csr) {
        ChunkLocal c;
        {
          nb::gil_scoped_release release;
          c = chunk_local(span_of(pairs), num_nodes, first_appearance, csr);
        }
        return nb::make_tuple(to_numpy(std::move(c.nodes)), to_numpy(std::move(c.local)),
                              to_numpy(std::move(c.indptr)), to_numpy(std::move(c.indices)));
      },
      nb::arg("pairs"), nb::arg("num_nodes"), nb::arg("first_appearance"), nb::arg("csr"),
      R"doc(A chunk's graph over local ids: ``(nodes, local, indptr, indices)``.

``pairs`` is the chunk as flat int64 ``(u0, v0, u1, v1, ...)`` with ids in
``[0, num_nodes)``. Local ids follow first appearance (row by row, ``u``
before ``v``) when ``first_appearance``, else increasing global id; ``nodes``
maps them back and ``local`` is ``pairs`` renumbered (flat). With ``csr``,
``indptr``/``indices`` are the symmetric CSR over local ids, each row sorted
by neighbour id, else empty. Releases the GIL.)doc");

  m.def(
      "grem_chunk_csr",
      [](InArray<int64_t> local, int64_t n) {
        std::vector<int64_t> indptr, indices;
        {
          nb::gil_scoped_release release;
          chunk_csr(span_of(local), n, indptr, indices);
        }
        return nb::make_tuple(to_numpy(std::move(indptr)), to_numpy(std::move(indices)));
      },
      nb::arg("local"), nb::arg("n"),
      R"doc(The symmetric CSR ``(indptr, indices)`` of flat local pairs over ``n``
ids, each row sorted by neighbour id. Releases the GIL.)doc");

  m.def(
      "grem_cluster_edges",
      [](const std::string& path, int64_t offset, bool int64, int64_t rows,
         InArray<int32_t> cluster, int64_t k, int64_t chunk_rows, int64_t buffer_keys) {
        const EdgeFile file = edge_file(path, offset, int64, rows);
        ClusterEdges c;
        {
          nb::gil_scoped_release release;
          c = cluster_edges(file, span_of(cluster), k, chunk_rows, buffer_keys);
        }
        return nb::make_tuple(to_numpy(std::move(c.keys)), to_numpy(std::move(c.counts)),
                              c.internal);
      },
      nb::arg("path"), nb::arg("offset"), nb::arg("int64"), nb::arg("rows"),
      nb::arg("cluster"), nb::arg("k"), nb::arg("chunk_rows"),
      nb::arg("buffer_keys") = int64_t{1} << 20,
      R"doc(The cluster graph of GREM's ``clusters`` seed in one pass over an edge
file, ``chunk_rows`` rows at a time: ``(keys, counts, internal)``.

``cluster`` (int32, one entry per node, -1 for none) assigns clusters in
``[0, k)``. Rows joining two clustered nodes of different clusters ``a, b``
count towards the key ``min(a, b) · k + max(a, b)``; ``keys`` are the distinct
keys in increasing order, ``counts`` their counts and ``internal`` the rows
inside one cluster. Raw keys are buffered up to ``max(buffer_keys, distinct
keys)``, then sorted and merged. Releases the GIL.)doc");

  m.def(
      "grem_majority_rounds",
      [](InArray<int64_t> local, nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig,
                                              nb::device::cpu> side, int rounds) {
        MutSpan<int64_t> out{side.data(), side.shape(0)};
        nb::gil_scoped_release release;
        majority_rounds(span_of(local), out, rounds);
      },
      nb::arg("local"), nb::arg("side").noconvert(), nb::arg("rounds"),
      R"doc(Majority labelling of GREM's ``clusters`` seed, in place on ``side``
(int64, -1 unlabelled, 0 or 1): in each of at most ``rounds`` synchronous
rounds, every unlabelled node takes the side held by more of its neighbours
over the flat pairs ``local`` (ties stay unlabelled); stops when a round labels
nothing. Releases the GIL.)doc");

  m.def(
      "grem_tree_roots",
      [](InArray<int64_t> indptr, InArray<int64_t> indices, int64_t max_weight) {
        std::vector<int64_t> root;
        {
          nb::gil_scoped_release release;
          root = tree_roots(span_of(indptr), span_of(indices), max_weight);
        }
        return to_numpy(std::move(root));
      },
      nb::arg("indptr"), nb::arg("indices"), nb::arg("max_weight"),
      R"doc(Root of each node after peeling the trees hanging off a symmetric CSR
(int64, no self-loops or repeated neighbours): ``root[x] == x`` for the nodes
left (the 2-core, plus one node per tree component), else the node left whose
hanging tree holds ``x``. A node is not peeled when its tree and its parent's
would together exceed ``max_weight`` nodes. Releases the GIL.)doc");

  m.def(
      "ldg_bisect",
      [](InArray<int64_t> indptr, InArray<int64_t> indices, int64_t capacity0,
         int64_t capacity1, int64_t weight0, int64_t weight1) {
        const int64_t cap[2] = {capacity0, capacity1};
        const int64_t w[2] = {weight0, weight1};
        std::vector<int64_t> side;
        {
          nb::gil_scoped_release release;
          side = ldg_bisect(span_of(indptr), span_of(indices), cap, w);
        }
        return to_numpy(std::move(side));
      },
      nb::arg("indptr"), nb::arg("indices"), nb::arg("capacity0"), nb::arg("capacity1"),
      nb::arg("weight0") = 1, nb::arg("weight1") = 1,
      R"doc(Linear Deterministic Greedy bisection of a symmetric CSR (int64), nodes
streamed in id order: ``v`` goes to ``argmax_s |N(v) ∩ side_s| · (1 − |side_s| /
capacity_s)`` among sides with room (ties: the side less full relative to
``weight``, then side 0). Returns int64 sides.)doc");
}

}  // namespace gnncore::bind
