#include "io/external_sort.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include "io/block_reader.h"
#include "io/write_behind.h"

namespace gnncore::io {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "run files and .npy headers are written little-endian");

namespace {

constexpr char kRunMagic[8] = {'G', 'N', 'C', 'R', 'U', 'N', '\r', '\n'};
constexpr size_t kMaxIo = size_t{0x7ffff000};  // Linux moves at most this per call
constexpr size_t kMinBuffer = 4096;

struct Pair {
  int64_t major;
  int64_t minor;
};

inline bool operator<(const Pair& a, const Pair& b) {
  return a.major < b.major || (a.major == b.major && a.minor < b.minor);
}
inline bool operator==(const Pair& a, const Pair& b) {
  return a.major == b.major && a.minor == b.minor;
}

struct RunHeader {
  char magic[8];
  uint32_t version;
  uint32_t order;
  int64_t count;
  int64_t max_id;
};
static_assert(sizeof(RunHeader) == kRunHeaderBytes, "run header layout");
static_assert(sizeof(Pair) == kRunPairBytes, "run pair layout");

RunHeader make_header(KeyOrder order, int64_t count, int64_t max_id) {
  RunHeader h{};
  std::memcpy(h.magic, kRunMagic, sizeof(kRunMagic));
  h.version = kRunVersion;
  h.order = static_cast<uint32_t>(order);
  h.count = count;
  h.max_id = max_id;
  return h;
}

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  throw RunFileError(what + ": " + std::strerror(err), path, err);
}

// A file written through a buffer into a temporary sibling of `path`, renamed
// onto `path` by commit(); removed when destroyed uncommitted (an error). With
// `direct`, written past the page cache behind the caller (WriteBehind) where
// the file system takes O_DIRECT.
class OutFile {
 public:
  OutFile(std::string path, size_t buffer_bytes, bool direct = false)
      : path_(std::move(path)) {
    static std::atomic<uint64_t> serial{0};
    for (int attempt = 0;; ++attempt) {
      tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
             std::to_string(serial.fetch_add(1));
      fd_ = open_retrying(tmp_, O_WRONLY | O_CREAT | O_EXCL, 0666);
      if (fd_ >= 0) break;
      if (errno != EEXIST || attempt > 100) throw_errno("cannot create " + tmp_, path_, errno);
    }
    try {
      if (direct) behind_ = WriteBehind::open(tmp_, fd_, std::max(buffer_bytes, kMinBuffer));
    } catch (...) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
      throw;
    }
    if (behind_) {
      buf_ = behind_->data();
      cap_ = behind_->capacity();
    } else {
      buffer_.resize(std::max(buffer_bytes, kMinBuffer));
      buf_ = buffer_.data();
      cap_ = buffer_.size();
    }
  }
  ~OutFile() {
    behind_.reset();  // its thread done before the descriptor goes
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    if (used_ + n > cap_) {
      flush();
      if (n >= cap_ && !behind_) {
        write_fd(p, n, written_);
        written_ += static_cast<int64_t>(n);
        return;
      }
      while (used_ + n > cap_) {  // behind: through the buffers
        const size_t part = cap_ - used_;
        std::memcpy(buf_ + used_, p, part);
        used_ += part;
        p += part;
        n -= part;
        flush();
      }
    }
    std::memcpy(buf_ + used_, p, n);
    used_ += n;
  }

  template <typename T>
  void put(const T& value) {
    if (used_ + sizeof(T) > cap_) make_room(sizeof(T));
    std::memcpy(buf_ + used_, &value, sizeof(T));
    used_ += sizeof(T);
  }

  // Room for `n` more bytes in the buffer (flushed first when short; `n` at
  // most the buffer's size): the caller writes them there and calls
  // advance() with how many it wrote. No call per byte run, where write()'s
  // memcpy of a varint's few bytes is a libc call per key.
  char* reserve(size_t n) {
    if (used_ + n > cap_) make_room(n);
    return buf_ + used_;
  }
  void advance(size_t n) { used_ += n; }

  // Overwrites bytes already flushed (a header whose counts are known at the
  // end); the file is written through the page cache from then on.
  void write_at(int64_t offset, const void* data, size_t n) {
    flush();
    end_behind();
    write_fd(static_cast<const char*>(data), n, offset);
  }

  // Flushes, and checks that `n` bytes fit after it (behind, a flush keeps
  // the partial block: WriteBehind's buffers are two blocks at least).
  void make_room(size_t n) {
    flush();
    if (used_ + n > cap_)
      throw std::logic_error("no room for " + std::to_string(n) + " bytes in the buffer of " +
                             tmp_ + " after a flush");
  }

  void flush() {
    if (used_ == 0) return;
    if (behind_) {
      try {
        used_ = behind_->hand_off(used_);  // whole blocks queued, the rest kept
      } catch (const std::system_error& e) {
        throw RunFileError(e.what(), path_, e.code().value());  // what() names the error
      }
      buf_ = behind_->data();
      written_ = behind_->offset();
      return;
    }
    write_fd(buf_, used_, written_);
    written_ += static_cast<int64_t>(used_);
    used_ = 0;
  }

  void commit() {
    flush();
    end_behind();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno("cannot write " + tmp_, path_, errno);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw_errno("cannot rename " + tmp_ + " into place", path_, errno);
    committed_ = true;
  }

 private:
  // Every byte of the writes behind in the file; a buffer of its own after.
  void end_behind() {
    if (!behind_) return;
    try {
      written_ = behind_->finish(used_);
    } catch (const std::system_error& e) {
      throw RunFileError(e.what(), path_, e.code().value());
    }
    behind_.reset();
    used_ = 0;
    buffer_.resize(kMinBuffer);
    buf_ = buffer_.data();
    cap_ = buffer_.size();
  }

  void write_fd(const char* p, size_t n, int64_t offset) {
    size_t done = 0;
    while (done < n) {
      const size_t want = std::min(n - done, kMaxIo);
      const ssize_t got =
          ::pwrite(fd_, p + done, want, static_cast<off_t>(offset + static_cast<int64_t>(done)));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw_errno("cannot write " + std::to_string(n) + " bytes at byte offset " +
                        std::to_string(offset + static_cast<int64_t>(done)),
                    path_, errno);
      }
      if (got == 0) throw_errno("cannot write (no progress)", path_, EIO);
      done += static_cast<size_t>(got);
    }
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::unique_ptr<WriteBehind> behind_;  // direct writes, when asked and taken
  std::vector<char> buffer_;             // otherwise
  char* buf_ = nullptr;                  // the buffer filled: behind_'s or buffer_
  size_t cap_ = 0;
  size_t used_ = 0;
  int64_t written_ = 0;  // the file offset of buf_[0]
};

