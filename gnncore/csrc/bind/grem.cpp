// Bindings for GREM: one streaming bisection, chunk reading and the LDG seed.
// Structured options (EdgeFileSpec, GremBisectOptions) in, typed results out.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>

#include "bind/common.h"
#include "partition/grem.h"
#include "partition/kway_refine.h"

namespace gnncore::bind {

// The options of one GREM bisection; validate() runs on construction and on every use.
struct GremBisectOptions {
  int64_t num_nodes = 0;
  int64_t chunk_rows = 1;
  std::array<int64_t, 2> capacities{0, 0};
  std::array<int64_t, 2> weights{1, 1};
  bool refine = true;
  int64_t passes = 0;
  std::array<std::string, 2> out_paths;

  void validate() const {
    static const char* cls = "GremBisectOptions";
    check_field(num_nodes >= 0, cls, "num_nodes", ">= 0", num_nodes);
    check_field(chunk_rows >= 1, cls, "chunk_rows", ">= 1", chunk_rows);
    for (int s = 0; s < 2; ++s) {
      const std::string i = "[" + std::to_string(s) + "]";
      check_field(capacities[s] >= 0, cls, "capacities" + i, ">= 0", capacities[s]);
      check_field(weights[s] >= 1, cls, "weights" + i, ">= 1", weights[s]);
    }
    check_field(passes >= 0 && passes <= INT_MAX, cls, "passes", "in [0, 2**31)", passes);
  }

