// Pieces shared by the uniform neighbour samplers (sampler/neighbor.cpp,
// sampler/dense.cpp): a counter-seeded generator, an int64 id hash map, uniform
// sampling without replacement and the CSR / seed validation.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "huge_array.h"
#include "parallel.h"
#include "random.h"
#include "types.h"

namespace gnncore::sampling {

// ---------------------------------------------------------------- random bits

// xoshiro256++ seeded from a 64-bit key through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t key) {
    for (auto& w : s_) {
      key += kGolden;
      w = mix64(key);
    }
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform integer in [0, n), n > 0 (Lemire's unbiased multiply-shift).
  uint64_t below(uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// The generator of frontier position `pos` in hop `hop`: a pure function of
// (seed, hop, pos), so the draws do not depend on how the hop is split into
// threads.
inline Rng node_rng(uint64_t seed, size_t hop, size_t pos) {
  return Rng(mix64(mix64(mix64(seed) + hop) + pos));
}

// A pause in a spin-wait loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// ------------------------------------------------------------- id hash table

inline size_t hash_slot(uint64_t key, unsigned shift) {
  return static_cast<size_t>((key * kGolden) >> shift);
}

// Open addressing with linear probing for non-negative keys; -1 marks empty.
// Key and value share a slot so a look-up touches one cache line.
class IdMap {
 public:
  explicit IdMap(size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap <<= 1;
    resize(cap);
  }
  void prefetch(int64_t key) const {
    __builtin_prefetch(&slots_[hash_slot(static_cast<uint64_t>(key), shift_)]);
  }
  // Returns the value of `key`, inserting `value` first if it is absent.
  int64_t get_or_insert(int64_t key, int64_t value, bool* inserted) {
    size_t i = hash_slot(static_cast<uint64_t>(key), shift_);
    while (true) {
      if (slots_[i].key == key) {
        *inserted = false;
        return slots_[i].value;
      }
      if (slots_[i].key == -1) break;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, value};
    *inserted = true;
    if (++size_ * 2 > slots_.size()) grow();
    return value;
  }

 private:
  struct Slot {
    int64_t key, value;
  };
  void resize(size_t cap) {
    slots_.assign(cap, Slot{-1, 0});
    mask_ = cap - 1;
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
  }
  void grow() { rehash(slots_.size() * 2); }
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    resize(cap);
    for (const Slot& slot : old) {
      if (slot.key == -1) continue;
      size_t i = hash_slot(static_cast<uint64_t>(slot.key), shift_);
      while (slots_[i].key != -1) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0, mask_ = 0;
  unsigned shift_ = 64;
};

// The largest graph (in nodes) whose samplers map ids through a direct array
// (LocalIds); 2^26 by default (256 MiB per sampling thread at most).
inline std::atomic<int64_t>& direct_map_max_nodes() {
  static std::atomic<int64_t> limit{int64_t{1} << 26};
  return limit;
}

// A thread's direct id map: one int32 per graph node. Its look-ups hit
// random places of the whole table, so a table of 4 MiB or more lives in
// 2 MiB-aligned memory advised for transparent huge pages: with 4 KiB pages
// nearly every look-up of a multi-MiB table also misses the TLB.
//
// An entry holds a batch stamp in its high bits and a local id in its low
// `id_bits()` bits (enough for any id below the table's size); an entry is
// set in the current batch only when its stamp is the current one. A new
// batch takes the next stamp (next_stamp) instead of resetting the entries
// it set, and the whole table is cleared only when the stamps run out (once
// every 1,023 batches for a 2M-node graph). Tables too large to leave room
// for 7 stamps (over 2^28 entries) have none: their users reset the entries
// they set (next_stamp returns 0, and entries are -1 when unset).
class DirectTable {
 public:
  DirectTable() = default;
  DirectTable(const DirectTable&) = delete;
  DirectTable& operator=(const DirectTable&) = delete;
  ~DirectTable() { std::free(data_); }
  // The table, with at least `n` entries.
  int32_t* at_least(size_t n) {
    if (n <= size_) return data_;
    // Huge pages for tables of two or more of them (1M nodes and up); a small
    // graph's table stays small (there is one per sampling thread).
    const size_t want = n * sizeof(int32_t);
    size_t bytes = (want + 63) / 64 * 64;
    void* p = want >= 2 * kHugePageBytes ? huge_page_alloc(want, &bytes)
                                         : std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::free(data_);  // nothing of the old table is needed
    data_ = static_cast<int32_t*>(p);
    size_ = bytes / sizeof(int32_t);
    bits_ = 0;
    while ((size_t{1} << bits_) < size_) ++bits_;
    max_stamp_ = bits_ <= 31 - kMinStampBits ? (uint32_t{1} << (31 - bits_)) - 1 : 0;
    stamp_ = 0;
    clear();
    return data_;
  }
  // Low bits of an entry that hold the local id.
  unsigned id_bits() const { return bits_; }
  // The stamp of a new batch (already shifted into the high bits), or 0 when
  // the table has no stamps.
  int32_t next_stamp() {
    if (max_stamp_ == 0) return 0;
    if (stamp_ == max_stamp_) {  // the stamps ran out: forget every batch
      stamp_ = 0;
      clear();
    }
    ++stamp_;
    return static_cast<int32_t>(stamp_ << bits_);
  }

 private:
  static constexpr unsigned kMinStampBits = 3;
  // Every entry unset: stamp 0 (never a batch's) or -1 without stamps.
  void clear() { std::fill(data_, data_ + size_, max_stamp_ == 0 ? -1 : 0); }
  int32_t* data_ = nullptr;
  size_t size_ = 0;
  unsigned bits_ = 0;
  uint32_t max_stamp_ = 0, stamp_ = 0;
};

// Global id -> local id of one batch. On graphs of at most
// direct_map_max_nodes() nodes it is an array indexed by global id: one per
// calling thread, kept between calls (4 bytes per graph node), each batch
// with its own stamp (DirectTable), so a batch pays neither hashing,
// probing, growing nor clearing. Larger graphs use an IdMap. Values must be
// below the number of graph nodes (and 2^31).
class LocalIds {
 public:
  LocalIds(int64_t num_nodes, size_t expected)
      : direct_(num_nodes <= direct_map_max_nodes().load(std::memory_order_relaxed)),
        map_(direct_ ? 0 : expected) {
    if (!direct_) return;
    DirectTable& table = table_of_thread();
    table_ = table.at_least(static_cast<size_t>(num_nodes));
    stamp_ = table.next_stamp();
    if (stamp_ != 0) id_mask_ = static_cast<int32_t>((uint32_t{1} << table.id_bits()) - 1);
    else touched_.reserve(expected);  // no stamps: id_bits() may exceed 31
  }
  ~LocalIds() {
    if (!direct_ || stamp_ != 0) return;
    const size_t n = touched_.size();
    for (size_t i = 0; i < n; ++i) {  // random writes: fetch their lines ahead
      if (i + kResetAhead < n) __builtin_prefetch(table_ + touched_[i + kResetAhead], 1);
      table_[touched_[i]] = -1;
    }
  }
  LocalIds(const LocalIds&) = delete;
  LocalIds& operator=(const LocalIds&) = delete;

  // Room for `n` keys in all, so that inserting them does not reallocate.
  void reserve(size_t n) {
    if (direct_ && stamp_ == 0) touched_.reserve(n);
  }
  void prefetch(int64_t key) const {
    if (direct_) __builtin_prefetch(table_ + key);
    else map_.prefetch(key);
  }
  // Returns the value of `key` (in [0, num_nodes)), inserting `value` first if
  // it is absent.
  int64_t get_or_insert(int64_t key, int64_t value, bool* inserted) {
    if (!direct_) return map_.get_or_insert(key, value, inserted);
    int32_t& slot = table_[key];
    if (stamp_ != 0) {
      if ((slot & ~id_mask_) == stamp_) {
        *inserted = false;
        return slot & id_mask_;
      }
      slot = stamp_ | static_cast<int32_t>(value);
      *inserted = true;
      return value;
    }
    if (slot >= 0) {
      *inserted = false;
      return slot;
    }
    slot = static_cast<int32_t>(value);
    touched_.push_back(key);
    *inserted = true;
    return value;
  }

 private:
  static constexpr size_t kResetAhead = 16;
  static DirectTable& table_of_thread() {
    thread_local DirectTable table;
    return table;
  }
  bool direct_;
  IdMap map_;
  int32_t* table_ = nullptr;
  int32_t stamp_ = 0, id_mask_ = 0;
  std::vector<int64_t> touched_;  // only without stamps
};

// Local id of neighbour `u`, read from indices[j]: appended to `node` (and
// mapped in `local_of`) when first seen. Throws std::out_of_range when `u` is
// outside [0, num_nodes).
inline int64_t neighbor_local_id(LocalIds& local_of, std::vector<NodeId>& node, int64_t u,
                                 int64_t j, int64_t num_nodes) {
  if (u < 0 || u >= num_nodes)
    throw std::out_of_range("indices[" + std::to_string(j) + "] = " + std::to_string(u) +
                            " is outside [0, " + std::to_string(num_nodes) + ")");
  bool inserted = false;
  const int64_t local = local_of.get_or_insert(u, static_cast<int64_t>(node.size()), &inserted);
  if (inserted) node.push_back(u);
  return local;
}

// The first nodes of a sample: appends the distinct `seeds` to `node` in
// first-seen order, each mapped in `local_of` to its position in `node`.
inline void add_seed_nodes(Span<NodeId> seeds, LocalIds& local_of, std::vector<NodeId>& node) {
  node.reserve(node.size() + seeds.size);
  bool inserted = false;
  for (size_t i = 0; i < seeds.size; ++i) {
    local_of.get_or_insert(seeds[i], static_cast<int64_t>(node.size()), &inserted);
    if (inserted) node.push_back(seeds[i]);
  }
}

// Per-thread scratch buffers of the sampling kernels (the CSR offsets and
// neighbour ids of a batch's draws), kept between calls so that a batch does
// not map fresh pages for them. A kernel takes them once per call and must not
// call another kernel while it holds them.
struct Scratch {
  std::vector<int64_t> offset, pos, nbr;
};
inline Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// ------------------------------------------------------------------ sampling

// Writes k distinct offsets of [0, n), k < n, into out[0..k), sorted.
inline void sample_without_replacement(Rng& rng, int64_t n, int64_t k, int64_t* out,
                                std::vector<int64_t>& scratch) {
  if (k <= 64) {  // Floyd's algorithm with a linear membership scan.
    int64_t filled = 0;
    for (int64_t j = n - k; j < n; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(j) + 1));
      const bool seen = std::find(out, out + filled, t) != out + filled;
      out[filled++] = seen ? j : t;
    }
  } else if (n <= 4 * k) {  // Partial Fisher-Yates over the whole row.
    scratch.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) scratch[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t r = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - i)));
      std::swap(scratch[static_cast<size_t>(i)], scratch[static_cast<size_t>(r)]);
      out[i] = scratch[static_cast<size_t>(i)];
    }
  } else {  // Floyd's algorithm with an open-addressing set.
    size_t cap = 16;
    while (cap < 2 * static_cast<size_t>(k)) cap <<= 1;
    unsigned shift = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift;
    scratch.assign(cap, -1);
    const size_t mask = cap - 1;
    auto insert = [&](int64_t v) {  // true if v was new
      size_t i = hash_slot(static_cast<uint64_t>(v), shift);
      while (scratch[i] != -1) {
        if (scratch[i] == v) return false;
        i = (i + 1) & mask;
      }
      scratch[i] = v;
      return true;
    };
    int64_t filled = 0;
    for (int64_t j = n - k; j < n; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(j) + 1));
      if (insert(t)) {
        out[filled++] = t;
      } else {
        insert(j);
        out[filled++] = j;
      }
    }
  }
  std::sort(out, out + k);
}


