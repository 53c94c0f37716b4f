#include "partition/grem.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

namespace gnncore {

namespace {

constexpr int8_t kNotMember = -2;  // node outside the sub-problem
constexpr int8_t kUnassigned = -1;

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

// The adjacency of one chunk over local ids 0..k-1, numbered by first
// appearance in the chunk (the visiting order). `local` maps global ids to
// local ones; it is reset after each chunk, so each chunk costs O(chunk).
struct ChunkGraph {
  std::vector<NodeId> nodes;
  std::vector<int64_t> indptr;
  std::vector<int64_t> adj;
  std::vector<int64_t> cursor;

  void build(const std::vector<NodeId>& pairs, std::vector<int64_t>& local) {
    nodes.clear();
    for (NodeId x : pairs) {
      if (local[static_cast<size_t>(x)] < 0) {
        local[static_cast<size_t>(x)] = static_cast<int64_t>(nodes.size());
        nodes.push_back(x);
      }
    }
    indptr.assign(nodes.size() + 1, 0);
    for (NodeId x : pairs) ++indptr[static_cast<size_t>(local[static_cast<size_t>(x)]) + 1];
    for (size_t i = 0; i < nodes.size(); ++i) indptr[i + 1] += indptr[i];
    cursor.assign(indptr.begin(), indptr.end() - 1);
    adj.resize(pairs.size());
    for (size_t e = 0; e < pairs.size(); e += 2) {
      const int64_t a = local[static_cast<size_t>(pairs[e])];
      const int64_t b = local[static_cast<size_t>(pairs[e + 1])];
      adj[static_cast<size_t>(cursor[static_cast<size_t>(a)]++)] = b;
      adj[static_cast<size_t>(cursor[static_cast<size_t>(b)]++)] = a;
    }
  }

  void release(std::vector<int64_t>& local) const {
    for (NodeId x : nodes) local[static_cast<size_t>(x)] = -1;
  }

