#include "io/edge_keys.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io/pieces.h"
#include "parallel.h"

namespace gnncore::io {

namespace {

std::string key_text(uint64_t key) {
  return "(" + std::to_string(key >> kKeyShift) + ", " + std::to_string(key & kKeyMinorMask) +
         ")";
}

}  // namespace

size_t pack_edge_keys(Span<int64_t> src, Span<int64_t> dst, bool unordered,
                      MutSpan<uint64_t> out) {
  if (src.size != dst.size)
    throw std::invalid_argument("src and dst differ in length (" + std::to_string(src.size) +
                                " and " + std::to_string(dst.size) + ")");
  if (out.size < src.size)
    throw std::invalid_argument("out holds " + std::to_string(out.size) + " keys, fewer than " +
                                std::to_string(src.size) + " edges");
  for (size_t i = 0; i < src.size; ++i) {
    const int64_t a = src[i], b = dst[i];
    if (a < 0 || b < 0 || a > kMaxKeyId || b > kMaxKeyId)
      throw std::invalid_argument("edge " + std::to_string(i) + " (" + std::to_string(a) + ", " +
                                  std::to_string(b) + ") has an id outside [0, 2^32)");
  }
  size_t kept = 0;
  for (size_t i = 0; i < src.size; ++i) {
    uint64_t a = static_cast<uint64_t>(src[i]), b = static_cast<uint64_t>(dst[i]);
    if (unordered && b < a) std::swap(a, b);
    out[kept] = a << kKeyShift | b;
    kept += a != b;  // a self-loop's slot is overwritten by the next key
  }
  return kept;
}

// Keys ahead whose minor id's table entry remap_keys prefetches: a random read
// of a table larger than the caches each.
constexpr size_t kRemapAhead = 16;

template <typename Lut>
void remap_keys(MutSpan<uint64_t> keys, Span<Lut> lut, int num_threads) {
  const uint64_t size = lut.size;
  auto mapped = [&](uint64_t key, uint64_t& out) {
    const uint64_t a = key >> kKeyShift, b = key & kKeyMinorMask;
    if (a >= size || b >= size) return false;
    const int64_t ma = static_cast<int64_t>(lut[a]), mb = static_cast<int64_t>(lut[b]);
    if (ma < 0 || mb < 0 || ma > kMaxKeyId || mb > kMaxKeyId) return false;
    out = static_cast<uint64_t>(ma) << kKeyShift | static_cast<uint64_t>(mb);
    return true;
  };
  const size_t n = keys.size;
  const int threads = piece_threads(std::min(kMaxPieceThreads, resolve_threads(num_threads)), n);
  std::vector<size_t> bad(static_cast<size_t>(threads), n);  // first bad key of a piece
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      // the minor ids are in no order: their table entries are fetched ahead
      // (the major ids increase, so theirs stream)
      if (i + kRemapAhead < end) {
        const uint64_t b = keys[i + kRemapAhead] & kKeyMinorMask;
        if (b < size) __builtin_prefetch(&lut[b]);
      }
      if (!mapped(keys[i], keys[i])) {
        bad[static_cast<size_t>(t)] = i;
        return;
      }
    }
  });
  const size_t i = *std::min_element(bad.begin(), bad.end());
  if (i == n) return;
  const uint64_t a = keys[i] >> kKeyShift, b = keys[i] & kKeyMinorMask;
  if (a >= size || b >= size)
    throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                " has an id outside the lookup table of " +
                                std::to_string(size) + " ids");
  throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                              " maps to (" + std::to_string(static_cast<int64_t>(lut[a])) +
                              ", " + std::to_string(static_cast<int64_t>(lut[b])) +
                              "), outside [0, 2^32)");
}

void count_key_degrees(Span<uint64_t> keys, bool directed, MutSpan<int64_t> counts) {
  const uint64_t n = counts.size;
  for (size_t i = 0; i < keys.size; ++i) {
    const uint64_t a = keys[i] >> kKeyShift, b = keys[i] & kKeyMinorMask;
    if (a >= n || b >= n)
      throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                  " has an id outside [0, " + std::to_string(n) + ")");
    ++counts[b];
    if (!directed) ++counts[a];
  }
}

