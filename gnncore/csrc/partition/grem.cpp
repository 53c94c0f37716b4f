#include "partition/grem.h"

#include "huge_array.h"
#include "parallel.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace gnncore {

namespace {

constexpr int8_t kNotMember = -2;  // node outside the sub-problem
constexpr int8_t kUnassigned = -1;

// Rows read at a time by the passes that treat every row on its own (the
// refinement counts, the split, the cluster-graph count): their results do not
// depend on how the stream is cut, so they read at most this many rows at a
// time instead of a whole chunk (8 MiB of int32 rows), keeping their per-edge
// memory off the chunk size.
constexpr int64_t kStreamBlockRows = int64_t{1} << 20;
int64_t stream_block(int64_t chunk_rows) { return std::min(chunk_rows, kStreamBlockRows); }

// The rows of `reader` (from where it stands) in chunks of `rows`, the next
// chunk read on a thread while the caller works on this one: past the page
// cache (a billion edges under a memory limit) a read waits on the device, and
// its copy and the cache's reclaim take CPU time, which the other core takes
// instead. Holds one chunk of rows beside the caller's. Chunks below
// kMinRows are read in the caller's thread: their reads cost less than a thread.
template <typename Id>
class ReadAhead {
 public:
  static constexpr int64_t kMinRows = int64_t{1} << 16;

  ReadAhead(EdgeChunkReader& reader, int64_t rows)
      : reader_(reader), rows_(rows), ahead_of_time_(rows >= kMinRows) {
    if (ahead_of_time_) start();
  }

  // The next chunk into `pairs` (its previous contents are dropped); 0 at the end.
  int64_t next(std::vector<Id>& pairs) {
    if (!ahead_of_time_) return reader_.next_raw(rows_, pairs);
    if (!pending_.valid()) return 0;
    const int64_t got = pending_.get();
    if (got == 0) return 0;
    pairs.swap(ahead_);
    start();
    return got;
  }

 private:
  void start() {
    pending_ = std::async(std::launch::async, [this] { return reader_.next_raw(rows_, ahead_); });
  }

  EdgeChunkReader& reader_;
  int64_t rows_;
  bool ahead_of_time_;
  std::vector<Id> ahead_;
  std::future<int64_t> pending_;  // declared last: destroyed (waited for) first
};

// Ids ahead (8 rows) at which the streamed passes prefetch the per-node entries
// of a row: at 100M nodes each of them misses the caches.
constexpr size_t kRowsAhead = 16;

// Part sizes and the capacity rules of ALGORITHMS.md §1 (Alg. 5 `assign`,
// `fix_sizes`), generalised to uneven target shares w0 : w1.
struct Sides {
  int64_t size[2] = {0, 0};
  int64_t cap[2] = {0, 0};
  int64_t w[2] = {1, 1};

  // Whether `s` can take the node whose current side is `old` (a node already
  // in `s` is not counted twice against P).
  bool room(int s, int old) const { return size[s] - (old == s ? 1 : 0) < cap[s]; }

  // argmin of size / weight (ties: side 0), i.e. argmin(sizes) for even
  // splits; falls back to the other side when the chosen one has no room
  // (only possible for uneven shares).
  int less_full(int old) const {
    int j = size[0] * w[1] <= size[1] * w[0] ? 0 : 1;
    if (!room(j, old) && room(1 - j, old)) j = 1 - j;
    return j;
  }

  int assign(double k0, double k1, int old) const {
    if (k0 < k1 && room(1, old)) return 1;
    if (k1 < k0 && room(0, old)) return 0;
    return less_full(old);
  }

  void fix(int now, int old) {
    ++size[now];
    if (old >= 0) --size[old];
  }
};

// One node's state during the GREM pass, all in one place so that a visit
// touches one cache line (two for a third of them): its
// running estimates of neighbours per side (nbr_counts), its chunk-local id
// while its chunk is built (-1 otherwise) and its side (kNotMember outside the
// sub-problem). At 100M nodes every first touch of a node in a chunk misses
// the caches; three arrays over the graph (estimates, map, sides) took five
// such misses a chunk node, this takes two or three.
// Packed: 21 bytes a node with int32 ids, as the three arrays took.
template <typename Id>
struct __attribute__((packed)) NodeState {
  double est[2];
  Id local;
  int8_t part;
};

// Prefetches for writing both cache lines a node's state may span.
template <typename Id>
inline void prefetch_state(const NodeState<Id>* node) {
  const char* first = reinterpret_cast<const char*>(node);
  __builtin_prefetch(first, 1);
  __builtin_prefetch(first + sizeof(NodeState<Id>) - 1, 1);
}

// The adjacency of one chunk over local ids 0..k-1, numbered by first
// appearance in the chunk (the visiting order). Id is the edge file's id
// width (int32 files keep every array of the chunk at 4 bytes an entry); Off,
// the offsets' type, is int32_t whenever a chunk's 2 · rows adjacency entries
// stay below 2^31.
//
// Everything the visits read is chunk-local: the adjacency holds local ids and
// `side` holds each chunk node's current label (read from the node's state
// once, when it is first seen, and written back by the visit), so counting a
// node's neighbours touches the chunk's arrays only. The nodes' states are
// read and written once by the build and once by the visit, in orders known
// ahead, and prefetched. The visit resets the node's local id.
//
// Memory per chunk edge (int32 files): the rows read (8 B, renumbered in place
// to local ids by the first sweep) and the adjacency (8 B); per chunk node: its
// global id (4 B), its offset (4 B) and its side (1 B). The offsets double as
// the fill cursors (shifted by one), so the CSR is built in place.
template <typename Id, typename Off>
struct ChunkGraph {
  static constexpr size_t kPrefetch = 16;  // ids ahead of the random accesses
  static constexpr size_t kFillAhead = 16;  // rows between a cursor's prefetch and its use
  static constexpr size_t kSlotAhead = 8;   // rows between a slot's prefetch and its write

