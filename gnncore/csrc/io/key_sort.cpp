#include "io/key_sort.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/clones.h"
#include "io/edge_keys.h"
#include "io/pieces.h"
#include "parallel.h"

namespace gnncore::io {

namespace {

// Whole-array LSD passes (few keys, or keys sorted by their minor ids).
constexpr int kDigitBits = 14;  // 3 passes over 42-bit keys (2M nodes), not 4
constexpr size_t kBuckets = size_t{1} << kDigitBits;

// Bucketed sort (many keys): one scatter by the top bits out of the caches,
// then each bucket sorted in them.
constexpr size_t kBucketedMinKeys = size_t{1} << 18;
constexpr int kTopMaxBits = 12;                  // at most 4096 buckets in the scatter
constexpr size_t kBucketKeys = size_t{1} << 13;  // a bucket's aim: 64 KiB, twice in L2
constexpr int kLocalDigitBits = 11;              // the in-cache passes: 2048 counts each
constexpr size_t kLocalDigits = size_t{1} << kLocalDigitBits;
constexpr int kMaxLocalPasses = (64 + kLocalDigitBits - 1) / kLocalDigitBits;
constexpr size_t kInsertionKeys = 32;  // a bucket this small: insertion sort

// One stable LSD pass on digit (key >> shift) & (2^bits - 1): in -> out.
void radix_pass(const uint64_t* in, uint64_t* out, size_t n, int shift, int bits, int threads) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const size_t buckets = size_t{1} << bits;
  std::vector<std::array<size_t, kBuckets>> hist(static_cast<size_t>(threads));
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    auto& h = hist[static_cast<size_t>(t)];
    h.fill(0);
    for (size_t i = begin; i < end; ++i) ++h[(in[i] >> shift) & mask];
  });
  piece_offsets(hist, buckets, static_cast<size_t*>(nullptr));
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    auto& h = hist[static_cast<size_t>(t)];
    for (size_t i = begin; i < end; ++i) out[h[(in[i] >> shift) & mask]++] = in[i];
  });
}

// (a << 32 | b) to (a << minor_bits | b): fewer digits to sort.
inline uint64_t compact(uint64_t k, int minor_bits) {
  return (k >> kKeyShift) << minor_bits | (k & kKeyMinorMask);
}

// The distinct keys of sorted[0, m), expanded back from (a << minor_bits | b)
// to (a << 32 | b), into out (which may be sorted itself, or trail it);
// returns their count.
inline size_t unique_expanded(const uint64_t* sorted, size_t m, int minor_bits, uint64_t* out) {
  const uint64_t minor_mask = (uint64_t{1} << minor_bits) - 1;
  size_t count = 0;
  uint64_t prev = 0;  // kept here: out may have overwritten sorted[i - 1]
  for (size_t i = 0; i < m; ++i) {
    const uint64_t k = sorted[i];
    if (i > 0 && k == prev) continue;
    prev = k;
    out[count++] = (k >> minor_bits) << kKeyShift | (k & minor_mask);
  }
  return count;
}

// The compacted keys a[0, n) sorted by LSD passes over bits [low, low + bits)
// (ping-ponging with b), then deduplicated and expanded into out; returns the
// count. The whole-array path.
size_t sort_by_passes(uint64_t* a, uint64_t* b, size_t n, int low, int bits, int threads,
                      int minor_bits, uint64_t* out) {
  const int passes = std::max(1, (bits + kDigitBits - 1) / kDigitBits);
  const int digit = (bits + passes - 1) / passes;
  for (int p = 0; p < passes && bits > 0; ++p) {
    radix_pass(a, b, n, low + p * digit, std::min(digit, bits - p * digit), threads);
    std::swap(a, b);
  }
  return unique_expanded(a, n, minor_bits, out);
}

// counts[p * 2^digit + d]: the keys of a[0, m) whose p-th digit is d, for the
// P digits of `digit` bits from the lowest (one read, the passes unrolled).
template <int P>
inline void count_digits(const uint64_t* a, size_t m, int digit, uint32_t* counts) {
  const size_t digits = size_t{1} << digit;
  const uint64_t mask = digits - 1;
  std::fill(counts, counts + P * digits, 0u);
  for (size_t i = 0; i < m; ++i) {
    const uint64_t k = a[i];
    for (int p = 0; p < P; ++p)
      ++counts[static_cast<size_t>(p) * digits + ((k >> (p * digit)) & mask)];
  }
}