template <typename Index>
void fill_csr_rows(Span<uint64_t> keys, int64_t first_rank, bool directed, int64_t num_nodes,
                   int64_t row_begin, MutSpan<int64_t> cursor, MutSpan<Index> indices,
                   MutSpan<int64_t> eid) {
  if (indices.size != eid.size) throw std::invalid_argument("indices and eid differ in length");
  const int64_t rows = static_cast<int64_t>(cursor.size);
  if (row_begin < 0 || row_begin + rows > num_nodes)
    throw std::invalid_argument("rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_begin + rows) + ") outside [0, " +
                                std::to_string(num_nodes) + ")");
  const uint64_t lo = static_cast<uint64_t>(row_begin);
  const uint64_t span = static_cast<uint64_t>(rows);
  const uint64_t n = static_cast<uint64_t>(num_nodes);
  const int64_t slots = static_cast<int64_t>(indices.size);
  auto put = [&](uint64_t row, uint64_t neighbour, int64_t rank, size_t i) {
    const int64_t slot = cursor[row - lo]++;
    if (slot < 0 || slot >= slots)
      throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                  " fills slot " + std::to_string(slot) + " of row " +
                                  std::to_string(row) + ", outside the " +
                                  std::to_string(slots) + " slots of the range");
    indices[static_cast<size_t>(slot)] = static_cast<Index>(neighbour);
    eid[static_cast<size_t>(slot)] = rank;
  };
  for (size_t i = 0; i < keys.size; ++i) {
    const uint64_t a = keys[i] >> kKeyShift, b = keys[i] & kKeyMinorMask;
    if (a >= n || b >= n)
      throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                  " has an id outside [0, " + std::to_string(num_nodes) + ")");
    const int64_t rank = first_rank + static_cast<int64_t>(i);
    if (b - lo < span) put(b, a, rank, i);
    if (!directed && a - lo < span) put(a, b, rank, i);
  }
}

void key_offsets(Span<uint64_t> keys, MutSpan<int64_t> offsets) {
  if (offsets.size == 0) throw std::invalid_argument("offsets must hold at least one entry");
  const uint64_t rows = offsets.size - 1;
  uint64_t next = 0;  // offsets[0, next) are written
  for (size_t i = 0; i < keys.size; ++i) {
    const uint64_t major = keys[i] >> kKeyShift;
    if (i > 0 && keys[i] < keys[i - 1])
      throw std::invalid_argument("keys are not sorted at position " + std::to_string(i));
    if (major >= rows)
      throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                  " has a major id outside [0, " + std::to_string(rows) + ")");
    for (; next <= major; ++next) offsets[next] = static_cast<int64_t>(i);
  }
  for (; next < offsets.size; ++next) offsets[next] = static_cast<int64_t>(keys.size);
}