  std::vector<Id> nodes;
  std::vector<int8_t> side;
  std::vector<Off> indptr;
  std::vector<Id> adj;

  // Returns false, having built nothing usable and with `pairs` as read, when a
  // row has an id outside [0, state.size()), is a self-loop or has an end
  // outside the sub-problem (check_chunk then names it); the check rides on the
  // renumbering sweep. The local ids it set stay set: the caller throws.
  bool build(std::vector<Id>& pairs, HugeArray<NodeState<Id>>& state) {
    nodes.clear();
    side.clear();
    // indptr[l + 2] counts the degree of local node l during the first sweep
    indptr.assign(2, 0);
    const size_t m = pairs.size(), n = state.size();
    NodeState<Id>* st = state.data();
    auto local_of = [&](size_t x) -> Id {  // -1: x is outside the sub-problem
      NodeState<Id>& node = st[x];
      if (node.local >= 0) return node.local;
      if (node.part == kNotMember) return -1;
      node.local = static_cast<Id>(nodes.size());
      nodes.push_back(static_cast<Id>(x));
      side.push_back(node.part);
      indptr.push_back(0);
      return node.local;
    };
    for (size_t e = 0; e < m; e += 2) {
      if (e + kPrefetch < m) {
        for (size_t end = 0; end < 2; ++end) {
          const size_t y = static_cast<size_t>(pairs[e + kPrefetch + end]);
          if (y < n) prefetch_state(&st[y]);
        }
      }
      // negative ids wrap to huge size_t values, so one comparison checks both ends
      const size_t u = static_cast<size_t>(pairs[e]), v = static_cast<size_t>(pairs[e + 1]);
      bool ok = (u < n) & (v < n) & (u != v);
      Id lu = -1, lv = -1;
      if (ok) {
        lu = local_of(u);
        if (lu >= 0) lv = local_of(v);
        ok = (lu >= 0) & (lv >= 0);
      }
      if (!ok) {  // give the rows renumbered so far their global ids back
        for (size_t f = 0; f < e; ++f) pairs[f] = nodes[static_cast<size_t>(pairs[f])];
        return false;
      }
      ++indptr[static_cast<size_t>(lu) + 2];
      ++indptr[static_cast<size_t>(lv) + 2];
      pairs[e] = lu;
      pairs[e + 1] = lv;
    }
    // prefix sums: indptr[l + 1] is where local node l's list starts
    for (size_t i = 2; i < indptr.size(); ++i) indptr[i] += indptr[i - 1];
    adj.resize(m);
    Off* fill = indptr.data() + 1;  // fill[l]: the next free slot of l's list
    Id* slots = adj.data();
    for (size_t e = 0; e < m; e += 2) {
      // A chunk of 1% of a billion edges has 80 MB of lists over ~15M nodes:
      // the ends' cursors, then their slots, are fetched a few rows ahead (a
      // slot fetched before an earlier row of the same node moves its cursor
      // is one entry off: the same cache line, mostly).
      if (e + 2 * kFillAhead < m) {
        __builtin_prefetch(&fill[pairs[e + 2 * kFillAhead]], 1);
        __builtin_prefetch(&fill[pairs[e + 2 * kFillAhead + 1]], 1);
      }
      if (e + 2 * kSlotAhead < m) {
        __builtin_prefetch(slots + fill[pairs[e + 2 * kSlotAhead]], 1);
        __builtin_prefetch(slots + fill[pairs[e + 2 * kSlotAhead + 1]], 1);
      }
      const Id lu = pairs[e], lv = pairs[e + 1];
      adj[static_cast<size_t>(fill[lu]++)] = lv;
      adj[static_cast<size_t>(fill[lv]++)] = lu;
    }
    indptr.pop_back();  // now indptr[l + 1] is where l's list ends: the CSR offsets
    return true;
  }

  // Fetches the sides of local node i's neighbours (a chunk's sides outgrow
  // the caches at a billion edges), for a visit a few nodes on.
  void prefetch_sides(size_t i) const {
    const Id* a = adj.data();
    for (Off j = indptr[i]; j < indptr[i + 1]; ++j)
      __builtin_prefetch(side.data() + static_cast<size_t>(a[j]));
  }

