#include "synth/planted_partition.h"

#include "parallel.h"
#include "random.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>


namespace gnncore {
namespace {

constexpr int kEdgeCounters = 16;  // counters reserved per edge
constexpr int kDstAttempts = 4;    // one draw plus three redraws on a self-loop

// Uniform index in [0, n) by multiply-shift (bias below n / 2**64).
inline uint64_t index_below(uint64_t r, uint64_t n) {
  return static_cast<uint64_t>((static_cast<__uint128_t>(r) * n) >> 64);
}

// Entry i of an alias table: (threshold << 32) | alias. Draw i uniformly, keep
// it when the top 32 bits of a second word are below the threshold, else take
// the alias. Entries kept with certainty alias to themselves.
inline uint32_t alias_draw(const uint64_t* table, uint64_t n, uint64_t r_index,
                           uint64_t r_coin) {
  const uint64_t i = index_below(r_index, n);
  const uint64_t entry = table[i];
  return (r_coin >> 32) < (entry >> 32) ? static_cast<uint32_t>(i)
                                         : static_cast<uint32_t>(entry);
}

// Vose's alias method over w[0, n), n >= 1; zero total weight gives a uniform table.
void build_alias(const double* w, size_t n, uint64_t* out, std::vector<double>& prob,
                 std::vector<uint32_t>& small, std::vector<uint32_t>& large) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += w[i];
  prob.resize(n);
  small.clear();
  large.clear();
  std::vector<uint32_t> alias(n);
  for (size_t i = 0; i < n; ++i) {
    prob[i] = total > 0 ? w[i] * static_cast<double>(n) / total : 1.0;
    alias[i] = static_cast<uint32_t>(i);
    (prob[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back();
    small.pop_back();
    const uint32_t l = large.back();
    alias[s] = l;
    prob[l] -= 1.0 - prob[s];
    if (prob[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  for (uint32_t i : small) prob[i] = 1.0;  // leftovers from rounding
  for (uint32_t i : large) prob[i] = 1.0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t threshold;
    uint32_t a = alias[i];
    if (prob[i] >= 1.0) {
      threshold = 0xffffffffULL;
      a = static_cast<uint32_t>(i);
    } else {
      threshold = static_cast<uint64_t>(std::max(0.0, prob[i]) * 4294967296.0);
    }
    out[i] = (threshold << 32) | a;
  }
}

}  // namespace

PlantedPartition::PlantedPartition(Span<int64_t> community, Span<double> theta,
                                   int64_t num_communities, double intra_fraction,
                                   uint64_t seed)
    : key_(mix64(mix64(seed) + 1)), intra_fraction_(intra_fraction) {
  const size_t n = community.size;
  if (theta.size != n)
    throw std::invalid_argument("community and theta differ in length (" + std::to_string(n) +
                                " vs " + std::to_string(theta.size) + ")");
  if (n == 0 || n >= (uint64_t{1} << 32))
    throw std::invalid_argument("the number of nodes must be in [1, 2**32), got " +
                                std::to_string(n));
  if (num_communities < 1 || num_communities > static_cast<int64_t>(n))
    throw std::invalid_argument("num_communities must be in [1, num_nodes = " +
                                std::to_string(n) + "], got " +
                                std::to_string(num_communities));
  if (!(intra_fraction >= 0.0 && intra_fraction <= 1.0))
    throw std::invalid_argument("intra_fraction must lie in [0, 1]");
  double total = 0;
  for (size_t v = 0; v < n; ++v) {
    if (!(theta[v] >= 0.0) || !std::isfinite(theta[v]))
      throw std::invalid_argument("theta[" + std::to_string(v) + "] = " +
                                  std::to_string(theta[v]) + " is not a finite weight >= 0");
    if (community[v] < 0 || community[v] >= num_communities)
      throw std::out_of_range("community[" + std::to_string(v) + "] = " +
                              std::to_string(community[v]) + " is outside [0, " +
                              std::to_string(num_communities) + ")");
    total += theta[v];
  }
  if (!(total > 0)) throw std::invalid_argument("theta sums to zero");

  const size_t C = static_cast<size_t>(num_communities);
  member_offset_.assign(C + 1, 0);
  community_cum_.assign(C + 1, 0.0);
  for (size_t v = 0; v < n; ++v) ++member_offset_[static_cast<size_t>(community[v]) + 1];
  for (size_t c = 0; c < C; ++c) member_offset_[c + 1] += member_offset_[c];
  members_.resize(n);
  {
    std::vector<int64_t> cursor(member_offset_.begin(), member_offset_.end() - 1);
    for (size_t v = 0; v < n; ++v)
      members_[static_cast<size_t>(cursor[static_cast<size_t>(community[v])]++)] =
          static_cast<uint32_t>(v);
  }
  std::vector<double> weight(n);  // theta by position
  for (size_t i = 0; i < n; ++i) weight[i] = theta[members_[i]];
  for (size_t c = 0; c < C; ++c) {
    double w = 0;
    for (int64_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i)
      w += weight[static_cast<size_t>(i)];
    community_cum_[c + 1] = community_cum_[c] + w;
  }

  global_alias_.resize(n);
  member_alias_.resize(n);
  [[maybe_unused]] const int threads = resolve_threads(0);
  const int64_t C_i = static_cast<int64_t>(C);
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
  {
    std::vector<double> prob;
    std::vector<uint32_t> small, large;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp single nowait
#endif
    build_alias(weight.data(), n, global_alias_.data(), prob, small, large);
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t c = 0; c < C_i; ++c) {
      const int64_t lo = member_offset_[c], hi = member_offset_[c + 1];
      if (hi > lo)
        build_alias(weight.data() + lo, static_cast<size_t>(hi - lo),
                    member_alias_.data() + lo, prob, small, large);
    }
  }
}

uint32_t PlantedPartition::community_of(uint64_t pos) const {
  return static_cast<uint32_t>(
      std::upper_bound(member_offset_.begin() + 1, member_offset_.end(),
                       static_cast<int64_t>(pos)) -
      (member_offset_.begin() + 1));
}

uint32_t PlantedPartition::target_community(uint64_t t, uint32_t c, bool intra) const {
  if (intra) return c;
  // Another community, by total theta: skip c's share of the cumulative weights.
  const size_t C = member_offset_.size() - 1;
  const double own = community_cum_[c + 1] - community_cum_[c];
  double x = unit(stream(key_, t + 2)) * (community_cum_[C] - own);
  if (x >= community_cum_[c]) x += own;
  size_t k = static_cast<size_t>(
      std::upper_bound(community_cum_.begin() + 1, community_cum_.end(), x) -
      (community_cum_.begin() + 1));
  if (k >= C) k = C - 1;
  // Rounding at a boundary may land on c or an empty community: stay in c.
  if (k == c || member_offset_[k + 1] == member_offset_[k]) return c;
  return static_cast<uint32_t>(k);
}

uint64_t PlantedPartition::draw_in_community(uint32_t c, uint64_t r_index,
                                             uint64_t r_coin) const {
  const int64_t lo = member_offset_[c];
  const uint64_t size = static_cast<uint64_t>(member_offset_[c + 1] - lo);
  return static_cast<uint64_t>(lo) +
         alias_draw(member_alias_.data() + lo, size, r_index, r_coin);
}

void PlantedPartition::generate(int64_t first, MutSpan<NodeId> src, MutSpan<NodeId> dst,
                                int num_threads) const {
  if (src.size != dst.size) throw std::invalid_argument("src and dst differ in length");
  if (first < 0) throw std::out_of_range("first edge must be non-negative");
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  const uint64_t n = members_.size();
  const size_t C = member_offset_.size() - 1;
  const double total = community_cum_[C];
  const int64_t count = static_cast<int64_t>(src.size);
  // Edges go in blocks whose table look-ups are prefetched stage by stage, so
  // the cache misses of a block overlap instead of following one another.
  constexpr int64_t kBlock = 64;
  const int64_t num_blocks = (count + kBlock - 1) / kBlock;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && num_blocks >= 64)
#endif
  for (int64_t block = 0; block < num_blocks; ++block) {
    const int64_t begin = block * kBlock;
    const int64_t m = std::min(kBlock, count - begin);
    uint64_t src_pos[kBlock], dst_pos[kBlock], slot[kBlock];
    uint32_t comm[kBlock];
    bool intra[kBlock];
    // Stage 1: the src slot of the global alias table.
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t base = static_cast<uint64_t>(first + begin + k) * kEdgeCounters;
      slot[k] = index_below(stream(key_, base), n);
      __builtin_prefetch(&global_alias_[slot[k]]);
    }
    // Stage 2: resolve src; pick the dst community and its alias slot.
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t base = static_cast<uint64_t>(first + begin + k) * kEdgeCounters;
      const uint64_t entry = global_alias_[slot[k]];
      src_pos[k] = (stream(key_, base + 1) >> 32) < (entry >> 32) ? slot[k]
                                                                  : (entry & 0xffffffffULL);
      __builtin_prefetch(&members_[src_pos[k]]);
      const uint32_t c = community_of(src_pos[k]);
      const double own = community_cum_[c + 1] - community_cum_[c];
      intra[k] = unit(stream(key_, base + 2)) < intra_fraction_ || !(total - own > 0);
      comm[k] = target_community(base + 3, c, intra[k]);
      const int64_t lo = member_offset_[comm[k]];
      const uint64_t size = static_cast<uint64_t>(member_offset_[comm[k] + 1] - lo);
      slot[k] = static_cast<uint64_t>(lo) + index_below(stream(key_, base + 3), size);
      __builtin_prefetch(&member_alias_[slot[k]]);
      comm[k] = c;  // keep the src community for redraws
    }
    // Stage 3: resolve dst (attempt 0), redrawing the rare self-loops in place.
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t base = static_cast<uint64_t>(first + begin + k) * kEdgeCounters;
      const uint64_t entry = member_alias_[slot[k]];
      const int64_t lo = member_offset_[community_of(slot[k])];
      uint64_t d = (stream(key_, base + 4) >> 32) < (entry >> 32)
                       ? slot[k]
                       : static_cast<uint64_t>(lo) + (entry & 0xffffffffULL);
      for (int a = 1; a < kDstAttempts && d == src_pos[k]; ++a) {
        const uint64_t t = base + 3 + 3 * static_cast<uint64_t>(a);
        const uint32_t target = target_community(t, comm[k], intra[k]);
        d = draw_in_community(target, stream(key_, t), stream(key_, t + 1));
      }
      dst_pos[k] = d;
      __builtin_prefetch(&members_[d]);
    }
    // Stage 4: positions to node ids.
    for (int64_t k = 0; k < m; ++k) {
      src[static_cast<size_t>(begin + k)] = static_cast<NodeId>(members_[src_pos[k]]);
      dst[static_cast<size_t>(begin + k)] = static_cast<NodeId>(members_[dst_pos[k]]);
    }
  }
}

