// Bindings for the streaming integer edge-list reader (io/edge_text.h); reads release the GIL.
#include <optional>
#include <stdexcept>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bind/common.h"
#include "io/edge_text.h"

namespace gnncore::bind {

namespace {

using IdBuffer = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

char separator_of(const std::optional<std::string>& separator) {
  if (!separator) return io::kWhitespaceSeparator;
  if (separator->size() != 1 || !(*separator == "," || *separator == "\t" || *separator == " "))
    throw std::invalid_argument("separator must be ',', '\\t', ' ' or None (runs of whitespace), "
                                "got '" + *separator + "'");
  return (*separator)[0];
}

}  // namespace

void bind_edge_text(nb::module_& m) {
  nb::class_<io::EdgeTextReader>(
      m, "EdgeTextReader",
      R"doc(A streaming reader of text edge lists of non-negative integer ids (pread in
blocks of ``block_bytes``, each parsed on ``num_threads`` threads, 1 or 2, split at a
line boundary). It skips the first ``skip_lines`` lines unread, blank lines and
``#`` comments, and parses lines ``id SEP id`` (``columns=3``: ``id SEP id SEP
weight``, the weight ignored) ending in ``\n``, ``\r\n`` or the end of the file;
``separator`` is ``','``, ``'\t'``, ``' '`` or ``None`` (runs of spaces and tabs);
an id is 1 to 18 decimal digits. It accepts a strict subset of what the Polars
reader of ``gnncore.io.edgelist`` accepts with the same layout, with the same
values: on any other line it *declines* (``read`` returns -1;
``decline_line``/``decline_reason`` say where and why) and the caller leaves the
file to the Polars path. With ``direct`` the file is read with ``O_DIRECT``,
chunks read ahead on a thread, where the file system allows it (no copy out of
the page cache, no pages left there: for files larger than the memory they may
use). Raises ``ValueError`` for bad options and
``RuntimeError`` when the file cannot be opened or read.)doc")
      .def(
          "__init__",
          [](io::EdgeTextReader* self, const std::string& path,
             const std::optional<std::string>& separator, int columns, int64_t skip_lines,
             int64_t block_bytes, int num_threads, bool direct) {
            if (block_bytes < 1)
              throw std::invalid_argument("block_bytes must be positive, got " +
                                          std::to_string(block_bytes));
            io::EdgeTextOptions options;
            options.separator = separator_of(separator);
            options.columns = columns;
            options.skip_lines = skip_lines;
            options.block_bytes = static_cast<size_t>(block_bytes);
            options.num_threads = num_threads;
            options.direct = direct;
            new (self) io::EdgeTextReader(path, options);
          },
          nb::arg("path"), nb::arg("separator").none(), nb::arg("columns") = 2,
          nb::arg("skip_lines") = 0, nb::arg("block_bytes") = int64_t{8} << 20,
          nb::arg("num_threads") = 2, nb::arg("direct") = false)
      .def(
          "read",
          [](io::EdgeTextReader& self, IdBuffer src, IdBuffer dst) {
            MutSpan<int64_t> s{src.data(), src.shape(0)};
            MutSpan<int64_t> d{dst.data(), dst.shape(0)};
            nb::gil_scoped_release release;
            return self.read(s, d);
          },
          nb::arg("src").noconvert(), nb::arg("dst").noconvert(),
          R"doc(Parse the next lines into ``src``/``dst`` (int64, the same nonzero length, from
index 0): returns the number of edges written (at least 1), 0 once the file is
done, or -1 when the reader declines (then and on later calls). Releases the GIL.)doc")
      .def_prop_ro("declined", &io::EdgeTextReader::declined,
                   "Whether the reader declined a line.")
      .def_prop_ro("decline_line", &io::EdgeTextReader::decline_line,
                   "The 1-based line the reader declined (0 when it did not).")
      .def_prop_ro("decline_reason", &io::EdgeTextReader::decline_reason,
                   "Why it declined (empty when it did not).")
      .def_prop_ro("last_max_id", &io::EdgeTextReader::last_max_id,
                   "The largest id of the last ``read``'s edges (-1 when none).")
      .def_prop_ro("lines", &io::EdgeTextReader::lines,
                   "Complete lines consumed so far, skipped ones included.")
      .def_prop_ro("bytes_read", &io::EdgeTextReader::bytes_read,
                   "Bytes read from the file so far.")
      .def_prop_ro("reading_direct", &io::EdgeTextReader::reading_direct,
                   "Whether reads go past the page cache (``direct`` asked and allowed).");
}

}  // namespace gnncore::bind
