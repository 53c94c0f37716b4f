// The greedy of balance_splits (partition/postprocess.h), over any source of
// neighbour rows: the rows of a symmetric CSR in memory (SpanRows) or read
// from its file row by row (partition/postprocess_stream.h). The rules are
// documented at balance_splits; the moves depend only on the rows' contents.
//
// A row source `Rows` has `void for_each(NodeId v, F f)` calling f(u) for
// every neighbour u of v, in row order; calls may nest (the callback of one
// row may read another row), two deep.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "partition/postprocess.h"
#include "types.h"

namespace gnncore {

// The rows of a symmetric CSR held in memory (ids checked beforehand).
template <typename IndexT>
struct SpanRows {
  Span<int64_t> indptr;
  Span<IndexT> indices;

  template <typename F>
  void for_each(NodeId v, F&& f) const {
    for (int64_t j = indptr[static_cast<size_t>(v)]; j < indptr[static_cast<size_t>(v) + 1]; ++j)
      f(static_cast<NodeId>(indices[static_cast<size_t>(j)]));
  }
};

namespace balance_detail {

// (gain, −node, part): the max-heap pops the largest gain, then the smallest
// node id.
using Entry = std::tuple<int64_t, int64_t, int64_t>;
using Heap = std::priority_queue<Entry>;

template <typename Rows>
class SplitBalancer {
 public:
  SplitBalancer(Rows& rows, Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                int64_t capacity, std::array<int64_t, 3> lo, std::array<int64_t, 3> hi)
      : rows_(rows), split_of_(split_of), parts_(parts), capacity_(capacity), lo_(lo), hi_(hi),
        a_(assignment.begin(), assignment.end()),
        size_(static_cast<size_t>(parts), 0),
        count_(static_cast<size_t>(parts), std::array<int64_t, 3>{0, 0, 0}),
        k_(static_cast<size_t>(parts), 0), closed_(static_cast<size_t>(parts), 0),
        evict_(static_cast<size_t>(parts)), evict_built_(static_cast<size_t>(parts), 0) {
    for (size_t v = 0; v < a_.size(); ++v) {
      const size_t p = static_cast<size_t>(a_[v]);
      ++size_[p];
      if (split_of_[v] >= 0) ++count_[p][static_cast<size_t>(split_of_[v])];
    }
    for (int64_t j = 0; j < parts_; ++j)
      for (int x = 0; x < 3; ++x) total_[x] += count_[at(j)][x];
    for (int x = 0; x < 3; ++x) {
      if (total_[x] == 0) continue;
      if (lo_[x] > hi_[x]) throw std::invalid_argument("lo must not exceed hi");
      if (lo_[x] * parts_ > total_[x] || hi_[x] * parts_ < total_[x])
        throw std::invalid_argument("no assignment can meet the split bounds");
    }
  }

  SplitBalance run() {
    SplitBalance out;
    for (int x = 0; x < 3; ++x) {
      if (total_[x] == 0) continue;
      x_ = x;
      for (stage_ = 1; stage_ <= 3; ++stage_) run_stage();
    }
    for (int x = 0; x < 3; ++x)
      for (int64_t j = 0; j < parts_ && total_[x] > 0; ++j)
        if (count_[at(j)][x] < lo_[x] || count_[at(j)][x] > hi_[x]) out.satisfied = false;
    out.assignment = std::move(a_);
    out.split_moves = split_moves_;
    out.evictions = evictions_;
    return out;
  }

 private:
  // Eviction candidates of a part, one heap per class: non-split, train, val,
  // test (class = split + 1).
  using ClassHeaps = std::array<Heap, 4>;

  Rows& rows_;
  Span<int8_t> split_of_;
  int64_t parts_, capacity_;
  std::array<int64_t, 3> lo_, hi_, total_{0, 0, 0};
  std::vector<int64_t> a_, size_;
  std::vector<std::array<int64_t, 3>> count_;
  std::vector<int64_t> k_, touched_;
  std::vector<char> closed_;  // full parts that found nothing to evict (this stage)
  std::vector<ClassHeaps> evict_;
  std::vector<char> evict_built_;
  Heap heap_;
  int x_ = 0, stage_ = 1;
  int64_t split_moves_ = 0, evictions_ = 0;