// a[0, m) sorted by its low `bits` bits, by LSD passes in the caches with b as
// scratch (a digit whose keys all agree is skipped); returns a or b, whichever
// holds the result. `counts`: kMaxLocalPasses * kLocalDigits.
inline uint64_t* sort_bucket(uint64_t* a, uint64_t* b, size_t m, int bits, uint32_t* counts) {
  if (m <= kInsertionKeys) {
    for (size_t i = 1; i < m; ++i) {
      const uint64_t k = a[i];
      size_t j = i;
      for (; j > 0 && a[j - 1] > k; --j) a[j] = a[j - 1];
      a[j] = k;
    }
    return a;
  }
  if (m > UINT32_MAX) {  // past the 32-bit counts
    std::sort(a, a + m);
    return a;
  }
  const int passes = std::max(1, (bits + kLocalDigitBits - 1) / kLocalDigitBits);
  const int digit = (bits + passes - 1) / passes;
  const size_t digits = size_t{1} << digit;
  const uint64_t mask = digits - 1;
  switch (passes) {
    case 1: count_digits<1>(a, m, digit, counts); break;
    case 2: count_digits<2>(a, m, digit, counts); break;
    case 3: count_digits<3>(a, m, digit, counts); break;
    case 4: count_digits<4>(a, m, digit, counts); break;
    case 5: count_digits<5>(a, m, digit, counts); break;
    default: count_digits<kMaxLocalPasses>(a, m, digit, counts); break;
  }
  for (int p = 0; p < passes; ++p) {
    uint32_t* c = counts + static_cast<size_t>(p) * digits;
    const int shift = p * digit;
    if (c[(a[0] >> shift) & mask] == m) continue;  // one digit value: nothing moves
    uint32_t sum = 0;
    for (size_t d = 0; d < digits; ++d) {
      const uint32_t v = c[d];
      c[d] = sum;
      sum += v;
    }
    for (size_t i = 0; i < m; ++i) {
      const uint64_t k = a[i];
      b[c[(k >> shift) & mask]++] = k;
    }
    std::swap(a, b);
  }
  return a;
}

// How the bucketed sort cuts the compacted keys: bucket = key >> low_bits.
struct Buckets {
  int minor_bits;  // (a << 32 | b) is compacted to (a << minor_bits | b)
  int low_bits;

  uint64_t compacted(uint64_t k) const { return compact(k, minor_bits); }
};

// h[bucket] += the keys of a[begin, end) in it.
GNNCORE_SHIFT_CLONES
void count_buckets(const uint64_t* a, size_t begin, size_t end, Buckets cut, size_t* h) {
  for (size_t i = begin; i < end; ++i) ++h[cut.compacted(a[i]) >> cut.low_bits];
}

// The compacted keys of a[begin, end) to out at their buckets' slots h (advanced).
GNNCORE_SHIFT_CLONES
void scatter_buckets(const uint64_t* a, size_t begin, size_t end, Buckets cut, size_t* h,
                     uint64_t* out) {
  for (size_t i = begin; i < end; ++i) {
    const uint64_t k = cut.compacted(a[i]);
    out[h[k >> cut.low_bits]++] = k;
  }
}

// Buckets [first, last) of tmp (bucket b: [start[b], start[b + 1])) sorted,
// deduplicated and expanded into a from a[start[first]]; returns the count.
// a's slots of those buckets are the sort's scratch: in place or from tmp, the
// reads stay ahead of the writes.
GNNCORE_SHIFT_CLONES
size_t sort_buckets(uint64_t* a, uint64_t* tmp, const size_t* start, size_t first, size_t last,
                    Buckets cut) {
  std::vector<uint32_t> counts(static_cast<size_t>(kMaxLocalPasses) * kLocalDigits);
  size_t out = start[first];
  for (size_t b = first; b < last; ++b) {
    const size_t s = start[b], m = start[b + 1] - s;
    if (m == 0) continue;
    if (b + 1 < last)  // the next bucket's lines (its head) come in while this one is sorted
      for (size_t x = start[b + 1]; x < std::min(start[b + 2], start[b + 1] + 4 * kBucketKeys);
           x += 8) {
        __builtin_prefetch(tmp + x, 0);
        __builtin_prefetch(a + x, 1);
      }
    const uint64_t* sorted = sort_bucket(tmp + s, a + s, m, cut.low_bits, counts.data());
    out += unique_expanded(sorted, m, cut.minor_bits, a + out);  // out <= s: behind the reads
  }
  return out - start[first];
}