// Throws std::invalid_argument unless indptr is a non-empty array that starts
// at 0 and ends at len(indices), std::out_of_range for a seed outside [0, N).
// Returns N. (Rows are checked for monotonicity when they are expanded.)
inline int64_t validate_csr_and_seeds(Span<int64_t> indptr, size_t num_indices,
                                      Span<NodeId> seeds) {
  if (indptr.size == 0)
    throw std::invalid_argument("indptr must have num_nodes + 1 >= 1 entries, got 0");
  const int64_t num_nodes = static_cast<int64_t>(indptr.size) - 1;
  const int64_t num_edges = static_cast<int64_t>(num_indices);
  if (indptr[0] != 0 || indptr[indptr.size - 1] != num_edges)
    throw std::invalid_argument("indptr must start at 0 and end at len(indices) = " +
                                std::to_string(num_edges) + ", got " +
                                std::to_string(indptr[0]) + " and " +
                                std::to_string(indptr[indptr.size - 1]));
  for (size_t i = 0; i < seeds.size; ++i)
    if (seeds[i] < 0 || seeds[i] >= num_nodes)
      throw std::out_of_range("seeds[" + std::to_string(i) + "] = " +
                              std::to_string(seeds[i]) + " is outside [0, " +
                              std::to_string(num_nodes) + ")");
  return num_nodes;
}