// Reads exactly n bytes at offset, or throws (truncated: error 0).
void pread_exact(int fd, const std::string& path, char* out, size_t n, int64_t offset) {
  size_t done = 0;
  while (done < n) {
    const size_t want = std::min(n - done, kMaxIo);
    const ssize_t got =
        ::pread(fd, out + done, want, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read at byte offset " +
                      std::to_string(offset + static_cast<int64_t>(done)),
                  path, errno);
    }
    if (got == 0)
      throw RunFileError("truncated run file: ends at byte offset " +
                             std::to_string(offset + static_cast<int64_t>(done)) +
                             " while reading " + std::to_string(n) + " bytes at byte offset " +
                             std::to_string(offset),
                         path, 0);
    done += static_cast<size_t>(got);
  }
}

// One run being merged: its header, checked, and a window of its pairs.
class RunReader {
 public:
  RunReader(std::string path, size_t buffer_bytes) : path_(std::move(path)) {
    fd_ = open_retrying(path_, O_RDONLY);
    if (fd_ < 0) throw_errno("cannot open run file for reading", path_, errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_errno("cannot stat run file", path_, errno);
    const int64_t size = static_cast<int64_t>(st.st_size);
    if (size < static_cast<int64_t>(kRunHeaderBytes))
      throw RunFileError("truncated run file: " + std::to_string(size) +
                             " bytes, shorter than the " + std::to_string(kRunHeaderBytes) +
                             "-byte header",
                         path_, 0);
    pread_exact(fd_, path_, reinterpret_cast<char*>(&header_), sizeof(header_), 0);
    if (std::memcmp(header_.magic, kRunMagic, sizeof(kRunMagic)) != 0)
      throw RunFileError("not a gnncore run file (bad magic)", path_, 0);
    if (header_.version != kRunVersion)
      throw RunFileError("unsupported run file version " + std::to_string(header_.version) +
                             " (expected " + std::to_string(kRunVersion) + ")",
                         path_, 0);
    if (header_.order > 1)
      throw RunFileError("bad key order " + std::to_string(header_.order) + " in the header",
                         path_, 0);
    const int64_t max_pairs = (std::numeric_limits<int64_t>::max() - 32) / 16;
    if (header_.count < 0 || header_.count > max_pairs || header_.max_id < -1 ||
        (header_.count > 0) != (header_.max_id >= 0))
      throw RunFileError("corrupt header (count " + std::to_string(header_.count) +
                             ", largest id " + std::to_string(header_.max_id) + ")",
                         path_, 0);
    const int64_t expected =
        static_cast<int64_t>(kRunHeaderBytes) + header_.count * static_cast<int64_t>(kRunPairBytes);
    if (size < expected)
      throw RunFileError("truncated run file: the header promises " +
                             std::to_string(header_.count) + " pairs (" +
                             std::to_string(expected) + " bytes), the file holds " +
                             std::to_string(size) + " bytes",
                         path_, 0);
    if (size > expected)
      throw RunFileError("run file has " + std::to_string(size - expected) +
                             " bytes past its " + std::to_string(header_.count) + " pairs",
                         path_, 0);
    (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    remaining_ = header_.count;
    buffer_.resize(std::max<size_t>(1, std::max(buffer_bytes, kMinBuffer) / sizeof(Pair)));
  }
  ~RunReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  RunReader(const RunReader&) = delete;
  RunReader& operator=(const RunReader&) = delete;

  const std::string& path() const { return path_; }
  KeyOrder order() const { return static_cast<KeyOrder>(header_.order); }
  int64_t count() const { return header_.count; }
  int64_t max_id() const { return header_.max_id; }

  // Positions on the first pair; false when the run is empty.
  bool start() { return advance_to_next(); }
  const Pair& head() const { return buffer_[pos_]; }
  // Moves to the next pair; false at the end of the run.
  bool advance() {
    const Pair prev = buffer_[pos_];
    ++pos_;
    if (!advance_to_next()) return false;
    if (!(prev < buffer_[pos_]))
      throw RunFileError("run file is not strictly sorted at pair " +
                             std::to_string(index_ - static_cast<int64_t>(filled_ - pos_)),
                         path_, 0);
    return true;
  }

 private:
  bool advance_to_next() {
    if (pos_ < filled_) return check(buffer_[pos_]);
    if (remaining_ == 0) return false;
    const size_t n = static_cast<size_t>(std::min<int64_t>(remaining_, buffer_.size()));
    pread_exact(fd_, path_, reinterpret_cast<char*>(buffer_.data()), n * sizeof(Pair),
                static_cast<int64_t>(kRunHeaderBytes) + index_ * static_cast<int64_t>(sizeof(Pair)));
    index_ += static_cast<int64_t>(n);
    remaining_ -= static_cast<int64_t>(n);
    filled_ = n;
    pos_ = 0;
    return check(buffer_[0]);
  }

  bool check(const Pair& p) const {
    if (p.major < 0 || p.minor < 0 || p.major > header_.max_id || p.minor > header_.max_id)
      throw RunFileError("corrupt run file: pair (" + std::to_string(p.major) + ", " +
                             std::to_string(p.minor) + ") lies outside the header's id range [0, " +
                             std::to_string(header_.max_id) + "]",
                         path_, 0);
    return true;
  }

  std::string path_;
  int fd_ = -1;
  RunHeader header_{};
  std::vector<Pair> buffer_;
  size_t pos_ = 0, filled_ = 0;
  int64_t index_ = 0;  // pairs read from the file so far
  int64_t remaining_ = 0;
};

// Opens every run and checks they share one key order.
std::vector<std::unique_ptr<RunReader>> open_runs(const std::vector<std::string>& paths,
                                                  size_t buffer_bytes) {
  std::vector<std::unique_ptr<RunReader>> runs;
  runs.reserve(paths.size());
  for (const auto& path : paths) {
    runs.push_back(std::make_unique<RunReader>(path, buffer_bytes));
    if (runs.back()->order() != runs.front()->order())
      throw std::invalid_argument("run files of different key orders: " + runs.front()->path() +
                                  " and " + path);
  }
  return runs;
}

// The k-way merge: calls emit(pair) for every distinct pair, in increasing order.
template <typename Emit>
int64_t merge(std::vector<std::unique_ptr<RunReader>>& runs, Emit&& emit) {
  std::vector<RunReader*> heap;
  heap.reserve(runs.size());
  for (auto& run : runs)
    if (run->start()) heap.push_back(run.get());
  // A binary min-heap on head(); replace-top + sift-down per pair.
  auto greater = [](const RunReader* a, const RunReader* b) { return b->head() < a->head(); };
  std::make_heap(heap.begin(), heap.end(), greater);
  auto sift_down = [&heap](size_t i) {
    const size_t n = heap.size();
    RunReader* item = heap[i];
    const Pair key = item->head();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heap[child + 1]->head() < heap[child]->head()) ++child;
      if (!(heap[child]->head() < key)) break;
      heap[i] = heap[child];
      i = child;
    }
    heap[i] = item;
  };
  int64_t count = 0;
  bool any = false;
  Pair last{0, 0};
  while (!heap.empty()) {
    RunReader* top = heap.front();
    const Pair p = top->head();
    if (!any || !(p == last)) {
      emit(p);
      last = p;
      any = true;
      ++count;
    }
    if (top->advance()) {
      sift_down(0);
    } else {
      heap.front() = heap.back();
      heap.pop_back();
      if (!heap.empty()) sift_down(0);
    }
  }
  return count;
}