  BisectConfig config() const {
    validate();
    BisectConfig c;
    c.num_nodes = num_nodes;
    c.chunk_rows = chunk_rows;
    c.refine = refine;
    c.passes = static_cast<int>(passes);
    for (int s = 0; s < 2; ++s) {
      c.capacity[s] = capacities[s];
      c.weight[s] = weights[s];
      c.out_path[s] = out_paths[s];
    }
    return c;
  }
};

// What one bisection did, with numpy arrays and plain numbers.
struct GremBisectResult {
  OutArray<int8_t> side;
  std::array<int64_t, 2> sizes{0, 0};
  std::array<int64_t, 2> rows_written{0, 0};
  int64_t num_chunks = 0;
  int64_t first_chunk_nodes = 0;
  int64_t isolated = 0;
  int64_t reassigned = 0;
  std::vector<int64_t> moves;
  double seconds_grem = 0;
  std::vector<double> seconds_passes;
  double seconds_split = 0;
};

// A chunk over local ids (grem_chunk_local); nodes and local in the pairs' width.
struct GremChunkLocal {
  nb::object nodes, local;
  OutArray<int64_t> indptr, indices;
};

template <typename Id>
GremChunkLocal chunk_local_numpy(InArray<Id> pairs, NodeId num_nodes, bool first_appearance,
                                 bool csr) {
  ChunkLocal<Id> c;
  {
    nb::gil_scoped_release release;
    c = chunk_local(span_of(pairs), num_nodes, first_appearance, csr);
  }
  return GremChunkLocal{nb::cast(to_numpy(std::move(c.nodes))),
                        nb::cast(to_numpy(std::move(c.local))), to_numpy(std::move(c.indptr)),
                        to_numpy(std::move(c.indices))};
}

template <typename Id>
ArrayPair<int64_t> chunk_csr_numpy(InArray<Id> local, int64_t n) {
  std::vector<int64_t> indptr, indices;
  {
    nb::gil_scoped_release release;
    chunk_csr(span_of(local), n, indptr, indices);
  }
  return ArrayPair<int64_t>(to_numpy(std::move(indptr)), to_numpy(std::move(indices)));
}

template <typename Id, typename Side>
void majority_rounds_numpy(InArray<Id> local,
                           nb::ndarray<Side, nb::ndim<1>, nb::c_contig, nb::device::cpu> side,
                           int rounds) {
  MutSpan<Side> out{side.data(), side.shape(0)};
  nb::gil_scoped_release release;
  majority_rounds(span_of(local), out, rounds);
}

template <typename Id, typename Label>
std::tuple<int64_t, int64_t> kway_lp_block_numpy(
    InArray<int64_t> indptr, InArray<Id> indices, int64_t first_row,
    nb::ndarray<Label, nb::ndim<1>, nb::c_contig, nb::device::cpu> labels,
    nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> sizes, int64_t cap) {
  MutSpan<Label> l{labels.data(), labels.shape(0)};
  MutSpan<int64_t> s{sizes.data(), sizes.shape(0)};
  KwayBlockStats stats;
  {
    nb::gil_scoped_release release;
    stats = kway_lp_block(span_of(indptr), span_of(indices), first_row, l, s, cap);
  }
  return {stats.moves, stats.gain};
}

using MutArray64 = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

inline MutSpan<int64_t> mut_span(MutArray64& a) { return {a.data(), a.shape(0)}; }

std::tuple<int64_t, int64_t> kway_lp_weighted_numpy(InArray<int64_t> indptr,
                                                    InArray<int64_t> indices,
                                                    InArray<int64_t> edge_weight,
                                                    InArray<int64_t> node_weight,
                                                    MutArray64 labels, MutArray64 sizes,
                                                    int64_t cap) {
  MutSpan<int64_t> l = mut_span(labels), s = mut_span(sizes);
  KwayBlockStats stats;
  {
    nb::gil_scoped_release release;
    stats = kway_lp_sweep(span_of(indptr), span_of(indices), span_of(edge_weight),
                          span_of(node_weight), 0, l, s, cap);
  }
  return {stats.moves, stats.gain};
}

template <typename Id>
int64_t kway_cluster_block_numpy(InArray<int64_t> indptr, InArray<Id> indices, int64_t first_row,
                                 InArray<int64_t> labels, MutArray64 cluster, MutArray64 weight,
                                 int64_t max_weight, MutArray64 scratch) {
  MutSpan<int64_t> c = mut_span(cluster), w = mut_span(weight), z = mut_span(scratch);
  nb::gil_scoped_release release;
  return kway_cluster_block(span_of(indptr), span_of(indices), first_row, span_of(labels), c, w,
                            max_weight, z);
}

template <typename Id>
OutArray<int64_t> side_scores_numpy(InArray<Id> local, InArray<int8_t> sides) {
  std::vector<int64_t> score;
  {
    nb::gil_scoped_release release;
    score = side_scores(span_of(local), span_of(sides));
  }
  return to_numpy(std::move(score));
}

template <typename Id>
nb::object read_edges_numpy(const EdgeFile& file, int64_t begin, int64_t count) {
  std::vector<Id> pairs;
  {
    nb::gil_scoped_release release;
    pairs = read_edge_rows_raw<Id>(file, begin, count);
  }
  return nb::cast(to_numpy(std::move(pairs)));
}

// The cluster graph of seed ``clusters`` (grem_cluster_edges).
struct GremClusterEdges {
  OutArray<int64_t> keys, counts;
  int64_t internal = 0;
};

static EdgeFile edge_file(const std::string& path, int64_t offset, bool int64, int64_t rows) {
  check_field(offset >= 0, "EdgeFileSpec", "offset", ">= 0", offset);
  check_field(rows >= 0, "EdgeFileSpec", "rows", ">= 0", rows);
  return EdgeFile{path, offset, int64, rows};
}

static void bind_grem_types(nb::module_& m) {
  nb::class_<EdgeFile>(m, "EdgeFileSpec",
                       R"doc(Where the rows of a binary edge file lie (read-only once built).

The file holds ``rows`` rows of two little-endian node ids, int64 when
``int64`` else int32, starting at byte ``offset`` (a ``.npy`` file's data
offset, or 0 for raw files).)doc")
      .def(
          "__init__",
          [](EdgeFile* self, const std::string& path, int64_t offset, bool int64, int64_t rows) {
            new (self) EdgeFile(edge_file(path, offset, int64, rows));
          },
          nb::arg("path"), nb::kw_only(), nb::arg("offset"), nb::arg("int64"), nb::arg("rows"),
          "Raises ``ValueError`` naming the field for a negative ``offset`` or ``rows``.")
      .def_ro("path", &EdgeFile::path, "The file.")
      .def_ro("offset", &EdgeFile::offset, "Byte offset of row 0.")
      .def_ro("int64", &EdgeFile::int64, "Id width: int64 when true, else int32.")
      .def_ro("rows", &EdgeFile::rows, "Number of ``(u, v)`` rows.")
      .def("__repr__", [](const EdgeFile& f) {
        return "EdgeFileSpec(" + nb::cast<std::string>(nb::repr(nb::str(f.path.c_str()))) +
               ", offset=" + std::to_string(f.offset) + ", int64=" +
               (f.int64 ? "True" : "False") + ", rows=" + std::to_string(f.rows) + ")";
      });

  nb::class_<GremBisectOptions> options(m, "GremBisectOptions",
                                R"doc(Options of one GREM bisection (``grem_bisect``).

Checked when built and again by every call that uses them: a bad value raises
``ValueError`` naming the field, e.g. ``GremBisectOptions.chunk_rows must be
>= 1, got 0``.)doc");
  options
      .def(
          "__init__",
          [](GremBisectOptions* self, int64_t num_nodes, int64_t chunk_rows,
             TupleOf<int64_t, 2> capacities, TupleOf<int64_t, 2> weights, bool refine,
             int64_t passes, TupleOf<std::string, 2> out_paths) {
            GremBisectOptions o{num_nodes,
                                chunk_rows,
                                as_array<int64_t>(capacities),
                                as_array<int64_t>(weights),
                                refine,
                                passes,
                                as_array<std::string>(out_paths)};
            o.validate();
            new (self) GremBisectOptions(std::move(o));
          },
          nb::kw_only(), nb::arg("num_nodes"), nb::arg("chunk_rows"), nb::arg("capacities"),
          nb::arg("weights") = std::make_tuple(int64_t{1}, int64_t{1}),
          nb::arg("refine") = true, nb::arg("passes") = 0,
          nb::arg("out_paths") = std::make_tuple(std::string(), std::string()))
      .def_rw("num_nodes", &GremBisectOptions::num_nodes,
              "Id space: the whole graph's node count (>= 0).")
      .def_rw("chunk_rows", &GremBisectOptions::chunk_rows,
              "Edges per chunk, fixed across recursion levels (>= 1).")
      .def_rw("refine", &GremBisectOptions::refine,
              "GREM's averaging refinement (True) or streaming greedy: a node keeps its "
              "first label (False).")
      .def_rw("passes", &GremBisectOptions::passes,
              "Restreaming refinement passes after the GREM pass (>= 0).")
      .def("__repr__", [](const GremBisectOptions& o) {
        return "GremBisectOptions(num_nodes=" + std::to_string(o.num_nodes) +
               ", chunk_rows=" + std::to_string(o.chunk_rows) + ", capacities=(" +
               std::to_string(o.capacities[0]) + ", " + std::to_string(o.capacities[1]) +
               "), weights=(" + std::to_string(o.weights[0]) + ", " +
               std::to_string(o.weights[1]) + "), refine=" + (o.refine ? "True" : "False") +
               ", passes=" + std::to_string(o.passes) + ", out_paths=" +
               nb::cast<std::string>(nb::repr(nb::cast(as_tuple(o.out_paths)))) + ")";
      });
  def_tuple_rw(options, "capacities", &GremBisectOptions::capacities,
               "``(P0, P1)``: the most nodes each side may hold (>= 0).");
  def_tuple_rw(options, "weights", &GremBisectOptions::weights,
               "``(w0, w1)``: target shares used when no neighbour count decides (>= 1).");
  def_tuple_rw(options, "out_paths", &GremBisectOptions::out_paths,
               "Per-side edge files for the edges inside each side (\"\" = none).");

  nb::class_<GremBisectResult> result(m, "GremBisectResult",
                                      "What one GREM bisection (``grem_bisect``) did.");
  def_tuple_ro(result, "sizes", &GremBisectResult::sizes, "Nodes on side 0 and side 1.");
  def_tuple_ro(result, "rows_written", &GremBisectResult::rows_written,
               "Rows written to each side's edge file (0 where none was asked for).");
  result
      .def_ro("side", &GremBisectResult::side, nb::rv_policy::reference,
              "int8 side (0 or 1) of each member, aligned "
              "with ``members`` (with every id for ``None``).")
      .def_ro("num_chunks", &GremBisectResult::num_chunks, "Chunks streamed.")
      .def_ro("first_chunk_nodes", &GremBisectResult::first_chunk_nodes,
              "Nodes of the first (seeded) chunk.")
      .def_ro("isolated", &GremBisectResult::isolated, "Members never seen in any chunk.")
      .def_ro("reassigned", &GremBisectResult::reassigned,
              "Label changes during the streaming pass.")
      .def_ro("moves", &GremBisectResult::moves, "Nodes moved by each refinement pass run.")
      .def_ro("seconds_grem", &GremBisectResult::seconds_grem,
              "Wall time of the GREM pass (and the isolated nodes).")
      .def_ro("seconds_passes", &GremBisectResult::seconds_passes,
              "Wall time of each restreaming pass run.")
      .def_ro("seconds_split", &GremBisectResult::seconds_split,
              "Wall time of the split into per-side edge files.");

  nb::class_<GremChunkLocal>(m, "GremChunkLocal", "A chunk's graph over local ids.")
      .def_ro("nodes", &GremChunkLocal::nodes, nb::rv_policy::reference,
              "Global id of each local id (the width of the pairs given).")
      .def_ro("local", &GremChunkLocal::local, nb::rv_policy::reference,
              "The pairs renumbered to local ids (flat, the width of the pairs given).")
      .def_ro("indptr", &GremChunkLocal::indptr, nb::rv_policy::reference,
              "Symmetric CSR offsets over local ids (empty unless asked for).")
      .def_ro("indices", &GremChunkLocal::indices, nb::rv_policy::reference,
              "Symmetric CSR neighbours, each row sorted (empty unless asked for).");

  nb::class_<GremClusterEdges>(m, "GremClusterEdges",
                               "The cluster graph of GREM's ``clusters`` seed.")
      .def_ro("keys", &GremClusterEdges::keys, nb::rv_policy::reference,
              "Distinct keys ``min(a, b) · k + max(a, b)``, increasing (int64).")
      .def_ro("counts", &GremClusterEdges::counts, nb::rv_policy::reference,
              "Rows counted for each key (int64).")
      .def_ro("internal", &GremClusterEdges::internal, "Rows inside one cluster.");
}

template <typename Ids, typename Sides>
GremBisectResult bisect_numpy(const EdgeFile& file, std::optional<InArray<Ids>> members,
                              InArray<Ids> seed_nodes, InArray<Sides> seed_sides,
                              const GremBisectOptions& options) {
  const BisectConfig config = options.config();
  Members sub;
  if (members) sub.list = WidthSpan<int32_t>::of(span_of(*members));
  else sub.all = true;
  BisectResult r;
  {
    nb::gil_scoped_release release;
    r = grem_bisect(file, config, sub,
                    WidthSpan<int32_t>::of(span_of(seed_nodes)),
                    WidthSpan<int8_t>::of(span_of(seed_sides)));
  }
  GremBisectResult out;
  out.side = to_numpy(std::move(r.side));
  out.sizes = {r.sizes[0], r.sizes[1]};
  out.rows_written = {r.rows_written[0], r.rows_written[1]};
  out.num_chunks = r.num_chunks;
  out.first_chunk_nodes = r.first_chunk_nodes;
  out.isolated = r.isolated;
  out.reassigned = r.reassigned;
  out.moves = std::move(r.moves);
  out.seconds_grem = r.seconds_grem;
  out.seconds_passes = std::move(r.seconds_passes);
  out.seconds_split = r.seconds_split;
  return out;
}

void bind_grem(nb::module_& m) {
  bind_grem_types(m);
  m.def(
      "grem_read_edges",
      [](const EdgeFile& file, int64_t begin, int64_t count) {
        return file.int64 ? read_edges_numpy<int64_t>(file, begin, count)
                          : read_edges_numpy<int32_t>(file, begin, count);
      },
      nb::arg("file"), nb::arg("begin"), nb::arg("count"),
      R"doc(Rows ``[begin, begin + count)`` of the edge file ``file`` as flat
``(u0, v0, u1, v1, ...)`` in the file's id width, int32 or int64 (fewer rows
at the end of the file). Releases the GIL.)doc");