// Throws std::invalid_argument for a fanout below -1.
inline void validate_fanouts(const std::vector<int64_t>& fanouts) {
  for (size_t h = 0; h < fanouts.size(); ++h)
    if (fanouts[h] < -1)
      throw std::invalid_argument("fanouts[" + std::to_string(h) + "] = " +
                                  std::to_string(fanouts[h]) +
                                  " is negative; use -1 for all neighbours");
}

// How far ahead draw_hop prefetches a frontier node's indptr entry and row.
constexpr int64_t kPtrAhead = 16, kRowAhead = 6;

// draw_hop's unit of work: it draws the positions of kDrawGroup nodes,
// prefetching each drawn entry of `indices`, then reads them. On a
// heavy-tailed graph the frontier is biased towards long rows whose sampled
// entries lie beyond the row's first cache lines, so prefetching the row's
// head (prefetch_row) leaves most of those reads waiting on memory.
constexpr int64_t kDrawGroup = 16;

// Prefetches the first cache lines (at most four) of node v's row of `indices`.
template <typename IndexT>
inline void prefetch_row(Span<int64_t> indptr, Span<IndexT> indices, NodeId v) {
  const int64_t lo = indptr[static_cast<size_t>(v)], hi = indptr[static_cast<size_t>(v) + 1];
  if (lo < 0 || hi <= lo || hi > static_cast<int64_t>(indices.size)) return;
  const char* first = reinterpret_cast<const char*>(indices.data + lo);
  const size_t bytes = static_cast<size_t>(hi - lo) * sizeof(IndexT);
  for (size_t off = 0; off < bytes && off < 4 * 64; off += 64) __builtin_prefetch(first + off);
}

