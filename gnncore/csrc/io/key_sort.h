// Sorting packed edge keys (io/edge_keys.h: a << 32 | b) and dropping repeats:
// the sort of ingestion's key buffer and of a transpose.
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gnncore::io {

// Sorts keys ascending and drops repeats in place; `tmp` is scratch of at
// least keys.size. Returns the number of distinct keys, which occupy
// keys[0, count). Radix sort over the bits the keys use, `num_threads` threads
// (0: OpenMP's default): many keys take one scatter by their top bits into
// buckets of a few thousand keys, then each bucket is sorted and deduplicated
// in the caches; few keys, LSD passes over the whole array. With
// `minor_sorted` the keys must already be in increasing order of their minor
// ids (key & mask): a stable sort by the major ids alone then suffices (the
// transpose of sorted keys), half the passes.
size_t sort_unique_keys(MutSpan<uint64_t> keys, MutSpan<uint64_t> tmp, int num_threads,
                        bool minor_sorted = false);

}  // namespace gnncore::io