  m.def("grem_bisect", &bisect_numpy<int64_t, int64_t>, nb::arg("file"),
        nb::arg("members").none(), nb::arg("seed_nodes"), nb::arg("seed_sides"),
        nb::arg("options"), R"doc(One GREM bisection (ALGORITHMS.md §1) streamed over the edge file ``file``.

``members`` (int64, distinct ids in ``[0, options.num_nodes)``) are the
sub-problem's nodes, or ``None`` for every id in ``[0, options.num_nodes)``;
every row of the file must join two members.
``seed_nodes`` / ``seed_sides`` label exactly the nodes of the first
``options.chunk_rows`` rows. Side ``s`` holds at most ``options.capacities[s]``
nodes; ``options.weights`` are the target shares used when no neighbour count
decides. ``options.passes`` restreaming refinement passes follow. Edges with
both endpoints on side ``s`` are written, in stream order, to
``options.out_paths[s]`` (raw rows of the input's id width) unless it is empty,
in side ``s``'s own ids: a node's rank among the side's members in increasing
id order.

Returns a ``GremBisectResult``. Releases the GIL.)doc");
  m.def("grem_bisect", &bisect_numpy<int32_t, int8_t>, nb::arg("file"),
        nb::arg("members").none(), nb::arg("seed_nodes"), nb::arg("seed_sides"),
        nb::arg("options"),
        "The same with int32 ``members`` and ``seed_nodes`` and int8 ``seed_sides``, "
        "read in their own width (no int64 copies).");

  m.def("grem_chunk_local", &chunk_local_numpy<int32_t>, nb::arg("pairs"), nb::arg("num_nodes"),
        nb::kw_only(), nb::arg("first_appearance"), nb::arg("csr"), R"doc(A chunk's graph over local ids, as a ``GremChunkLocal``.

``pairs`` is the chunk as flat int32 or int64 ``(u0, v0, u1, v1, ...)`` with ids in
``[0, num_nodes)``. Local ids follow first appearance (row by row, ``u``
before ``v``) when ``first_appearance``, else increasing global id; ``nodes``
maps them back and ``local`` is ``pairs`` renumbered (flat), both in the
width of ``pairs``. With ``csr``,
``indptr``/``indices`` are the symmetric CSR over local ids, each row sorted
by neighbour id, else empty. Releases the GIL.)doc");
  m.def("grem_chunk_local", &chunk_local_numpy<int64_t>, nb::arg("pairs"), nb::arg("num_nodes"),
        nb::kw_only(), nb::arg("first_appearance"), nb::arg("csr"),
        "The same with int64 ``pairs`` (int64 ``nodes`` and ``local``).");

  m.def("grem_chunk_csr", &chunk_csr_numpy<int32_t>, nb::arg("local"), nb::arg("n"), R"doc(The symmetric CSR ``(indptr, indices)``, int64, of flat local pairs (int32
or int64) over ``n``
ids, each row sorted by neighbour id. Releases the GIL.)doc");
  m.def("grem_chunk_csr", &chunk_csr_numpy<int64_t>, nb::arg("local"), nb::arg("n"),
        "The same over int64 local pairs.");

