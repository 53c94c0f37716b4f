// Bindings for the packed edge keys of fast ingestion (io/edge_keys.h); GIL released.
#include <stdexcept>
#include <string>

#include "bind/common.h"
#include "io/edge_keys.h"

namespace gnncore::bind {

namespace {

template <typename T>
using MutArray = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T>
MutSpan<T> mut_span_of(MutArray<T>& a) {
  return MutSpan<T>{a.data(), a.shape(0)};
}

template <typename Lut>
void remap_with(MutArray<uint64_t> keys, InArray<Lut> lut, int num_threads) {
  nb::gil_scoped_release release;
  io::remap_keys<Lut>(mut_span_of(keys), span_of(lut), num_threads);
}

template <typename Index>
void fill_rows(InArray<uint64_t> keys, int64_t first_rank, bool directed, int64_t num_nodes,
               int64_t row_begin, MutArray<int64_t> cursor, MutArray<Index> indices,
               MutArray<int64_t> eid) {
  nb::gil_scoped_release release;
  io::fill_csr_rows<Index>(span_of(keys), first_rank, directed, num_nodes, row_begin,
                           mut_span_of(cursor), mut_span_of(indices), mut_span_of(eid));
}

template <typename Index>
void merge_rows(InArray<uint64_t> forward, InArray<uint64_t> transposed, bool directed,
                int64_t row_begin, int64_t row_end, MutArray<int64_t> cursor,
                MutArray<int64_t> next_rank, MutArray<Index> indices, MutArray<int64_t> eid) {
  nb::gil_scoped_release release;
  io::merge_csr_rows<Index>(span_of(forward), span_of(transposed), directed, row_begin, row_end,
                            mut_span_of(cursor), mut_span_of(next_rank), mut_span_of(indices),
                            mut_span_of(eid));
}

constexpr const char* kMergeDoc = R"doc(Fill rows ``[row_begin, row_end)`` of the in-neighbour CSR by merging
``transposed`` (the canonical keys rotated to ``b << 32 | a``, sorted: row ``v``'s
sources ``u``) and, unless ``directed``, ``forward`` (the canonical keys sorted:
row ``v``'s ``w`` of keys ``(v, w)``), both read sequentially. ``eid`` gets each
entry's key rank in ``forward``: ``next_rank[u]`` (int64, one per node, starting
at each node's first forward position, advanced in place) for the transposed
part. ``cursor`` (int64 ``[2]``: next forward and transposed positions) is
advanced in place: call with row ranges in order. ``indices``/``eid`` must hold
exactly the range's entries. Releases the GIL. Raises ``ValueError`` otherwise.)doc";

constexpr const char* kRemapDoc = R"doc(Map the ids of packed keys ``a << 32 | b`` (uint64) through ``lut``
(int32 or int64, nondecreasing so sorted keys stay sorted), in place:
``lut[a] << 32 | lut[b]``, on up to ``num_threads`` threads. Releases the GIL.
Raises ``ValueError`` for the first id outside the lut or mapped id outside
``[0, 2**32)`` (the keys are then left partly mapped).)doc";

constexpr const char* kFillDoc = R"doc(Fill rows ``[row_begin, row_begin + len(cursor))`` of the in-neighbour CSR
from a block of sorted distinct canonical keys (uint64 ``u << 32 | v``) whose
first key is edge ``first_rank`` (its row of ``edges.parquet``): row ``v`` gets
``u`` for each key ``(u, v)`` and, unless ``directed``, row ``u`` gets ``v``;
``eid`` gets the key's rank. ``cursor[r]`` (int64) is the next free slot of row
``row_begin + r`` in ``indices``/``eid`` and is advanced in place (pass the blocks
in order). Releases the GIL. Raises ``ValueError`` for an id outside
``[0, num_nodes)`` or a slot outside ``indices``.)doc";

template <typename Index>
int64_t invalid_block(InArray<int64_t> indptr, InArray<Index> indices, int64_t row_begin,
                      int64_t num_nodes, bool strict) {
  nb::gil_scoped_release release;
  return io::find_invalid_csr_block<Index>(span_of(indptr), span_of(indices), row_begin,
                                           num_nodes, strict);
}

constexpr const char* kInvalidBlockDoc = R"doc(The first invalid row of a block of CSR rows read in pieces: ``indptr``
(int64) holds the offsets of rows ``[row_begin, row_begin + len(indptr) - 1)``
and the end of the last, absolute (``indptr[0]`` is the block's first entry);
``indices`` (int32 or int64) the block's entries. A row is invalid when its
offsets decrease or an entry is outside ``[0, num_nodes)``, below the one
before it or (``strict``) equal to it. Returns the row id, or -1. Releases the
GIL. Raises ``ValueError`` when ``len(indices)`` is not the span of ``indptr``.)doc";

template <typename Index>
bool pairs_ok(InArray<Index> pairs, int64_t num_nodes) {
  nb::gil_scoped_release release;
  return io::pairs_in_order<Index>(span_of(pairs), num_nodes);
}

constexpr const char* kPairsDoc = R"doc(Whether every pair ``(pairs[2i], pairs[2i + 1])`` of the flat ``pairs``
(int32 or int64) is ``u < v`` with both ids in ``[0, num_nodes)``: the rows of
``edges_shuffled.npy``, checked in one pass. Releases the GIL. Raises
``ValueError`` for an odd count.)doc";

}  // namespace

