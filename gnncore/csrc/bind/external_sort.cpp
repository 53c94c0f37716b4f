// Bindings for external sorting: sorted runs on disk merged into a CSR (GIL released).
#include <Python.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind/common.h"
#include "io/external_sort.h"
#include "io/run_csr.h"

namespace gnncore::bind {

namespace {

// Raises the Python error of a failed run-file operation (needs the GIL): a
// malformed run (bad magic, truncated, unsorted) is gnncore.errors.InputError
// naming the file; a failed system call is OSError(errno, message, path)
// (FileNotFoundError, ... by errno), its message naming the file.
[[noreturn]] void raise_run_error(const io::RunFileError& e) {
  if (e.error() == 0) {
    nb::object cls = nb::module_::import_("gnncore.errors").attr("InputError");
    nb::object exc = cls(nb::str(e.problem().c_str()), nb::str(e.path().c_str()));
    PyErr_SetObject(cls.ptr(), exc.ptr());
  } else {
    nb::object args = nb::make_tuple(e.error(), nb::str(e.what()), nb::str(e.path().c_str()));
    PyErr_SetObject(PyExc_OSError, args.ptr());
  }
  throw nb::python_error();
}

// _C.scatter_key_buckets for one bucket type (an overload each).
template <typename Bucket>
void scatter_buckets(InArray<uint64_t> keys, InArray<Bucket> buckets,
                     const std::vector<io::KeyRunWriter*>& writers) {
  try {
    nb::gil_scoped_release release;
    io::scatter_key_buckets<Bucket>(span_of(keys), span_of(buckets), writers);
  } catch (const io::RunFileError& e) {
    raise_run_error(e);
  }
}

io::KeyOrder key_order_of(const std::string& key_order) {
  if (key_order == "dst_src") return io::KeyOrder::kDstSrc;
  if (key_order == "src_dst") return io::KeyOrder::kSrcDst;
  throw std::invalid_argument("key_order must be 'dst_src' or 'src_dst', got '" + key_order +
                              "'");
}

size_t buffer_of(int64_t buffer_bytes) {
  if (buffer_bytes <= 0)
    throw std::invalid_argument("buffer_bytes must be positive, got " +
                                std::to_string(buffer_bytes));
  return static_cast<size_t>(buffer_bytes);
}

// numpy.dtype(index_dtype) must be int32 or int64; returns whether it is int32.
bool int32_of(const nb::handle& index_dtype) {
  nb::object dtype = nb::module_::import_("numpy").attr("dtype")(index_dtype);
  const std::string str = nb::cast<std::string>(dtype.attr("str"));
  if (str == "<i4") return true;
  if (str == "<i8") return false;
  throw std::invalid_argument("index_dtype must be int32 or int64, got " +
                              nb::cast<std::string>(nb::str(dtype)));
}

template <typename T>
using OutSpanArray = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename Index>
void fill_range_of(const std::string& bucket_path, io::KeyRunReader* forward, int64_t row_begin,
                   int64_t row_end, InArray<int64_t> indptr, OutSpanArray<int64_t> next_rank,
                   OutSpanArray<int64_t> cursor, OutSpanArray<Index> indices,
                   OutSpanArray<int64_t> eid, int64_t buffer_bytes) {
  const size_t buffer = buffer_of(buffer_bytes);
  try {
    nb::gil_scoped_release release;
    io::KeyRunReader bucket(bucket_path, buffer);
    io::fill_csr_range<Index>(bucket, forward, row_begin, row_end, span_of(indptr),
                              MutSpan<int64_t>{next_rank.data(), next_rank.shape(0)},
                              MutSpan<int64_t>{cursor.data(), cursor.shape(0)},
                              MutSpan<Index>{indices.data(), indices.shape(0)},
                              MutSpan<int64_t>{eid.data(), eid.shape(0)});
  } catch (const io::RunFileError& e) {
    raise_run_error(e);
  }
}

constexpr const char* kFillRangeDoc = R"doc(Fill rows ``[row_begin, row_end)`` of the in-neighbour CSR of the sorted
canonical keys of a key run (io/run_csr.h): ``indices``/``eid`` (int32 or int64,
int64) must hold exactly the range's entries (``indptr``: the whole CSR's int64
offsets). First the key run ``bucket_path`` (the keys whose minor id is in the
range, from :func:`split_key_run`): key ``(a, b)`` gives row ``b`` entry ``a``
with edge id ``next_rank[a]`` (int64, one per node: each node's first rank as a
major id, advanced in place: call with the ranges in order). Then, unless
``forward`` is None (directed graphs), the next keys of ``forward`` (a
:class:`KeyRunReader` of the whole run, read in step with the ranges): key
``(a, b)`` gives row ``a`` entry ``b`` with the key's rank. Entries go in key
order within each row. ``cursor``: int64 scratch of at least the range's rows.
Releases the GIL. Raises ``ValueError`` when the keys do not fit the offsets.)doc";

