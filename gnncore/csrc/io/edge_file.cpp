#include "io/edge_file.h"

#include <algorithm>
#include <utility>

#include "io/block_reader.h"
#include <cerrno>
#include <cstring>
#include <stdexcept>

#if defined(__linux__)
#include <fcntl.h>
#endif

namespace gnncore {

namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

constexpr size_t kWriteBuffer = size_t{1} << 20;

}  // namespace

EdgeChunkReader::EdgeChunkReader(const EdgeFile& file) : file_(file) {
  if (file.offset < 0 || file.rows < 0)
    throw std::invalid_argument("edge file offset and rows must be non-negative");
  fh_ = std::fopen(file.path.c_str(), "rb");
  if (!fh_) throw io_error("cannot open edge file", file.path);
  if (std::fseek(fh_, 0, SEEK_END) != 0) {
    std::fclose(fh_);
    throw io_error("cannot seek in", file.path);
  }
  const long size = std::ftell(fh_);
  const int64_t need = file.offset + file.rows * file.row_bytes();
  if (size < need) {
    std::fclose(fh_);
    throw std::runtime_error("edge file " + file.path + " holds " + std::to_string(size) +
                             " bytes, fewer than the " + std::to_string(need) +
                             " its offset and row count need");
  }
#if defined(__linux__)
  // passes read the whole file in order: a larger kernel read-ahead window
  posix_fadvise(fileno(fh_), 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  seek(0);
}

void EdgeChunkReader::read_ahead(int64_t rows) {
  const int64_t n = std::min(rows, file_.rows - row_);
  if (n <= 0) return;
  const int64_t start = file_.offset + row_ * file_.row_bytes();
  const int64_t bytes = n * file_.row_bytes();
  if (file_.direct) {
    join_ahead(false);  // a read-ahead nobody took (after a seek): dropped
    ahead_.resize(static_cast<size_t>(bytes));
    ahead_row_ = row_;
    ahead_rows_ = n;
    ahead_error_ = nullptr;
    ahead_thread_ = std::thread([this, start, bytes] {
      try {
        io::read_range(file_.path, start, bytes, ahead_.data(), io::kDefaultChunkBytes, false,
                       true);
      } catch (...) {
        ahead_error_ = std::current_exception();
      }
    });
    return;
  }
#if defined(__linux__)
  // advisory: the kernel starts reading, nobody waits for it
  posix_fadvise(fileno(fh_), static_cast<off_t>(start), static_cast<off_t>(bytes),
                POSIX_FADV_WILLNEED);
#endif
}

void EdgeChunkReader::join_ahead(bool rethrow) {
  if (ahead_thread_.joinable()) ahead_thread_.join();
  if (rethrow && ahead_error_) std::rethrow_exception(std::exchange(ahead_error_, nullptr));
}

void EdgeChunkReader::fill(int64_t n, void* out) {
  const size_t bytes = static_cast<size_t>(n * file_.row_bytes());
  if (!file_.direct) {
    if (std::fread(out, 1, bytes, fh_) != bytes) throw io_error("short read from", file_.path);
    return;
  }
  join_ahead(ahead_row_ == row_);
  if (ahead_row_ == row_ && ahead_rows_ >= n) {
    std::memcpy(out, ahead_.data(), bytes);
  } else {
    io::read_range(file_.path, file_.offset + row_ * file_.row_bytes(),
                   static_cast<int64_t>(bytes), out, io::kDefaultChunkBytes, false, true);
  }
  ahead_row_ = -1;
}

EdgeChunkReader::~EdgeChunkReader() {
  join_ahead(false);
  if (fh_) std::fclose(fh_);
}

void EdgeChunkReader::seek(int64_t row) {
  if (row < 0 || row > file_.rows) throw std::out_of_range("row outside the edge file");
  if (std::fseek(fh_, static_cast<long>(file_.offset + row * file_.row_bytes()), SEEK_SET) != 0)
    throw io_error("cannot seek in", file_.path);
  row_ = row;
}

int64_t EdgeChunkReader::next(int64_t max_rows, std::vector<NodeId>& pairs) {
  const int64_t n = std::min(max_rows, file_.rows - row_);
  pairs.resize(static_cast<size_t>(2 * std::max<int64_t>(n, 0)));
  if (n <= 0) return 0;
  if (file_.int64) {
    fill(n, pairs.data());
  } else {
    raw_.resize(static_cast<size_t>(n * file_.row_bytes()));
    fill(n, raw_.data());
    const int32_t* ids = reinterpret_cast<const int32_t*>(raw_.data());
    for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = ids[i];
  }
  row_ += n;
  read_ahead(n);
  return n;
}

template <typename Id>
int64_t EdgeChunkReader::next_raw(int64_t max_rows, std::vector<Id>& ids) {
  if (sizeof(Id) != static_cast<size_t>(file_.row_bytes() / 2))
    throw std::invalid_argument("next_raw: id width differs from the edge file's");
  const int64_t n = std::min(max_rows, file_.rows - row_);
  ids.resize(static_cast<size_t>(2 * std::max<int64_t>(n, 0)));
  if (n <= 0) return 0;
  fill(n, ids.data());
  row_ += n;
  read_ahead(n);
  return n;
}

template int64_t EdgeChunkReader::next_raw<int32_t>(int64_t, std::vector<int32_t>&);
template int64_t EdgeChunkReader::next_raw<int64_t>(int64_t, std::vector<int64_t>&);

EdgeFileWriter::EdgeFileWriter(const std::string& path, bool int64)
    : path_(path), int64_(int64), buffer_(kWriteBuffer) {
  fh_ = std::fopen(path.c_str(), "wb");
  if (!fh_) throw io_error("cannot create edge file", path);
}

EdgeFileWriter::~EdgeFileWriter() {
  if (fh_) std::fclose(fh_);
}

void EdgeFileWriter::append(NodeId u, NodeId v) {
  const size_t row = int64_ ? 16 : 8;
  if (used_ + row > buffer_.size()) flush();
  char* out = buffer_.data() + used_;
  if (int64_) {
    const int64_t ids[2] = {u, v};
    std::memcpy(out, ids, sizeof ids);
  } else {
    const int32_t ids[2] = {static_cast<int32_t>(u), static_cast<int32_t>(v)};
    std::memcpy(out, ids, sizeof ids);
  }
  used_ += row;
  ++rows_;
}

void EdgeFileWriter::append_raw(const void* ids, int64_t rows) {
  if (rows <= 0) return;
  flush();
  const size_t bytes = static_cast<size_t>(rows) * (int64_ ? 16 : 8);
  if (std::fwrite(ids, 1, bytes, fh_) != bytes) throw io_error("cannot write to", path_);
  rows_ += rows;
}

void EdgeFileWriter::flush() {
  if (used_ && std::fwrite(buffer_.data(), 1, used_, fh_) != used_)
    throw io_error("cannot write to", path_);
  used_ = 0;
}

int64_t EdgeFileWriter::close() {
  if (!fh_) return rows_;
  flush();
  std::FILE* fh = fh_;
  fh_ = nullptr;
  if (std::fclose(fh) != 0) throw io_error("cannot close", path_);
  return rows_;
}

}  // namespace gnncore
