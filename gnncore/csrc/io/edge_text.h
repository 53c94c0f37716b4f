// A streaming reader of text edge lists of non-negative integer ids, the fast
// parse of bounded-memory ingestion. It reads the file in large blocks
// (pread), splits each at line boundaries (into two halves parsed on two
// threads when asked) and parses `src<sep>dst[<sep>weight]` lines into int64
// id arrays.
//
// It accepts a strict subset of what the Polars reader of gnncore.io.edgelist
// accepts with the same layout, and parses it to the same values:
//   * a UTF-8 byte order mark (EF BB BF) opening the file is skipped, as
//     Polars skips it;
//   * the first `skip_lines` physical lines are skipped unread (leading
//     comments, blank lines, a header), as Polars' skip_lines does;
//   * blank lines ("", "\r"; with runs of whitespace also lines of spaces and
//     tabs) and comment lines ('#' first, then printable ASCII or tabs; no '"'
//     when the separator is a comma, which Polars reads quoted) are skipped;
//   * a data line is `id SEP id` (3 columns: `id SEP id SEP weight`, the
//     weight 1+ printable ASCII bytes without the separator or '"', ignored)
//     then "\n", "\r\n", or "\r" / nothing at the end of the file; an id is 1
//     to 18 decimal digits (below 2^63, leading zeros allowed); SEP is exactly
//     the separator byte, or for `kWhitespace` runs of spaces and tabs (with
//     leading and trailing runs allowed).
// Anything else -- a sign, a 19-digit id, a missing or extra column, spaces
// around a comma, a stray '\r', other bytes -- makes the reader *decline*: it
// stops, remembers the line and the reason, and the caller leaves the whole
// file to the Polars path (which accepts it or words the exact error).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/read_ahead.h"
#include "types.h"

namespace gnncore::io {

// The separator byte for "runs of spaces and tabs".
constexpr char kWhitespaceSeparator = '\0';

struct EdgeTextOptions {
  char separator = ',';    // ',', '\t', ' ' or kWhitespaceSeparator
  int columns = 2;         // 2 (src dst) or 3 (src dst weight; weight ignored)
  int64_t skip_lines = 0;  // physical lines skipped unread at the start
  size_t block_bytes = size_t{8} << 20;  // bytes read at once (the buffer grows for longer lines)
  int num_threads = 2;     // 1 or 2: threads parsing one block
  // Read past the page cache with O_DIRECT, chunks read ahead on a thread
  // (io/read_ahead.h), where the file system allows it; else buffered reads.
  bool direct = false;
};

// What one parse of a byte range found (internal, exposed for the tests of the kernel).
struct ParsedRange {
  size_t edges = 0;        // data lines parsed into src/dst
  int64_t lines = 0;       // '\n' consumed (complete lines)
  int64_t max_id = -1;     // the largest id parsed
  const char* stop = nullptr;  // where parsing stopped (the range's end unless declined)
  const char* reason = nullptr;  // why it declined (nullptr: it did not)
};

// Parses the lines of [begin, end) (which ends after a '\n', or at the end of
// the file when `at_eof`) into src/dst from index 0; they must hold
// (end - begin + 1) / 4 ids, a bound on the data lines (each line is at least
// "d,d\n"). Stops at the first line outside the accepted subset.
ParsedRange parse_edge_lines(const char* begin, const char* end, bool at_eof, char separator,
                             int columns, int64_t* src, int64_t* dst);

class EdgeTextReader {
 public:
  // Opens `path`; throws std::invalid_argument for bad options and
  // std::runtime_error (naming the path and errno's text) when it cannot be opened.
  EdgeTextReader(const std::string& path, EdgeTextOptions options);
  ~EdgeTextReader();
  EdgeTextReader(const EdgeTextReader&) = delete;
  EdgeTextReader& operator=(const EdgeTextReader&) = delete;

  // Parses the next lines into src/dst (equal lengths, at least 1): returns
  // the number of edges written (at least 1), 0 once the file is done, or -1
  // when the reader declines (see decline_line/decline_reason; later calls
  // return -1 too). Throws std::runtime_error for a failed read.
  int64_t read(MutSpan<int64_t> src, MutSpan<int64_t> dst);

  bool declined() const { return decline_reason_ != nullptr; }
  // The 1-based line the reader declined at (0 when it did not).
  int64_t decline_line() const { return decline_line_; }
  std::string decline_reason() const { return decline_reason_ ? decline_reason_ : ""; }
  // The largest id of the last read's edges (-1 when none).
  int64_t last_max_id() const { return last_max_id_; }
  // Complete lines consumed so far, skipped ones included.
  int64_t lines() const { return lines_; }
  int64_t bytes_read() const { return file_offset_; }  // a skipped BOM included
  // Whether reads go past the page cache (asked for, and allowed by the file system).
  bool reading_direct() const;

 private:
  bool refill();  // reads more bytes after the unparsed ones; false at the end of the file
  bool skip_leading_lines();
  ParsedRange parse_range(const char* begin, const char* end, bool at_eof, int64_t* src,
                          int64_t* dst, size_t capacity);

  std::string path_;
  EdgeTextOptions options_;
  int fd_ = -1;
  std::unique_ptr<ReadAhead> ahead_;  // the direct reads
  size_t bom_ = 0;  // bytes of a byte order mark to skip (the direct reads start at 0)
  std::vector<char> buffer_;
  size_t pos_ = 0;  // first unparsed byte of buffer_
  size_t end_ = 0;  // end of the bytes read into buffer_
  int64_t file_offset_ = 0;
  bool eof_ = false;
  int64_t to_skip_ = 0;
  int64_t lines_ = 0;
  int64_t last_max_id_ = -1;
  int64_t decline_line_ = 0;
  const char* decline_reason_ = nullptr;
};

}  // namespace gnncore::io