template <typename Index>
void edge_ids_of(InArray<int64_t> indptr, InArray<Index> indices, int64_t row_begin,
                 nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> next,
                 nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> out,
                 bool directed) {
  MutSpan<int64_t> next_span{next.data(), next.shape(0)};
  MutSpan<int64_t> out_span{out.data(), out.shape(0)};
  nb::gil_scoped_release release;
  io::csr_edge_ids<Index>(span_of(indptr), span_of(indices), row_begin, next_span, out_span,
                          directed);
}

// The docstring of both csr_edge_ids overloads (int32 and int64 indices).
constexpr const char* kEdgeIdsDoc = R"doc(Fill ``out`` with the edge ids (``eid.npy``: rows of ``edges.parquet``) of a
block of rows of an in-neighbour CSR, blocks visited in increasing row order.
``indptr``: the block's rows + 1 offsets (absolute), ``indices``: its entries
(int32 or int64), ``row_begin``: its first row; ``next`` (int64, one per node)
starts as the src-major offsets of the canonical edges and is updated in place
(pass it on to the next block). Entry (v, u) gets the rank in (src, dst) order of
(u, v) (directed) or of (min(u, v), max(u, v)) (undirected). Releases the GIL.
Raises ``ValueError`` for an index outside ``[0, len(next))`` or sizes that
disagree.)doc";

template <typename Lut>
int64_t merge_map_of(const std::vector<std::string>& run_paths, const std::string& out_path,
                     int64_t buffer_bytes, InArray<Lut> lut, OutSpanArray<int64_t> major,
                     OutSpanArray<int64_t> minor, bool direct) {
  const size_t buffer = buffer_of(buffer_bytes);
  try {
    nb::gil_scoped_release release;
    return io::merge_map_key_runs<Lut>(run_paths, out_path, buffer, span_of(lut),
                                       MutSpan<int64_t>{major.data(), major.shape(0)},
                                       MutSpan<int64_t>{minor.data(), minor.shape(0)},
                                       direct);
  } catch (const io::RunFileError& e) {
    raise_run_error(e);
  }
}

constexpr const char* kMergeMapDoc = R"doc(Merge key runs of raw-id keys like :func:`merge_key_runs`, map each
distinct key's ids through ``lut`` (int32 or int64, as :func:`remap_keys`),
count their ends into ``major`` / ``minor`` (int64, as :func:`count_key_ends`)
and write the mapped keys as the key run ``out_path``, in one pass. Returns the
number of keys written. ``direct``: the run is written past the page cache
where the file system allows (as :class:`KeyRunWriter`). Releases the GIL.
Raises ``ValueError`` for an id outside ``lut`` or the counts, or mapped keys
that do not increase.)doc";

}  // namespace

