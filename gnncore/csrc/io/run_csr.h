// The in-neighbour CSR of sorted canonical keys held in a key run on disk
// (io/external_sort.h), in bounded memory and a fixed number of sequential
// passes whatever the number of row ranges:
//   1. count_key_ends over the (mapped) run: each node's count as the major
//      and as the minor id of a key (the caller maps the ids and writes the
//      mapped run in the same pass);
//   2. split_key_run: one pass over the mapped run writes, per row range, the
//      keys whose minor id falls in it (a sub-run, still sorted);
//   3. fill_csr_range, range after range: the range's sub-run (the entries
//      (b, a) of keys (a, b), scattered by a cursor per row) and, unless
//      directed, the next keys of the mapped run (the entries (a, b) of the
//      keys whose major id is in the range, read in order).
// Each row lists its neighbours in key order, exactly as fill_csr_rows
// (io/edge_keys.h) fills it; an entry's edge id is its key's rank in the run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/external_sort.h"
#include "types.h"

namespace gnncore::io {

// Adds one to major[a + 1] and to minor[b + 1] for every key (a, b) (counts
// stored one position up: an in-place cumulative sum then gives CSR offsets).
// Throws std::invalid_argument for an id past either array.
void count_key_ends(Span<uint64_t> keys, MutSpan<int64_t> major, MutSpan<int64_t> minor);

// Merges the key runs `run_paths` of raw-id keys (dropping keys repeated across
// runs), maps each distinct key's ids through `lut` (remap_keys: monotone, so
// the mapped keys still increase), counts their ends (count_key_ends) and
// writes the mapped keys as the key run `out_path`: the final merge and step 1
// in one pass, instead of a merge then a pass over the merged run. Each run and
// the output go through a buffer of `buffer_bytes` (the output two, with
// `direct`: written past the page cache, KeyRunWriter). Returns the keys
// written. Throws std::invalid_argument for an id outside the lut or the counts.
template <typename Lut>
int64_t merge_map_key_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                           size_t buffer_bytes, Span<Lut> lut, MutSpan<int64_t> major,
                           MutSpan<int64_t> minor, bool direct = false);

// Reads the key run `run_path` once and writes to bucket_paths[r] (key runs)
// its keys whose minor id b is in [bounds[r], bounds[r + 1]); bounds has
// bucket_paths.size() + 1 nondecreasing entries. Each output gets a write
// buffer of `buffer_bytes`. Returns the keys read. Throws std::invalid_argument
// for a minor id outside [bounds[0], bounds.back()), RunFileError for files
// that cannot be read or written.
int64_t split_key_run(const std::string& run_path, Span<int64_t> bounds,
                      const std::vector<std::string>& bucket_paths, size_t buffer_bytes);

// Fills rows [row_begin, row_end) of the in-neighbour CSR into indices/eid
// (exactly the range's entries, indptr[row_end] - indptr[row_begin]): first, for
// each key (a, b) of the sub-run `bucket` (minor ids in the range, keys in
// order), entry a of row b with edge id next_rank[a]++ (next_rank: each node's
// first rank as a major id, advanced in place across calls); then, unless
// `directed`, for each of the next keys (a, b) of `forward` (the whole run, read
// in step with the ranges, so the keys with a in the range), entry b of row a
// with the key's rank. `cursor` is scratch of at least row_end - row_begin.
// Throws std::invalid_argument when the keys do not fit the offsets.
template <typename Index>
void fill_csr_range(KeyRunReader& bucket, KeyRunReader* forward, int64_t row_begin,
                    int64_t row_end, Span<int64_t> indptr, MutSpan<int64_t> next_rank,
                    MutSpan<int64_t> cursor, MutSpan<Index> indices, MutSpan<int64_t> eid);

}  // namespace gnncore::io