  m.def(
      "grem_cluster_edges",
      [](const EdgeFile& file, InArray<int32_t> cluster, int64_t k, int64_t chunk_rows,
         int64_t buffer_keys) {
        ClusterEdges c;
        {
          nb::gil_scoped_release release;
          c = cluster_edges(file, span_of(cluster), k, chunk_rows, buffer_keys);
        }
        return GremClusterEdges{to_numpy(std::move(c.keys)), to_numpy(std::move(c.counts)),
                                c.internal};
      },
      nb::arg("file"), nb::arg("cluster"), nb::arg("k"), nb::kw_only(), nb::arg("chunk_rows"),
      nb::arg("buffer_keys") = int64_t{1} << 20,
      R"doc(The cluster graph of GREM's ``clusters`` seed in one pass over the edge
file ``file``, ``chunk_rows`` rows at a time, as a ``GremClusterEdges``.

``cluster`` (int32, one entry per node, -1 for none) assigns clusters in
``[0, k)``. Rows joining two clustered nodes of different clusters ``a, b``
count towards the key ``min(a, b) · k + max(a, b)``; ``keys`` are the distinct
keys in increasing order, ``counts`` their counts and ``internal`` the rows
inside one cluster. Raw keys are buffered up to ``max(buffer_keys, distinct
keys)``, then sorted and merged. Releases the GIL.)doc");