  // Neighbours of local node i in this chunk, by their current side (-1 not counted).
  void count(size_t i, double k[2]) const {
    int64_t c0 = 0, c1 = 0;
    const Id* a = adj.data();
    const int8_t* s = side.data();
    for (Off j = indptr[i]; j < indptr[i + 1]; ++j) {
      const int8_t sj = s[static_cast<size_t>(a[j])];
      c0 += sj == 0;
      c1 += sj == 1;
    }
    k[0] = static_cast<double>(c0);
    k[1] = static_cast<double>(c1);
  }
};

// Checks every row of a chunk: ids in [0, n), no self-loop, both endpoints
// members. One branch-light sweep; the error message (first bad row) is only
// built when the sweep finds one.
template <typename Id>
void check_chunk(const std::vector<Id>& pairs, const std::vector<int8_t>& part,
                 int64_t first_row, const std::string& path) {
  const size_t n = part.size();
  bool bad = false;
  for (size_t e = 0; e < pairs.size(); e += 2) {
    const size_t u = static_cast<size_t>(pairs[e]), v = static_cast<size_t>(pairs[e + 1]);
    // negative ids wrap to huge size_t values, so one comparison checks both ends
    bad |= (u >= n) | (v >= n) | (u == v);
    if (bad) break;
    bad |= (part[u] == kNotMember) | (part[v] == kNotMember);
  }
  if (!bad) return;
  for (size_t e = 0; e < pairs.size(); e += 2) {
    const int64_t u = pairs[e], v = pairs[e + 1];
    auto where = [&] {
      return "row " + std::to_string(first_row + static_cast<int64_t>(e / 2)) + " (" +
             std::to_string(u) + ", " + std::to_string(v) + ") of " + path;
    };
    if (u < 0 || u >= static_cast<int64_t>(n) || v < 0 || v >= static_cast<int64_t>(n))
      throw std::out_of_range(where() + " has a node id outside [0, " + std::to_string(n) + ")");
    if (u == v) throw std::invalid_argument(where() + " is a self-loop");
    if (part[static_cast<size_t>(u)] == kNotMember || part[static_cast<size_t>(v)] == kNotMember)
      throw std::invalid_argument(where() + " has an endpoint outside the sub-problem's nodes");
  }
}

// Calls f(id) for every member, in the order listed (increasing for `all`).
template <typename F>
void for_each_member(const Members& members, size_t n, F&& f) {
  if (members.all) {
    for (size_t x = 0; x < n; ++x) f(static_cast<NodeId>(x));
  } else {
    for (NodeId m : members.list) f(m);
  }
}

// Rows of a block a restreaming pass counts with the OpenMP team (fewer: in
// the caller's thread, as tests' tiny files are).
constexpr size_t kParallelRows = 4096;
// Nodes from which it does: below, the states stay in the caches, where an
// atomic add costs more than the miss it overlaps (2M nodes: 0.16 s a pass on
// two threads against 0.06 s on one; 51M nodes: 3.9-4.6 s against 5.8-6.2 s).
constexpr size_t kSharedCountNodes = size_t{1} << 24;

// Adds each row's change of gain to both its ends (see refine_pass), rows
// [first, last) of `ids`. `kShared`: other threads add into `st` at once, so
// every read and add is atomic. A pass never changes a state's low bit (the
// side; the adds are even), so the bits each row reads are the pass' own, and
// the sums are the same in any order: the same states as one thread.
template <bool kShared, typename Id, typename State>
void count_cut_rows(const Id* ids, size_t first, size_t last, State* st) {
  for (size_t e = 2 * first; e < 2 * last; e += 2) {
    if (e + kRowsAhead < 2 * last) {  // the rows were checked by the GREM pass: ids in range
      __builtin_prefetch(&st[static_cast<size_t>(ids[e + kRowsAhead])], 1);
      __builtin_prefetch(&st[static_cast<size_t>(ids[e + kRowsAhead + 1])], 1);
    }
    State* ends[2] = {&st[static_cast<size_t>(ids[e])], &st[static_cast<size_t>(ids[e + 1])]};
    State bits;
    if constexpr (kShared)
      bits = __atomic_load_n(ends[0], __ATOMIC_RELAXED) ^
             __atomic_load_n(ends[1], __ATOMIC_RELAXED);
    else
      bits = *ends[0] ^ *ends[1];
    // both ends gain 1 when the row is cut (the sides' bits differ), lose 1 when not
    const State d = static_cast<State>(4 * (bits & 1) - 2);
    for (State* end : ends) {
      if constexpr (kShared)
        __atomic_fetch_add(end, d, __ATOMIC_RELAXED);
      else
        *end += d;
    }
  }
}

// count_cut_rows over a block's rows cut into one share per thread of the
// team, the adds atomic. At 100M nodes every add misses the caches; two cores
// keep twice as many misses in flight.
template <typename Id, typename State>
void count_cut_rows_shared(const Id* ids, size_t rows, State* st, int threads) {
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    const size_t me = thread_index(), team = team_size();
    count_cut_rows<true>(ids, rows * me / team, rows * (me + 1) / team, st);
  }
}

struct Candidate {
  int64_t gain;
  NodeId node;
};

// One restreaming refinement pass; returns the number of nodes moved. `state`
// holds each node's side in its low bit and twice its gain (neighbours on the
// other side minus those on its own) above it, so a row reads and updates the
// two cache lines of its ends only (a side array and a counts array took four:
// at 100M nodes every one a miss). State is int32_t whenever the file has
// fewer than 2^30 rows (a degree cannot exceed the row count). The blocks are
// counted by OpenMP's team (count_cut_rows_shared) from kSharedCountNodes
// nodes up: the same states for any thread count.
template <typename Id, typename State>
int64_t refine_pass(EdgeChunkReader& reader, int64_t chunk_rows, const Members& members,
                    std::vector<int8_t>& part, HugeArray<State>& state, Sides& sides) {
  const size_t n = part.size();
  State* st = state.data();
  for (size_t x = 0; x < n; ++x) st[x] = static_cast<State>(part[x] & 1);  // -2 (not a member): 0
  std::vector<Id> pairs;
  reader.seek(0);
  ReadAhead<Id> blocks(reader, stream_block(chunk_rows));
  const int threads = resolve_threads(0);
  while (blocks.next(pairs) > 0) {
    const size_t rows = pairs.size() / 2;
    if (threads > 1 && rows >= kParallelRows && n >= kSharedCountNodes) {
      count_cut_rows_shared(pairs.data(), rows, st, threads);
    } else {
      count_cut_rows<false>(pairs.data(), 0, rows, st);
    }
  }
  std::vector<Candidate> cand[2];
  for_each_member(members, n, [&](NodeId m) {
    const size_t x = static_cast<size_t>(m);
    const int s = part[x];
    const int64_t gain = static_cast<int64_t>(state[x] >> 1);  // arithmetic: floor
    if (gain > 0) cand[s].push_back({gain, m});
  });
  for (auto& cs : cand)
    std::sort(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) {
      return a.gain != b.gain ? a.gain > b.gain : a.node < b.node;
    });
  size_t next[2] = {0, 0};
  int64_t moved = 0;
  for (;;) {
    const bool has[2] = {next[0] < cand[0].size(), next[1] < cand[1].size()};
    if (!has[0] && !has[1]) break;
    int s;  // the side a node leaves
    if (has[0] && has[1]) {
      const int64_t g0 = cand[0][next[0]].gain, g1 = cand[1][next[1]].gain;
      if (g0 != g1) s = g0 > g1 ? 0 : 1;
      else s = sides.size[1] * sides.w[0] > sides.size[0] * sides.w[1] ? 1 : 0;  // fuller side
    } else {
      s = has[0] ? 0 : 1;
    }
    if (!sides.room(1 - s, s)) {  // receiving side full: try the other direction
      s = 1 - s;
      if (!has[s] || !sides.room(1 - s, s)) break;
    }
    const size_t x = static_cast<size_t>(cand[s][next[s]++].node);
    part[x] = static_cast<int8_t>(1 - s);
    sides.fix(1 - s, s);
    ++moved;
  }
  return moved;
}