void fill_features(Span<float> centroids, int64_t num_classes, int64_t num_features,
                   Span<int64_t> labels, int64_t start_row, uint64_t seed, double noise,
                   MutSpan<float> out, int num_threads) {
  if (num_classes < 1 || num_features < 1)
    throw std::invalid_argument("num_classes and num_features must be positive");
  const size_t F = static_cast<size_t>(num_features);
  if (centroids.size != static_cast<size_t>(num_classes) * F)
    throw std::invalid_argument("centroids must hold num_classes * num_features values");
  if (out.size % F != 0)
    throw std::invalid_argument("out must hold whole rows of num_features values");
  if (!std::isfinite(noise) || noise < 0)
    throw std::invalid_argument("noise must be finite and non-negative");
  const int64_t rows = static_cast<int64_t>(out.size / F);
  if (start_row < 0 || start_row + rows > static_cast<int64_t>(labels.size))
    throw std::out_of_range("rows [" + std::to_string(start_row) + ", " +
                            std::to_string(start_row + rows) + ") are outside [0, " +
                            std::to_string(labels.size) + ")");
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t y = labels[static_cast<size_t>(start_row + i)];
    if (y < 0 || y >= num_classes)
      throw std::out_of_range("labels[" + std::to_string(start_row + i) + "] = " +
                              std::to_string(y) + " is outside [0, " +
                              std::to_string(num_classes) + ")");
  }
  const uint64_t key = mix64(mix64(seed) + 2);
  [[maybe_unused]] const int threads = resolve_threads(num_threads);
  constexpr double kTwoPi = 6.283185307179586;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && rows >= 256)
#endif
  for (int64_t i = 0; i < rows; ++i) {
    const uint64_t r = static_cast<uint64_t>(start_row + i);
    const uint64_t row_key = stream(key, r);
    const float* mu = centroids.data + static_cast<size_t>(labels[r]) * F;
    float* x = out.data + static_cast<size_t>(i) * F;
    for (size_t f = 0; f < F; f += 2) {  // Box-Muller: two normals per pair
      const double u1 = static_cast<double>((stream(row_key, f) >> 11) + 1) * 0x1.0p-53;
      const double u2 = unit(stream(row_key, f + 1));
      const double radius = std::sqrt(-2.0 * std::log(u1));
      x[f] = static_cast<float>(static_cast<double>(mu[f]) +
                                noise * radius * std::cos(kTwoPi * u2));
      if (f + 1 < F)
        x[f + 1] = static_cast<float>(static_cast<double>(mu[f + 1]) +
                                      noise * radius * std::sin(kTwoPi * u2));
    }
  }
}

}  // namespace gnncore