// LSD radix sort of keys using their low `bits` bits; `tmp` is scratch of the same size.
void radix_sort(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp, int bits) {
  constexpr int kDigit = 11;
  constexpr size_t kBuckets = size_t{1} << kDigit;
  const size_t n = keys.size();
  std::array<size_t, kBuckets> count{};
  for (int shift = 0; shift < bits; shift += kDigit) {
    count.fill(0);
    for (size_t i = 0; i < n; ++i) ++count[(keys[i] >> shift) & (kBuckets - 1)];
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;  // one digit: nothing moves
    size_t sum = 0;
    for (auto& c : count) {
      const size_t c0 = c;
      c = sum;
      sum += c0;
    }
    for (size_t i = 0; i < n; ++i) tmp[count[(keys[i] >> shift) & (kBuckets - 1)]++] = keys[i];
    keys.swap(tmp);
  }
}

int bit_width(uint64_t x) {
  int b = 0;
  while (x) {
    ++b;
    x >>= 1;
  }
  return b;
}

std::string npy_descr(bool int32) { return int32 ? "<i4" : "<i8"; }

}  // namespace

std::string npy_header(const std::string& descr, int64_t length) {
  // numpy.lib.format: the dict repr, spare spaces so the length can grow to 21
  // digits in place, then spaces and '\n' padding magic + version + 2-byte header
  // length + header to a multiple of 64 bytes.
  const std::string len = std::to_string(length);
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + len + ",), }";
  constexpr size_t kGrowthDigits = 21;
  if (len.size() < kGrowthDigits) dict.append(kGrowthDigits - len.size(), ' ');
  const size_t hlen = dict.size() + 1;
  const size_t pad = 64 - ((6 + 2 + 2 + hlen) % 64);
  const size_t total_header = hlen + pad;
  if (total_header > 0xffff) throw std::length_error("npy header too long");
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(total_header & 0xff));
  out.push_back(static_cast<char>(total_header >> 8));
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  return out;
}

