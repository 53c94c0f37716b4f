// Bindings for the sequential block reader (pread in chunks, GIL released).
#include <Python.h>

#include <stdexcept>
#include <string>

#include <nanobind/stl/string.h>

#include "bind/common.h"
#include "io/block_reader.h"

namespace gnncore::bind {

namespace {

// A writable, contiguous, 1-D uint8 buffer the reader fills in place.
using ByteBuffer = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Raises the Python OSError of a failed read (needs the GIL): OSError(errno,
// message, path) -- so FileNotFoundError, PermissionError, ... where errno says
// so -- or, for a file that ends before the range, OSError(message) with errno
// None. The message names the path, the byte offset and the error.
[[noreturn]] void raise_os_error(const io::BlockReadError& e) {
  if (e.truncated()) {
    PyErr_SetString(PyExc_OSError, e.what());
  } else {
    nb::object args = nb::make_tuple(e.error(), nb::str(e.what()), nb::str(e.path().c_str()));
    PyErr_SetObject(PyExc_OSError, args.ptr());
  }
  throw nb::python_error();
}

size_t chunk_of(int64_t chunk_bytes) {
  if (chunk_bytes <= 0)
    throw std::invalid_argument("chunk_bytes must be positive, got " +
                                std::to_string(chunk_bytes));
  return static_cast<size_t>(chunk_bytes);
}

}  // namespace

void bind_block_reader(nb::module_& m) {
  m.def(
      "read_range",
      [](const std::string& path, int64_t offset, ByteBuffer out, int64_t chunk_bytes,
         bool sequential_hint, bool direct) {
        const size_t chunk = chunk_of(chunk_bytes);
        const int64_t nbytes = static_cast<int64_t>(out.shape(0));
        uint8_t* data = out.data();
        try {
          nb::gil_scoped_release release;
          io::read_range(path, offset, nbytes, data, chunk, sequential_hint, direct);
        } catch (const io::BlockReadError& e) {
          raise_os_error(e);
        }
      },
      nb::arg("path"), nb::arg("offset"), nb::arg("out").noconvert(),
      nb::arg("chunk_bytes") = static_cast<int64_t>(io::kDefaultChunkBytes),
      nb::arg("sequential_hint") = true, nb::arg("direct") = false,
      R"doc(Read ``out.size`` bytes of the file ``path`` from byte ``offset`` into
``out`` (a writable, contiguous, 1-D uint8 array), in ``pread`` calls of at most
``chunk_bytes`` bytes, retried on EINTR and continued after short reads. With
``sequential_hint``, first advises the kernel of a sequential read
(``posix_fadvise``). With ``direct``, reads with ``O_DIRECT`` through an
aligned bounce buffer, bypassing the page cache, where the file system allows
it (else through the page cache). Releases the GIL.

Raises ``ValueError`` for a negative offset or a non-positive ``chunk_bytes``,
and ``OSError`` naming the path and offset when the file cannot be opened or
read (``FileNotFoundError`` etc. by errno), or, with ``errno`` None and
"ends early (truncated)" in the message, when the file ends before the range.)doc");

  m.def(
      "read_ranges",
      [](const std::string& path, InArray<int64_t> offsets, InArray<int64_t> lengths,
         ByteBuffer out, int64_t chunk_bytes, bool sequential_hint, bool direct) {
        const size_t chunk = chunk_of(chunk_bytes);
        const size_t count = offsets.shape(0);
        if (lengths.shape(0) != count)
          throw std::invalid_argument("read_ranges: offsets and lengths differ in length (" +
                                      std::to_string(count) + " and " +
                                      std::to_string(lengths.shape(0)) + ")");
        const int64_t* lens = lengths.data();
        const uint64_t size = out.shape(0);
        uint64_t total = 0;
        for (size_t i = 0; i < count; ++i) {
          if (lens[i] < 0)
            throw std::invalid_argument("read_ranges: lengths[" + std::to_string(i) +
                                        "] is negative: " + std::to_string(lens[i]));
          if (static_cast<uint64_t>(lens[i]) > size - total)
            throw std::invalid_argument("read_ranges: the lengths add up to more than the " +
                                        std::to_string(size) + " bytes of out");
          total += static_cast<uint64_t>(lens[i]);
        }
        if (total != size)
          throw std::invalid_argument("read_ranges: the lengths add up to " +
                                      std::to_string(total) + " bytes, out holds " +
                                      std::to_string(size));
        const int64_t* offs = offsets.data();
        uint8_t* data = out.data();
        try {
          nb::gil_scoped_release release;
          io::read_ranges(path, offs, lens, count, data, chunk, sequential_hint, direct);
        } catch (const io::BlockReadError& e) {
          raise_os_error(e);
        }
      },
      nb::arg("path"), nb::arg("offsets"), nb::arg("lengths"), nb::arg("out").noconvert(),
      nb::arg("chunk_bytes") = static_cast<int64_t>(io::kDefaultChunkBytes),
      nb::arg("sequential_hint") = true, nb::arg("direct") = false,
      R"doc(Read the byte ranges ``[offsets[i], offsets[i] + lengths[i])`` of the
file ``path``, in order, into consecutive regions of ``out`` (a writable,
contiguous, 1-D uint8 array of ``sum(lengths)`` bytes), opening the file once,
``direct`` as for :func:`read_range`. ``offsets`` and ``lengths`` are int64
arrays of one length. Releases the GIL.

Raises ``ValueError`` when ``offsets`` and ``lengths`` differ in length, a
length or offset is negative or the lengths do not add up to ``out.size``;
``OSError`` as :func:`read_range`.)doc");

  m.def(
      "evict",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return io::evict(path);
      },
      nb::arg("path"),
      R"doc(Ask the kernel to drop the cached pages of the file ``path``
(``posix_fadvise(POSIX_FADV_DONTNEED)`` over the whole file), e.g. before a
cold-cache benchmark. Returns whether the file could be opened and the advice
was taken (dirty pages are not written back first).)doc");
}

}  // namespace gnncore::bind
