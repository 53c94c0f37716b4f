// Binary edge files read and written in chunks: rows of two node ids (u, v),
// int32 or int64, little-endian, C order, starting at a byte offset (the data
// offset of a .npy file, or 0 for the raw files GREM writes between levels).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "types.h"

namespace gnncore {

// Where the rows of an edge file lie.
struct EdgeFile {
  std::string path;
  int64_t offset = 0;  // byte offset of row 0
  bool int64 = false;  // id width: int64 when true, else int32
  int64_t rows = 0;    // number of (u, v) rows

  int64_t row_bytes() const { return int64 ? 16 : 8; }
};

// Sequential chunked reader. Holds one chunk of rows (converted to int64) at a time.
class EdgeChunkReader {
 public:
  // Opens `file` and checks that it holds at least offset + rows * row_bytes bytes.
  explicit EdgeChunkReader(const EdgeFile& file);
  ~EdgeChunkReader();
  EdgeChunkReader(const EdgeChunkReader&) = delete;
  EdgeChunkReader& operator=(const EdgeChunkReader&) = delete;

  // Positions the reader at row `row` (0 <= row <= rows).
  void seek(int64_t row);
  // Reads up to `max_rows` rows into `pairs` (u0, v0, u1, v1, ...) and returns
  // the number read; 0 at the end of the file.
  int64_t next(int64_t max_rows, std::vector<NodeId>& pairs);
  // The same rows in the file's own id width, without conversion: one fread
  // straight into `ids` (Id must be int32_t for int32 files, int64_t for int64).
  template <typename Id>
  int64_t next_raw(int64_t max_rows, std::vector<Id>& ids);

 private:
  // Asks the kernel to start reading the next `rows` rows (POSIX_FADV_WILLNEED)
  // while the caller works on the rows just read: every read is followed by
  // one of the same size, so a pass over a file larger than the page cache
  // (a billion rows under a memory limit) computes while the disk reads, where
  // the kernel's own read-ahead window (a few MiB) would leave a chunk's read
  // of tens of MiB waiting.
  void read_ahead(int64_t rows);

  EdgeFile file_;
  std::FILE* fh_ = nullptr;
  int64_t row_ = 0;
  std::vector<char> raw_;
};

// Buffered writer of raw rows (no header) with a fixed id width.
class EdgeFileWriter {
 public:
  EdgeFileWriter(const std::string& path, bool int64);
  ~EdgeFileWriter();
  EdgeFileWriter(const EdgeFileWriter&) = delete;
  EdgeFileWriter& operator=(const EdgeFileWriter&) = delete;

  void append(NodeId u, NodeId v);
  // Appends `rows` rows already in the writer's id width (2 · rows ids of 4 or
  // 8 bytes each, as given by the constructor's `int64`).
  void append_raw(const void* ids, int64_t rows);
  // Flushes and closes; throws on any write error. Returns the rows written.
  int64_t close();
  int64_t rows() const { return rows_; }

 private:
  void flush();
  std::string path_;
  bool int64_;
  std::FILE* fh_ = nullptr;
  std::vector<char> buffer_;
  size_t used_ = 0;
  int64_t rows_ = 0;
};

}  // namespace gnncore