int64_t write_run(Span<NodeId> src, Span<NodeId> dst, const std::string& path, KeyOrder order) {
  if (src.size != dst.size)
    throw std::invalid_argument("src and dst differ in length (" + std::to_string(src.size) +
                                " and " + std::to_string(dst.size) + ")");
  const Span<NodeId>& major = order == KeyOrder::kDstSrc ? dst : src;
  const Span<NodeId>& minor = order == KeyOrder::kDstSrc ? src : dst;
  const size_t n = src.size;
  int64_t max_id = -1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = src[i], b = dst[i];
    if (a < 0 || b < 0)
      throw std::invalid_argument("edge " + std::to_string(i) + " (" + std::to_string(a) + ", " +
                                  std::to_string(b) + ") has a negative node id");
    max_id = std::max(max_id, std::max(a, b));
  }
  OutFile out(path, size_t{1} << 20);
  const RunHeader placeholder = make_header(order, 0, -1);
  out.write(&placeholder, sizeof(placeholder));
  int64_t count = 0;
  if (n > 0 && max_id < (int64_t{1} << 32)) {
    // Both ids fit in `bits` bits: sort packed keys (major << bits | minor) by radix.
    const int bits = std::max(1, bit_width(static_cast<uint64_t>(max_id)));
    std::vector<uint64_t> keys(n);
    for (size_t i = 0; i < n; ++i)
      keys[i] = (static_cast<uint64_t>(major[i]) << bits) | static_cast<uint64_t>(minor[i]);
    {
      std::vector<uint64_t> tmp(n);
      radix_sort(keys, tmp, 2 * bits);
    }
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0 && keys[i] == keys[i - 1]) continue;
      const Pair p{static_cast<int64_t>(keys[i] >> bits), static_cast<int64_t>(keys[i] & mask)};
      out.put(p);
      ++count;
    }
  } else if (n > 0) {
    std::vector<Pair> pairs(n);
    for (size_t i = 0; i < n; ++i) pairs[i] = Pair{major[i], minor[i]};
    std::sort(pairs.begin(), pairs.end());
    for (size_t i = 0; i < n; ++i) {
      if (i > 0 && pairs[i] == pairs[i - 1]) continue;
      out.put(pairs[i]);
      ++count;
    }
  }
  const RunHeader header = make_header(order, count, max_id);
  out.write_at(0, &header, sizeof(header));
  out.commit();
  return count;
}

