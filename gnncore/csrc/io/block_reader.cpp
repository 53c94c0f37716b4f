#include "io/block_reader.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

namespace gnncore::io {

namespace {

constexpr int64_t kMaxOffset = std::numeric_limits<off_t>::max();
// Linux transfers at most 0x7ffff000 bytes per read call.
constexpr size_t kMaxChunk = size_t{0x7ffff000};

std::string where(const std::string& path, int64_t offset) {
  return path + " at byte offset " + std::to_string(offset);
}

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(-1) {
    do {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

int open_or_throw(const Fd& fd, const std::string& path) {
  if (!fd.ok()) {
    const int err = errno;
    throw BlockReadError("cannot open " + path + " for reading: " + std::strerror(err), path,
                         err);
  }
  return fd.get();
}

void check_range(const std::string& path, int64_t offset, int64_t nbytes) {
  if (offset < 0)
    throw std::invalid_argument("read of " + path + ": offset must be non-negative, got " +
                                std::to_string(offset));
  if (nbytes < 0)
    throw std::invalid_argument("read of " + path + ": length must be non-negative, got " +
                                std::to_string(nbytes));
  if (nbytes > kMaxOffset - offset)
    throw std::invalid_argument("read of " + path + ": range of " + std::to_string(nbytes) +
                                " bytes at offset " + std::to_string(offset) +
                                " ends past the largest file offset");
}

void check_chunk(size_t chunk_bytes) {
  if (chunk_bytes == 0) throw std::invalid_argument("chunk_bytes must be positive");
}

// The read loop over an open descriptor; the range has been checked.
void pread_all(int fd, const std::string& path, int64_t offset, int64_t nbytes, char* out,
               size_t chunk_bytes, bool sequential_hint) {
  if (nbytes == 0) return;
  if (sequential_hint) {
    // Only a hint: a refusal (e.g. on a pipe-like file) does not stop the read.
    (void)::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(nbytes),
                          POSIX_FADV_SEQUENTIAL);
  }
  const size_t chunk = std::min(chunk_bytes, kMaxChunk);
  int64_t done = 0;
  while (done < nbytes) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(nbytes - done, chunk));
    const ssize_t got = ::pread(fd, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw BlockReadError("cannot read " + std::to_string(nbytes) + " bytes of " +
                               where(path, offset) + ": pread at byte offset " +
                               std::to_string(offset + done) + " failed: " + std::strerror(err),
                           path, err);
    }
    if (got == 0) {
      throw BlockReadError(path + " ends early (truncated): reading " + std::to_string(nbytes) +
                               " bytes at byte offset " + std::to_string(offset) +
                               " found end of file at byte offset " +
                               std::to_string(offset + done),
                           path, 0);
    }
    done += got;  // a short read continues where it stopped
  }
}

}  // namespace

void read_range(const std::string& path, int64_t offset, int64_t nbytes, void* out,
                size_t chunk_bytes, bool sequential_hint) {
  check_range(path, offset, nbytes);
  check_chunk(chunk_bytes);
  Fd fd(path);
  pread_all(open_or_throw(fd, path), path, offset, nbytes, static_cast<char*>(out), chunk_bytes,
            sequential_hint);
}

void read_ranges(const std::string& path, const int64_t* offsets, const int64_t* lengths,
                 size_t count, void* out, size_t chunk_bytes, bool sequential_hint) {
  for (size_t i = 0; i < count; ++i) check_range(path, offsets[i], lengths[i]);
  check_chunk(chunk_bytes);
  Fd fd(path);
  const int handle = open_or_throw(fd, path);
  char* dst = static_cast<char*>(out);
  for (size_t i = 0; i < count; ++i) {
    pread_all(handle, path, offsets[i], lengths[i], dst, chunk_bytes, sequential_hint);
    dst += lengths[i];
  }
}

bool evict(const std::string& path) {
  Fd fd(path);
  if (!fd.ok()) return false;
  return ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) == 0;
}

}  // namespace gnncore::io
