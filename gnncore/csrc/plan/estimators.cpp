#include "plan/estimators.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "parallel.h"

namespace gnncore {

namespace {

// Checks the CSR once so the loops below index without checks: indptr starts
// at 0, never decreases and ends at len(indices); every neighbour id is in
// [0, N). Returns N.
template <typename IndexT>
NodeId check_csr(Span<int64_t> indptr, Span<IndexT> indices, [[maybe_unused]] int threads) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must have N + 1 >= 1 entries, got 0");
  const NodeId n = static_cast<NodeId>(indptr.size - 1);
  const int64_t e = static_cast<int64_t>(indices.size);
  if (indptr[0] != 0 || indptr[indptr.size - 1] != e)
    throw std::invalid_argument("indptr must start at 0 and end at len(indices) = " +
                                std::to_string(e) + ", got " + std::to_string(indptr[0]) +
                                " ... " + std::to_string(indptr[indptr.size - 1]));
  for (NodeId v = 0; v < n; ++v)
    if (indptr[v] > indptr[v + 1])
      throw std::invalid_argument("indptr must be non-decreasing, but indptr[" +
                                  std::to_string(v) + "] = " + std::to_string(indptr[v]) +
                                  " > indptr[" + std::to_string(v + 1) +
                                  "] = " + std::to_string(indptr[v + 1]));
  int64_t first_bad = e;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && e >= (1 << 16)) \
    schedule(static) reduction(min : first_bad)
#endif
  for (int64_t j = 0; j < e; ++j) {
    const int64_t u = static_cast<int64_t>(indices[static_cast<size_t>(j)]);
    if ((u < 0 || u >= n) && j < first_bad) first_bad = j;
  }
  if (first_bad < e)
    throw std::invalid_argument(
        "indices[" + std::to_string(first_bad) +
        "] = " + std::to_string(static_cast<int64_t>(indices[static_cast<size_t>(first_bad)])) +
        " is outside [0, " + std::to_string(n) + ")");
  return n;
}

void check_layers(int64_t layers) {
  if (layers < 0)
    throw std::invalid_argument("layers must be >= 0, got " + std::to_string(layers));
}

// The distinct training ids, in first-seen order; throws for one outside [0, N).
std::vector<NodeId> distinct_train(Span<NodeId> train, NodeId n) {
  std::vector<uint8_t> seen(static_cast<size_t>(n), 0);
  std::vector<NodeId> out;
  out.reserve(train.size);
  for (size_t i = 0; i < train.size; ++i) {
    const NodeId t = train[i];
    if (t < 0 || t >= n)
      throw std::invalid_argument("train[" + std::to_string(i) + "] = " + std::to_string(t) +
                                  " is outside [0, " + std::to_string(n) + ")");
    if (!seen[static_cast<size_t>(t)]) {
      seen[static_cast<size_t>(t)] = 1;
      out.push_back(t);
    }
  }
  return out;
}

// The transposed CSR: row j lists every t with j in row t (once per
// occurrence), in ascending t whatever the thread count.
template <typename RowT>
struct Transposed {
  std::vector<int64_t> indptr;
  std::vector<RowT> indices;
};

template <typename RowT, typename IndexT>
Transposed<RowT> transpose(Span<int64_t> indptr, Span<IndexT> indices, NodeId n, int threads) {
  const int64_t e = static_cast<int64_t>(indices.size);
  if (e < (1 << 16)) threads = 1;
  Transposed<RowT> out;
  out.indptr.assign(static_cast<size_t>(n) + 1, 0);
  out.indices.resize(static_cast<size_t>(e));
  int64_t* count = out.indptr.data() + 1;
  if (threads == 1) {
    for (int64_t j = 0; j < e; ++j) ++count[indices[static_cast<size_t>(j)]];
  } else {
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t j = 0; j < e; ++j) {
#pragma omp atomic
      ++count[indices[static_cast<size_t>(j)]];
    }
#endif
  }
  for (NodeId v = 1; v < n; ++v) count[v] += count[v - 1];
  // Worker k owns the transposed rows [bound[k], bound[k + 1]) (about E / threads
  // entries each) and fills them walking every row t in ascending order, so
  // each transposed row comes out in ascending t for any thread count.
  std::vector<NodeId> bound(static_cast<size_t>(threads) + 1, n);
  bound[0] = 0;
  for (int k = 1; k < threads; ++k)
    bound[static_cast<size_t>(k)] = static_cast<NodeId>(
        std::lower_bound(out.indptr.begin(), out.indptr.end(), e / threads * k) -
        out.indptr.begin());
  std::vector<int64_t> cursor(out.indptr.begin(), out.indptr.end() - 1);
  RowT* ti = out.indices.data();
  auto fill = [&](int k) {
    const NodeId lo = bound[static_cast<size_t>(k)], hi = bound[static_cast<size_t>(k) + 1];
    if (lo >= hi) return;
    const bool all = lo == 0 && hi == n;
    for (NodeId t = 0; t < n; ++t)
      for (int64_t j = indptr[t]; j < indptr[t + 1]; ++j) {
        const NodeId u = static_cast<NodeId>(indices[j]);
        if (all || (u >= lo && u < hi)) ti[cursor[static_cast<size_t>(u)]++] = static_cast<RowT>(t);
      }
  };
  // A team smaller than asked for still fills every range (and one thread, all).
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
  for (size_t k = thread_index(); k < static_cast<size_t>(threads); k += team_size())
    fill(static_cast<int>(k));
  return out;
}