void bind_external_sort(nb::module_& m) {
  m.def(
      "write_run",
      [](InArray<NodeId> src, InArray<NodeId> dst, const std::string& path,
         const std::string& key_order) {
        const io::KeyOrder order = key_order_of(key_order);
        try {
          nb::gil_scoped_release release;
          return io::write_run(span_of(src), span_of(dst), path, order);
        } catch (const io::RunFileError& e) {
          raise_run_error(e);
        }
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("path"), nb::arg("key_order") = "dst_src",
      R"doc(Sort the edges ``(src[i], dst[i])`` (int64 arrays of one length) by
``(dst, src)`` (``key_order="dst_src"``: the CSR rows are destinations, the graph
format's in-neighbour lists) or by ``(src, dst)`` (``"src_dst"``), drop repeated
pairs and write them as the run file ``path`` (written into a temporary sibling,
then renamed). Returns the number of pairs written. Releases the GIL.

Memory: 16 bytes per edge besides the inputs. Raises ``ValueError`` when src
and dst differ in length, an id is negative or ``key_order`` is unknown, and
``OSError`` naming the path when the file cannot be written.)doc");

  m.def(
      "merge_runs",
      [](const std::vector<std::string>& run_paths, const std::string& out_path,
         int64_t buffer_bytes) {
        const size_t buffer = buffer_of(buffer_bytes);
        try {
          nb::gil_scoped_release release;
          return io::merge_runs(run_paths, out_path, buffer);
        } catch (const io::RunFileError& e) {
          raise_run_error(e);
        }
      },
      nb::arg("run_paths"), nb::arg("out_path"),
      nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
      R"doc(Merge run files of one key order (from :func:`write_run`) into the run
file ``out_path``, dropping pairs repeated across runs; each run is read through
a buffer of ``buffer_bytes``. Returns the number of pairs written. Releases the
GIL. Errors as :func:`merge_runs_to_csr`.)doc");

  m.def(
      "merge_runs_to_csr",
      [](const std::vector<std::string>& run_paths, NodeId num_nodes,
         const std::string& indptr_path, const std::string& indices_path,
         nb::handle index_dtype, int64_t buffer_bytes) {
        const bool int32 = int32_of(index_dtype);
        const size_t buffer = buffer_of(buffer_bytes);
        try {
          nb::gil_scoped_release release;
          return io::merge_runs_to_csr(run_paths, num_nodes, indptr_path, indices_path, int32,
                                       buffer);
        } catch (const io::RunFileError& e) {
          raise_run_error(e);
        }
      },
      nb::arg("run_paths"), nb::arg("num_nodes"), nb::arg("indptr_path"),
      nb::arg("indices_path"), nb::arg("index_dtype"),
      nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
      R"doc(K-way merge of run files of one key order (from :func:`write_run`) into
a CSR over the major key: row ``v`` lists, sorted and without repeats, the minor
ids of the pairs ``(v, u)`` of all runs. Writes ``indptr_path`` (int64
``[num_nodes + 1]``) and ``indices_path`` (``index_dtype``: int32 or int64) as
``.npy`` files byte-identical to ``numpy.save`` of the same arrays, both
streamed sequentially (temporary sibling, then rename). Returns the number of
distinct pairs. Memory: ``(len(run_paths) + 2) * buffer_bytes``. Releases the GIL.

Raises ``ValueError`` for a node id outside ``[0, num_nodes)`` (naming the run),
int32 indices that cannot hold the ids, a bad ``index_dtype`` or runs of
different key orders; :class:`gnncore.errors.InputError` naming the file for a
run that is not a run file (bad magic), is truncated or corrupt; ``OSError``
naming the file when one cannot be opened, read or written.)doc");
  nb::class_<io::KeyRunWriter>(m, "KeyRunWriter", R"doc(Writes a key run: sorted distinct uint64 keys, delta-coded (LEB128), into
a temporary sibling of ``path`` renamed into place by :meth:`commit` (removed if
the writer is dropped uncommitted). ``buffer_bytes``: the write buffer.
``direct``: written past the page cache (``O_DIRECT``, two buffers of
``buffer_bytes`` taking turns, written on a thread of the writer's own) where the
file system allows and ``GNNCORE_DIRECT_WRITE`` is not ``0``, else through it;
the file's bytes are the same.)doc")
      .def(
          "__init__",
          [](io::KeyRunWriter* self, const std::string& path, int64_t buffer_bytes,
             bool direct) {
            const size_t buffer = buffer_of(buffer_bytes);
            try {
              new (self) io::KeyRunWriter(path, buffer, direct);
            } catch (const io::RunFileError& e) {
              raise_run_error(e);
            }
          },
          nb::arg("path"),
          nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
          nb::arg("direct") = false)
      .def(
          "append",
          [](io::KeyRunWriter& self, InArray<uint64_t> keys) {
            try {
              nb::gil_scoped_release release;
              self.append(span_of(keys));
            } catch (const io::RunFileError& e) {
              raise_run_error(e);
            }
          },
          nb::arg("keys"),
          R"doc(Append uint64 keys that increase strictly and follow the last one
appended. Releases the GIL. Raises ``ValueError`` naming the first key that does
not (nothing of the call is written then), ``OSError`` when the file cannot be
written.)doc")
      .def(
          "commit",
          [](io::KeyRunWriter& self) {
            try {
              return self.commit();
            } catch (const io::RunFileError& e) {
              raise_run_error(e);
            }
          },
          "Write the header and rename the file into place; returns the key count.")
      .def_prop_ro("count", &io::KeyRunWriter::count, "Keys appended so far.")
      .def_prop_ro("coded_bytes", &io::KeyRunWriter::coded_bytes,
                   "Bytes of the coded keys so far (the 32-byte header not counted).");

  m.def("scatter_key_buckets", &scatter_buckets<uint8_t>, nb::arg("keys"), nb::arg("buckets"),
        nb::arg("writers"));
  m.def("scatter_key_buckets", &scatter_buckets<uint32_t>, nb::arg("keys"), nb::arg("buckets"),
        nb::arg("writers"), R"doc(Append each of the uint64 ``keys`` to ``writers[buckets[i]]``
(:class:`KeyRunWriter`; ``buckets`` uint8 or uint32, one a key) in one pass:
the scatter of the bounded shuffle. The keys must increase strictly and follow
every key appended to the writers before. Releases the GIL. Raises ``ValueError``
naming the first key or bucket that does not fit (nothing of the call is written
then), ``OSError`` when a file cannot be written.)doc");

  nb::class_<io::KeyRunReader>(m, "KeyRunReader", R"doc(Reads a key run (from :class:`KeyRunWriter` or :func:`merge_key_runs`)
sequentially through a buffer of ``buffer_bytes``, checking it as it goes.
Raises :class:`gnncore.errors.InputError` naming the file for a malformed run
(bad magic, truncated, corrupt, unsorted), ``OSError`` when it cannot be read.)doc")
      .def(
          "__init__",
          [](io::KeyRunReader* self, const std::string& path, int64_t buffer_bytes) {
            const size_t buffer = buffer_of(buffer_bytes);
            try {
              new (self) io::KeyRunReader(path, buffer);
            } catch (const io::RunFileError& e) {
              raise_run_error(e);
            }
          },
          nb::arg("path"),
          nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes))
      .def(
          "read",
          [](io::KeyRunReader& self,
             nb::ndarray<uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> out) {
            MutSpan<uint64_t> span{out.data(), out.shape(0)};
            try {
              nb::gil_scoped_release release;
              return self.read(span);
            } catch (const io::RunFileError& e) {
              raise_run_error(e);
            }
          },
          nb::arg("out").noconvert(),
          R"doc(Decode the next keys into ``out`` (uint64), as many as fit or are left;
returns how many (0 at the end). Releases the GIL.)doc")
      .def_prop_ro("count", &io::KeyRunReader::count, "The run's key count (its header).")
      .def_prop_ro("remaining", &io::KeyRunReader::remaining, "Keys not read yet.");

  m.def(
      "merge_key_runs",
      [](const std::vector<std::string>& run_paths, const std::string& out_path,
         int64_t buffer_bytes) {
        const size_t buffer = buffer_of(buffer_bytes);
        try {
          nb::gil_scoped_release release;
          return io::merge_key_runs(run_paths, out_path, buffer);
        } catch (const io::RunFileError& e) {
          raise_run_error(e);
        }
      },
      nb::arg("run_paths"), nb::arg("out_path"),
      nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
      R"doc(Merge key runs into the key run ``out_path`` (temporary sibling, then
rename), dropping keys repeated across runs; each run and the output go through
a buffer of ``buffer_bytes``. Returns the number of keys written. Releases the
GIL. Errors as :class:`KeyRunReader`.)doc");
  m.def("merge_map_key_runs", &merge_map_of<int32_t>, nb::arg("run_paths"), nb::arg("out_path"),
        nb::arg("buffer_bytes"), nb::arg("lut").noconvert(), nb::arg("major").noconvert(),
        nb::arg("minor").noconvert(), nb::arg("direct") = false, kMergeMapDoc);
  m.def("merge_map_key_runs", &merge_map_of<int64_t>, nb::arg("run_paths"), nb::arg("out_path"),
        nb::arg("buffer_bytes"), nb::arg("lut").noconvert(), nb::arg("major").noconvert(),
        nb::arg("minor").noconvert(), nb::arg("direct") = false, kMergeMapDoc);
  m.def(
      "count_key_ends",
      [](InArray<uint64_t> keys, OutSpanArray<int64_t> major, OutSpanArray<int64_t> minor) {
        nb::gil_scoped_release release;
        io::count_key_ends(span_of(keys), MutSpan<int64_t>{major.data(), major.shape(0)},
                           MutSpan<int64_t>{minor.data(), minor.shape(0)});
      },
      nb::arg("keys"), nb::arg("major").noconvert(), nb::arg("minor").noconvert(),
      R"doc(For every packed key ``a << 32 | b`` (uint64) add one to ``major[a + 1]`` and
to ``minor[b + 1]`` (int64, one more entry than nodes: an in-place cumulative
sum then gives CSR offsets). Releases the GIL. Raises ``ValueError`` for an id
past either array.)doc");
  m.def(
      "split_key_run",
      [](const std::string& run_path, InArray<int64_t> bounds,
         const std::vector<std::string>& bucket_paths, int64_t buffer_bytes) {
        const size_t buffer = buffer_of(buffer_bytes);
        try {
          nb::gil_scoped_release release;
          return io::split_key_run(run_path, span_of(bounds), bucket_paths, buffer);
        } catch (const io::RunFileError& e) {
          raise_run_error(e);
        }
      },
      nb::arg("run_path"), nb::arg("bounds"), nb::arg("bucket_paths"),
      nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
      R"doc(Read the key run ``run_path`` once and write to ``bucket_paths[r]`` (key
runs, each through a buffer of ``buffer_bytes``) its keys whose minor id is in
``[bounds[r], bounds[r + 1])`` (int64, one more entry than buckets,
nondecreasing). Returns the keys read. Releases the GIL. Raises ``ValueError``
for a minor id outside ``[bounds[0], bounds[-1])``; file errors as
:class:`KeyRunReader`.)doc");
  m.def("fill_csr_range", &fill_range_of<int32_t>, nb::arg("bucket_path"),
        nb::arg("forward").none(), nb::arg("row_begin"), nb::arg("row_end"), nb::arg("indptr"),
        nb::arg("next_rank").noconvert(), nb::arg("cursor").noconvert(),
        nb::arg("indices").noconvert(), nb::arg("eid").noconvert(),
        nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
        kFillRangeDoc);
  m.def("fill_csr_range", &fill_range_of<int64_t>, nb::arg("bucket_path"),
        nb::arg("forward").none(), nb::arg("row_begin"), nb::arg("row_end"), nb::arg("indptr"),
        nb::arg("next_rank").noconvert(), nb::arg("cursor").noconvert(),
        nb::arg("indices").noconvert(), nb::arg("eid").noconvert(),
        nb::arg("buffer_bytes") = static_cast<int64_t>(io::kDefaultMergeBufferBytes),
        kFillRangeDoc);
  m.def("csr_edge_ids", &edge_ids_of<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("row_begin"), nb::arg("next").noconvert(), nb::arg("out").noconvert(),
        nb::arg("directed"), kEdgeIdsDoc);
  m.def("csr_edge_ids", &edge_ids_of<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("row_begin"), nb::arg("next").noconvert(), nb::arg("out").noconvert(),
        nb::arg("directed"), kEdgeIdsDoc);
}

}  // namespace gnncore::bind
