#include "io/edge_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "io/block_reader.h"

namespace gnncore::io {

namespace {

constexpr int kMaxDigits = 18;  // 10^18 - 1 < 2^63: no overflow, no sign
// A block is split between two threads only from this size on.
constexpr size_t kParallelMinBytes = size_t{1} << 18;
// Direct reads: chunks of at most 4 MiB, three read ahead of the parse.
constexpr size_t kAheadChunk = size_t{4} << 20;
constexpr int kAheadDepth = 3;

constexpr const char* kBadId = "an id that is not 1 to 18 plain decimal digits";
constexpr const char* kBadColumns = "not the expected columns and separator";
constexpr const char* kBadLineEnd = "bytes after the last column (or a stray '\\r')";
constexpr const char* kBadStart = "a line that starts with neither a digit nor '#'";
constexpr const char* kBadComment =
    "a comment with bytes other than printable ASCII and tabs (or a '\"' in a comma-separated "
    "file)";
constexpr const char* kBadWeight =
    "a weight column that is empty or holds spaces, quotes or non-ASCII bytes";

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Parses 1 to kMaxDigits decimal digits at p; false for none or too many.
inline bool parse_id(const char*& p, const char* end, int64_t& out) {
  const char* start = p;
  uint64_t value = 0;
  while (p < end && is_digit(*p)) {
    value = value * 10 + static_cast<uint64_t>(*p - '0');
    ++p;
  }
  out = static_cast<int64_t>(value);
  return p != start && p - start <= kMaxDigits;
}

// Consumes a line end at p: "\n" or "\r\n" (returns 1: one line completed),
// or at the end of the file nothing or "\r" (returns 0). -1: not a line end.
inline int line_end(const char*& p, const char* end, bool at_eof) {
  if (p == end) return at_eof ? 0 : -1;
  if (*p == '\n') {
    ++p;
    return 1;
  }
  if (*p == '\r') {
    if (p + 1 < end && p[1] == '\n') {
      p += 2;
      return 1;
    }
    if (p + 1 == end && at_eof) {
      ++p;
      return 0;
    }
  }
  return -1;
}

inline bool comment_byte(char c, char separator) {
  const auto u = static_cast<unsigned char>(c);
  return ((u >= 0x20 && u < 0x7f) || c == '\t') && !(c == '"' && separator == ',');
}

inline bool weight_byte(char c, char separator) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f && c != separator && c != '"';
}

}  // namespace

ParsedRange parse_edge_lines(const char* begin, const char* end, bool at_eof, char separator,
                             int columns, int64_t* src, int64_t* dst) {
  const bool runs = separator == kWhitespaceSeparator;
  ParsedRange result;
  size_t edges = 0;
  int64_t lines = 0;
  int64_t max_id = -1;
  const char* p = begin;
  auto decline = [&](const char* line, const char* reason) {
    result.stop = line;
    result.reason = reason;
  };
  while (p < end) {
    const char* line = p;
    if (*p == '#') {  // a comment: skipped
      ++p;
      while (p < end && *p != '\n' && *p != '\r' && comment_byte(*p, separator)) ++p;
      const int ended = line_end(p, end, at_eof);
      if (ended < 0) {
        decline(line, kBadComment);
        break;
      }
      lines += ended;
      continue;
    }
    if (runs)
      while (p < end && is_blank(*p)) ++p;
    if (p == end || !is_digit(*p)) {  // a blank line, or declined
      const int ended = line_end(p, end, at_eof);
      if (ended < 0) {
        decline(line, kBadStart);
        break;
      }
      lines += ended;
      continue;
    }
    int64_t a = 0;
    int64_t b = 0;
    if (!parse_id(p, end, a)) {
      decline(line, kBadId);
      break;
    }
    if (runs) {
      const char* gap = p;
      while (p < end && is_blank(*p)) ++p;
      if (p == gap) {
        decline(line, p < end && is_digit(*p) ? kBadId : kBadColumns);
        break;
      }
    } else if (p < end && *p == separator) {
      ++p;
    } else {
      decline(line, p < end && is_digit(*p) ? kBadId : kBadColumns);
      break;
    }
    if (p == end || !is_digit(*p)) {
      decline(line, kBadColumns);
      break;
    }
    if (!parse_id(p, end, b)) {
      decline(line, kBadId);
      break;
    }
    if (columns == 3) {
      if (runs) {
        const char* gap = p;
        while (p < end && is_blank(*p)) ++p;
        if (p == gap) {
          decline(line, kBadColumns);
          break;
        }
      } else if (p < end && *p == separator) {
        ++p;
      } else {
        decline(line, kBadColumns);
        break;
      }
      const char* weight = p;
      while (p < end && weight_byte(*p, separator)) ++p;
      if (p == weight) {
        decline(line, kBadWeight);
        break;
      }
    }
    if (runs)
      while (p < end && is_blank(*p)) ++p;
    const int ended = line_end(p, end, at_eof);
    if (ended < 0) {
      decline(line, columns == 3 ? kBadWeight : kBadLineEnd);
      break;
    }
    lines += ended;
    src[edges] = a;
    dst[edges] = b;
    ++edges;
    max_id = std::max(max_id, std::max(a, b));
  }
  result.edges = edges;
  result.lines = lines;
  result.max_id = max_id;
  if (result.reason == nullptr) result.stop = end;
  return result;
}