// The bucketed sort of the keys a[0, n) (compacted: total_bits wide), tmp as
// scratch, deduplicated and expanded into a; returns the count. One parallel
// scatter by the top bits into tmp, then the threads take contiguous runs of
// buckets (about n / threads keys each), sort each in the caches and write its
// distinct keys into a from the run's start; the runs are moved together last.
size_t sort_in_buckets(uint64_t* a, uint64_t* tmp, size_t n, int total_bits, int minor_bits,
                       int threads) {
  int top_bits = 1;
  while (top_bits < kTopMaxBits && (n >> top_bits) > kBucketKeys) ++top_bits;
  top_bits = std::min(top_bits, total_bits - 1);
  const Buckets cut{minor_bits, total_bits - top_bits};
  const size_t buckets = size_t{1} << top_bits;
  const size_t tcount = static_cast<size_t>(threads);
  std::vector<std::vector<size_t>> hist(tcount, std::vector<size_t>(buckets, 0));
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    count_buckets(a, begin, end, cut, hist[static_cast<size_t>(t)].data());
  });
  // start[b]: bucket b's first slot; hist[t][b]: piece t's next slot in it
  std::vector<size_t> start(buckets + 1);
  start[buckets] = piece_offsets(hist, buckets, start.data());
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    scatter_buckets(a, begin, end, cut, hist[static_cast<size_t>(t)].data(), tmp);
  });
  // thread t: buckets [first[t], first[t + 1])
  std::vector<size_t> first(tcount + 1, buckets), kept(tcount, 0);
  for (size_t t = 1; t < tcount; ++t)
    first[t] = static_cast<size_t>(
        std::lower_bound(start.begin(), start.end() - 1, n * t / tcount) - start.begin());
  first[0] = 0;
  parallel_teams(threads, [&](int t) {
    const size_t ti = static_cast<size_t>(t);
    kept[ti] = sort_buckets(a, tmp, start.data(), first[ti], first[ti + 1], cut);
  });
  size_t count = kept[0];
  for (size_t t = 1; t < tcount; ++t) {
    const size_t from = start[first[t]];
    if (kept[t] > 0 && from != count)
      std::memmove(a + count, a + from, kept[t] * sizeof(uint64_t));
    count += kept[t];
  }
  return count;
}

}  // namespace

size_t sort_unique_keys(MutSpan<uint64_t> keys, MutSpan<uint64_t> tmp, int num_threads,
                        bool minor_sorted) {
  const size_t n = keys.size;
  if (tmp.size < n)
    throw std::invalid_argument("tmp holds " + std::to_string(tmp.size) + " keys, fewer than " +
                                std::to_string(n));
  if (n == 0) return 0;
  const int threads = piece_threads(std::min(kMaxPieceThreads, resolve_threads(num_threads)), n);
  // the bits the keys use: compacted (compact) to fewer digits to sort
  std::vector<uint64_t> major_or(static_cast<size_t>(threads), 0), minor_or(major_or);
  parallel_pieces(threads, n, [&](int t, size_t begin, size_t end) {
    uint64_t major = 0, minor = 0;
    for (size_t i = begin; i < end; ++i) {
      major |= keys[i] >> kKeyShift;
      minor |= keys[i] & kKeyMinorMask;
    }
    major_or[static_cast<size_t>(t)] = major;
    minor_or[static_cast<size_t>(t)] = minor;
  });
  uint64_t major = 0, minor = 0;
  for (size_t t = 0; t < major_or.size(); ++t) {
    major |= major_or[t];
    minor |= minor_or[t];
  }
  const int minor_bits = bit_width(minor);
  const int total_bits = bit_width(major) + minor_bits;
  uint64_t* a = keys.data;
  if (!minor_sorted && n >= kBucketedMinKeys && total_bits > kLocalDigitBits)
    return sort_in_buckets(a, tmp.data, n, total_bits, minor_bits, threads);
  if (minor_bits < kKeyShift)
    parallel_pieces(threads, n, [&](int, size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) a[i] = compact(a[i], minor_bits);
    });
  // LSD passes over bits [low, total_bits): stable, so keys already ordered by
  // their minor ids need only the major bits
  const int low = minor_sorted ? minor_bits : 0;
  return sort_by_passes(a, tmp.data, n, low, total_bits - low, threads, minor_bits, a);
}

}  // namespace gnncore::io
