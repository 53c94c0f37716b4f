// Edges as packed 64-bit keys, the fast path of ingestion: an edge (a, b) with
// both ids below 2^32 is the key a << 32 | b, so sorting keys sorts edges by
// (a, b). The kernels here pack parsed edges into keys, sort and deduplicate
// them (parallel LSD radix sort), map raw ids to node ids (a monotone map keeps
// the order), build the in-neighbour CSR with its edge ids from the sorted
// canonical keys, one row range at a time, and shuffle keys exactly as numpy's
// Generator(PCG64).shuffle does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "io/key_sort.h"
#include "types.h"

namespace gnncore::io {

constexpr int kKeyShift = 32;
constexpr uint64_t kKeyMinorMask = (uint64_t{1} << kKeyShift) - 1;
constexpr int64_t kMaxKeyId = (int64_t{1} << kKeyShift) - 1;

// Packs (src[i], dst[i]) into out: (min << 32 | max) when `unordered`, else
// (src << 32 | dst); self-loops are dropped. Returns the number of keys
// written (out must hold src.size). Throws std::invalid_argument naming the
// first edge with an id outside [0, 2^32) (nothing is written then) or
// lengths that disagree.
size_t pack_edge_keys(Span<int64_t> src, Span<int64_t> dst, bool unordered,
                      MutSpan<uint64_t> out);

// key = lut[key >> 32] << 32 | lut[key & mask], in place. The lut must be
// nondecreasing for the keys to stay sorted. Throws std::invalid_argument for an
// id outside the lut or a mapped id outside [0, 2^32) (the first such key; keys
// are left partly mapped). Runs on up to num_threads threads.
template <typename Lut>
void remap_keys(MutSpan<uint64_t> keys, Span<Lut> lut, int num_threads = 1);

// Adds, for every key (a, b), one to counts[b] and, unless `directed`, one to
// counts[a]: the row lengths of the in-neighbour CSR. Throws
// std::invalid_argument for an id outside counts.
void count_key_degrees(Span<uint64_t> keys, bool directed, MutSpan<int64_t> counts);

// Fills the entries of rows [row_begin, row_begin + cursor.size) of the
// in-neighbour CSR from a block of sorted distinct canonical keys whose first
// key has edge rank `first_rank` (its row in edges.parquet). Row v lists u for
// every key (u, v) and, unless `directed`, w for every key (v, w); the entry's
// edge id is the key's rank. cursor[r] is the next free slot of row
// row_begin + r in indices/eid (slots relative to the range's first entry),
// advanced in place: call with the blocks in order. Throws
// std::invalid_argument for an id outside [0, num_nodes) or a slot outside
// indices.
template <typename Index>
void fill_csr_rows(Span<uint64_t> keys, int64_t first_rank, bool directed, int64_t num_nodes,
                   int64_t row_begin, MutSpan<int64_t> cursor, MutSpan<Index> indices,
                   MutSpan<int64_t> eid);

// offsets[v] = the number of sorted keys whose major id (key >> 32) is below v,
// for v in [0, offsets.size): the CSR offsets of keys sorted by major id.
// Throws std::invalid_argument for unsorted keys or a major id past
// offsets.size - 2.
void key_offsets(Span<uint64_t> keys, MutSpan<int64_t> offsets);

// Sets bit `id % 64` of `bits[id / 64]` for every id of `ids`: a presence bitmap
// of `size` ids (bits.size * 64 at least). A bit, not a bool, an id: the random
// writes then span an eighth of the memory, within the TLB's reach far longer
// (100M ids: 2.2x faster here). Throws std::invalid_argument for an id outside
// [0, size) (the bits unchanged from that id on) or a bitmap shorter than size.
void mark_present(MutSpan<uint64_t> bits, Span<int64_t> ids, uint64_t size);

// out[i] = keys[i] rotated by 32 bits: (a, b) becomes (b, a).
void transpose_keys(Span<uint64_t> keys, MutSpan<uint64_t> out);

// The transpose of sorted distinct keys, sorted, by counting scatters (no
// comparison sort; on one thread by ranges of rows that stay in the caches): out
// gets every key (a, b) as (b, a), ordered by b and, for one b, by a (the order of
// `keys`, sorted by (a, b), is kept); offsets[v] (as key_offsets of out) = the
// number of keys whose minor id is below v, for v in [0, offsets.size). out must
// hold keys.size keys. Throws std::invalid_argument for keys not strictly
// increasing or a minor id past offsets.size - 2. Runs on up to num_threads
// threads (each with a count per row).
void transpose_sorted_keys(Span<uint64_t> keys, MutSpan<uint64_t> out, MutSpan<int64_t> offsets,
                           int num_threads);

// Fills rows [row_begin, row_end) of the in-neighbour CSR by merging two sorted
// streams of distinct canonical keys: `transposed` (the keys (b, a) of the
// canonical (a, b), sorted) gives row v's sources u of keys (u, v), in order;
// unless `directed`, `forward` (the canonical keys, sorted) then gives row v's
// w of keys (v, w). An entry's edge id is its key's rank in `forward`: the
// forward position for the second part, next_rank[u]++ for the first
// (next_rank starts as each node's first forward position; rows are visited in
// increasing order, so u's keys come in rank order). cursor = {next forward
// position, next transposed position}, advanced in place: call with row ranges
// in order. indices/eid must hold exactly the range's entries. Throws
// std::invalid_argument when they do not or an id is out of range.
template <typename Index>
void merge_csr_rows(Span<uint64_t> forward, Span<uint64_t> transposed, bool directed,
                    int64_t row_begin, int64_t row_end, MutSpan<int64_t> cursor,
                    MutSpan<int64_t> next_rank, MutSpan<Index> indices, MutSpan<int64_t> eid);

// The first invalid row of a block of rows of a CSR, for checking one read in
// pieces: `indptr` holds the offsets of rows [row_begin, row_begin + indptr.size
// - 1) and the end of the last (absolute: indptr[0] is the block's first entry),
// `indices` the block's entries. A row is invalid when its offsets decrease or
// an entry lies outside [0, num_nodes), is smaller than the one before it in the
// row or (when `strict`) equal to it. Returns that row's id, or -1 when every
// row is valid. Throws std::invalid_argument when indices.size is not
// indptr.back() - indptr.front().
template <typename Index>
int64_t find_invalid_csr_block(Span<int64_t> indptr, Span<Index> indices, int64_t row_begin,
                               int64_t num_nodes, bool strict);

// Whether every pair (pairs[2i], pairs[2i + 1]) is u < v with both ids in
// [0, num_nodes) (the rows of edges_shuffled.npy), in one pass. Throws
// std::invalid_argument for an odd count.
template <typename Index>
bool pairs_in_order(Span<Index> pairs, int64_t num_nodes);

// Whether every value lies in [low, high), in one pass.
bool all_in_range(Span<int64_t> values, int64_t low, int64_t high);

// numpy's PCG64 bit generator: a 128-bit LCG with XSL-RR output, and the
// buffered upper half for 32-bit draws (numpy's pcg64_next32).
struct Pcg64State {
  unsigned __int128 state;
  unsigned __int128 increment;
  bool has_uint32;
  uint32_t uinteger;
};

// Shuffles values in place exactly as numpy.random.Generator(PCG64).shuffle
// does a 1-D array (Fisher-Yates from the end, masked rejection sampling of each
// index); `state` is advanced. So values[k] becomes the old values[perm[k]],
// perm = Generator.permutation(len(values)) from the same state.
template <typename T>
void pcg64_shuffle(MutSpan<T> values, Pcg64State& state);

}  // namespace gnncore::io