EdgeTextReader::EdgeTextReader(const std::string& path, EdgeTextOptions options)
    : path_(path), options_(options), to_skip_(options.skip_lines) {
  const char sep = options.separator;
  if (sep != ',' && sep != '\t' && sep != ' ' && sep != kWhitespaceSeparator)
    throw std::invalid_argument("separator must be ',', '\\t', ' ' or runs of whitespace");
  if (options.columns != 2 && options.columns != 3)
    throw std::invalid_argument("columns must be 2 or 3, got " + std::to_string(options.columns));
  if (options.skip_lines < 0)
    throw std::invalid_argument("skip_lines must be non-negative, got " +
                                std::to_string(options.skip_lines));
  if (options.block_bytes < 1)
    throw std::invalid_argument("block_bytes must be positive");
  if (options.num_threads != 1 && options.num_threads != 2)
    throw std::invalid_argument("num_threads must be 1 or 2, got " +
                                std::to_string(options.num_threads));
  fd_ = open_retrying(path, O_RDONLY);
  if (fd_ < 0)
    throw std::runtime_error("cannot open " + path + " for reading: " + std::strerror(errno));
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  // A UTF-8 byte order mark is not data (Polars skips it too): parsing starts
  // after it. With skip_lines > 0 it is part of the first skipped line anyway.
  unsigned char bom[3] = {0, 0, 0};
  ssize_t got = 0;
  do {
    got = ::pread(fd_, bom, sizeof bom, 0);
  } while (got < 0 && errno == EINTR);
  const bool has_bom = got == 3 && bom[0] == 0xEF && bom[1] == 0xBB && bom[2] == 0xBF;
  if (options.direct)  // chunks no larger than a block: small blocks test their seams
    ahead_ = ReadAhead::open(path, std::min(options.block_bytes, kAheadChunk), kAheadDepth);
  if (has_bom) {
    if (ahead_)
      bom_ = 3;  // the direct reads start at byte 0: skipped once read
    else
      file_offset_ = 3;
  }
  buffer_.resize(options.block_bytes);
}

bool EdgeTextReader::reading_direct() const { return ahead_ && ahead_->direct(); }

EdgeTextReader::~EdgeTextReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool EdgeTextReader::refill() {
  const size_t kept = end_ - pos_;
  if (pos_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + pos_, kept);
    pos_ = 0;
    end_ = kept;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // a line longer than a block
  const size_t before = end_;
  while (end_ < buffer_.size() && !eof_) {
    const ssize_t got =
        ahead_ ? static_cast<ssize_t>(ahead_->read(buffer_.data() + end_, buffer_.size() - end_))
               : ::pread(fd_, buffer_.data() + end_, buffer_.size() - end_, file_offset_);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot read " + path_ + " at byte offset " +
                               std::to_string(file_offset_) + ": " + std::strerror(errno));
    }
    if (got == 0) {
      eof_ = true;
      break;
    }
    end_ += static_cast<size_t>(got);
    file_offset_ += got;
  }
  if (bom_ > 0 && end_ - pos_ >= bom_) {  // the byte order mark, read directly: skipped
    pos_ += bom_;
    bom_ = 0;
  }
  return end_ > before;
}