int64_t merge_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                   size_t buffer_bytes) {
  auto runs = open_runs(run_paths, buffer_bytes);
  const KeyOrder order = runs.empty() ? KeyOrder::kDstSrc : runs.front()->order();
  int64_t max_id = -1;
  for (const auto& run : runs) max_id = std::max(max_id, run->max_id());
  OutFile out(out_path, buffer_bytes);
  const RunHeader placeholder = make_header(order, 0, -1);
  out.write(&placeholder, sizeof(placeholder));
  const int64_t count = merge(runs, [&out](const Pair& p) { out.put(p); });
  const RunHeader header = make_header(order, count, count > 0 ? max_id : -1);
  out.write_at(0, &header, sizeof(header));
  out.commit();
  return count;
}

namespace {

template <typename IndexT>
int64_t merge_to_csr(std::vector<std::unique_ptr<RunReader>>& runs, NodeId num_nodes,
                     const std::string& indptr_path, const std::string& indices_path,
                     size_t buffer_bytes) {
  constexpr bool kInt32 = std::is_same_v<IndexT, int32_t>;
  OutFile indptr(indptr_path, buffer_bytes);
  OutFile indices(indices_path, buffer_bytes);
  const std::string indptr_header = npy_header("<i8", num_nodes + 1);
  indptr.write(indptr_header.data(), indptr_header.size());
  const std::string placeholder = npy_header(npy_descr(kInt32), 0);
  indices.write(placeholder.data(), placeholder.size());
  indptr.put<int64_t>(0);
  NodeId next_row = 0;  // rows [0, next_row) have their end written to indptr
  int64_t written = 0;
  const int64_t count = merge(runs, [&](const Pair& p) {
    while (next_row < p.major) {
      indptr.put<int64_t>(written);
      ++next_row;
    }
    indices.put<IndexT>(static_cast<IndexT>(p.minor));
    ++written;
  });
  while (next_row < num_nodes) {
    indptr.put<int64_t>(written);
    ++next_row;
  }
  const std::string header = npy_header(npy_descr(kInt32), count);
  if (header.size() != placeholder.size())
    throw std::length_error("npy header of " + indices_path + " changed length");
  indices.write_at(0, header.data(), header.size());
  indptr.commit();
  indices.commit();
  return count;
}

}  // namespace