void bind_edge_keys(nb::module_& m) {
  m.def("pairs_in_order", &pairs_ok<int32_t>, nb::arg("pairs"), nb::arg("num_nodes"), kPairsDoc);
  m.def("pairs_in_order", &pairs_ok<int64_t>, nb::arg("pairs"), nb::arg("num_nodes"), kPairsDoc);
  m.def(
      "all_in_range",
      [](InArray<int64_t> values, int64_t low, int64_t high) {
        nb::gil_scoped_release release;
        return io::all_in_range(span_of(values), low, high);
      },
      nb::arg("values"), nb::arg("low"), nb::arg("high"),
      R"doc(Whether every value of ``values`` (int64) lies in ``[low, high)``, in one
pass (NumPy's ``min`` and ``max`` take two). Releases the GIL.)doc");
  m.def("find_invalid_csr_block", &invalid_block<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("row_begin"), nb::arg("num_nodes"), nb::arg("strict"), kInvalidBlockDoc);
  m.def("find_invalid_csr_block", &invalid_block<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("row_begin"), nb::arg("num_nodes"), nb::arg("strict"), kInvalidBlockDoc);
  m.def(
      "pack_edge_keys",
      [](InArray<int64_t> src, InArray<int64_t> dst, bool unordered,
         MutArray<uint64_t> out) {
        nb::gil_scoped_release release;
        return io::pack_edge_keys(span_of(src), span_of(dst), unordered, mut_span_of(out));
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("unordered"), nb::arg("out").noconvert(),
      R"doc(Pack the edges ``(src[i], dst[i])`` (int64) into ``out`` (uint64, at least
``len(src)``) as ``min << 32 | max`` (``unordered``) or ``src << 32 | dst``,
dropping self-loops; returns the number of keys written. Releases the GIL.
Raises ``ValueError`` naming the first edge with an id outside ``[0, 2**32)``.)doc");
  m.def(
      "sort_unique_keys",
      [](MutArray<uint64_t> keys, MutArray<uint64_t> tmp, int num_threads, bool minor_sorted) {
        nb::gil_scoped_release release;
        return io::sort_unique_keys(mut_span_of(keys), mut_span_of(tmp), num_threads,
                                    minor_sorted);
      },
      nb::arg("keys").noconvert(), nb::arg("tmp").noconvert(), nb::arg("num_threads") = 0,
      nb::arg("minor_sorted") = false,
      R"doc(Sort uint64 ``keys`` ascending and drop repeats in place (parallel radix
sort over the bits the keys use: many keys, one scatter by their top bits and
each bucket sorted in the caches; ``tmp``: scratch of at least ``len(keys)``);
returns the count of distinct keys, which fill ``keys[:count]``. With
``minor_sorted`` the keys must already be ordered by their low 32 bits (the
transpose of sorted keys): only the high bits are sorted, stably. Releases the
GIL.)doc");
  m.def("remap_keys", &remap_with<int32_t>, nb::arg("keys").noconvert(), nb::arg("lut"),
        nb::arg("num_threads") = 1, kRemapDoc);
  m.def("remap_keys", &remap_with<int64_t>, nb::arg("keys").noconvert(), nb::arg("lut"),
        nb::arg("num_threads") = 1, kRemapDoc);
  m.def(
      "count_key_degrees",
      [](InArray<uint64_t> keys, bool directed, MutArray<int64_t> counts) {
        nb::gil_scoped_release release;
        io::count_key_degrees(span_of(keys), directed, mut_span_of(counts));
      },
      nb::arg("keys"), nb::arg("directed"), nb::arg("counts").noconvert(),
      R"doc(Add the in-neighbour CSR's row lengths of packed keys ``a << 32 | b`` to
``counts`` (int64, one per node): one to ``counts[b]`` and, unless ``directed``,
one to ``counts[a]``. Releases the GIL. Raises ``ValueError`` for an id outside
``counts``.)doc");
  m.def("fill_csr_rows", &fill_rows<int32_t>, nb::arg("keys"), nb::arg("first_rank"),
        nb::arg("directed"), nb::arg("num_nodes"), nb::arg("row_begin"),
        nb::arg("cursor").noconvert(), nb::arg("indices").noconvert(),
        nb::arg("eid").noconvert(), kFillDoc);
  m.def("fill_csr_rows", &fill_rows<int64_t>, nb::arg("keys"), nb::arg("first_rank"),
        nb::arg("directed"), nb::arg("num_nodes"), nb::arg("row_begin"),
        nb::arg("cursor").noconvert(), nb::arg("indices").noconvert(),
        nb::arg("eid").noconvert(), kFillDoc);
  m.def(
      "key_offsets",
      [](InArray<uint64_t> keys, MutArray<int64_t> offsets) {
        nb::gil_scoped_release release;
        io::key_offsets(span_of(keys), mut_span_of(offsets));
      },
      nb::arg("keys"), nb::arg("offsets").noconvert(),
      R"doc(``offsets[v]`` (int64) = the number of sorted uint64 keys whose major id
``key >> 32`` is below ``v``: the CSR offsets over major ids (``len(offsets)`` is
the row count + 1). Releases the GIL. Raises ``ValueError`` for unsorted keys
or a major id past the rows.)doc");
  m.def(
      "mark_present",
      [](MutArray<uint64_t> bits, InArray<int64_t> ids, uint64_t size) {
        nb::gil_scoped_release release;
        io::mark_present(mut_span_of(bits), span_of(ids), size);
      },
      nb::arg("bits").noconvert(), nb::arg("ids"), nb::arg("size"),
      "Set bit ``id % 64`` of ``bits[id // 64]`` for every int64 id of ``ids``: "
      "a presence bitmap of ``size`` ids (uint64 ``bits``, at least ``size / 64`` "
      "words; :func:`gnncore.io.bounded.ids.present_ids` reads it back). Releases "
      "the GIL. Raises ``ValueError`` for an id outside ``[0, size)`` or a bitmap "
      "too short.");
  m.def(
      "transpose_keys",
      [](InArray<uint64_t> keys, MutArray<uint64_t> out) {
        nb::gil_scoped_release release;
        io::transpose_keys(span_of(keys), mut_span_of(out));
      },
      nb::arg("keys"), nb::arg("out").noconvert(),
      "``out[i]`` = ``keys[i]`` (uint64 ``a << 32 | b``) rotated to ``b << 32 | a``. "
      "Releases the GIL.");
  m.def(
      "transpose_sorted_keys",
      [](InArray<uint64_t> keys, MutArray<uint64_t> out, MutArray<int64_t> offsets,
         int num_threads) {
        nb::gil_scoped_release release;
        io::transpose_sorted_keys(span_of(keys), mut_span_of(out), mut_span_of(offsets),
                                  num_threads);
      },
      nb::arg("keys"), nb::arg("out").noconvert(), nb::arg("offsets").noconvert(),
      nb::arg("num_threads") = 1,
      R"doc(The transpose of sorted distinct uint64 keys ``a << 32 | b``, sorted, by
counting scatters (one thread: by ranges of rows, in the caches): ``out`` (at
least ``len(keys)``) gets each key as ``b << 32 | a`` in order of ``b``, then
``a``; ``offsets`` (int64, the row count + 1) gets ``key_offsets`` of ``out``:
``offsets[v]`` = the keys whose minor id is below ``v``. ``num_threads`` split
the keys (each with a count per row). Releases the GIL. Raises ``ValueError``
for keys not strictly increasing or a minor id past the rows.)doc");
  m.def("merge_csr_rows", &merge_rows<int32_t>, nb::arg("forward"), nb::arg("transposed"),
        nb::arg("directed"), nb::arg("row_begin"), nb::arg("row_end"),
        nb::arg("cursor").noconvert(), nb::arg("next_rank").noconvert(),
        nb::arg("indices").noconvert(), nb::arg("eid").noconvert(), kMergeDoc);
  m.def("merge_csr_rows", &merge_rows<int64_t>, nb::arg("forward"), nb::arg("transposed"),
        nb::arg("directed"), nb::arg("row_begin"), nb::arg("row_end"),
        nb::arg("cursor").noconvert(), nb::arg("next_rank").noconvert(),
        nb::arg("indices").noconvert(), nb::arg("eid").noconvert(), kMergeDoc);
  m.def(
      "pcg64_shuffle",
      [](MutArray<uint64_t> values, uint64_t state_high, uint64_t state_low,
         uint64_t increment_high, uint64_t increment_low, bool has_uint32, uint32_t uinteger) {
        io::Pcg64State state{
            static_cast<unsigned __int128>(state_high) << 64 | state_low,
            static_cast<unsigned __int128>(increment_high) << 64 | increment_low, has_uint32,
            uinteger};
        nb::gil_scoped_release release;
        io::pcg64_shuffle<uint64_t>(mut_span_of(values), state);
      },
      nb::arg("values").noconvert(), nb::arg("state_high"), nb::arg("state_low"),
      nb::arg("increment_high"), nb::arg("increment_low"), nb::arg("has_uint32"),
      nb::arg("uinteger"),
      R"doc(Shuffle uint64 ``values`` in place exactly as
``numpy.random.Generator(PCG64)`` with this bit-generator state (the fields of
``PCG64().state``, 128-bit integers split in 64-bit halves) shuffles a 1-D array:
``values`` becomes ``values[Generator.permutation(len(values))]``. Releases the
GIL.)doc");
}

}  // namespace gnncore::bind
