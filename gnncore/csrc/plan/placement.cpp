#include "plan/placement.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace gnncore {

namespace {

template <typename V>
[[noreturn]] void bad_argument(const std::string& name, const std::string& rule, const V& got) {
  std::ostringstream msg;
  msg << name << " must be " << rule << ", got " << got;
  throw std::invalid_argument(msg.str());
}

struct Ranked {
  double p;
  NodeId id;
};

// Hotter first; equal p by smaller id (a strict total order: p holds no NaN).
inline bool hotter(const Ranked& a, const Ranked& b) {
  return a.p > b.p || (a.p == b.p && a.id < b.id);
}

inline double p_of(uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// V[:lim]: the lim hottest nodes, hotter first (p descending, ties by smaller
// id). The lim-th largest p is found by selection; one pass in id order then
// takes the nodes above it and, of those equal to it, the smallest ids, so the
// chosen nodes come in ascending id. Few are sorted with std::sort; many with
// an LSD radix sort on the bits of p (order-preserving for doubles >= 0),
// which is stable and so keeps equal p in ascending id: the same order.
std::vector<Ranked> hottest(Span<double> p, int64_t lim) {
  const int64_t n = static_cast<int64_t>(p.size);
  std::vector<Ranked> v;
  if (lim <= 0) return v;
  v.reserve(static_cast<size_t>(lim));
  if (lim == n) {
    for (int64_t i = 0; i < n; ++i) v.push_back(Ranked{p[static_cast<size_t>(i)], i});
  } else {
    std::vector<double> q(p.begin(), p.end());
    std::nth_element(q.begin(), q.begin() + (lim - 1), q.end(), std::greater<double>());
    const double cut = q[static_cast<size_t>(lim - 1)];
    int64_t at_cut = lim;  // how many nodes with p == cut make it
    for (double x : p)
      if (x > cut) --at_cut;
    for (int64_t i = 0; i < n; ++i) {
      const double x = p[static_cast<size_t>(i)];
      if (x > cut || (x == cut && at_cut-- > 0)) v.push_back(Ranked{x, i});
    }
  }
  const size_t m = v.size();
  if (m < (size_t{1} << 16)) {
    std::sort(v.begin(), v.end(), hotter);
    return v;
  }
  struct Keyed {
    uint64_t key;  // ascending key = descending p
    NodeId id;
  };
  std::vector<Keyed> a(m), b(m);
  for (size_t i = 0; i < m; ++i) {
    const double x = v[i].p + 0.0;  // -0.0 -> +0.0
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    a[i] = Keyed{~bits, v[i].id};
  }
  constexpr int kBits = 11, kPasses = (64 + kBits - 1) / kBits;
  constexpr size_t kBuckets = size_t{1} << kBits;
  std::vector<size_t> hist(kPasses * kBuckets, 0);
  for (const Keyed& r : a)
    for (int pass = 0; pass < kPasses; ++pass)
      ++hist[pass * kBuckets + ((r.key >> (pass * kBits)) & (kBuckets - 1))];
  for (int pass = 0; pass < kPasses; ++pass) {
    size_t* h = hist.data() + pass * kBuckets;
    if (*std::max_element(h, h + kBuckets) == m) continue;  // one digit for all: no-op
    size_t sum = 0;
    for (size_t d = 0; d < kBuckets; ++d) sum += std::exchange(h[d], sum);
    for (const Keyed& r : a) b[h[(r.key >> (pass * kBits)) & (kBuckets - 1)]++] = r;
    a.swap(b);
  }
  for (size_t i = 0; i < m; ++i) v[i] = Ranked{p_of(~a[i].key), a[i].id};
  return v;
}

}  // namespace

CacheLayout place_features(Span<double> p, int64_t devices, int64_t slots, double alpha) {
  if (devices < 1) bad_argument("devices", ">= 1", devices);
  if (slots < 0) bad_argument("slots", ">= 0", slots);
  if (!(std::isfinite(alpha) && alpha >= 0)) bad_argument("alpha", "a finite number >= 0", alpha);
  const int64_t n = static_cast<int64_t>(p.size);
  for (int64_t v = 0; v < n; ++v)
    if (!(std::isfinite(p[static_cast<size_t>(v)]) && p[static_cast<size_t>(v)] >= 0))
      bad_argument("p[" + std::to_string(v) + "]", "a finite number >= 0",
                   p[static_cast<size_t>(v)]);

  CacheLayout out;
  out.devices = devices;
  const int64_t width = std::min(slots, n);
  out.width = width;
  // lim = min(N, devices · width) without overflow.
  const int64_t lim = (width == 0) ? 0 : (devices > n / width ? n : devices * width);

  // V[:lim]; the rest of V is never read.
  const std::vector<Ranked> v = hottest(p, lim);

  out.nodes.resize(static_cast<size_t>(devices * width));
  for (int64_t d = 0; d < devices; ++d)
    for (int64_t i = 0; i < width; ++i)
      out.nodes[static_cast<size_t>(d * width + i)] = v[static_cast<size_t>(i)].id;

  std::vector<double> p_sum(static_cast<size_t>(devices), 0.0);
  std::vector<int64_t> order(static_cast<size_t>(devices));
  int64_t nxt = width;
  for (int64_t r = 0; r < width; ++r) {
    if (nxt >= lim || devices == 1) break;  // nothing more can change
    const int64_t oi = width - 1 - r;
    const double p_old = v[static_cast<size_t>(oi)].p;
    for (int64_t d = 0; d < devices; ++d) order[static_cast<size_t>(d)] = d;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return p_sum[static_cast<size_t>(a)] < p_sum[static_cast<size_t>(b)];
    });
    for (int64_t k = 0; k + 1 < devices; ++k) {  // the last device keeps `old`
      if (nxt >= lim) return out;
      const Ranked& fresh = v[static_cast<size_t>(nxt)];
      if (!(fresh.p > alpha * p_old)) return out;
      const int64_t d = order[static_cast<size_t>(k)];
      out.nodes[static_cast<size_t>(d * width + oi)] = fresh.id;
      p_sum[static_cast<size_t>(d)] += fresh.p;
      ++nxt;
    }
  }
  return out;
}