bool EdgeTextReader::skip_leading_lines() {
  while (to_skip_ > 0) {
    if (pos_ == end_) {
      if (eof_) return false;
      refill();
      continue;
    }
    const char* base = buffer_.data();
    const void* nl = std::memchr(base + pos_, '\n', end_ - pos_);
    if (nl == nullptr) {  // the skipped line goes on: drop what is read of it
      pos_ = end_;
      continue;
    }
    pos_ = static_cast<size_t>(static_cast<const char*>(nl) - base) + 1;
    --to_skip_;
    ++lines_;
  }
  return true;
}

ParsedRange EdgeTextReader::parse_range(const char* begin, const char* end, bool at_eof,
                                        int64_t* src, int64_t* dst, size_t capacity) {
  const char sep = options_.separator;
  const int columns = options_.columns;
  const size_t length = static_cast<size_t>(end - begin);
  const char* mid = begin + length / 2;
  const void* nl = options_.num_threads > 1 && length >= kParallelMinBytes
                       ? std::memchr(mid, '\n', static_cast<size_t>(end - mid))
                       : nullptr;
  if (nl == nullptr || static_cast<const char*>(nl) + 1 >= end)
    return parse_edge_lines(begin, end, at_eof, sep, columns, src, dst);
  // Two halves split after a '\n'. The first holds at most split/4 data lines
  // (each at least "d,d\n"), so the second writes from there; then it is moved down.
  const char* split = static_cast<const char*>(nl) + 1;
  const size_t second_at = static_cast<size_t>(split - begin) / 4;
  if (second_at + (static_cast<size_t>(end - split) + 1) / 4 > capacity)
    return parse_edge_lines(begin, end, at_eof, sep, columns, src, dst);
  ParsedRange second;
  std::thread worker([&] {
    second = parse_edge_lines(split, end, at_eof, sep, columns, src + second_at, dst + second_at);
  });
  ParsedRange first = parse_edge_lines(begin, split, false, sep, columns, src, dst);
  worker.join();
  if (first.reason != nullptr) return first;
  std::memmove(src + first.edges, src + second_at, second.edges * sizeof(int64_t));
  std::memmove(dst + first.edges, dst + second_at, second.edges * sizeof(int64_t));
  second.edges += first.edges;
  second.lines += first.lines;
  second.max_id = std::max(first.max_id, second.max_id);
  return second;
}

int64_t EdgeTextReader::read(MutSpan<int64_t> src, MutSpan<int64_t> dst) {
  if (src.size != dst.size || src.size == 0)
    throw std::invalid_argument("src and dst must have the same nonzero length, got " +
                                std::to_string(src.size) + " and " + std::to_string(dst.size));
  last_max_id_ = -1;
  if (declined()) return -1;
  const size_t capacity = src.size;
  // A range of R bytes holds at most (R + 1) / 4 data lines.
  const size_t max_range = capacity > std::numeric_limits<size_t>::max() / 8
                               ? std::numeric_limits<size_t>::max() / 2
                               : 4 * capacity - 1;
  while (true) {
    if (to_skip_ > 0 && !skip_leading_lines()) return 0;
    if (pos_ == end_ && eof_) return 0;
    const char* base = buffer_.data();
    const size_t limit = end_ - pos_ > max_range ? pos_ + max_range : end_;
    size_t stop = 0;
    bool at_eof = false;
    if (eof_ && limit == end_) {
      stop = end_;
      at_eof = true;
    } else {
      const void* nl = ::memrchr(base + pos_, '\n', limit - pos_);
      if (nl == nullptr && limit < end_)  // one line longer than the range: alone
        nl = std::memchr(base + limit, '\n', end_ - limit);
      if (nl != nullptr) {
        stop = static_cast<size_t>(static_cast<const char*>(nl) - base) + 1;
      } else if (eof_) {  // the file's last line, unterminated and alone
        stop = end_;
        at_eof = true;
      } else {  // no complete line held: read on
        refill();
        continue;
      }
    }
    const ParsedRange parsed =
        parse_range(base + pos_, base + stop, at_eof, src.data, dst.data, capacity);
    if (parsed.reason != nullptr) {
      decline_line_ = lines_ + parsed.lines + 1;
      decline_reason_ = parsed.reason;
      return -1;
    }
    pos_ = stop;
    lines_ += parsed.lines;
    if (parsed.edges > 0) {
      last_max_id_ = parsed.max_id;
      return static_cast<int64_t>(parsed.edges);
    }
  }
}

}  // namespace gnncore::io
