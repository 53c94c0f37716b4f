// External sorting of edge lists: the edges are cut into sorted, deduplicated
// *runs* on disk (write_run), which a k-way merge (a heap, or for key runs a
// loser tree, over bounded read buffers, sequential reads) combines, dropping
// the duplicates across runs, into fewer runs (merge_runs) or straight into a
// CSR written as two .npy files (merge_runs_to_csr) -- in memory O(k * buffer),
// whatever the edge count.
//
// Run file (native little-endian):
//   bytes  0..7   magic "GNCRUN\r\n"
//   bytes  8..11  uint32 version (1)
//   bytes 12..15  uint32 key order (0: pairs are (dst, src), 1: (src, dst))
//   bytes 16..23  int64 number of pairs
//   bytes 24..31  int64 largest node id in the run (-1 when empty)
//   then the pairs: int64 (major, minor), strictly increasing.
// Every file is written into a temporary sibling and renamed into place.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "types.h"

namespace gnncore::io {

// Which endpoint a run sorts by first. The CSR's rows are the major key: with
// kDstSrc row v lists the sources of the edges into v (the graph format's
// in-neighbour lists); with kSrcDst it lists the destinations out of v.
enum class KeyOrder : uint32_t { kDstSrc = 0, kSrcDst = 1 };

constexpr size_t kRunHeaderBytes = 32;
constexpr uint32_t kRunVersion = 1;
constexpr size_t kRunPairBytes = 16;
constexpr size_t kDefaultMergeBufferBytes = size_t{4} << 20;

// A file that cannot be created, read or written (`error()` is the errno), or a
// run file that is malformed (`error()` is 0: bad magic, truncated, unsorted).
// `what()` is "<path>: <problem>".
class RunFileError : public std::runtime_error {
 public:
  RunFileError(const std::string& problem, std::string path, int error)
      : std::runtime_error(path + ": " + problem),
        problem_(problem),
        path_(std::move(path)),
        error_(error) {}
  const std::string& problem() const { return problem_; }
  const std::string& path() const { return path_; }
  int error() const { return error_; }

 private:
  std::string problem_;
  std::string path_;
  int error_;
};

// Sorts the pairs (dst[i], src[i]) (kDstSrc) or (src[i], dst[i]) (kSrcDst),
// drops repeated pairs and writes them as the run file `path`. Returns the
// number of pairs written. Memory: 16 bytes per input pair besides the input.
// Throws std::invalid_argument when src and dst differ in length or an id is
// negative, RunFileError when the file cannot be written.
int64_t write_run(Span<NodeId> src, Span<NodeId> dst, const std::string& path, KeyOrder order);

// Merges the runs (all of one key order) into the run file `out_path`, dropping
// pairs repeated across runs. Each run gets a read buffer of `buffer_bytes`.
// Returns the number of pairs written.
int64_t merge_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                   size_t buffer_bytes = kDefaultMergeBufferBytes);

// Merges the runs (all of one key order) into a CSR over the major key, dropping
// pairs repeated across runs, and writes `indptr_path` (int64 [num_nodes + 1])
// and `indices_path` (int32 or int64 [E]) as .npy files (format 1.0, headers
// byte-identical to numpy's). Both are streamed: memory is (k + 2) buffers of
// `buffer_bytes`. Returns E, the number of distinct pairs. Throws
// std::invalid_argument for a node id outside [0, num_nodes) (naming the run)
// or int32 indices that cannot hold num_nodes - 1, RunFileError for a run that
// cannot be read or is malformed and for outputs that cannot be written.
int64_t merge_runs_to_csr(const std::vector<std::string>& run_paths, NodeId num_nodes,
                          const std::string& indptr_path, const std::string& indices_path,
                          bool int32_indices, size_t buffer_bytes = kDefaultMergeBufferBytes);

// Key run file: sorted distinct uint64 keys (packed edges a << 32 | b,
// io/edge_keys.h), delta-coded -- a few bytes a key where a pair run takes 16
// (native little-endian):
//   bytes  0..7   magic "GNCKEYS\n"
//   bytes  8..11  uint32 version (1)
//   bytes 12..15  uint32 0
//   bytes 16..23  int64 number of keys
//   bytes 24..31  int64 bytes of the coded keys that follow
//   then the keys as LEB128 varints: the first key, then each key minus the one
//   before it (at least 1: the keys are strictly increasing).
constexpr size_t kKeyRunHeaderBytes = 32;
constexpr uint32_t kKeyRunVersion = 1;