// Writes each row whose endpoints share a side to that side's writer (if any),
// in stream order, renumbered to the side's own ids: a node's new id is its
// rank among its side's members in increasing id order. One word per node
// holds that rank and the side (rank · 2 + side, unsigned: it fits the id
// width's unsigned range), so a row reads one cache line per end. A block's
// rows are cut into one consecutive share per thread, each gathered per side
// into the thread's own buffers, then written share after share: the files are
// the same for any thread count.
template <typename Id>
void split_pass(EdgeChunkReader& reader, int64_t chunk_rows, const std::vector<int8_t>& part,
                std::unique_ptr<EdgeFileWriter> (&out)[2]) {
  using Code = std::make_unsigned_t<Id>;
  const size_t n = part.size();
  HugeArray<Code> code(n);
  Code rank[2] = {0, 0};
  for (size_t x = 0; x < n; ++x) {
    const int s = part[x];
    if (s == 0 || s == 1) code[x] = static_cast<Code>((rank[s]++ << 1) | static_cast<Code>(s));
  }
  const int threads = resolve_threads(0);  // OpenMP's default count
  std::vector<Id> pairs;
  std::vector<std::vector<Id>> buf(2 * static_cast<size_t>(threads));  // [thread · 2 + side]
  std::vector<size_t> used(2 * static_cast<size_t>(threads));
  reader.seek(0);
  const Code* c = code.data();
  while (reader.next_raw(stream_block(chunk_rows), pairs) > 0) {
    const size_t rows = pairs.size() / 2;
    std::fill(used.begin(), used.end(), 0);
    // sized here, not in the threads (nothing may throw inside the region): a
    // block's length each, whatever share the team hands a thread (2^20 rows at most)
    for (auto& b : buf) b.resize(pairs.size());
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && rows >= 4096)
#endif
    {
      const size_t me = thread_index(), team = team_size();
      const size_t first = 2 * (rows * me / team), last = 2 * (rows * (me + 1) / team);
      const Id* ids = pairs.data();
      Id* dst[2] = {buf[2 * me].data(), buf[2 * me + 1].data()};
      size_t kept[2] = {0, 0};
      for (size_t e = first; e < last; e += 2) {  // branch-free: write to both, advance the kept one
        if (e + kRowsAhead < last) {
          __builtin_prefetch(&c[static_cast<size_t>(ids[e + kRowsAhead])]);
          __builtin_prefetch(&c[static_cast<size_t>(ids[e + kRowsAhead + 1])]);
        }
        const Code cu = c[static_cast<size_t>(ids[e])], cv = c[static_cast<size_t>(ids[e + 1])];
        const size_t su = cu & 1, same = su == (cv & 1);
        const Id u = static_cast<Id>(cu >> 1), v = static_cast<Id>(cv >> 1);
        dst[0][kept[0]] = u;
        dst[0][kept[0] + 1] = v;
        dst[1][kept[1]] = u;
        dst[1][kept[1] + 1] = v;
        kept[0] += 2 * (same & static_cast<size_t>(su == 0));
        kept[1] += 2 * (same & static_cast<size_t>(su == 1));
      }
      used[2 * me] = kept[0];
      used[2 * me + 1] = kept[1];
    }
    for (size_t t = 0; t < static_cast<size_t>(threads); ++t)
      for (int s = 0; s < 2; ++s)
        if (out[s] && used[2 * t + s])
          out[s]->append_raw(buf[2 * t + s].data(), static_cast<int64_t>(used[2 * t + s] / 2));
  }
}