int64_t merge_runs_to_csr(const std::vector<std::string>& run_paths, NodeId num_nodes,
                          const std::string& indptr_path, const std::string& indices_path,
                          bool int32_indices, size_t buffer_bytes) {
  if (num_nodes < 0)
    throw std::invalid_argument("num_nodes must be non-negative, got " +
                                std::to_string(num_nodes));
  if (int32_indices && num_nodes - 1 > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("int32 indices cannot hold node ids up to " +
                                std::to_string(num_nodes - 1));
  auto runs = open_runs(run_paths, buffer_bytes);
  for (const auto& run : runs)
    if (run->max_id() >= num_nodes)
      throw std::invalid_argument(run->path() + ": holds node id " +
                                  std::to_string(run->max_id()) + ", outside [0, " +
                                  std::to_string(num_nodes) + ")");
  return int32_indices
             ? merge_to_csr<int32_t>(runs, num_nodes, indptr_path, indices_path, buffer_bytes)
             : merge_to_csr<int64_t>(runs, num_nodes, indptr_path, indices_path, buffer_bytes);
}

template <typename Index>
void csr_edge_ids(Span<int64_t> indptr, Span<Index> indices, int64_t row_begin,
                  MutSpan<int64_t> next, MutSpan<int64_t> out, bool directed) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold at least one offset");
  const int64_t base = indptr[0];
  const int64_t rows = static_cast<int64_t>(indptr.size) - 1;
  const int64_t n = static_cast<int64_t>(next.size);
  if (indices.size != out.size || indptr[indptr.size - 1] - base != static_cast<int64_t>(indices.size))
    throw std::invalid_argument("indptr, indices and out disagree in size");
  if (row_begin < 0 || row_begin + rows > n)
    throw std::invalid_argument("rows outside [0, num_nodes)");
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t v = row_begin + r;
    const int64_t begin = indptr[r] - base, end = indptr[r + 1] - base;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(indices.size))
      throw std::invalid_argument("indptr is not nondecreasing");
    int64_t above = 0;  // undirected: entries u > v of row v are v's canonical out-edges
    for (int64_t k = begin; k < end; ++k) {
      const int64_t u = static_cast<int64_t>(indices[k]);
      if (u < 0 || u >= n)
        throw std::invalid_argument("index " + std::to_string(u) + " of row " +
                                    std::to_string(v) + " is outside [0, " + std::to_string(n) +
                                    ")");
      if (directed || u < v) {
        out[k] = next[u]++;
      } else {
        out[k] = next[v] + above++;
      }
    }
  }
}

template void csr_edge_ids<int32_t>(Span<int64_t>, Span<int32_t>, int64_t, MutSpan<int64_t>,
                                    MutSpan<int64_t>, bool);
template void csr_edge_ids<int64_t>(Span<int64_t>, Span<int64_t>, int64_t, MutSpan<int64_t>,
                                    MutSpan<int64_t>, bool);

// Key runs ---------------------------------------------------------------------

namespace {

constexpr char kKeyRunMagic[8] = {'G', 'N', 'C', 'K', 'E', 'Y', 'S', '\n'};
constexpr size_t kMaxVarintBytes = 10;

struct KeyRunHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  int64_t count;
  int64_t coded_bytes;
};
static_assert(sizeof(KeyRunHeader) == kKeyRunHeaderBytes, "key run header layout");

KeyRunHeader make_key_header(int64_t count, int64_t coded_bytes) {
  KeyRunHeader h{};
  std::memcpy(h.magic, kKeyRunMagic, sizeof(kKeyRunMagic));
  h.version = kKeyRunVersion;
  h.count = count;
  h.coded_bytes = coded_bytes;
  return h;
}

// LEB128: seven bits a byte, low bits first, the high bit set on all but the last.
inline size_t encode_varint(uint64_t value, uint8_t* out) {
  size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<uint8_t>(value);
  return n;
}

}  // namespace

struct KeyRunWriter::Impl {
  Impl(const std::string& path, size_t buffer_bytes, bool direct)
      : out(path, buffer_bytes, direct) {
    const KeyRunHeader placeholder = make_key_header(0, 0);
    out.write(&placeholder, sizeof(placeholder));
  }
  void put(uint64_t key) {
    uint8_t* bytes = reinterpret_cast<uint8_t*>(out.reserve(kMaxVarintBytes));
    const size_t n = encode_varint(key - last, bytes);
    out.advance(n);
    coded += static_cast<int64_t>(n);
    last = key;
    ++count;
  }
  OutFile out;
  uint64_t last = 0;
  int64_t count = 0, coded = 0;
};

KeyRunWriter::KeyRunWriter(const std::string& path, size_t buffer_bytes, bool direct)
    : impl_(std::make_unique<Impl>(path, buffer_bytes, direct)) {}
KeyRunWriter::~KeyRunWriter() = default;

void KeyRunWriter::append(Span<uint64_t> keys) {
  uint64_t prev = impl_->last;
  for (size_t i = 0; i < keys.size; ++i) {
    if ((impl_->count > 0 || i > 0) && keys[i] <= prev)
      throw std::invalid_argument("keys must increase strictly: key " + std::to_string(i) +
                                  " of the block (" + std::to_string(keys[i]) +
                                  ") does not exceed the one before (" + std::to_string(prev) +
                                  ")");
    prev = keys[i];
  }
  for (size_t i = 0; i < keys.size; ++i) impl_->put(keys[i]);
}