  // Neighbours of local node i in this chunk, by their current side (-1 not counted).
  void count(size_t i, const std::vector<int8_t>& part, double k[2]) const {
    int64_t c[2] = {0, 0};
    for (int64_t j = indptr[i]; j < indptr[i + 1]; ++j) {
      const NodeId nbr = nodes[static_cast<size_t>(adj[static_cast<size_t>(j)])];
      const int8_t s = part[static_cast<size_t>(nbr)];
      if (s >= 0) ++c[s];
    }
    k[0] = static_cast<double>(c[0]);
    k[1] = static_cast<double>(c[1]);
  }
};

void check_chunk(const std::vector<NodeId>& pairs, const std::vector<int8_t>& part,
                 int64_t first_row, const std::string& path) {
  const NodeId n = static_cast<NodeId>(part.size());
  for (size_t e = 0; e < pairs.size(); e += 2) {
    const NodeId u = pairs[e], v = pairs[e + 1];
    const std::string where = "row " + std::to_string(first_row + static_cast<int64_t>(e / 2)) +
                              " (" + std::to_string(u) + ", " + std::to_string(v) + ") of " + path;
    if (u < 0 || u >= n || v < 0 || v >= n)
      throw std::out_of_range(where + " has a node id outside [0, " + std::to_string(n) + ")");
    if (u == v) throw std::invalid_argument(where + " is a self-loop");
    if (part[static_cast<size_t>(u)] == kNotMember || part[static_cast<size_t>(v)] == kNotMember)
      throw std::invalid_argument(where + " has an endpoint outside the sub-problem's nodes");
  }
}

struct Candidate {
  int64_t gain;
  NodeId node;
};

// One restreaming refinement pass; returns the number of nodes moved.
int64_t refine_pass(EdgeChunkReader& reader, int64_t chunk_rows, Span<NodeId> members,
                    std::vector<int8_t>& part, std::vector<int64_t>& cnt, Sides& sides) {
  std::fill(cnt.begin(), cnt.end(), 0);
  std::vector<NodeId> pairs;
  reader.seek(0);
  while (reader.next(chunk_rows, pairs) > 0) {
    for (size_t e = 0; e < pairs.size(); e += 2) {
      const size_t u = static_cast<size_t>(pairs[e]), v = static_cast<size_t>(pairs[e + 1]);
      ++cnt[2 * u + static_cast<size_t>(part[v])];
      ++cnt[2 * v + static_cast<size_t>(part[u])];
    }
  }
  std::vector<Candidate> cand[2];
  for (NodeId m : members) {
    const size_t x = static_cast<size_t>(m);
    const int s = part[x];
    const int64_t gain =
        cnt[2 * x + static_cast<size_t>(1 - s)] - cnt[2 * x + static_cast<size_t>(s)];
    if (gain > 0) cand[s].push_back({gain, m});
  }
  for (auto& c : cand)
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
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

}  // namespace

std::vector<NodeId> read_edge_rows(const EdgeFile& edges, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0) throw std::invalid_argument("begin and count must be non-negative");
  EdgeChunkReader reader(edges);
  std::vector<NodeId> pairs;
  reader.seek(std::min(begin, edges.rows));
  reader.next(count, pairs);
  return pairs;
}

BisectResult grem_bisect(const EdgeFile& edges, const BisectConfig& config,
                         Span<NodeId> members, Span<NodeId> seed_nodes,
                         Span<int64_t> seed_sides) {
  if (config.num_nodes < 0) throw std::invalid_argument("num_nodes must be non-negative");
  if (config.chunk_rows < 1) throw std::invalid_argument("chunk_rows must be >= 1");
  if (config.passes < 0) throw std::invalid_argument("passes must be >= 0");
  for (int s = 0; s < 2; ++s) {
    if (config.capacity[s] < 0) throw std::invalid_argument("capacities must be non-negative");
    if (config.weight[s] < 1) throw std::invalid_argument("weights must be >= 1");
  }
  if (seed_nodes.size != seed_sides.size)
    throw std::invalid_argument("seed_nodes and seed_sides differ in length");
  if (static_cast<int64_t>(members.size) > config.capacity[0] + config.capacity[1])
    throw std::invalid_argument("the sub-problem's " + std::to_string(members.size) +
                                " nodes exceed the two capacities' sum " +
                                std::to_string(config.capacity[0] + config.capacity[1]));

  const size_t n = static_cast<size_t>(config.num_nodes);
  std::vector<int8_t> part(n, kNotMember);
  for (NodeId m : members) {
    if (m < 0 || m >= config.num_nodes)
      throw std::out_of_range("member " + std::to_string(m) + " is outside [0, " +
                              std::to_string(config.num_nodes) + ")");
    if (part[static_cast<size_t>(m)] != kNotMember)
      throw std::invalid_argument("member " + std::to_string(m) + " is listed twice");
    part[static_cast<size_t>(m)] = kUnassigned;
  }
  Sides sides;
  for (int s = 0; s < 2; ++s) {
    sides.cap[s] = config.capacity[s];
    sides.w[s] = config.weight[s];
  }
  BisectResult result;

  // The GREM pass (Alg. 4).
  {
    std::vector<double> est(2 * n, 0.0);  // nbr_counts: running neighbour estimates per side
    std::vector<int64_t> local(n, -1);
    std::vector<NodeId> pairs;
    ChunkGraph g;
    EdgeChunkReader reader(edges);
    int64_t row = 0;
    for (int64_t c = 0;; ++c) {
      const int64_t got = reader.next(config.chunk_rows, pairs);
      if (got == 0) break;
      check_chunk(pairs, part, row, edges.path);
      row += got;
      g.build(pairs, local);
      ++result.num_chunks;
      double k[2];
      if (c == 0) {  // seed: labels from seed_algo on the first chunk's subgraph
        for (size_t i = 0; i < seed_nodes.size; ++i) {
          const NodeId x = seed_nodes[i];
          const int64_t s = seed_sides[i];
          if (x < 0 || x >= config.num_nodes || local[static_cast<size_t>(x)] < 0)
            throw std::invalid_argument("seed node " + std::to_string(x) +
                                        " is not in the first chunk");
          if (s != 0 && s != 1) throw std::invalid_argument("seed sides must be 0 or 1");
          if (part[static_cast<size_t>(x)] != kUnassigned)
            throw std::invalid_argument("seed node " + std::to_string(x) + " is listed twice");
          part[static_cast<size_t>(x)] = static_cast<int8_t>(s);
          ++sides.size[s];
        }
        if (seed_nodes.size != g.nodes.size())
          throw std::invalid_argument("the seed labels " + std::to_string(seed_nodes.size) +
                                      " nodes, the first chunk holds " +
                                      std::to_string(g.nodes.size()));
        result.first_chunk_nodes = static_cast<int64_t>(g.nodes.size());
        for (size_t i = 0; i < g.nodes.size(); ++i) {
          g.count(i, part, k);
          const size_t x = static_cast<size_t>(g.nodes[i]);
          est[2 * x] = k[0];
          est[2 * x + 1] = k[1];
        }
      } else {
        for (size_t i = 0; i < g.nodes.size(); ++i) {
          const size_t x = static_cast<size_t>(g.nodes[i]);
          const int old = part[x];
          if (old != kUnassigned && !config.refine) continue;  // greedy: first label stays
          g.count(i, part, k);
          if (old != kUnassigned) {  // refinement: average with the running estimate
            k[0] = (est[2 * x] + k[0]) / 2;
            k[1] = (est[2 * x + 1] + k[1]) / 2;
          }
          const int now = sides.assign(k[0], k[1], old);
          if (old != kUnassigned && now != old) ++result.reassigned;
          part[x] = static_cast<int8_t>(now);
          sides.fix(now, old);
          est[2 * x] = k[0];
          est[2 * x + 1] = k[1];
        }
      }
      g.release(local);
    }
    if (result.num_chunks == 0 && seed_nodes.size)
      throw std::invalid_argument("seed labels given for an empty edge file");
  }

  // Nodes never seen in any chunk go to the smaller side (relative to its share).
  for (NodeId m : members) {
    const size_t x = static_cast<size_t>(m);
    if (part[x] != kUnassigned) continue;
    const int s = sides.less_full(kUnassigned);
    part[x] = static_cast<int8_t>(s);
    sides.fix(s, kUnassigned);
    ++result.isolated;
  }

  // Restreaming refinement passes, then the split of the edge file.
  const bool split = !config.out_path[0].empty() || !config.out_path[1].empty();
  if (config.passes > 0 || split) {
    EdgeChunkReader reader(edges);
    if (config.passes > 0) {
      std::vector<int64_t> cnt(2 * n);
      for (int p = 0; p < config.passes; ++p) {
        const int64_t moved = refine_pass(reader, config.chunk_rows, members, part, cnt, sides);
        result.moves.push_back(moved);
        if (moved == 0) break;
      }
    }
    if (split) {
      std::unique_ptr<EdgeFileWriter> out[2];
      for (int s = 0; s < 2; ++s)
        if (!config.out_path[s].empty())
          out[s] = std::make_unique<EdgeFileWriter>(config.out_path[s], edges.int64);
      std::vector<NodeId> pairs;
      reader.seek(0);
      while (reader.next(config.chunk_rows, pairs) > 0) {
        for (size_t e = 0; e < pairs.size(); e += 2) {
          const int s = part[static_cast<size_t>(pairs[e])];
          if (s == part[static_cast<size_t>(pairs[e + 1])] && out[s])
            out[s]->append(pairs[e], pairs[e + 1]);
        }
      }
      for (int s = 0; s < 2; ++s)
        if (out[s]) result.rows_written[s] = out[s]->close();
    }
  }

  result.side.resize(members.size);
  for (size_t i = 0; i < members.size; ++i) result.side[i] = part[static_cast<size_t>(members[i])];
  result.sizes[0] = sides.size[0];
  result.sizes[1] = sides.size[1];
  return result;
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
