// Binding of the streaming pass of partition post-processing: the edge cut and
// the 1-hop halo bits of a group of parts, in one read of an edge file.
#include "bind/common.h"
#include "partition/postprocess_stream.h"

namespace gnncore::bind {

// What edge_pass found.
struct EdgePassResult {
  int64_t rows = 0;
  int64_t cut = 0;
  int64_t words = 0;
  OutArray<uint64_t> halo_bits;
};

void bind_postprocess_stream(nb::module_& m) {
  nb::class_<EdgePassResult>(m, "EdgePassResult", "What ``edge_pass`` found.")
      .def_ro("rows", &EdgePassResult::rows, "Edge rows read.")
      .def_ro("cut", &EdgePassResult::cut, "Rows whose endpoints lie in different parts.")
      .def_ro("words", &EdgePassResult::words, "uint64 words per part's halo bits: ceil(n / 64).")
      .def_ro("halo_bits", &EdgePassResult::halo_bits, nb::rv_policy::reference,
              "uint64[halo_count * words], part-major: node w is in the halo of part "
              "halo_first + k iff bit w % 64 of word k * words + w // 64 is set.");

  m.def(
      "edge_pass",
      [](const EdgeFile& file, InArray<int64_t> assignment, int64_t parts, int64_t halo_first,
         int64_t halo_count, int64_t chunk_rows) {
        EdgePass r;
        {
          nb::gil_scoped_release release;
          r = edge_pass(file, span_of(assignment), parts, halo_first, halo_count, chunk_rows);
        }
        return EdgePassResult{r.rows, r.cut, r.words, to_numpy(std::move(r.halo_bits))};
      },
      nb::arg("file"), nb::arg("assignment"), nb::arg("parts"), nb::kw_only(),
      nb::arg("halo_first") = 0, nb::arg("halo_count") = 0, nb::arg("chunk_rows") = 1 << 20,
      R"doc(One sequential read of the undirected edge rows of ``file`` (an
``EdgeFileSpec``), ``chunk_rows`` rows at a time in the file's id width:
counts the rows cut by ``assignment`` (int64[n], values in ``[0, parts)``)
and marks the 1-hop halo of parts ``[halo_first, halo_first + halo_count)``
(0 parts: the cut only). Memory: one chunk and ``halo_count · ceil(n / 64)``
words. Every id is checked against ``[0, n)`` (``IndexError`` naming the
row). Releases the GIL.)doc");
}

}  // namespace gnncore::bind