void KeyRunWriter::put(uint64_t key) { impl_->put(key); }

int64_t KeyRunWriter::commit() {
  const KeyRunHeader header = make_key_header(impl_->count, impl_->coded);
  impl_->out.write_at(0, &header, sizeof(header));
  impl_->out.commit();
  return impl_->count;
}

int64_t KeyRunWriter::count() const { return impl_->count; }
int64_t KeyRunWriter::coded_bytes() const { return impl_->coded; }
uint64_t KeyRunWriter::last() const { return impl_->last; }

template <typename Bucket>
void scatter_key_buckets(Span<uint64_t> keys, Span<Bucket> buckets,
                         const std::vector<KeyRunWriter*>& writers) {
  if (buckets.size != keys.size)
    throw std::invalid_argument("scatter_key_buckets: " + std::to_string(keys.size) +
                                " keys but " + std::to_string(buckets.size) + " buckets");
  for (const KeyRunWriter* writer : writers)
    if (writer == nullptr) throw std::invalid_argument("scatter_key_buckets: a writer is None");
  const uint64_t num_writers = writers.size();
  for (size_t i = 0; i < keys.size; ++i) {
    if (static_cast<uint64_t>(buckets[i]) >= num_writers)
      throw std::invalid_argument("key " + std::to_string(i) + " has bucket " +
                                  std::to_string(static_cast<uint64_t>(buckets[i])) +
                                  ", not one of the " + std::to_string(num_writers) + " writers");
    if (i > 0 && keys[i] <= keys[i - 1])
      throw std::invalid_argument("keys must increase strictly: key " + std::to_string(i) +
                                  " of the block (" + std::to_string(keys[i]) +
                                  ") does not exceed the one before (" +
                                  std::to_string(keys[i - 1]) + ")");
  }
  if (keys.size > 0)
    for (const KeyRunWriter* writer : writers)
      if (writer->count() > 0 && keys[0] <= writer->last())
        throw std::invalid_argument("keys must increase strictly: the block's first key (" +
                                    std::to_string(keys[0]) + ") does not exceed one appended before (" +
                                    std::to_string(writer->last()) + ")");
  for (size_t i = 0; i < keys.size; ++i) writers[buckets[i]]->put(keys[i]);
}

template void scatter_key_buckets<uint8_t>(Span<uint64_t>, Span<uint8_t>,
                                           const std::vector<KeyRunWriter*>&);
template void scatter_key_buckets<uint32_t>(Span<uint64_t>, Span<uint32_t>,
                                            const std::vector<KeyRunWriter*>&);

KeyRunReader::KeyRunReader(const std::string& path, size_t buffer_bytes) : path_(path) {
  fd_ = open_retrying(path_, O_RDONLY);
  if (fd_ < 0) throw_errno("cannot open key run for reading", path_, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw_errno("cannot stat key run", path_, errno);
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size < static_cast<int64_t>(kKeyRunHeaderBytes))
    throw RunFileError("truncated key run: " + std::to_string(size) +
                           " bytes, shorter than the header",
                       path_, 0);
  KeyRunHeader header{};
  pread_exact(fd_, path_, reinterpret_cast<char*>(&header), sizeof(header), 0);
  if (std::memcmp(header.magic, kKeyRunMagic, sizeof(kKeyRunMagic)) != 0)
    throw RunFileError("not a gnncore key run (bad magic)", path_, 0);
  if (header.version != kKeyRunVersion)
    throw RunFileError("unsupported key run version " + std::to_string(header.version), path_,
                       0);
  if (header.count < 0 || header.coded_bytes < header.count ||
      header.coded_bytes != size - static_cast<int64_t>(kKeyRunHeaderBytes))
    throw RunFileError("corrupt key run header (" + std::to_string(header.count) + " keys in " +
                           std::to_string(header.coded_bytes) + " bytes, file of " +
                           std::to_string(size) + " bytes)",
                       path_, 0);
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  count_ = remaining_ = header.count;
  coded_bytes_ = header.coded_bytes;
  file_offset_ = static_cast<int64_t>(kKeyRunHeaderBytes);
  buffer_.resize(std::max(buffer_bytes, kMinBuffer));
}

KeyRunReader::~KeyRunReader() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t KeyRunReader::count() const { return count_; }
int64_t KeyRunReader::remaining() const { return remaining_; }
const std::string& KeyRunReader::path() const { return path_; }

