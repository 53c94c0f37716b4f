// Partition post-processing in bounded memory: what a partition directory
// needs beside the assignment (the edge cut, the 1-hop halos, the balancing of
// train/val/test counts), computed from the graph's files read a chunk or a row
// at a time, never mapped or loaded whole. Memory: O(|V|) arrays, one chunk of
// edge rows, and the halo bits of the parts asked for.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "io/edge_file.h"
#include "partition/postprocess.h"
#include "types.h"

namespace gnncore {

// One sequential pass over the undirected edge rows of `file`.
struct EdgePass {
  int64_t rows = 0;  // edge rows read
  int64_t cut = 0;   // rows whose endpoints lie in different parts
  // Halo membership of parts [halo_first, halo_first + halo_count), part-major:
  // bit w of part halo_first + k is word k * words + w / 64, bit w % 64, with
  // words = ceil(n / 64). Bit w is set iff w lies outside that part and has a
  // neighbour inside it.
  std::vector<uint64_t> halo_bits;
  int64_t words = 0;
};

// Reads `file` in chunks of `chunk_rows` rows (in the file's id width), checks
// every id against [0, n) with n = assignment.size (std::out_of_range naming
// the row), counts the cut rows and sets the halo bits of parts
// [halo_first, halo_first + halo_count) (halo_count may be 0: the cut only).
// Throws std::invalid_argument for an assignment outside [0, parts) or a part
// range outside [0, parts).
EdgePass edge_pass(const EdgeFile& file, Span<int64_t> assignment, int64_t parts,
                   int64_t halo_first, int64_t halo_count, int64_t chunk_rows);

// The rows of a symmetric CSR whose indptr is in memory and whose indices stay
// in a file (a .npy file's data from byte `offset`): each row is read with one
// pread into a buffer of its own nesting depth, its ids checked against
// [0, n). Memory: indptr and the buffers of the longest rows read.
template <typename IndexT>
class FileRows {
 public:
  // Checks indptr (starts at 0, non-decreasing) and that the file holds
  // indptr[n] ids after `offset`.
  FileRows(Span<int64_t> indptr, const std::string& path, int64_t offset);
  ~FileRows();
  FileRows(const FileRows&) = delete;
  FileRows& operator=(const FileRows&) = delete;

  NodeId num_nodes() const { return static_cast<NodeId>(indptr_.size - 1); }
  int64_t rows_read() const { return rows_read_; }

  template <typename F>
  void for_each(NodeId v, F&& f) {
    if (depth_ == buffers_.size()) buffers_.emplace_back();  // deque: no reference moves
    std::vector<IndexT>& row = buffers_[depth_];
    read_row(v, row);
    ++depth_;
    try {
      for (const IndexT u : row) f(static_cast<NodeId>(u));
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
  }

 private:
  void read_row(NodeId v, std::vector<IndexT>& row);

  Span<int64_t> indptr_;
  std::string path_;
  int64_t offset_ = 0;
  int fd_ = -1;
  size_t depth_ = 0;
  std::deque<std::vector<IndexT>> buffers_;
  int64_t rows_read_ = 0;
};

// balance_splits (partition/postprocess.h), same rules and same result, with
// the symmetric CSR's indices read from their file row by row (FileRows)
// instead of held in memory. Rows are read only when a split count is out of
// its band; `rows_read` reports how many were.
SplitBalance balance_splits_file(Span<int64_t> indptr, const std::string& indices_path,
                                 int64_t indices_offset, bool int64_indices,
                                 Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                                 std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                                 int64_t capacity, int64_t* rows_read = nullptr);

}  // namespace gnncore