template <typename Id, typename Off>
BisectResult bisect_impl(const EdgeFile& edges, const BisectConfig& config,
                         const Members& members, WidthSpan<int32_t> seed_nodes,
                         WidthSpan<int8_t> seed_sides) {
  const size_t n = static_cast<size_t>(config.num_nodes);
  // The nodes' states during the GREM pass; their sides (`part`) after it.
  HugeArray<NodeState<Id>> state(
      n, NodeState<Id>{{0.0, 0.0}, -1, members.all ? kUnassigned : kNotMember});
  NodeState<Id>* st = state.data();
  for (NodeId m : members.list) {
    if (m < 0 || m >= config.num_nodes)
      throw std::out_of_range("member " + std::to_string(m) + " is outside [0, " +
                              std::to_string(config.num_nodes) + ")");
    if (st[m].part != kNotMember)
      throw std::invalid_argument("member " + std::to_string(m) + " is listed twice");
    st[m].part = kUnassigned;
  }
  std::vector<int8_t> part;
  auto sides_of_states = [&] {
    part.resize(n);
    for (size_t x = 0; x < n; ++x) part[x] = st[x].part;
  };
  Sides sides;
  for (int s = 0; s < 2; ++s) {
    sides.cap[s] = config.capacity[s];
    sides.w[s] = config.weight[s];
  }
  BisectResult result;
  constexpr size_t kAhead = 16;  // visits between a prefetch and its use
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  auto started = Clock::now();

  // The GREM pass (Alg. 4), over the nodes' states; `part` is given back to
  // the passes after it.
  {
    std::vector<Id> pairs;
    ChunkGraph<Id, Off> g;
    EdgeChunkReader reader(edges);
    ReadAhead<Id> chunks(reader, config.chunk_rows);
    int64_t row = 0;
    for (int64_t c = 0;; ++c) {
      const int64_t got = chunks.next(pairs);
      if (got == 0) break;
      if (!g.build(pairs, state)) {
        sides_of_states();
        check_chunk(pairs, part, row, edges.path);  // throws, naming the first bad row
        throw std::logic_error("a chunk failed its check without a bad row");
      }
      row += got;
      ++result.num_chunks;
      double k[2];
      const size_t k_nodes = g.nodes.size();
      if (c == 0) {  // seed: labels from seed_algo on the first chunk's subgraph
        for (size_t i = 0; i < seed_nodes.size; ++i) {
          const NodeId x = static_cast<NodeId>(seed_nodes[i]);
          const int64_t s = static_cast<int64_t>(seed_sides[i]);
          if (x < 0 || x >= config.num_nodes || st[x].local < 0)
            throw std::invalid_argument("seed node " + std::to_string(x) +
                                        " is not in the first chunk");
          if (s != 0 && s != 1) throw std::invalid_argument("seed sides must be 0 or 1");
          NodeState<Id>& node = st[x];
          if (node.part != kUnassigned)
            throw std::invalid_argument("seed node " + std::to_string(x) + " is listed twice");
          node.part = static_cast<int8_t>(s);
          g.side[static_cast<size_t>(node.local)] = static_cast<int8_t>(s);
          ++sides.size[s];
        }
        if (seed_nodes.size != k_nodes)
          throw std::invalid_argument("the seed labels " + std::to_string(seed_nodes.size) +
                                      " nodes, the first chunk holds " +
                                      std::to_string(k_nodes));
        result.first_chunk_nodes = static_cast<int64_t>(k_nodes);
        for (size_t i = 0; i < k_nodes; ++i) {
          g.count(i, k);
          NodeState<Id>& node = st[g.nodes[i]];
          node.est[0] = k[0];
          node.est[1] = k[1];
          node.local = -1;
        }
      } else {
        for (size_t i = 0; i < k_nodes; ++i) {
          if (i + kAhead < k_nodes) {  // the state and neighbours' sides of a node ahead
            prefetch_state(&st[g.nodes[i + kAhead]]);
            g.prefetch_sides(i + kAhead);
          }
          NodeState<Id>& node = st[g.nodes[i]];
          node.local = -1;
          const int old = g.side[i];
          if (old != kUnassigned && !config.refine) continue;  // greedy: first label stays
          g.count(i, k);
          if (old != kUnassigned) {  // refinement: average with the running estimate
            k[0] = (node.est[0] + k[0]) / 2;
            k[1] = (node.est[1] + k[1]) / 2;
          }
          const int now = sides.assign(k[0], k[1], old);
          if (old != kUnassigned && now != old) ++result.reassigned;
          g.side[i] = static_cast<int8_t>(now);
          node.part = static_cast<int8_t>(now);
          sides.fix(now, old);
          node.est[0] = k[0];
          node.est[1] = k[1];
        }
      }
    }
    if (result.num_chunks == 0 && seed_nodes.size)
      throw std::invalid_argument("seed labels given for an empty edge file");
    sides_of_states();
    state.reset();
  }

  // Nodes never seen in any chunk go to the smaller side (relative to its share).
  for_each_member(members, n, [&](NodeId m) {
    const size_t x = static_cast<size_t>(m);
    if (part[x] != kUnassigned) return;
    const int s = sides.less_full(kUnassigned);
    part[x] = static_cast<int8_t>(s);
    sides.fix(s, kUnassigned);
    ++result.isolated;
  });
  result.seconds_grem = seconds_since(started);

  // Restreaming refinement passes, then the split of the edge file.
  const bool split = !config.out_path[0].empty() || !config.out_path[1].empty();
  if (config.passes > 0 || split) {
    EdgeChunkReader reader(edges);
    if (config.passes > 0) {
      auto run = [&](auto& state) {
        for (int p = 0; p < config.passes; ++p) {
          started = Clock::now();
          const int64_t moved =
              refine_pass<Id>(reader, config.chunk_rows, members, part, state, sides);
          result.moves.push_back(moved);
          result.seconds_passes.push_back(seconds_since(started));
          if (moved == 0) break;
        }
      };
      if (edges.rows < (int64_t{1} << 30)) {
        HugeArray<int32_t> state(n);  // each pass sets every word first
        run(state);
      } else {
        HugeArray<int64_t> state(n);
        run(state);
      }
    }
    if (split) {
      started = Clock::now();
      std::unique_ptr<EdgeFileWriter> out[2];
      for (int s = 0; s < 2; ++s)
        if (!config.out_path[s].empty())
          out[s] = std::make_unique<EdgeFileWriter>(config.out_path[s], edges.int64);
      split_pass<Id>(reader, config.chunk_rows, part, out);
      for (int s = 0; s < 2; ++s)
        if (out[s]) result.rows_written[s] = out[s]->close();
      result.seconds_split = seconds_since(started);
    }
  }

  if (members.all) {
    result.side = std::move(part);
  } else {
    result.side.resize(members.list.size);
    for (size_t i = 0; i < members.list.size; ++i)
      result.side[i] = part[static_cast<size_t>(members.list[i])];
  }
  result.sizes[0] = sides.size[0];
  result.sizes[1] = sides.size[1];
  return result;
}

}  // namespace

std::vector<NodeId> read_edge_rows(const EdgeFile& edges, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0) throw std::invalid_argument("begin and count must be non-negative");
  EdgeChunkReader reader(edges);
  std::vector<NodeId> pairs;
  reader.seek(std::min(begin, edges.rows));
  reader.next(count, pairs);
  return pairs;
}

