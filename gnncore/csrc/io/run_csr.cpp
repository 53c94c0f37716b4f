#include "io/run_csr.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/edge_keys.h"

namespace gnncore::io {

namespace {

constexpr size_t kBlockKeys = size_t{1} << 16;  // keys decoded at a time
constexpr size_t kPipelineDepth = 4;  // BlockPipeline: blocks queued between two stages
constexpr size_t kRowAhead = 32;   // fill_csr_range: keys between a row's prefetch and its use
constexpr size_t kSlotAhead = 16;  // ... and between a slot's prefetch and its write
constexpr uint64_t kSplitTableSize = uint64_t{1} << 16;  // split_key_run: blocks of rows
constexpr size_t kCountAhead = 16;  // count_key_ends: keys between a counter's prefetch and its add

std::string key_pair(uint64_t key) {
  return "(" + std::to_string(key >> kKeyShift) + ", " + std::to_string(key & kKeyMinorMask) +
         ")";
}

// Blocks handed from the calling thread to one worker thread that processes
// them in order, up to `depth` of them queued: the caller fills one buffer
// while the worker processes the others. With one block in flight, three
// stages on two cores waited on each other whenever one of them was
// descheduled (the billion's remap: both cores three quarters busy); a queue
// of a few blocks takes up those hiccups. What the worker throws is rethrown
// to the caller at its next hand_off() or at finish(); the destructor drops
// the blocks the worker has not started and joins it.
class BlockPipeline {
 public:
  explicit BlockPipeline(std::function<void(std::vector<uint64_t>&)> process,
                         size_t depth = kPipelineDepth)
      : process_(std::move(process)) {
    free_.resize(std::max<size_t>(depth, 1));
    for (auto& buffer : free_) buffer.reserve(kBlockKeys);
    filling_.reserve(kBlockKeys);
    worker_ = std::thread([this] { run(); });
  }
  BlockPipeline(const BlockPipeline&) = delete;
  BlockPipeline& operator=(const BlockPipeline&) = delete;
  ~BlockPipeline() { close(/*drain=*/false); }

  // The buffer to fill.
  std::vector<uint64_t>& block() { return filling_; }

  // Queues the filled buffer for the worker and takes an empty one, waiting
  // while all of them are queued.
  void hand_off() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !free_.empty() || error_; });
    if (error_) std::rethrow_exception(error_);
    queued_.push_back(std::move(filling_));
    filling_ = std::move(free_.back());
    free_.pop_back();
    changed_.notify_all();
  }

  // Hands off what is left and waits for the worker to process every queued
  // block; rethrows its error.
  void finish() {
    if (!block().empty()) hand_off();
    close(/*drain=*/true);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return !queued_.empty() || closed_; });
      if (queued_.empty() || (closed_ && !drain_)) return;
      std::vector<uint64_t> work = std::move(queued_.front());
      queued_.pop_front();
      lock.unlock();
      std::exception_ptr failed;
      try {
        process_(work);
      } catch (...) {
        failed = std::current_exception();
      }
      work.clear();
      lock.lock();
      free_.push_back(std::move(work));
      if (failed) error_ = failed;
      changed_.notify_all();
      if (failed) return;
    }
  }

  void close(bool drain) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      closed_ = true;
      drain_ = drain;
      changed_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
  }

  std::function<void(std::vector<uint64_t>&)> process_;
  std::vector<uint64_t> filling_;                // the caller's
  std::deque<std::vector<uint64_t>> queued_;     // filled, in order, for the worker
  std::vector<std::vector<uint64_t>> free_;      // empty, for the caller
  bool closed_ = false;
  bool drain_ = true;  // on close: process what is queued (finish), or drop it
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_;
};

}  // namespace

void count_key_ends(Span<uint64_t> keys, MutSpan<int64_t> major, MutSpan<int64_t> minor) {
  const uint64_t n_major = major.size == 0 ? 0 : major.size - 1;
  const uint64_t n_minor = minor.size == 0 ? 0 : minor.size - 1;
  for (size_t i = 0; i < keys.size; ++i) {
    // the minor ids are in no order: their counters are fetched ahead (the
    // major ids increase, so theirs stream)
    if (i + kCountAhead < keys.size) {
      const uint64_t ahead = keys[i + kCountAhead] & kKeyMinorMask;
      if (ahead < n_minor) __builtin_prefetch(&minor[ahead + 1], 1);
    }
    const uint64_t a = keys[i] >> kKeyShift, b = keys[i] & kKeyMinorMask;
    if (a >= n_major || b >= n_minor)
      throw std::invalid_argument("key " + std::to_string(i) + " " + key_pair(keys[i]) +
                                  " has an id outside [0, " + std::to_string(n_major) + ")");
    ++major[a + 1];
    ++minor[b + 1];
  }
}