  m.def("grem_majority_rounds", &majority_rounds_numpy<int32_t, int8_t>, nb::arg("local"),
        nb::arg("side").noconvert(), nb::arg("rounds"), R"doc(Majority labelling of GREM's ``clusters`` seed, in place on ``side``
(int8 or int64, -1 unlabelled, 0 or 1): in each of at most ``rounds`` synchronous
rounds, every unlabelled node takes the side held by more of its neighbours
over the flat pairs ``local`` (int32 or int64) (ties stay unlabelled); stops when a round labels
nothing. Releases the GIL.)doc");
  m.def("grem_majority_rounds", &majority_rounds_numpy<int64_t, int8_t>, nb::arg("local"),
        nb::arg("side").noconvert(), nb::arg("rounds"), "The same over int64 pairs.");
  m.def("grem_majority_rounds", &majority_rounds_numpy<int32_t, int64_t>, nb::arg("local"),
        nb::arg("side").noconvert(), nb::arg("rounds"), "The same with int64 sides.");
  m.def("grem_majority_rounds", &majority_rounds_numpy<int64_t, int64_t>, nb::arg("local"),
        nb::arg("side").noconvert(), nb::arg("rounds"),
        "The same over int64 pairs with int64 sides.");

  m.def("grem_side_scores", &side_scores_numpy<int32_t>, nb::arg("local"), nb::arg("sides"),
        R"doc(The capacity repair's score of each local node of a chunk (int64): its
neighbours over the flat local pairs ``local`` (int32 or int64) on its own side
(``sides``, int8 0/1 per node) minus those on the other side. Releases the GIL.)doc");
  m.def("grem_side_scores", &side_scores_numpy<int64_t>, nb::arg("local"), nb::arg("sides"),
        "The same over int64 local pairs.");