// Fills block[0, count) with the CSR positions node i of hop `hop` draws from
// its row [lo, lo + deg): the whole row when count == deg without
// replacement, else draws of node_rng(seed, hop, i) (sorted).
inline void draw_positions(int64_t lo, int64_t deg, int64_t count, bool all, bool replace,
                           uint64_t seed, size_t hop, size_t i, int64_t* block,
                           std::vector<int64_t>& scratch) {
  if (all) {
    for (int64_t t = 0; t < count; ++t) block[t] = lo + t;
    return;
  }
  Rng rng = node_rng(seed, hop, i);
  if (replace) {
    for (int64_t t = 0; t < count; ++t)
      block[t] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(deg)));
    std::sort(block, block + count);
  } else {
    sample_without_replacement(rng, deg, count, block, scratch);
  }
  for (int64_t t = 0; t < count; ++t) block[t] += lo;
}

// Sizes one hop of uniform neighbour sampling (the serial first pass of
// draw_hop): offset[i + 1] = offset[i] + the number of draws of frontier node
// i (up to `fanout`, all when fanout = -1 or the degree is smaller, exactly
// `fanout` with `replace`; none for an empty row); `pos` and `nbr` are resized
// to offset[n]. Throws std::invalid_argument for a malformed indptr row.
template <typename IndexT>
void size_hop(Span<int64_t> indptr, Span<IndexT> indices, const NodeId* frontier, size_t n,
              int64_t fanout, bool replace, int64_t* offset, std::vector<int64_t>& pos,
              std::vector<int64_t>& nbr);

// size_hop without resizing `pos` and `nbr`.
template <typename IndexT>
void size_rows(Span<int64_t> indptr, Span<IndexT> indices, const NodeId* frontier, size_t n,
               int64_t fanout, bool replace, int64_t* offset) {
  const int64_t num_edges = static_cast<int64_t>(indices.size);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPtrAhead < n)
      __builtin_prefetch(&indptr[static_cast<size_t>(frontier[i + kPtrAhead])]);
    const NodeId v = frontier[i];
    const int64_t lo = indptr[static_cast<size_t>(v)], hi = indptr[static_cast<size_t>(v) + 1];
    if (lo < 0 || hi < lo || hi > num_edges)
      throw std::invalid_argument("indptr is not non-decreasing within [0, " +
                                  std::to_string(num_edges) + "] at row " +
                                  std::to_string(v));
    const int64_t deg = hi - lo;
    int64_t count = 0;
    if (deg > 0) {
      if (fanout < 0) count = deg;
      else if (replace) count = fanout;
      else count = std::min(deg, fanout);
    }
    offset[i + 1] = offset[i] + count;
  }
}