void mark_present(MutSpan<uint64_t> bits, Span<int64_t> ids, uint64_t size) {
  if (size > bits.size * 64)
    throw std::invalid_argument("a bitmap of " + std::to_string(bits.size) +
                                " words holds fewer than " + std::to_string(size) + " ids");
  for (size_t i = 0; i < ids.size; ++i) {
    const uint64_t id = static_cast<uint64_t>(ids[i]);  // a negative id wraps past size
    if (id >= size)
      throw std::invalid_argument("id " + std::to_string(ids[i]) + " at position " +
                                  std::to_string(i) + " is outside [0, " +
                                  std::to_string(size) + ")");
    bits[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

void transpose_keys(Span<uint64_t> keys, MutSpan<uint64_t> out) {
  if (out.size < keys.size)
    throw std::invalid_argument("out holds fewer keys than the input");
  for (size_t i = 0; i < keys.size; ++i) out[i] = keys[i] << kKeyShift | keys[i] >> kKeyShift;
}

namespace {

constexpr size_t kTransposeBuckets = 1024;  // transpose_by_buckets: ranges of rows
constexpr size_t kTransposeBucketKeys = size_t{1} << 21;  // ... its buffer: 16 MiB at most

[[noreturn]] void throw_bad_key(Span<uint64_t> keys, size_t i, size_t rows) {
  if ((keys[i] & kKeyMinorMask) >= rows)
    throw std::invalid_argument("key " + std::to_string(i) + " " + key_text(keys[i]) +
                                " has a minor id outside [0, " + std::to_string(rows) + ")");
  throw std::invalid_argument("keys are not sorted and distinct at position " +
                              std::to_string(i));
}

// transpose_sorted_keys on one thread in three passes that stay in the caches,
// not one counting scatter whose every write (and count) misses them and the
// TLB: (1) check the keys and count them per range of 2^shift rows (at most
// kTransposeBuckets ranges); (2) scatter the transposed keys to their range's
// part of `out` (a write stream a range, in order: stable); (3) a range at a
// time, copy its part to a buffer and scatter it back by row (a range's rows
// and keys are in L2), writing the range's offsets. Returns false, with
// nothing written, when a range holds more than kTransposeBucketKeys keys (a
// hub's row): the caller scatters in one pass then.
bool transpose_by_buckets(Span<uint64_t> keys, MutSpan<uint64_t> out, MutSpan<int64_t> offsets) {
  const size_t n = keys.size;
  const size_t rows = offsets.size - 1;
  int shift = 0;
  while (rows > 0 && ((rows - 1) >> shift) >= kTransposeBuckets) ++shift;
  const size_t buckets = rows == 0 ? 0 : ((rows - 1) >> shift) + 1;
  std::vector<int64_t> start(buckets + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t b = keys[i] & kKeyMinorMask;
    if ((i > 0 && keys[i] <= keys[i - 1]) || b >= rows) throw_bad_key(keys, i, rows);
    ++start[(b >> shift) + 1];
  }
  int64_t largest = 0;
  for (size_t k = 0; k < buckets; ++k) {
    largest = std::max(largest, start[k + 1]);
    start[k + 1] += start[k];
  }
  if (static_cast<uint64_t>(largest) > kTransposeBucketKeys) return false;
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = keys[i];
    out[static_cast<size_t>(next[(key & kKeyMinorMask) >> shift]++)] =
        key << kKeyShift | key >> kKeyShift;
  }
  std::vector<uint64_t> part(static_cast<size_t>(largest));
  std::vector<int64_t> slot(size_t{1} << shift);
  for (size_t k = 0; k < buckets; ++k) {
    const size_t first_row = k << shift;
    const size_t span = std::min(rows, (k + 1) << shift) - first_row;
    const size_t begin = static_cast<size_t>(start[k]);
    const size_t size = static_cast<size_t>(start[k + 1]) - begin;
    std::copy(out.data + begin, out.data + begin + size, part.begin());
    std::fill(slot.begin(), slot.begin() + static_cast<std::ptrdiff_t>(span), 0);
    for (size_t i = 0; i < size; ++i) ++slot[(part[i] >> kKeyShift) - first_row];
    int64_t at = start[k];
    for (size_t r = 0; r < span; ++r) {
      offsets[first_row + r] = at;
      const int64_t c = slot[r];
      slot[r] = at;
      at += c;
    }
    for (size_t i = 0; i < size; ++i)
      out[static_cast<size_t>(slot[(part[i] >> kKeyShift) - first_row]++)] = part[i];
  }
  offsets[rows] = static_cast<int64_t>(n);
  return true;
}

}  // namespace

void transpose_sorted_keys(Span<uint64_t> keys, MutSpan<uint64_t> out, MutSpan<int64_t> offsets,
                           int num_threads) {
  if (out.size < keys.size) throw std::invalid_argument("out holds fewer keys than the input");
  if (offsets.size == 0) throw std::invalid_argument("offsets must hold at least one entry");
  const size_t n = keys.size;
  const size_t rows = offsets.size - 1;
  const int threads = piece_threads(std::min(kMaxPieceThreads, resolve_threads(num_threads)), n);
  if (threads == 1 && transpose_by_buckets(keys, out, offsets)) return;
  constexpr size_t kAhead = 16;  // prefetch distance of the random accesses
  // next[t][b]: piece t's count of minor id b, then its next slot for b (the
  // pieces are consecutive in (a, b) order: piece t's keys of one b go after
  // those of the pieces before it, so each b's keys land in increasing a)
  std::vector<std::vector<int64_t>> next(static_cast<size_t>(threads),
                                         std::vector<int64_t>(rows, 0));
  std::vector<size_t> bad(static_cast<size_t>(threads), n);  // first bad key of a piece
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    int64_t* count = next[static_cast<size_t>(t)].data();
    for (size_t i = begin; i < end; ++i) {
      const uint64_t b = keys[i] & kKeyMinorMask;
      if ((i > 0 && keys[i] <= keys[i - 1]) || b >= rows) {
        bad[static_cast<size_t>(t)] = i;
        return;
      }
      if (i + kAhead < end) __builtin_prefetch(count + (keys[i + kAhead] & kKeyMinorMask), 1);
      ++count[b];
    }
  });
  for (const size_t i : bad)
    if (i != n) throw_bad_key(keys, i, rows);
  offsets[rows] = piece_offsets(next, rows, offsets.data);
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    int64_t* slot = next[static_cast<size_t>(t)].data();
    for (size_t i = begin; i < end; ++i) {
      if (i + 2 * kAhead < end) __builtin_prefetch(slot + (keys[i + 2 * kAhead] & kKeyMinorMask), 1);
      if (i + kAhead < end) __builtin_prefetch(out.data + slot[keys[i + kAhead] & kKeyMinorMask], 1);
      const uint64_t key = keys[i];
      out[static_cast<size_t>(slot[key & kKeyMinorMask]++)] = key << kKeyShift | key >> kKeyShift;
    }
  });
}