template <typename RowT, typename IndexT>
std::vector<double> spmv_with(Span<int64_t> indptr, Span<IndexT> indices,
                              const std::vector<NodeId>& train, int64_t layers, NodeId n,
                              [[maybe_unused]] int threads) {
  std::vector<double> x(static_cast<size_t>(n), 0.0);
  for (NodeId t : train) x[static_cast<size_t>(t)] = 1.0;
  if (layers == 0 || n == 0) return x;
  const Transposed<RowT> tr = transpose<RowT>(indptr, indices, n, threads);
  const int64_t* tp = tr.indptr.data();
  const RowT* ti = tr.indices.data();
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t l = 0; l < layers; ++l) {
    const double* xs = x.data();
    double* ys = y.data();
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && n >= 4096) \
    schedule(dynamic, 2048)
#endif
    for (NodeId j = 0; j < n; ++j) {
      double s = xs[j];
      for (int64_t k = tp[j]; k < tp[j + 1]; ++k) s += xs[ti[k]];
      ys[j] = s;
    }
    x.swap(y);
  }
  return x;
}

}  // namespace

template <typename IndexT>
std::vector<int64_t> access_reach(Span<int64_t> indptr, Span<IndexT> indices,
                                  Span<NodeId> train, int64_t layers, int num_threads) {
  check_layers(layers);
  const int threads = resolve_threads(num_threads);
  const NodeId n = check_csr(indptr, indices, threads);
  const std::vector<NodeId> roots = distinct_train(train, n);
  const int64_t count = static_cast<int64_t>(roots.size());
  std::vector<int64_t> f(static_cast<size_t>(n), 0);
  int64_t* fs = f.data();
  // One bounded BFS per root; `seen` is the BFS queue (levels are consecutive
  // ranges of it) and also the list of marks to clear afterwards. Counts are
  // integers, so the atomic adds give the same result in any order.
#ifdef GNNCORE_WITH_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && count > 1)
#endif
  {
    std::vector<uint8_t> visited(static_cast<size_t>(n), 0);
    std::vector<NodeId> seen;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
    for (int64_t r = 0; r < count; ++r) {
      const NodeId t = roots[static_cast<size_t>(r)];
      seen.clear();
      seen.push_back(t);
      visited[static_cast<size_t>(t)] = 1;
      size_t lo = 0;
      for (int64_t h = 0; h < layers && lo < seen.size(); ++h) {
        const size_t hi = seen.size();
        for (size_t i = lo; i < hi; ++i) {
          const NodeId u = seen[i];
          for (int64_t j = indptr[u]; j < indptr[u + 1]; ++j) {
            const NodeId w = static_cast<NodeId>(indices[j]);
            if (!visited[static_cast<size_t>(w)]) {
              visited[static_cast<size_t>(w)] = 1;
              seen.push_back(w);
            }
          }
        }
        lo = hi;
      }
      for (NodeId w : seen) {
        visited[static_cast<size_t>(w)] = 0;
#ifdef GNNCORE_WITH_OPENMP
#pragma omp atomic
#endif
        ++fs[w];
      }
    }
  }
  return f;
}

template <typename IndexT>
std::vector<double> access_spmv(Span<int64_t> indptr, Span<IndexT> indices, Span<NodeId> train,
                                int64_t layers, int num_threads) {
  check_layers(layers);
  const int threads = resolve_threads(num_threads);
  const NodeId n = check_csr(indptr, indices, threads);
  const std::vector<NodeId> roots = distinct_train(train, n);
  // Row ids of the transposed CSR fit in int32 for all but huge graphs.
  if (n <= static_cast<NodeId>(std::numeric_limits<int32_t>::max()))
    return spmv_with<int32_t>(indptr, indices, roots, layers, n, threads);
  return spmv_with<int64_t>(indptr, indices, roots, layers, n, threads);
}

template std::vector<int64_t> access_reach<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                    int64_t, int);
template std::vector<int64_t> access_reach<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                    int64_t, int);
template std::vector<double> access_spmv<int32_t>(Span<int64_t>, Span<int32_t>, Span<NodeId>,
                                                  int64_t, int);
template std::vector<double> access_spmv<int64_t>(Span<int64_t>, Span<int64_t>, Span<NodeId>,
                                                  int64_t, int);

}  // namespace gnncore