template <typename IndexT>
void size_hop(Span<int64_t> indptr, Span<IndexT> indices, const NodeId* frontier, size_t n,
              int64_t fanout, bool replace, int64_t* offset, std::vector<int64_t>& pos,
              std::vector<int64_t>& nbr) {
  size_rows(indptr, indices, frontier, n, fanout, replace, offset);
  pos.resize(static_cast<size_t>(offset[n]));
  nbr.resize(pos.size());
}

// Draws the blocks of frontier nodes [i0, i1) of a hop sized by size_hop:
// pos[offset[i] : offset[i + 1]] and nbr receive node i's CSR positions and
// neighbour ids, drawn from node_rng(seed, hop, i). Works in groups of
// kDrawGroup nodes: all draws of a group are prefetched before any is read.
template <typename IndexT>
void draw_nodes(Span<int64_t> indptr, Span<IndexT> indices, const NodeId* frontier, size_t n,
                size_t i0, size_t i1, int64_t fanout, bool replace, uint64_t seed, size_t hop,
                const int64_t* offset, int64_t* pos, int64_t* nbr,
                std::vector<int64_t>& scratch) {
  for (size_t g0 = i0; g0 < i1; g0 += kDrawGroup) {
    const size_t g1 = std::min(i1, g0 + static_cast<size_t>(kDrawGroup));
    // Draw the group's positions, prefetching each sampled entry (and the
    // indptr entries of the groups ahead, which size_hop read long ago).
    for (size_t i = g0; i < g1; ++i) {
      if (i + 2 * kDrawGroup < n)
        __builtin_prefetch(&indptr[static_cast<size_t>(frontier[i + 2 * kDrawGroup])]);
      const int64_t count = offset[i + 1] - offset[i];
      if (count == 0) continue;
      const NodeId v = frontier[i];
      const int64_t lo = indptr[static_cast<size_t>(v)];
      const int64_t deg = indptr[static_cast<size_t>(v) + 1] - lo;
      int64_t* block = pos + offset[i];
      draw_positions(lo, deg, count, count == deg && (fanout < 0 || !replace), replace, seed,
                     hop, i, block, scratch);
      for (int64_t t = 0; t < count; ++t) __builtin_prefetch(indices.data + block[t]);
    }
    // Then read them: the lines have had the group's draws to arrive.
    for (int64_t t = offset[g0]; t < offset[g1]; ++t)
      nbr[t] = static_cast<int64_t>(indices[static_cast<size_t>(pos[t])]);
  }
}

// One hop of uniform neighbour sampling: size_hop, then draw_nodes over the
// whole frontier on `threads` threads. `offset` points at n + 1 entries
// whose first holds the start in `pos`. Node i draws from
// node_rng(seed, hop, i), so the result does not depend on `threads`. Throws
// std::invalid_argument for a malformed indptr row.
template <typename IndexT>
void draw_hop(Span<int64_t> indptr, Span<IndexT> indices, const NodeId* frontier, size_t n,
              int64_t fanout, bool replace, uint64_t seed, size_t hop,
              [[maybe_unused]] int threads, int64_t* offset, std::vector<int64_t>& pos,
              std::vector<int64_t>& nbr) {
  size_hop(indptr, indices, frontier, n, fanout, replace, offset, pos, nbr);
  constexpr int64_t kChunk = 4 * kDrawGroup;
  const int64_t chunks = (static_cast<int64_t>(n) + kChunk - 1) / kChunk;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && n >= 256)
#endif
  {
    std::vector<int64_t> scratch;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t i0 = static_cast<size_t>(c * kChunk);
      draw_nodes(indptr, indices, frontier, n, i0, std::min(n, i0 + static_cast<size_t>(kChunk)),
                 fanout, replace, seed, hop, offset, pos.data(), nbr.data(), scratch);
    }
  }
}

}  // namespace gnncore::sampling