template <typename Id>
std::vector<Id> read_edge_rows_raw(const EdgeFile& edges, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0) throw std::invalid_argument("begin and count must be non-negative");
  EdgeChunkReader reader(edges);
  std::vector<Id> pairs;
  reader.seek(std::min(begin, edges.rows));
  reader.next_raw(count, pairs);
  return pairs;
}

template std::vector<int32_t> read_edge_rows_raw<int32_t>(const EdgeFile&, int64_t, int64_t);
template std::vector<int64_t> read_edge_rows_raw<int64_t>(const EdgeFile&, int64_t, int64_t);

BisectResult grem_bisect(const EdgeFile& edges, const BisectConfig& config,
                         const Members& members, WidthSpan<int32_t> seed_nodes,
                         WidthSpan<int8_t> seed_sides) {
  if (config.num_nodes < 0) throw std::invalid_argument("num_nodes must be non-negative");
  if (config.chunk_rows < 1) throw std::invalid_argument("chunk_rows must be >= 1");
  if (config.passes < 0) throw std::invalid_argument("passes must be >= 0");
  for (int s = 0; s < 2; ++s) {
    if (config.capacity[s] < 0) throw std::invalid_argument("capacities must be non-negative");
    if (config.weight[s] < 1) throw std::invalid_argument("weights must be >= 1");
  }
  if (seed_nodes.size != seed_sides.size)
    throw std::invalid_argument("seed_nodes and seed_sides differ in length");
  if (members.all && members.list.size)
    throw std::invalid_argument("members: a list given with all members");
  const int64_t count = members.all ? config.num_nodes : static_cast<int64_t>(members.list.size);
  if (count > config.capacity[0] + config.capacity[1])
    throw std::invalid_argument("the sub-problem's " + std::to_string(count) +
                                " nodes exceed the two capacities' sum " +
                                std::to_string(config.capacity[0] + config.capacity[1]));
  // int32 offsets while a chunk's 2 · rows adjacency entries fit them
  const bool small = config.chunk_rows < (int64_t{1} << 30);
  if (edges.int64)
    return small ? bisect_impl<int64_t, int32_t>(edges, config, members, seed_nodes, seed_sides)
                 : bisect_impl<int64_t, int64_t>(edges, config, members, seed_nodes, seed_sides);
  return small ? bisect_impl<int32_t, int32_t>(edges, config, members, seed_nodes, seed_sides)
               : bisect_impl<int32_t, int64_t>(edges, config, members, seed_nodes, seed_sides);
}


template <typename Id>
void chunk_csr(Span<Id> local, int64_t n, std::vector<int64_t>& indptr,
               std::vector<int64_t>& indices) {
  if (n < 0) throw std::invalid_argument("n must be non-negative");
  if (local.size % 2) throw std::invalid_argument("pairs must hold an even number of ids");
  const size_t k = static_cast<size_t>(n);
  indptr.assign(k + 1, 0);
  for (const Id x : local) {
    if (x < 0 || x >= n) throw std::out_of_range("local id outside [0, n)");
    ++indptr[static_cast<size_t>(x) + 1];
  }
  for (size_t i = 0; i < k; ++i) indptr[i + 1] += indptr[i];
  std::vector<int64_t> cursor(indptr.begin(), indptr.end() - 1);
  indices.resize(local.size);
  for (size_t e = 0; e < local.size; e += 2) {
    const size_t u = static_cast<size_t>(local[e]), v = static_cast<size_t>(local[e + 1]);
    indices[static_cast<size_t>(cursor[u]++)] = local[e + 1];
    indices[static_cast<size_t>(cursor[v]++)] = local[e];
  }
  for (size_t x = 0; x < k; ++x)
    std::sort(indices.begin() + indptr[x], indices.begin() + indptr[x + 1]);
}

template void chunk_csr<int32_t>(Span<int32_t>, int64_t, std::vector<int64_t>&,
                                  std::vector<int64_t>&);
template void chunk_csr<int64_t>(Span<int64_t>, int64_t, std::vector<int64_t>&,
                                  std::vector<int64_t>&);

template <typename Id>
ChunkLocal<Id> chunk_local(Span<Id> pairs, NodeId num_nodes, bool first_appearance, bool csr) {
  if (num_nodes < 0) throw std::invalid_argument("num_nodes must be non-negative");
  if (pairs.size % 2) throw std::invalid_argument("pairs must hold an even number of ids");
  for (const Id x : pairs)
    if (x < 0 || x >= num_nodes)
      throw std::out_of_range("node id " + std::to_string(x) + " outside [0, " +
                              std::to_string(num_nodes) + ")");
  ChunkLocal<Id> out;
  // local ids are below the number of distinct ids in pairs, so they fit Id
  std::vector<Id> pos(static_cast<size_t>(num_nodes), -1);
  if (first_appearance) {
    for (const Id x : pairs) {
      Id& l = pos[static_cast<size_t>(x)];
      if (l < 0) {
        l = static_cast<Id>(out.nodes.size());
        out.nodes.push_back(x);
      }
    }
  } else {
    for (const Id x : pairs) pos[static_cast<size_t>(x)] = 0;
    for (size_t x = 0; x < pos.size(); ++x)
      if (pos[x] == 0) {
        pos[x] = static_cast<Id>(out.nodes.size());
        out.nodes.push_back(static_cast<Id>(x));
      }
  }
  out.local.resize(pairs.size);
  for (size_t e = 0; e < pairs.size; ++e) out.local[e] = pos[static_cast<size_t>(pairs[e])];
  std::vector<Id>().swap(pos);  // before the CSR: it needs no global scratch
  if (csr)
    chunk_csr(Span<Id>{out.local.data(), out.local.size()},
              static_cast<int64_t>(out.nodes.size()), out.indptr, out.indices);
  return out;
}

template ChunkLocal<int32_t> chunk_local<int32_t>(Span<int32_t>, NodeId, bool, bool);
template ChunkLocal<int64_t> chunk_local<int64_t>(Span<int64_t>, NodeId, bool, bool);