  // one overload per (indices, labels) width; the first carries the docstring
  auto def_lp_block = [&m](auto fn, const char* doc) {
    m.def("grem_kway_lp_block", fn, nb::arg("indptr"), nb::arg("indices"), nb::arg("first_row"),
          nb::arg("labels").noconvert(), nb::arg("sizes").noconvert(), nb::arg("cap"), doc);
  };
  def_lp_block(&kway_lp_block_numpy<int32_t, int64_t>,
               R"doc(One size-constrained label-propagation sweep of GREM's final k-way
refinement over the CSR rows ``[first_row, first_row + len(indptr) - 1)``:
``indptr`` (int64 offsets into ``indices``, the first one subtracted) and
``indices`` (int32 or int64 global ids). In place on ``labels`` (every node's
part: int64, or int8/int16 when they hold every part, which keeps the random
reads of the neighbours' labels in 1 or 2 bytes a node) and ``sizes`` (int64,
nodes per part): each node in row order moves to the part with the most of its
neighbours among those below ``cap``, when that beats its own part (or ties it
and is at least two nodes lighter). Returns ``(moves, gain)``, gain the cut
edges removed. Releases the GIL.)doc");
  def_lp_block(&kway_lp_block_numpy<int64_t, int64_t>, "The same over int64 indices.");
  def_lp_block(&kway_lp_block_numpy<int32_t, int8_t>, "The same over int8 labels.");
  def_lp_block(&kway_lp_block_numpy<int64_t, int8_t>, "The same over int64 indices, int8 labels.");
  def_lp_block(&kway_lp_block_numpy<int32_t, int16_t>, "The same over int16 labels.");
  def_lp_block(&kway_lp_block_numpy<int64_t, int16_t>,
               "The same over int64 indices, int16 labels.");

