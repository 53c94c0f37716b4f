#include "sampler/neighbor.h"

#include "parallel.h"
#include "random.h"

#include <algorithm>
#include <stdexcept>
#include <string>


namespace gnncore {
namespace {

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

// ------------------------------------------------------------------ sampling

// Writes k distinct offsets of [0, n), k < n, into out[0..k), sorted.
void sample_without_replacement(Rng& rng, int64_t n, int64_t k, int64_t* out,
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

}  // namespace

template <typename IndexT>
NeighborSample sample_neighbors(Span<int64_t> indptr, Span<IndexT> indices,
                                Span<NodeId> seeds, const std::vector<int64_t>& fanouts,
                                uint64_t seed, bool replace, int num_threads) {
  if (indptr.size == 0)
    throw std::invalid_argument("indptr must have num_nodes + 1 >= 1 entries, got 0");
  const int64_t num_nodes = static_cast<int64_t>(indptr.size) - 1;
  const int64_t num_edges = static_cast<int64_t>(indices.size);
  if (indptr[0] != 0 || indptr[indptr.size - 1] != num_edges)
    throw std::invalid_argument("indptr must start at 0 and end at len(indices) = " +
                                std::to_string(num_edges) + ", got " +
                                std::to_string(indptr[0]) + " and " +
                                std::to_string(indptr[indptr.size - 1]));
  for (size_t h = 0; h < fanouts.size(); ++h)
    if (fanouts[h] < -1)
      throw std::invalid_argument("fanouts[" + std::to_string(h) + "] = " +
                                  std::to_string(fanouts[h]) +
                                  " is negative; use -1 for all neighbours");
  for (size_t i = 0; i < seeds.size; ++i)
    if (seeds[i] < 0 || seeds[i] >= num_nodes)
      throw std::out_of_range("seeds[" + std::to_string(i) + "] = " +
                              std::to_string(seeds[i]) + " is outside [0, " +
                              std::to_string(num_nodes) + ")");

  NeighborSample out;
  IdMap local_of(seeds.size * 4);
  out.node.reserve(seeds.size);
  bool inserted = false;
  for (size_t i = 0; i < seeds.size; ++i) {
    local_of.get_or_insert(seeds[i], static_cast<int64_t>(out.node.size()), &inserted);
    if (inserted) out.node.push_back(seeds[i]);
  }
  out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size()));

  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  std::vector<int64_t> offset;  // per frontier node: start of its block in `pos`
  std::vector<int64_t> pos;     // sampled CSR positions, grouped per frontier node
  std::vector<int64_t> nbr;     // indices[pos], read in the parallel pass
  size_t begin = 0;
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const size_t end = out.node.size();
    const size_t frontier = end - begin;
    const int64_t fanout = fanouts[hop];

    // Serial pass: validate rows and size each node's block.
    offset.assign(frontier + 1, 0);
    for (size_t i = 0; i < frontier; ++i) {
      const NodeId v = out.node[begin + i];
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
    pos.resize(static_cast<size_t>(offset[frontier]));
    nbr.resize(pos.size());

    // Parallel pass: draw each node's block from its own generator.
    const int64_t frontier_i = static_cast<int64_t>(frontier);
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && frontier >= 256)
#endif
    {
      std::vector<int64_t> scratch;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 64)
#endif
      for (int64_t ii = 0; ii < frontier_i; ++ii) {
        const size_t i = static_cast<size_t>(ii);
        const NodeId v = out.node[begin + i];
        const int64_t lo = indptr[static_cast<size_t>(v)];
        const int64_t deg = indptr[static_cast<size_t>(v) + 1] - lo;
        const int64_t count = offset[i + 1] - offset[i];
        int64_t* block = pos.data() + offset[i];
        if (count == 0) continue;
        if (count == deg && (fanout < 0 || !replace)) {
          for (int64_t t = 0; t < count; ++t) block[t] = lo + t;
          continue;
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
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(static)
#endif
      for (int64_t t = 0; t < static_cast<int64_t>(pos.size()); ++t)
        nbr[static_cast<size_t>(t)] =
            static_cast<int64_t>(indices[static_cast<size_t>(pos[static_cast<size_t>(t)])]);
    }

    // Serial pass: assign local ids in frontier order, prefetching the hash
    // slots a few edges ahead.
    const size_t emitted = pos.size();
    constexpr size_t kAhead = 8;
    for (size_t t = 0; t < std::min(kAhead, emitted); ++t) local_of.prefetch(nbr[t]);
    out.row.reserve(out.row.size() + emitted);
    out.col.reserve(out.col.size() + emitted);
    out.edge.reserve(out.edge.size() + emitted);
    for (size_t i = 0; i < frontier; ++i) {
      const int64_t target = static_cast<int64_t>(begin + i);
      for (int64_t t = offset[i]; t < offset[i + 1]; ++t) {
        const size_t ts = static_cast<size_t>(t);
        if (ts + kAhead < emitted) local_of.prefetch(nbr[ts + kAhead]);
        const int64_t j = pos[ts];
        const int64_t u = nbr[ts];
        if (u < 0 || u >= num_nodes)
          throw std::out_of_range("indices[" + std::to_string(j) + "] = " + std::to_string(u) +
                                  " is outside [0, " + std::to_string(num_nodes) + ")");
        const int64_t local =
            local_of.get_or_insert(u, static_cast<int64_t>(out.node.size()), &inserted);
        if (inserted) out.node.push_back(u);
        out.row.push_back(local);
        out.col.push_back(target);
        out.edge.push_back(j);
      }
    }
    out.num_sampled_nodes.push_back(static_cast<int64_t>(out.node.size() - end));
    out.num_sampled_edges.push_back(static_cast<int64_t>(emitted));
    begin = end;
  }
  return out;
}

template NeighborSample sample_neighbors<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);
template NeighborSample sample_neighbors<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                  const std::vector<int64_t>&, uint64_t, bool,
                                                  int);

}  // namespace gnncore