template <typename Lut>
int64_t merge_map_key_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                           size_t buffer_bytes, Span<Lut> lut, MutSpan<int64_t> major,
                           MutSpan<int64_t> minor, bool direct) {
  KeyRunWriter out(out_path, buffer_bytes, direct);
  {
    // Three stages, a thread each, a few blocks queued between them: this thread
    // merges, a second maps the ids, a third counts the ends and writes. The
    // mapping and the counting each read a table of the nodes at random; on one
    // thread together they took twice the merge's time at a billion keys (62 s
    // against 31), the merge thread idle half of it.
    BlockPipeline count_and_write([&](std::vector<uint64_t>& block) {
      const Span<uint64_t> mapped{block.data(), block.size()};
      count_key_ends(mapped, major, minor);
      out.append(mapped);  // checks that the mapped keys still increase
    });
    BlockPipeline map_ids([&](std::vector<uint64_t>& block) {
      remap_keys<Lut>(MutSpan<uint64_t>{block.data(), block.size()}, lut, 1);
      count_and_write.block().swap(block);  // the next stage's free buffer: empty
      count_and_write.hand_off();
    });
    merge_distinct_keys(run_paths, buffer_bytes, [&](uint64_t key) {
      std::vector<uint64_t>& block = map_ids.block();
      block.push_back(key);
      if (block.size() == kBlockKeys) map_ids.hand_off();
    });
    map_ids.finish();
    count_and_write.finish();
  }
  return out.commit();
}

template int64_t merge_map_key_runs<int32_t>(const std::vector<std::string>&, const std::string&,
                                             size_t, Span<int32_t>, MutSpan<int64_t>,
                                             MutSpan<int64_t>, bool);
template int64_t merge_map_key_runs<int64_t>(const std::vector<std::string>&, const std::string&,
                                             size_t, Span<int64_t>, MutSpan<int64_t>,
                                             MutSpan<int64_t>, bool);

int64_t split_key_run(const std::string& run_path, Span<int64_t> bounds,
                      const std::vector<std::string>& bucket_paths, size_t buffer_bytes) {
  const size_t buckets = bucket_paths.size();
  if (bounds.size != buckets + 1)
    throw std::invalid_argument("bounds must hold one entry more than the buckets");
  for (size_t r = 0; r < buckets; ++r)
    if (bounds[r] > bounds[r + 1] || bounds[r] < 0)
      throw std::invalid_argument("bounds must be nonnegative and nondecreasing");
  KeyRunReader reader(run_path, buffer_bytes);
  std::vector<std::unique_ptr<KeyRunWriter>> writers;
  writers.reserve(buckets);
  for (const std::string& path : bucket_paths)
    writers.push_back(std::make_unique<KeyRunWriter>(path, buffer_bytes));
  // the bucket of a minor id: the bucket of the first row of its block of
  // 2^shift rows (a table of at most 2^16 entries, in the cache), then the
  // bounds walked up from there (a range spans many blocks: mostly no step).
  // A binary search of the bounds per key cost a mispredicted branch or more.
  const uint64_t lo = buckets ? static_cast<uint64_t>(bounds[0]) : 0;
  const uint64_t hi = buckets ? static_cast<uint64_t>(bounds[buckets]) : 0;
  int shift = 0;
  while (((hi - lo) >> shift) > kSplitTableSize) ++shift;
  std::vector<uint32_t> first_bucket(static_cast<size_t>((hi - lo) >> shift) + 1, 0);
  for (size_t t = 0, k = 0; t < first_bucket.size(); ++t) {
    const uint64_t row = lo + (static_cast<uint64_t>(t) << shift);
    while (k + 1 < buckets && row >= static_cast<uint64_t>(bounds[k + 1])) ++k;
    first_bucket[t] = static_cast<uint32_t>(k);
  }
  std::vector<uint64_t> block(kBlockKeys);
  int64_t total = 0;
  for (;;) {
    const size_t got = reader.read(MutSpan<uint64_t>{block.data(), block.size()});
    if (got == 0) break;
    for (size_t i = 0; i < got; ++i) {
      const uint64_t key = block[i];
      const uint64_t b = key & kKeyMinorMask;
      if (b < lo || b >= hi)
        throw std::invalid_argument("key " + std::to_string(total + static_cast<int64_t>(i)) +
                                    " " + key_pair(key) + " of " + run_path +
                                    " has a minor id outside [" + std::to_string(lo) + ", " +
                                    std::to_string(hi) + ")");
      size_t k = first_bucket[static_cast<size_t>((b - lo) >> shift)];
      while (b >= static_cast<uint64_t>(bounds[k + 1])) ++k;
      writers[k]->put(key);
    }
    total += static_cast<int64_t>(got);
  }
  for (auto& writer : writers) writer->commit();
  return total;
}

