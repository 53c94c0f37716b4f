#include "io/write_behind.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace gnncore::io {

namespace {

constexpr size_t kMaxWrite = size_t{1} << 30;  // per pwrite call

// A buffer's size: whole blocks, two at least, so that after a hand-off (a
// partial block kept at the front) a block's worth of room is left.
size_t round_up(size_t bytes) {
  const size_t blocks = std::max<size_t>((bytes + kDirectAlign - 1) / kDirectAlign, 2);
  return blocks * kDirectAlign;
}

bool direct_writes_enabled() {
  const char* env = std::getenv("GNNCORE_DIRECT_WRITE");  // as the Python writers read it
  return env == nullptr || std::strcmp(env, "0") != 0;
}

}  // namespace

std::unique_ptr<WriteBehind> WriteBehind::open(const std::string& path, int plain_fd,
                                               size_t buffer_bytes) {
#ifdef O_DIRECT
  if (!direct_writes_enabled()) return nullptr;
  const int fd = open_retrying(path, O_WRONLY | O_DIRECT);
  if (fd < 0) return nullptr;  // refused (tmpfs: EINVAL): the caller writes buffered
  try {
    return std::unique_ptr<WriteBehind>(new WriteBehind(path, plain_fd, fd, buffer_bytes));
  } catch (...) {
    ::close(fd);
    throw;
  }
#else
  (void)path;
  (void)plain_fd;
  (void)buffer_bytes;
  return nullptr;
#endif
}

WriteBehind::WriteBehind(std::string path, int plain_fd, int direct_fd, size_t buffer_bytes)
    : path_(std::move(path)),
      plain_fd_(plain_fd),
      direct_fd_(direct_fd),
      buffers_{AlignedBuffer(round_up(buffer_bytes)), AlignedBuffer(round_up(buffer_bytes))} {
  worker_ = std::thread([this] { run(); });
}

WriteBehind::~WriteBehind() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    closing_ = true;
    changed_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  ::close(direct_fd_);
}

char* WriteBehind::data() const { return buffers_[filling_].data.get(); }
size_t WriteBehind::capacity() const { return buffers_[filling_].size; }

void WriteBehind::wait_idle(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !pending_; });
  if (error_) std::rethrow_exception(error_);
}

size_t WriteBehind::hand_off(size_t used) {
  const size_t whole = used / kDirectAlign * kDirectAlign;
  if (whole == 0) return used;
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle(lock);  // the other buffer is free
  char* full = buffers_[filling_].data.get();
  job_data_ = full;
  job_size_ = whole;
  job_offset_ = offset_;
  pending_ = true;
  changed_.notify_all();
  lock.unlock();
  offset_ += static_cast<int64_t>(whole);
  filling_ = 1 - filling_;
  const size_t left = used - whole;
  std::memcpy(buffers_[filling_].data.get(), full + whole, left);
  return left;
}

int64_t WriteBehind::finish(size_t used) {
  const size_t left = hand_off(used);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock);
  }
  // the last partial block: through the page cache (the thread is idle)
  write_out(buffers_[filling_].data.get(), left, offset_, /*direct=*/false);
  offset_ += static_cast<int64_t>(left);
  return offset_;
}

void WriteBehind::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return pending_ || closing_; });
    if (!pending_) return;
    lock.unlock();
    std::exception_ptr failed;
    try {
      write_out(job_data_, job_size_, job_offset_, direct_);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed) error_ = failed;
    pending_ = false;
    changed_.notify_all();
  }
}

// `n` bytes at `offset`: with `direct`, whole blocks at a block offset, with
// O_DIRECT while the device takes them, else (refused: EINVAL, which sends
// every later write through the page cache too, or a short write that left
// the alignment) through the plain descriptor.
void WriteBehind::write_out(const char* p, size_t n, int64_t offset, bool direct) {
  size_t done = 0;
  while (done < n) {
    const bool aligned = done % kDirectAlign == 0;
    const int fd = direct && aligned ? direct_fd_ : plain_fd_;
    const size_t want = std::min(n - done, kMaxWrite);
    const ssize_t got =
        ::pwrite(fd, p + done, want, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EINVAL && fd == direct_fd_) {
      direct = direct_ = false;
      continue;
    }
    if (got <= 0)
      throw std::system_error(got < 0 ? errno : EIO, std::generic_category(),
                              "cannot write " + std::to_string(want) + " bytes at byte offset " +
                                  std::to_string(offset + static_cast<int64_t>(done)) + " of " +
                                  path_);
    done += static_cast<size_t>(got);
  }
}

}  // namespace gnncore::io
