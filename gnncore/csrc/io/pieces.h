// Contiguous pieces of [0, n) run on plain threads: the kernels of edge keys
// (sort, remap, transpose) split their loops this way.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace gnncore::io {

// The most threads the edge-key kernels take, whatever they are asked for.
constexpr int kMaxPieceThreads = 64;

// The threads parallel_pieces runs for n items: at most `threads`, one per 65536 items.
inline int piece_threads(int threads, size_t n) {
  return std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(n / 65536, 1))));
}

// Runs fn(t, begin, end) on `threads` threads over [0, n) cut into contiguous
// pieces (fewer threads for few items: piece_threads); piece 0 on the caller.
template <typename Fn>
void parallel_pieces(int threads, size_t n, Fn&& fn) {
  threads = piece_threads(threads, n);
  if (threads == 1) {
    fn(0, size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads) - 1);
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&fn, t, threads, n] {
      fn(t, n * static_cast<size_t>(t) / static_cast<size_t>(threads),
         n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads));
    });
  fn(0, size_t{0}, n / static_cast<size_t>(threads));
  for (auto& th : pool) th.join();
}

// Runs fn(t) for t in [0, threads) on `threads` threads (0 on the caller).
template <typename Fn>
void parallel_teams(int threads, Fn&& fn) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(std::max(threads, 1)) - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back([&fn, t] { fn(t); });
  fn(0);
  for (auto& th : pool) th.join();
}

// pieces[t][b] (piece t's count in bucket b) becomes piece t's first slot in
// bucket b, buckets in order and the pieces in order within each (what a
// stable parallel scatter writes to); first[b] gets bucket b's first slot
// unless first is null. Returns the total count.
template <typename Pieces, typename Slot>
auto piece_offsets(Pieces& pieces, size_t buckets, Slot* first) {
  using Count = std::decay_t<decltype(pieces[0][0])>;
  Count sum = 0;
  for (size_t b = 0; b < buckets; ++b) {
    if (first != nullptr) first[b] = static_cast<Slot>(sum);
    for (auto& piece : pieces) {
      const Count c = piece[b];
      piece[b] = sum;
      sum += c;
    }
  }
  return sum;
}

inline int bit_width(uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

}  // namespace gnncore::io