  m.def("grem_kway_lp_weighted", &kway_lp_weighted_numpy, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("edge_weight"), nb::arg("node_weight"), nb::arg("labels").noconvert(),
        nb::arg("sizes").noconvert(), nb::arg("cap"),
        R"doc(``grem_kway_lp_block`` over a whole weighted CSR (int64): the counts
weighed by ``edge_weight`` (one per index), the sizes by ``node_weight`` (one per
node); a node moves only where ``sizes[q] + node_weight[v] <= cap``. The coarse
level of GREM's final refinement (clusters and the edges between them). Returns
``(moves, gain)``. Releases the GIL.)doc");
  m.def(
      "grem_coarse_csr",
      [](InArray<int64_t> keys, InArray<int64_t> counts, int64_t k) {
        CoarseCsr c;
        {
          nb::gil_scoped_release release;
          c = coarse_csr(span_of(keys), span_of(counts), k);
        }
        return std::make_tuple(to_numpy(std::move(c.indptr)), to_numpy(std::move(c.heads)),
                               to_numpy(std::move(c.weights)));
      },
      nb::arg("keys"), nb::arg("counts"), nb::arg("k"),
      R"doc(The symmetric weighted CSR ``(indptr, heads, weights)`` (int64) of a
cluster graph given as pair keys ``a · k + b`` (``a < b``) and their counts:
row ``a`` holds ``b`` and row ``b`` holds ``a``, each with the pair's count. A
counting sort (32 B per pair out). Releases the GIL.)doc");
  m.def("grem_kway_cluster_block", &kway_cluster_block_numpy<int32_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("first_row"), nb::arg("labels"),
        nb::arg("cluster").noconvert(), nb::arg("weight").noconvert(), nb::arg("max_weight"),
        nb::arg("scratch").noconvert(),
        R"doc(One sweep of size-constrained label-propagation clustering inside the
parts ``labels`` (int64) over the CSR block ``indptr``/``indices`` (rows from
``first_row``): each node joins the cluster with most of its same-part
neighbours among those below ``max_weight`` nodes, when that beats its own.
In place on ``cluster`` and ``weight`` (int64, one per node id); ``scratch``
(int64 zeros, one per node) is left zero. Returns the moves. Releases the GIL.)doc");
  m.def("grem_kway_cluster_block", &kway_cluster_block_numpy<int64_t>, nb::arg("indptr"),
        nb::arg("indices"), nb::arg("first_row"), nb::arg("labels"),
        nb::arg("cluster").noconvert(), nb::arg("weight").noconvert(), nb::arg("max_weight"),
        nb::arg("scratch").noconvert(), "The same over int64 indices.");

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