namespace {

// Sorts `buf` and merges its run-length counts into the sorted (keys, counts).
void merge_keys(std::vector<int64_t>& buf, ClusterEdges& out) {
  std::sort(buf.begin(), buf.end());
  std::vector<int64_t> keys, counts;
  keys.reserve(out.keys.size() + buf.size());
  counts.reserve(out.keys.size() + buf.size());
  size_t i = 0, j = 0;
  while (i < out.keys.size() || j < buf.size()) {
    int64_t key, count = 0;
    if (j == buf.size() || (i < out.keys.size() && out.keys[i] <= buf[j])) {
      key = out.keys[i];
      count = out.counts[i++];
    } else {
      key = buf[j];
    }
    while (j < buf.size() && buf[j] == key) {
      ++count;
      ++j;
    }
    keys.push_back(key);
    counts.push_back(count);
  }
  out.keys.swap(keys);
  out.counts.swap(counts);
  buf.clear();
}

template <typename Id>
ClusterEdges cluster_edges_impl(const EdgeFile& edges, Span<int32_t> cluster, int64_t k,
                                int64_t chunk_rows, size_t buffer_keys) {
  ClusterEdges out;
  EdgeChunkReader reader(edges);
  std::vector<Id> pairs;
  std::vector<int64_t> buf;
  const size_t n = cluster.size;
  int64_t row = 0;
  while (const int64_t got = reader.next_raw(stream_block(chunk_rows), pairs)) {
    for (size_t e = 0; e < pairs.size(); e += 2) {
      if (e + kRowsAhead < pairs.size()) {  // a later row's clusters: misses at scale
        const size_t y0 = static_cast<size_t>(pairs[e + kRowsAhead]);
        const size_t y1 = static_cast<size_t>(pairs[e + kRowsAhead + 1]);
        if (y0 < n) __builtin_prefetch(&cluster[y0]);
        if (y1 < n) __builtin_prefetch(&cluster[y1]);
      }
      const size_t u = static_cast<size_t>(pairs[e]), v = static_cast<size_t>(pairs[e + 1]);
      if (u >= n || v >= n)
        throw std::out_of_range("row " + std::to_string(row + static_cast<int64_t>(e / 2)) +
                                " of " + edges.path + " has a node id outside [0, " +
                                std::to_string(n) + ")");
      const int64_t a = cluster[u], b = cluster[v];
      if (a < 0 || b < 0) continue;
      if (a == b) {
        ++out.internal;
        continue;
      }
      buf.push_back(a < b ? a * k + b : b * k + a);
    }
    row += got;
    if (buf.size() > std::max(buffer_keys, out.keys.size())) merge_keys(buf, out);
  }
  merge_keys(buf, out);
  return out;
}

}  // namespace

ClusterEdges cluster_edges(const EdgeFile& edges, Span<int32_t> cluster, int64_t k,
                           int64_t chunk_rows, int64_t buffer_keys) {
  if (chunk_rows < 1) throw std::invalid_argument("chunk_rows must be >= 1");
  if (buffer_keys < 0) throw std::invalid_argument("buffer_keys must be >= 0");
  if (k < 0 || (k > 0 && k > (int64_t{1} << 62) / k))
    throw std::invalid_argument("k must be in [0, 2^31)");
  for (const int32_t c : cluster)
    if (c < -1 || c >= k) throw std::out_of_range("cluster ids must be in [-1, k)");
  const size_t buffer = static_cast<size_t>(buffer_keys);
  return edges.int64 ? cluster_edges_impl<int64_t>(edges, cluster, k, chunk_rows, buffer)
                     : cluster_edges_impl<int32_t>(edges, cluster, k, chunk_rows, buffer);
}

template <typename Id, typename Side>
void majority_rounds(Span<Id> local, MutSpan<Side> side, int rounds) {
  if (local.size % 2) throw std::invalid_argument("pairs must hold an even number of ids");
  const size_t n = side.size;
  for (const Id x : local)
    if (x < 0 || static_cast<size_t>(x) >= n) throw std::out_of_range("local id outside [0, n)");
  for (const Side s : side)
    if (s < -1 || s > 1) throw std::invalid_argument("sides must be -1, 0 or 1");
  // Only pairs with an unlabelled end vote; they shrink every round.
  std::vector<Id> open;
  for (size_t e = 0; e < local.size; e += 2)
    if (side[static_cast<size_t>(local[e])] < 0 || side[static_cast<size_t>(local[e + 1])] < 0) {
      open.push_back(local[e]);
      open.push_back(local[e + 1]);
    }
  // A node's votes in a round are at most its open pairs, its chunk degree
  // (below n for distinct pairs), so the id width holds them.
  std::vector<Id> votes(2 * n, 0), touched, decided;
  std::vector<int8_t> decided_side;
  for (int r = 0; r < rounds && !open.empty(); ++r) {
    touched.clear();
    for (size_t e = 0; e < open.size(); e += 2)
      for (int end = 0; end < 2; ++end) {
        const size_t x = static_cast<size_t>(open[e + end]);
        const int64_t sy = side[static_cast<size_t>(open[e + 1 - end])];
        if (side[x] < 0 && sy >= 0) {
          if (votes[2 * x] == 0 && votes[2 * x + 1] == 0) touched.push_back(static_cast<Id>(x));
          ++votes[2 * x + static_cast<size_t>(sy)];
        }
      }
    decided.clear();
    decided_side.clear();
    for (const Id t : touched) {
      const size_t x = static_cast<size_t>(t);
      if (votes[2 * x] != votes[2 * x + 1]) {
        decided.push_back(t);
        decided_side.push_back(votes[2 * x + 1] > votes[2 * x] ? 1 : 0);
      }
      votes[2 * x] = votes[2 * x + 1] = 0;
    }
    if (decided.empty()) break;
    for (size_t i = 0; i < decided.size(); ++i)  // synchronous: after all votes
      side[static_cast<size_t>(decided[i])] = static_cast<Side>(decided_side[i]);
    size_t kept = 0;
    for (size_t e = 0; e < open.size(); e += 2)
      if (side[static_cast<size_t>(open[e])] < 0 || side[static_cast<size_t>(open[e + 1])] < 0) {
        open[kept++] = open[e];
        open[kept++] = open[e + 1];
      }
    open.resize(kept);
  }
}