std::vector<int64_t> degree_greedy_assign(Span<int64_t> degree, int64_t parts,
                                          int64_t group_size, Span<uint8_t> skip) {
  if (parts < 1) bad_argument("parts", ">= 1", parts);
  if (group_size < 1) bad_argument("group_size", ">= 1", group_size);
  const int64_t n = static_cast<int64_t>(degree.size);
  if (skip.size != 0 && static_cast<int64_t>(skip.size) != n)
    bad_argument("skip", "None or have one entry per node (" + std::to_string(n) + ")",
                 std::to_string(skip.size) + " entries");
  for (int64_t v = 0; v < n; ++v)
    if (degree[static_cast<size_t>(v)] < 0)
      bad_argument("degree[" + std::to_string(v) + "]", ">= 0", degree[static_cast<size_t>(v)]);

  std::vector<int64_t> owner(static_cast<size_t>(n), -1);
  std::vector<std::pair<int64_t, NodeId>> ranked;  // (−degree, id): ascending = the order
  ranked.reserve(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v)
    if (skip.size == 0 || skip[static_cast<size_t>(v)] == 0)
      ranked.emplace_back(-degree[static_cast<size_t>(v)], v);
  std::sort(ranked.begin(), ranked.end());

  using Load = std::pair<int64_t, int64_t>;  // (degree sum, part): the min pops first
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> heap;
  for (int64_t j = 0; j < parts; ++j) heap.emplace(0, j);
  const size_t m = ranked.size();
  const size_t g = static_cast<size_t>(group_size);
  for (size_t start = 0, end = 0; start < m; start = end) {
    end = start + std::min(g, m - start);
    const auto [sum, part] = heap.top();
    heap.pop();
    int64_t group_sum = 0;
    for (size_t i = start; i < end; ++i) {
      owner[static_cast<size_t>(ranked[i].second)] = part;
      group_sum -= ranked[i].first;
    }
    heap.emplace(sum + group_sum, part);
  }
  return owner;
}

}  // namespace gnncore