// Moves the unread bytes to the front and reads more; false when none are left.
bool KeyRunReader::refill() {
  const size_t left = filled_ - pos_;
  std::memmove(buffer_.data(), buffer_.data() + pos_, left);
  const int64_t end = static_cast<int64_t>(kKeyRunHeaderBytes) + coded_bytes_;
  const size_t want =
      static_cast<size_t>(std::min<int64_t>(end - file_offset_, buffer_.size() - left));
  if (want > 0)
    pread_exact(fd_, path_, reinterpret_cast<char*>(buffer_.data() + left), want, file_offset_);
  file_offset_ += static_cast<int64_t>(want);
  filled_ = left + want;
  pos_ = 0;
  return filled_ > 0;
}

bool KeyRunReader::next(uint64_t& key) {
  if (remaining_ == 0) return false;
  if (filled_ - pos_ < kMaxVarintBytes &&
      file_offset_ < static_cast<int64_t>(kKeyRunHeaderBytes) + coded_bytes_)
    refill();
  uint64_t delta = 0;
  int shift = 0;
  for (;;) {
    if (pos_ >= filled_ || shift > 63)
      throw RunFileError("corrupt key run: a varint runs past the data at key " +
                             std::to_string(count_ - remaining_),
                         path_, 0);
    const uint8_t byte = buffer_[pos_++];
    delta |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
    shift += 7;
  }
  if (delta == 0 && remaining_ != count_)
    throw RunFileError("key run is not strictly sorted at key " +
                           std::to_string(count_ - remaining_),
                       path_, 0);
  last_ += delta;
  --remaining_;
  if (remaining_ == 0 && (pos_ != filled_ || file_offset_ != static_cast<int64_t>(
                                                                  kKeyRunHeaderBytes) +
                                                                  coded_bytes_))
    throw RunFileError("corrupt key run: bytes past its " + std::to_string(count_) + " keys",
                       path_, 0);
  key = last_;
  return true;
}

// The keys in bulk: while a whole varint is sure to be in the buffer, they are
// decoded without next()'s per-byte bounds check and refill test (the run's
// deltas take 3-5 bytes; per key the checks cost as much as the decoding).
// next() takes the keys at a buffer's end and the run's last key, whose
// end-of-run checks it makes.
size_t KeyRunReader::read(MutSpan<uint64_t> out) {
  size_t n = 0;
  uint64_t key = 0;
  while (n < out.size && remaining_ > 0) {
    const uint8_t* buf = buffer_.data();
    // positions from which a longest varint ends inside the buffer
    const size_t safe_end = filled_ >= kMaxVarintBytes ? filled_ - kMaxVarintBytes + 1 : 0;
    const size_t want = std::min<size_t>(out.size - n, static_cast<size_t>(remaining_ - 1));
    size_t pos = pos_, i = 0;
    uint64_t last = last_;
    for (; i < want && pos < safe_end; ++i) {
      uint8_t byte = buf[pos++];
      uint64_t delta = byte & 0x7f;
      for (int shift = 7; byte & 0x80; shift += 7) {
        if (shift > 63)
          throw RunFileError("corrupt key run: a varint runs past the data at key " +
                                 std::to_string(count_ - remaining_ + static_cast<int64_t>(i)),
                             path_, 0);
        byte = buf[pos++];
        delta |= static_cast<uint64_t>(byte & 0x7f) << shift;
      }
      if (delta == 0 && (remaining_ != count_ || i > 0))
        throw RunFileError("key run is not strictly sorted at key " +
                               std::to_string(count_ - remaining_ + static_cast<int64_t>(i)),
                           path_, 0);
      last += delta;
      out[n + i] = last;
    }
    pos_ = pos;
    last_ = last;
    remaining_ -= static_cast<int64_t>(i);
    n += i;
    if (n < out.size) {  // the buffer's end or the run's last key: the checked path
      if (!next(key)) break;
      out[n++] = key;
    }
  }
  return n;
}

int64_t merge_key_runs(const std::vector<std::string>& run_paths, const std::string& out_path,
                       size_t buffer_bytes) {
  KeyRunWriter out(out_path, buffer_bytes);
  merge_distinct_keys(run_paths, buffer_bytes, [&](uint64_t key) { out.put(key); });
  return out.commit();
}

}  // namespace gnncore::io
