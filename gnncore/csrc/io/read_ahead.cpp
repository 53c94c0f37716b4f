#include "io/read_ahead.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace gnncore::io {

namespace {

// The share of the file's pages in the page cache (mincore over a read-only
// mapping, a byte a page, in windows of 1 GiB); 0 when it cannot be told.
double cached_share(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) return 0.0;
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return 0.0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t kWindow = size_t{1} << 30;
  std::vector<unsigned char> resident(kWindow / page);
  size_t cached = 0, pages = 0;
  for (size_t at = 0; at < size; at += kWindow) {
    const size_t length = std::min(kWindow, size - at);
    const size_t count = (length + page - 1) / page;
    if (::mincore(static_cast<char*>(map) + at, length, resident.data()) != 0) break;
    for (size_t i = 0; i < count; ++i) cached += resident[i] & 1;
    pages += count;
  }
  ::munmap(map, size);
  return pages ? static_cast<double>(cached) / static_cast<double>(pages) : 0.0;
}

}  // namespace

std::unique_ptr<ReadAhead> ReadAhead::open(const std::string& path, size_t chunk_bytes,
                                           int depth) {
  if (depth < 1) throw std::invalid_argument("depth must be at least 1");
  const int fd = open_retrying(path, O_RDONLY | O_DIRECT);
  if (fd < 0) {
    if (errno == EINVAL) return nullptr;  // no O_DIRECT here: the caller reads buffered
    throw std::runtime_error("cannot open " + path + " for reading: " + std::strerror(errno));
  }
  if (cached_share(fd) >= kCachedShare) {  // mostly in the page cache: read from there
    ::close(fd);
    return nullptr;
  }
  const size_t chunk =
      (std::max<size_t>(chunk_bytes, 1) + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  return std::unique_ptr<ReadAhead>(new ReadAhead(path, fd, chunk, depth));
}

ReadAhead::ReadAhead(std::string path, int direct_fd, size_t chunk_bytes, int depth)
    : path_(std::move(path)), direct_fd_(direct_fd), chunk_bytes_(chunk_bytes) {
  try {
    chunks_.reserve(static_cast<size_t>(depth));
    for (int i = 0; i < depth; ++i) chunks_.emplace_back(chunk_bytes_);
  } catch (...) {
    ::close(direct_fd_);  // no destructor runs
    throw;
  }
  thread_ = std::thread([this] { run(); });
}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (buffered_fd_ >= 0) ::close(buffered_fd_);
}

bool ReadAhead::direct() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return direct_;
}

// Reads the chunk at byte `at` (fewer bytes only at the end of the file, which
// sets `last`). O_DIRECT needs aligned offsets, lengths and memory: a refusal,
// or the unaligned offset after a short read, continues through the page cache.
size_t ReadAhead::fill(char* data, int64_t at, bool& last) {
  size_t done = 0;
  while (done < chunk_bytes_) {
    const bool direct = buffered_fd_ < 0;
    const ssize_t got = ::pread(direct ? direct_fd_ : buffered_fd_, data + done,
                                chunk_bytes_ - done, static_cast<off_t>(at + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      if (direct && errno == EINVAL) {
        buffered_fd_ = open_retrying(path_, O_RDONLY);
        if (buffered_fd_ < 0)
          throw std::runtime_error("cannot open " + path_ + " for reading: " +
                                   std::strerror(errno));
        (void)::posix_fadvise(buffered_fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
        std::lock_guard<std::mutex> lock(mutex_);
        direct_ = false;
        continue;
      }
      throw std::runtime_error("cannot read " + path_ + " at byte offset " +
                               std::to_string(at + static_cast<int64_t>(done)) + ": " +
                               std::strerror(errno));
    }
    if (got == 0) {
      last = true;
      break;
    }
    done += static_cast<size_t>(got);
  }
  return done;
}

void ReadAhead::run() {
  int64_t at = 0;
  for (;;) {
    Chunk* chunk = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || tail_ - head_ < chunks_.size(); });
      if (stop_) return;
      chunk = &chunks_[tail_ % chunks_.size()];
    }
    size_t got = 0;
    bool last = false;
    std::exception_ptr error;
    try {
      got = fill(chunk->data.data.get(), at, last);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      chunk->size = got;
      chunk->used = 0;
      chunk->last = last || error != nullptr;
      chunk->error = error;
      ++tail_;
    }
    changed_.notify_all();
    if (last || error) return;
    at += static_cast<int64_t>(got);
  }
}

size_t ReadAhead::read(char* out, size_t n) {
  size_t copied = 0;
  while (copied < n && !done_) {
    Chunk* chunk = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return head_ < tail_; });
      chunk = &chunks_[head_ % chunks_.size()];
    }
    if (chunk->error) {
      done_ = true;
      std::rethrow_exception(chunk->error);
    }
    const size_t take = std::min(n - copied, chunk->size - chunk->used);
    std::memcpy(out + copied, chunk->data.data.get() + chunk->used, take);
    chunk->used += take;
    copied += take;
    if (chunk->used == chunk->size) {  // handed out in full: back to the thread
      const bool last = chunk->last;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++head_;
      }
      changed_.notify_all();
      if (last) done_ = true;
    }
  }
  return copied;
}

}  // namespace gnncore::io