template <typename Index>
void merge_csr_rows(Span<uint64_t> forward, Span<uint64_t> transposed, bool directed,
                    int64_t row_begin, int64_t row_end, MutSpan<int64_t> cursor,
                    MutSpan<int64_t> next_rank, MutSpan<Index> indices, MutSpan<int64_t> eid) {
  if (indices.size != eid.size) throw std::invalid_argument("indices and eid differ in length");
  if (cursor.size != 2) throw std::invalid_argument("cursor must hold 2 positions");
  const int64_t n = static_cast<int64_t>(next_rank.size);
  if (row_begin < 0 || row_end < row_begin || row_end > n)
    throw std::invalid_argument("rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") outside [0, " + std::to_string(n) +
                                ")");
  size_t f = static_cast<size_t>(cursor[0]), t = static_cast<size_t>(cursor[1]);
  if (f > forward.size || t > transposed.size) throw std::invalid_argument("cursor past the keys");
  const size_t slots = indices.size;
  size_t o = 0;
  auto overflow = [&](int64_t v) {
    return std::invalid_argument("row " + std::to_string(v) + " has more entries than the " +
                                 std::to_string(slots) + " slots of rows [" +
                                 std::to_string(row_begin) + ", " + std::to_string(row_end) + ")");
  };
  // next_rank[u] of the transposed keys ahead, prefetched: a random read each
  constexpr size_t kRankAhead = 16;
  const uint64_t last_node = static_cast<uint64_t>(std::max<int64_t>(n - 1, 0));
  for (int64_t v = row_begin; v < row_end; ++v) {
    const uint64_t row = static_cast<uint64_t>(v);
    for (; t < transposed.size && (transposed[t] >> kKeyShift) == row; ++t) {
      if (t + kRankAhead < transposed.size)
        __builtin_prefetch(
            next_rank.data + std::min(transposed[t + kRankAhead] & kKeyMinorMask, last_node), 1);
      const uint64_t u = transposed[t] & kKeyMinorMask;
      if (u >= static_cast<uint64_t>(n))
        throw std::invalid_argument("transposed key " + std::to_string(t) + " " +
                                    key_text(transposed[t]) + " has an id outside [0, " +
                                    std::to_string(n) + ")");
      if (o == slots) throw overflow(v);
      indices[o] = static_cast<Index>(u);
      eid[o] = next_rank[u]++;
      ++o;
    }
    if (directed) continue;
    for (; f < forward.size && (forward[f] >> kKeyShift) == row; ++f) {
      if (o == slots) throw overflow(v);
      indices[o] = static_cast<Index>(forward[f] & kKeyMinorMask);
      eid[o] = static_cast<int64_t>(f);
      ++o;
    }
  }
  if (o != slots)
    throw std::invalid_argument("rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") have " + std::to_string(o) +
                                " entries, not the " + std::to_string(slots) + " slots given");
  cursor[0] = static_cast<int64_t>(f);
  cursor[1] = static_cast<int64_t>(t);
}

namespace {

constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

inline uint64_t pcg64_next64(Pcg64State& s) {
  s.state = s.state * kPcgMultiplier + s.increment;
  const uint64_t hi = static_cast<uint64_t>(s.state >> 64);
  const uint64_t lo = static_cast<uint64_t>(s.state);
  const uint64_t x = hi ^ lo;
  const unsigned rot = static_cast<unsigned>(hi >> 58);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

inline uint32_t pcg64_next32(Pcg64State& s) {
  if (s.has_uint32) {
    s.has_uint32 = false;
    return s.uinteger;
  }
  const uint64_t next = pcg64_next64(s);
  s.has_uint32 = true;
  s.uinteger = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

// numpy's random_interval: a uniform integer in [0, max] by masked rejection.
inline uint64_t random_interval(Pcg64State& s, uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (pcg64_next32(s) & mask)) > max) {
    }
  } else {
    while ((value = (pcg64_next64(s) & mask)) > max) {
    }
  }
  return value;
}

}  // namespace