  static size_t at(int64_t j) { return static_cast<size_t>(j); }
  int64_t cx(int64_t j) const { return count_[at(j)][static_cast<size_t>(x_)]; }
  bool donor(int64_t j) const { return stage_ == 3 ? cx(j) > lo_[x_] : cx(j) > hi_[x_]; }
  bool receiver(int64_t j) const { return stage_ == 2 ? cx(j) < hi_[x_] : cx(j) < lo_[x_]; }
  bool pending() const {
    bool over = false, under = false;
    for (int64_t j = 0; j < parts_; ++j) {
      over = over || cx(j) > hi_[x_];
      under = under || cx(j) < lo_[x_];
    }
    return stage_ == 1 ? over && under : stage_ == 2 ? over : under;
  }

  // k_[p] = neighbours of v in part p (reset by clear_counts).
  void count_neighbours(NodeId v) {
    rows_.for_each(v, [this](NodeId u) {
      const int64_t p = a_[static_cast<size_t>(u)];
      if (k_[at(p)]++ == 0) touched_.push_back(p);
    });
  }
  void clear_counts() {
    for (int64_t p : touched_) k_[at(p)] = 0;
    touched_.clear();
  }

  // The best receiving part for split-x node v: (gain, part), part -1 if none.
  std::pair<int64_t, int64_t> best_target(NodeId v) {
    count_neighbours(v);
    const int64_t s = a_[static_cast<size_t>(v)];
    int64_t best = -1, gain = 0;
    for (int64_t t = 0; t < parts_; ++t) {
      if (t == s || !receiver(t) || closed_[at(t)]) continue;
      const int64_t g = k_[at(t)] - k_[at(s)];
      if (best < 0 || g > gain || (g == gain && cx(t) < cx(best))) {
        best = t;
        gain = g;
      }
    }
    clear_counts();
    return {gain, best};
  }

  // Rules for evicting a node of split s (-1: none) from part t to part c.
  // Strict: c stays below the node cap and, for a split node, at or below its
  // split's upper bound; t keeps at least the lower bound; never the split
  // being balanced. Relaxed (only for splits balanced later, s > x): any part
  // below the node cap, whatever the counts; the later stages repair them.
  bool relaxed_for(int8_t s, bool relaxed) const { return relaxed && s > x_; }
  bool exit_allowed(int8_t s, int64_t c, bool relaxed) const {
    return size_[at(c)] < capacity_ &&
           (s < 0 || relaxed_for(s, relaxed) || count_[at(c)][at(s)] < hi_[at(s)]);
  }
  bool leave_allowed(int8_t s, int64_t t, bool relaxed) const {
    return s < 0 || relaxed_for(s, relaxed) ||
           (s != x_ && count_[at(t)][at(s)] > lo_[at(s)]);
  }

  // The best allowed exit for node u: (gain, part), part -1 if none. With
  // `any`, every other part is allowed (an upper bound on the gain).
  std::pair<int64_t, int64_t> best_exit(NodeId u, bool relaxed = false, bool any = false) {
    const int8_t cls = split_of_[static_cast<size_t>(u)];
    count_neighbours(u);
    const int64_t s = a_[static_cast<size_t>(u)];
    int64_t best = -1, gain = 0;
    for (int64_t c = 0; c < parts_; ++c) {
      if (c == s || (!any && !exit_allowed(cls, c, relaxed))) continue;
      const int64_t g = k_[at(c)] - k_[at(s)];
      if (best < 0 || g > gain || (g == gain && size_[at(c)] < size_[at(best)])) {
        best = c;
        gain = g;
      }
    }
    clear_counts();
    return {gain, best};
  }

  void push_split_node(NodeId v) {
    const auto [gain, t] = best_target(v);
    if (t >= 0) heap_.emplace(gain, -v, t);
  }
  // Queues u as an eviction candidate of its part, keyed by its best strict
  // exit, else its best relaxed exit, else (no exit now) the upper bound
  // over all parts with part -1, so it is re-checked when it reaches the top.
  void push_evictable(NodeId u) {
    auto [gain, c] = best_exit(u);
    if (c < 0) std::tie(gain, c) = best_exit(u, true);
    if (c < 0) {
      gain = best_exit(u, false, true).first;
      c = -1;
    }
    const size_t cls = static_cast<size_t>(split_of_[static_cast<size_t>(u)] + 1);
    evict_[at(a_[static_cast<size_t>(u)])][cls].emplace(gain, -u, c);
  }

  void move(NodeId v, int64_t to) {
    const size_t from = at(a_[static_cast<size_t>(v)]);
    const int8_t s = split_of_[static_cast<size_t>(v)];
    --size_[from];
    ++size_[at(to)];
    if (s >= 0) {
      --count_[from][static_cast<size_t>(s)];
      ++count_[at(to)][static_cast<size_t>(s)];
    }
    a_[static_cast<size_t>(v)] = to;
  }