// Writes a key run through a buffer into a temporary sibling of `path`, renamed
// into place by commit() (removed when destroyed uncommitted). Throws
// RunFileError when the file cannot be written.
class KeyRunWriter {
 public:
  // `direct`: written past the page cache where the file system allows
  // (WriteBehind; a run read back from the disk anyway, too large to stay cached).
  KeyRunWriter(const std::string& path, size_t buffer_bytes = kDefaultMergeBufferBytes,
               bool direct = false);
  ~KeyRunWriter();
  KeyRunWriter(const KeyRunWriter&) = delete;
  KeyRunWriter& operator=(const KeyRunWriter&) = delete;
  // Appends keys that increase strictly and follow the last key appended;
  // throws std::invalid_argument naming the first key that does not (nothing of
  // this call is written then).
  void append(Span<uint64_t> keys);
  // Appends one key above the last; no check (the merge's own output).
  void put(uint64_t key);
  // Writes the header and renames the file into place; returns the key count.
  int64_t commit();
  int64_t count() const;
  // Bytes of the coded keys so far (the header not counted).
  int64_t coded_bytes() const;
  // The last key appended (0 before the first).
  uint64_t last() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Appends each of `keys` to the writer its bucket names, `writers[buckets[i]]`,
// in one pass (the bounded shuffle's scatter). `keys` must increase strictly
// and follow every key appended before; throws std::invalid_argument naming
// the first key or bucket that does not fit (nothing of this call is written
// then).
template <typename Bucket>
void scatter_key_buckets(Span<uint64_t> keys, Span<Bucket> buckets,
                         const std::vector<KeyRunWriter*>& writers);

// Reads a key run sequentially through a buffer of `buffer_bytes` (checked:
// magic, version, sizes, strictly increasing keys). Throws RunFileError for a
// file that cannot be read or is malformed.
class KeyRunReader {
 public:
  KeyRunReader(const std::string& path, size_t buffer_bytes = kDefaultMergeBufferBytes);
  ~KeyRunReader();
  KeyRunReader(const KeyRunReader&) = delete;
  KeyRunReader& operator=(const KeyRunReader&) = delete;
  int64_t count() const;
  // Keys not read yet.
  int64_t remaining() const;
  const std::string& path() const;
  // The next key into `key`; false at the end of the run.
  bool next(uint64_t& key);
  // Decodes up to out.size next keys into out; returns how many (0 at the end).
  size_t read(MutSpan<uint64_t> out);

 private:
  bool refill();
  std::string path_;
  int fd_ = -1;
  int64_t count_ = 0, remaining_ = 0, coded_bytes_ = 0, file_offset_ = 0;
  std::vector<uint8_t> buffer_;
  size_t pos_ = 0, filled_ = 0;
  uint64_t last_ = 0;
};

// The heads of k sorted key runs in a loser tree (a tournament whose inner
// nodes keep the loser of each match): the smallest head is at the root, and
// advancing its run replays one leaf-to-root path of log2(k) matches, each a
// conditional move. A heap pops and pushes instead, two sifts of about as
// many mispredicted compares. Each run's keys are decoded a block at a time
// (KeyRunReader::read), not by a call of next() per key.
class KeyRunMerge {
 public:
  static constexpr size_t kDecodedKeys = 512;  // each run's keys decoded at a time

  KeyRunMerge(const std::vector<std::string>& run_paths, size_t buffer_bytes)
      : k_(run_paths.size()) {
    runs_.reserve(k_);
    for (const auto& path : run_paths)
      runs_.push_back(std::make_unique<KeyRunReader>(path, buffer_bytes));
    decoded_.resize(k_ * kDecodedKeys);
    pos_.assign(k_, 0);
    len_.assign(k_, 0);
    heads_.assign(k_, kExhausted);
    live_ = k_;
    for (size_t i = 0; i < k_; ++i) advance(i);
    // leaves at k..2k-1, inner nodes at 1..k-1 (node n plays 2n against 2n+1)
    loser_.assign(std::max<size_t>(k_, 1), 0);
    std::vector<uint32_t> winner(2 * std::max<size_t>(k_, 1), 0);
    for (size_t i = 0; i < k_; ++i) winner[k_ + i] = static_cast<uint32_t>(i);
    for (size_t n = k_ - 1; k_ > 1 && n >= 1; --n) {
      const uint32_t a = winner[2 * n], b = winner[2 * n + 1];
      const bool a_wins = heads_[a] <= heads_[b];
      winner[n] = a_wins ? a : b;
      loser_[n] = a_wins ? b : a;
    }
    loser_[0] = winner[1];  // k = 1: the one leaf, at 1
  }