template <typename T>
void pcg64_shuffle(MutSpan<T> values, Pcg64State& state) {
  // The draws do not depend on the data: they are made a batch ahead, so the
  // far end of each swap can be prefetched.
  constexpr size_t kBatch = 4096, kAhead = 16;
  std::vector<uint64_t> picks(kBatch);
  size_t i = values.size;  // swaps positions i - 1 down to 1
  while (i > 1) {
    const size_t batch = std::min(kBatch, i - 1);
    for (size_t k = 0; k < batch; ++k) picks[k] = random_interval(state, i - 1 - k);
    for (size_t k = 0; k < batch; ++k) {
      if (k + kAhead < batch) __builtin_prefetch(values.data + picks[k + kAhead], 1);
      const size_t at = i - 1 - k;
      std::swap(values[at], values[static_cast<size_t>(picks[k])]);
    }
    i -= batch;
  }
}

template <typename Index>
int64_t find_invalid_csr_block(Span<int64_t> indptr, Span<Index> indices, int64_t row_begin,
                               int64_t num_nodes, bool strict) {
  if (indptr.size == 0) return -1;
  const int64_t base = indptr[0];
  if (indptr[indptr.size - 1] - base != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("the block holds " + std::to_string(indices.size) +
                                " entries, its offsets span " +
                                std::to_string(indptr[indptr.size - 1] - base));
  for (size_t r = 0; r + 1 < indptr.size; ++r) {
    const int64_t lo = indptr[r] - base, hi = indptr[r + 1] - base;
    const int64_t row = row_begin + static_cast<int64_t>(r);
    if (lo > hi || lo < 0 || hi > static_cast<int64_t>(indices.size)) return row;
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t u = static_cast<int64_t>(indices[j]);
      if (u < 0 || u >= num_nodes) return row;
      if (j > lo) {
        const int64_t prev = static_cast<int64_t>(indices[j - 1]);
        if (prev > u || (strict && prev == u)) return row;
      }
    }
  }
  return -1;
}

template <typename Index>
bool pairs_in_order(Span<Index> pairs, int64_t num_nodes) {
  if (pairs.size % 2 != 0)
    throw std::invalid_argument("pairs hold an odd count of ids (" + std::to_string(pairs.size) +
                                ")");
  // u < v and u >= 0 leave v >= 1: both in range when u >= 0 and v < num_nodes
  bool ok = true;
  for (size_t i = 0; i < pairs.size; i += 2) {
    const int64_t u = static_cast<int64_t>(pairs[i]), v = static_cast<int64_t>(pairs[i + 1]);
    ok &= (u >= 0) & (u < v) & (v < num_nodes);
  }
  return ok;
}

bool all_in_range(Span<int64_t> values, int64_t low, int64_t high) {
  bool ok = true;
  for (size_t i = 0; i < values.size; ++i) ok &= (values[i] >= low) & (values[i] < high);
  return ok;
}

template bool pairs_in_order<int32_t>(Span<int32_t>, int64_t);
template bool pairs_in_order<int64_t>(Span<int64_t>, int64_t);
template int64_t find_invalid_csr_block<int32_t>(Span<int64_t>, Span<int32_t>, int64_t, int64_t,
                                                bool);
template int64_t find_invalid_csr_block<int64_t>(Span<int64_t>, Span<int64_t>, int64_t, int64_t,
                                                bool);
template void remap_keys<int32_t>(MutSpan<uint64_t>, Span<int32_t>, int);
template void remap_keys<int64_t>(MutSpan<uint64_t>, Span<int64_t>, int);
template void fill_csr_rows<int32_t>(Span<uint64_t>, int64_t, bool, int64_t, int64_t,
                                     MutSpan<int64_t>, MutSpan<int32_t>, MutSpan<int64_t>);
template void fill_csr_rows<int64_t>(Span<uint64_t>, int64_t, bool, int64_t, int64_t,
                                     MutSpan<int64_t>, MutSpan<int64_t>, MutSpan<int64_t>);
template void merge_csr_rows<int32_t>(Span<uint64_t>, Span<uint64_t>, bool, int64_t, int64_t,
                                      MutSpan<int64_t>, MutSpan<int64_t>, MutSpan<int32_t>,
                                      MutSpan<int64_t>);
template void merge_csr_rows<int64_t>(Span<uint64_t>, Span<uint64_t>, bool, int64_t, int64_t,
                                      MutSpan<int64_t>, MutSpan<int64_t>, MutSpan<int64_t>,
                                      MutSpan<int64_t>);
template void pcg64_shuffle<uint64_t>(MutSpan<uint64_t>, Pcg64State&);
template void pcg64_shuffle<int64_t>(MutSpan<int64_t>, Pcg64State&);

}  // namespace gnncore::io