template void majority_rounds<int32_t, int8_t>(Span<int32_t>, MutSpan<int8_t>, int);
template void majority_rounds<int64_t, int8_t>(Span<int64_t>, MutSpan<int8_t>, int);
template void majority_rounds<int32_t, int64_t>(Span<int32_t>, MutSpan<int64_t>, int);
template void majority_rounds<int64_t, int64_t>(Span<int64_t>, MutSpan<int64_t>, int);

template <typename Id>
std::vector<int64_t> side_scores(Span<Id> local, Span<int8_t> sides) {
  if (local.size % 2) throw std::invalid_argument("pairs must hold an even number of ids");
  const size_t n = sides.size;
  for (const int8_t s : sides)
    if (s != 0 && s != 1) throw std::invalid_argument("sides must be 0 or 1");
  std::vector<int64_t> score(n, 0);
  for (size_t e = 0; e < local.size; e += 2) {
    const size_t u = static_cast<size_t>(local[e]), v = static_cast<size_t>(local[e + 1]);
    if (u >= n || v >= n) throw std::out_of_range("local id outside [0, n)");
    const int64_t sign = sides[u] == sides[v] ? 1 : -1;
    score[u] += sign;
    score[v] += sign;
  }
  return score;
}

template std::vector<int64_t> side_scores<int32_t>(Span<int32_t>, Span<int8_t>);
template std::vector<int64_t> side_scores<int64_t>(Span<int64_t>, Span<int8_t>);

std::vector<int64_t> tree_roots(Span<int64_t> indptr, Span<int64_t> indices,
                                int64_t max_weight) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold num_nodes + 1 entries");
  const size_t n = indptr.size - 1;
  if (indptr[0] != 0 || indptr[n] != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr does not match indices");
  std::vector<int64_t> deg(n), parent(n), weight(n, 1);
  std::vector<int64_t> queue;  // nodes of degree 1, then the peeling order
  std::vector<uint8_t> peeled(n, 0);
  for (size_t x = 0; x < n; ++x) {
    if (indptr[x + 1] < indptr[x]) throw std::invalid_argument("indptr must be non-decreasing");
    deg[x] = indptr[x + 1] - indptr[x];
    parent[x] = static_cast<int64_t>(x);
    if (deg[x] == 1) queue.push_back(static_cast<int64_t>(x));
  }
  for (const int64_t y : indices)
    if (y < 0 || static_cast<size_t>(y) >= n) throw std::out_of_range("neighbour id out of range");
  std::vector<int64_t> order;
  for (size_t head = 0; head < queue.size(); ++head) {
    const size_t x = static_cast<size_t>(queue[head]);
    if (peeled[x] || deg[x] != 1) continue;  // degree 0: the last node of a tree component
    int64_t y = -1;
    for (int64_t j = indptr[x]; j < indptr[x + 1]; ++j)
      if (!peeled[static_cast<size_t>(indices[static_cast<size_t>(j)])]) {
        y = indices[static_cast<size_t>(j)];
        break;
      }
    if (weight[x] + weight[static_cast<size_t>(y)] > max_weight) continue;  // stays
    weight[static_cast<size_t>(y)] += weight[x];
    peeled[x] = 1;
    parent[x] = y;
    order.push_back(static_cast<int64_t>(x));
    if (--deg[static_cast<size_t>(y)] == 1) queue.push_back(y);
  }
  // A node's parent was peeled later or stays: resolve roots in reverse order.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const size_t x = static_cast<size_t>(*it);
    parent[x] = parent[static_cast<size_t>(parent[x])];
  }
  return parent;
}

std::vector<int64_t> ldg_bisect(Span<int64_t> indptr, Span<int64_t> indices,
                                const int64_t capacity[2], const int64_t weight[2]) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold num_nodes + 1 entries");
  const size_t n = indptr.size - 1;
  if (indptr[0] != 0 || indptr[n] != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr does not match indices");
  Sides sides;
  for (int s = 0; s < 2; ++s) {
    sides.cap[s] = std::max<int64_t>(capacity[s], 1);
    sides.w[s] = std::max<int64_t>(weight[s], 1);
  }
  std::vector<int64_t> side(n, -1);
  for (size_t v = 0; v < n; ++v) {
    int64_t k[2] = {0, 0};
    for (int64_t j = indptr[v]; j < indptr[v + 1]; ++j) {
      const int64_t u = indices[static_cast<size_t>(j)];
      if (u < 0 || static_cast<size_t>(u) >= n)
        throw std::out_of_range("neighbour id out of range");
      if (side[static_cast<size_t>(u)] >= 0) ++k[side[static_cast<size_t>(u)]];
    }
    int best = -1;
    double best_score = 0;
    for (int s = 0; s < 2; ++s) {
      if (!sides.room(s, -1)) continue;
      const double fill =
          static_cast<double>(sides.size[s]) / static_cast<double>(sides.cap[s]);
      const double score = static_cast<double>(k[s]) * (1.0 - fill);
      if (best < 0 || score > best_score) {
        best = s;
        best_score = score;
      } else if (score == best_score) {
        best = sides.less_full(-1);  // both tie: the less full side
      }
    }
    if (best < 0) best = sides.less_full(-1);
    side[v] = best;
    sides.fix(best, -1);
  }
  return side;
}

}  // namespace gnncore