  // Calls put(key) for every distinct key of the runs, in increasing order.
  template <typename Put>
  void run(Put&& put) {
    if (k_ == 0) return;
    bool any = false;
    uint64_t last = 0;
    for (;;) {
      const uint32_t top = loser_[0];
      const uint64_t key = heads_[top];
      if (len_[top] == 0) {
        // the smallest head is an exhausted run's (kExhausted): a run still
        // live holds kExhausted itself, as its last key
        if (live_ > 0 && (!any || last != kExhausted)) put(kExhausted);
        return;
      }
      if (!any || key != last) {
        put(key);
        last = key;
        any = true;
      }
      advance(top);
      uint32_t winner = top;
      uint64_t best = heads_[top];
      for (size_t n = (top + k_) / 2; n >= 1; n /= 2) {
        // without a branch (a compiler's choice for ?: here, mispredicted
        // half the time): the two swapped through a mask when `other` wins
        const uint32_t other = loser_[n];
        const uint64_t head = heads_[other];
        const uint32_t swap = (winner ^ other) & (0u - static_cast<uint32_t>(head < best));
        loser_[n] = other ^ swap;
        winner ^= swap;
        best = head < best ? head : best;
      }
      loser_[0] = winner;
    }
  }

 private:
  static constexpr uint64_t kExhausted = ~uint64_t{0};

  // The next key of run i into heads_[i]; past its end kExhausted, and len_ 0.
  void advance(size_t i) {
    if (++pos_[i] < len_[i]) {
      heads_[i] = decoded_[i * kDecodedKeys + pos_[i]];
      return;
    }
    uint64_t* block = &decoded_[i * kDecodedKeys];
    len_[i] = runs_[i]->read(MutSpan<uint64_t>{block, kDecodedKeys});
    pos_[i] = 0;
    if (len_[i] == 0) {
      heads_[i] = kExhausted;
      --live_;
    } else {
      heads_[i] = block[0];
    }
  }

  size_t k_;
  std::vector<std::unique_ptr<KeyRunReader>> runs_;
  std::vector<uint64_t> decoded_;  // kDecodedKeys a run
  std::vector<size_t> pos_, len_;  // each run's place in its decoded block
  std::vector<uint64_t> heads_;    // each run's smallest key not merged yet
  std::vector<uint32_t> loser_;    // [0]: the winner; [n], n >= 1: the loser at inner node n
  size_t live_ = 0;                // runs not exhausted
};

// Calls put(key) for every distinct key of the key runs `run_paths`, in
// increasing order (KeyRunMerge; keys repeated across runs come once). Each
// run is read through a buffer of `buffer_bytes`.
template <typename Put>
void merge_distinct_keys(const std::vector<std::string>& run_paths, size_t buffer_bytes,
                         Put&& put) {
  KeyRunMerge(run_paths, buffer_bytes).run(std::forward<Put>(put));
}

// Merges key runs into the key run `out_path`, dropping keys repeated across
// runs; each run is read through a buffer of `buffer_bytes`, and the output
// written through one. Returns the number of keys written.
int64_t merge_key_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                       size_t buffer_bytes = kDefaultMergeBufferBytes);

// Edge ids (the graph format's eid.npy) of a block of rows of an in-neighbour
// CSR whose rows are visited in increasing order, block after block: entry
// (row v, source u) gets the row of edges.parquet -- the rank, in (src, dst)
// order, of its canonical edge: (u, v) for directed graphs, (min, max) for
// undirected ones. `indptr` holds the block's rows + 1 offsets (absolute: the
// block's first entry is indptr[0]), `indices` the block's entries, `row_begin`
// the block's first row. `next` (one per node) starts as the offsets of the
// canonical edges' src-major CSR (edge rank of each source's first out-edge) and
// carries the state between blocks. Memory: O(1) besides the arguments. Throws
// std::invalid_argument for an index outside [0, next.size) or sizes that
// disagree.
template <typename Index>
void csr_edge_ids(Span<int64_t> indptr, Span<Index> indices, int64_t row_begin,
                  MutSpan<int64_t> next, MutSpan<int64_t> out, bool directed);

// The .npy (format 1.0) header numpy writes for a C-ordered 1-D array of
// `length` items of type `descr` (e.g. "<i8"), padding included.
std::string npy_header(const std::string& descr, int64_t length);

}  // namespace gnncore::io
