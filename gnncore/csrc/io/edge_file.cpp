#include "io/edge_file.h"

#include <algorithm>
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
#if defined(__linux__)
  const int64_t n = std::min(rows, file_.rows - row_);
  if (n > 0)  // advisory: the kernel starts reading, nobody waits for it
    posix_fadvise(fileno(fh_), static_cast<off_t>(file_.offset + row_ * file_.row_bytes()),
                  static_cast<off_t>(n * file_.row_bytes()), POSIX_FADV_WILLNEED);
#else
  (void)rows;
#endif
}

EdgeChunkReader::~EdgeChunkReader() {
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
  const size_t bytes = static_cast<size_t>(n * file_.row_bytes());
  if (file_.int64) {
    if (std::fread(pairs.data(), 1, bytes, fh_) != bytes)
      throw io_error("short read from", file_.path);
  } else {
    raw_.resize(bytes);
    if (std::fread(raw_.data(), 1, bytes, fh_) != bytes)
      throw io_error("short read from", file_.path);
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
  const size_t bytes = static_cast<size_t>(n * file_.row_bytes());
  if (std::fread(ids.data(), 1, bytes, fh_) != bytes) throw io_error("short read from", file_.path);
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