  // Gains of v's neighbours changed: queue fresh entries (old ones are
  // re-checked when popped).
  void refresh_neighbours(NodeId v) {
    rows_.for_each(v, [this](NodeId u) {
      const int64_t p = a_[static_cast<size_t>(u)];
      if (split_of_[static_cast<size_t>(u)] == x_ && donor(p)) push_split_node(u);
      if (evict_built_[at(p)]) push_evictable(u);
    });
  }

  // The freshest top of one class heap of part t: pops entries whose node
  // left or whose gain changed (re-queued), and stops at an entry that is
  // current. Returns false when the class has no allowed exit.
  bool fresh_top(Heap& heap, int64_t t, bool relaxed, Entry& out) {
    while (!heap.empty()) {
      const auto [gain, neg_u, c] = heap.top();
      const NodeId u = -neg_u;
      if (a_[static_cast<size_t>(u)] != t) {
        heap.pop();
        continue;
      }
      const auto [g, best] = best_exit(u, relaxed);
      if (best < 0) return false;  // no part may take this class now
      if (g == gain && best == c) {
        out = heap.top();
        return true;
      }
      heap.pop();
      heap.emplace(g, -u, best);
    }
    return false;
  }

  // Part t is above the node cap: move out its cheapest evictable node (the
  // largest exit gain over the allowed classes; ties: non-split first), by
  // the strict rules if any node qualifies, else by the relaxed ones.
  // Returns false, changing nothing, if no node may leave.
  bool evict_from(int64_t t) {
    ClassHeaps& heaps = evict_[at(t)];
    if (!evict_built_[at(t)]) {
      evict_built_[at(t)] = 1;
      for (size_t u = 0; u < a_.size(); ++u)
        if (a_[u] == t) push_evictable(static_cast<NodeId>(u));
    }
    for (bool relaxed : {false, true}) {
      int best_cls = -1;
      Entry best{};
      for (int cls = 0; cls < 4; ++cls) {
        const int8_t s = static_cast<int8_t>(cls - 1);
        if (relaxed && !relaxed_for(s, true)) continue;  // the strict pass covered it
        Entry top;
        if (!leave_allowed(s, t, relaxed) || !fresh_top(heaps[at(cls)], t, relaxed, top))
          continue;
        if (best_cls < 0 || std::get<0>(top) > std::get<0>(best)) {
          best_cls = cls;
          best = top;
        }
      }
      if (best_cls < 0) continue;
      heaps[at(best_cls)].pop();
      const NodeId u = -std::get<1>(best);
      const int64_t c = std::get<2>(best);
      move(u, c);
      ++evictions_;
      if (evict_built_[at(c)]) push_evictable(u);
      refresh_neighbours(u);
      return true;
    }
    return false;
  }

  void run_stage() {
    if (!pending()) return;
    std::fill(closed_.begin(), closed_.end(), 0);
    heap_ = Heap();
    for (size_t v = 0; v < a_.size(); ++v)
      if (split_of_[v] == x_ && donor(a_[v])) push_split_node(static_cast<NodeId>(v));
    while (!heap_.empty() && pending()) {
      const auto [gain, neg_v, t] = heap_.top();
      heap_.pop();
      const NodeId v = -neg_v;
      if (!donor(a_[static_cast<size_t>(v)])) continue;
      const auto [g, best] = best_target(v);
      if (best < 0) continue;  // roles only shrink: v can never move again
      if (g != gain || best != t) {
        heap_.emplace(g, -v, best);
        continue;
      }
      const int64_t from = a_[static_cast<size_t>(v)];
      const bool full = size_[at(t)] >= capacity_;
      move(v, t);
      if (full && !evict_from(t)) {
        move(v, from);
        closed_[at(t)] = 1;  // t stays full for the rest of the stage
        push_split_node(v);
        continue;
      }
      ++split_moves_;
      refresh_neighbours(v);
    }
  }
};

}  // namespace balance_detail

// Runs the split balancing greedy over `rows` (n = assignment.size nodes);
// the caller has checked the assignment, split_of and capacity.
template <typename Rows>
SplitBalance balance_splits_over(Rows& rows, Span<int64_t> assignment, Span<int8_t> split_of,
                                 int64_t parts, std::array<int64_t, 3> lo,
                                 std::array<int64_t, 3> hi, int64_t capacity) {
  balance_detail::SplitBalancer<Rows> balancer(rows, assignment, split_of, parts, capacity, lo,
                                               hi);
  return balancer.run();
}

}  // namespace gnncore