template <typename Index>
void fill_csr_range(KeyRunReader& bucket, KeyRunReader* forward, int64_t row_begin,
                    int64_t row_end, Span<int64_t> indptr, MutSpan<int64_t> next_rank,
                    MutSpan<int64_t> cursor, MutSpan<Index> indices, MutSpan<int64_t> eid) {
  const int64_t num_nodes = static_cast<int64_t>(next_rank.size);
  if (indptr.size != next_rank.size + 1)
    throw std::invalid_argument("indptr must hold one entry more than next_rank");
  if (row_begin < 0 || row_end < row_begin || row_end > num_nodes)
    throw std::invalid_argument("rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") outside [0, " +
                                std::to_string(num_nodes) + ")");
  const size_t rows = static_cast<size_t>(row_end - row_begin);
  if (cursor.size < rows) throw std::invalid_argument("cursor holds fewer slots than the rows");
  const int64_t base = indptr[static_cast<size_t>(row_begin)];
  const int64_t slots = indptr[static_cast<size_t>(row_end)] - base;
  if (static_cast<int64_t>(indices.size) != slots || static_cast<int64_t>(eid.size) != slots)
    throw std::invalid_argument("indices and eid must hold the range's " +
                                std::to_string(slots) + " entries");
  for (size_t r = 0; r < rows; ++r) cursor[r] = indptr[static_cast<size_t>(row_begin) + r] - base;
  const uint64_t lo = static_cast<uint64_t>(row_begin);
  const uint64_t n = static_cast<uint64_t>(num_nodes);
  auto put = [&](uint64_t row, uint64_t neighbour, int64_t rank, uint64_t key) {
    const int64_t slot = cursor[row - lo]++;
    if (slot >= indptr[row + 1] - base)
      throw std::invalid_argument("key " + key_pair(key) + " overflows row " +
                                  std::to_string(row) + ": the keys do not match the offsets");
    indices[static_cast<size_t>(slot)] = static_cast<Index>(neighbour);
    eid[static_cast<size_t>(slot)] = rank;
  };
  std::vector<uint64_t> block(kBlockKeys);
  for (;;) {  // the entries (b, a) of keys whose minor id is in the range
    const size_t got = bucket.read(MutSpan<uint64_t>{block.data(), block.size()});
    if (got == 0) break;
    for (size_t i = 0; i < got; ++i) {
      // The rows of these keys are scattered over the range: a key's cursor and
      // row end, then its slot in indices and eid, each miss the caches (a
      // billion edges: ranges of 5M rows, 1.2 GB of entries). Fetched ahead:
      // the row of the key kRowAhead on, the slot of the key kSlotAhead on
      // (its cursor fetched by then; a key of the same row in between only
      // moves it to the next slot).
      if (i + kRowAhead < got) {
        const uint64_t r = (block[i + kRowAhead] & kKeyMinorMask) - lo;
        if (r < rows) {
          __builtin_prefetch(&cursor[r], 1);
          __builtin_prefetch(&indptr[lo + r + 1]);
        }
      }
      if (i + kSlotAhead < got) {
        const uint64_t r = (block[i + kSlotAhead] & kKeyMinorMask) - lo;
        if (r < rows) {
          const int64_t slot = cursor[r];
          if (slot >= 0 && slot < slots) {
            __builtin_prefetch(&indices[static_cast<size_t>(slot)], 1);
            __builtin_prefetch(&eid[static_cast<size_t>(slot)], 1);
          }
        }
      }
      const uint64_t a = block[i] >> kKeyShift, b = block[i] & kKeyMinorMask;
      if (a >= n || b - lo >= rows)
        throw std::invalid_argument("key " + key_pair(block[i]) + " of " + bucket.path() +
                                    " is outside rows [" + std::to_string(row_begin) + ", " +
                                    std::to_string(row_end) + ")");
      put(b, a, next_rank[a]++, block[i]);
    }
  }
  if (forward == nullptr) {
    if (bucket.count() != slots)
      throw std::invalid_argument(bucket.path() + " holds " + std::to_string(bucket.count()) +
                                  " keys, not the " + std::to_string(slots) +
                                  " entries of its rows");
    return;
  }
  // the entries (a, b) of the keys whose major id is in the range: the next
  // ones of the run, as many as the slots left
  int64_t left = slots - bucket.count();
  while (left > 0) {
    const int64_t first_rank = forward->count() - forward->remaining();
    const size_t want = static_cast<size_t>(std::min<int64_t>(left, kBlockKeys));
    const size_t got = forward->read(MutSpan<uint64_t>{block.data(), want});
    if (got == 0)
      throw std::invalid_argument(forward->path() + " ends before rows [" +
                                  std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                  ") are filled");
    for (size_t i = 0; i < got; ++i) {
      const uint64_t a = block[i] >> kKeyShift, b = block[i] & kKeyMinorMask;
      if (a - lo >= rows || b >= n)
        throw std::invalid_argument("key " + key_pair(block[i]) + " of " + forward->path() +
                                    " is outside rows [" + std::to_string(row_begin) + ", " +
                                    std::to_string(row_end) + ")");
      put(a, b, first_rank + static_cast<int64_t>(i), block[i]);
    }
    left -= static_cast<int64_t>(got);
  }
}

template void fill_csr_range<int32_t>(KeyRunReader&, KeyRunReader*, int64_t, int64_t,
                                      Span<int64_t>, MutSpan<int64_t>, MutSpan<int64_t>,
                                      MutSpan<int32_t>, MutSpan<int64_t>);
template void fill_csr_range<int64_t>(KeyRunReader&, KeyRunReader*, int64_t, int64_t,
                                      Span<int64_t>, MutSpan<int64_t>, MutSpan<int64_t>,
                                      MutSpan<int64_t>, MutSpan<int64_t>);

}  // namespace gnncore::io
