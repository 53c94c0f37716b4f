#include "io/block_reader.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
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
  explicit Fd(const std::string& path, int extra_flags = 0)
      : fd_(open_retrying(path, O_RDONLY | extra_flags)) {}
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

[[noreturn]] void throw_read_error(const std::string& path, int64_t offset, int64_t nbytes,
                                   int64_t at, int err) {
  throw BlockReadError("cannot read " + std::to_string(nbytes) + " bytes of " +
                           where(path, offset) + ": pread at byte offset " + std::to_string(at) +
                           " failed: " + std::strerror(err),
                       path, err);
}

[[noreturn]] void throw_truncated(const std::string& path, int64_t offset, int64_t nbytes,
                                  int64_t at) {
  throw BlockReadError(path + " ends early (truncated): reading " + std::to_string(nbytes) +
                           " bytes at byte offset " + std::to_string(offset) +
                           " found end of file at byte offset " + std::to_string(at),
                       path, 0);
}

// The buffered read loop over an open descriptor, from byte `done` of the
// range on; the range has been checked.
void pread_all(int fd, const std::string& path, int64_t offset, int64_t nbytes, char* out,
               size_t chunk_bytes, bool sequential_hint, int64_t done = 0) {
  if (nbytes == done) return;
  if (sequential_hint) {
    // Only a hint: a refusal (e.g. on a pipe-like file) does not stop the read.
    (void)::posix_fadvise(fd, static_cast<off_t>(offset + done),
                          static_cast<off_t>(nbytes - done), POSIX_FADV_SEQUENTIAL);
  }
  const size_t chunk = std::min(chunk_bytes, kMaxChunk);
  while (done < nbytes) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(nbytes - done, chunk));
    const ssize_t got = ::pread(fd, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_read_error(path, offset, nbytes, offset + done, errno);
    }
    if (got == 0) throw_truncated(path, offset, nbytes, offset + done);
    done += got;  // a short read continues where it stopped
  }
}

// Reads with O_DIRECT through `bounce` from byte `done` of the range on and
// returns the bytes read: all of the range, or fewer when the file system
// refused a direct read (EINVAL), for the buffered loop to finish.
int64_t pread_direct(int fd, const std::string& path, int64_t offset, int64_t nbytes, char* out,
                     AlignedBuffer& bounce, int64_t done = 0) {
  constexpr int64_t align = static_cast<int64_t>(kDirectAlign);
  while (done < nbytes) {
    const int64_t at = offset + done;
    const int64_t start = at - at % align;  // the aligned block holding byte `at`
    const int64_t skip = at - start;
    const int64_t payload =
        std::min<int64_t>(nbytes - done, static_cast<int64_t>(bounce.size) - skip);
    const int64_t want = (skip + payload + align - 1) / align * align;
    const ssize_t got = ::pread(fd, bounce.data.get(), static_cast<size_t>(want),
                                static_cast<off_t>(start));
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL) return done;  // no direct reads here: finish buffered
      throw_read_error(path, offset, nbytes, at, errno);
    }
    if (got <= skip) throw_truncated(path, offset, nbytes, at);  // EOF before byte `at`
    const int64_t usable = std::min<int64_t>(got - skip, payload);
    std::memcpy(out + done, bounce.data.get() + skip, static_cast<size_t>(usable));
    done += usable;  // a short read (end of file, or a signal) continues from here
  }
  return done;
}

// Reads every range into consecutive regions of `out`: with `direct` through an
// O_DIRECT descriptor where the file system allows it, else (or for what a
// refused direct read left) through the page cache.
void read_all(const std::string& path, const int64_t* offsets, const int64_t* lengths,
              size_t count, char* out, size_t chunk_bytes, bool sequential_hint, bool direct) {
  Fd buffered(path);
  const int handle = open_or_throw(buffered, path);
  std::unique_ptr<Fd> unbuffered;
  std::unique_ptr<AlignedBuffer> bounce;
  if (direct) {
    unbuffered = std::make_unique<Fd>(path, O_DIRECT);
    if (unbuffered->ok()) {
      const size_t chunk = std::min(std::max(chunk_bytes, kDirectAlign), kMaxChunk / 2);
      bounce = std::make_unique<AlignedBuffer>((chunk + kDirectAlign - 1) / kDirectAlign *
                                               kDirectAlign);
    } else {
      unbuffered.reset();  // e.g. EINVAL on tmpfs: read through the page cache
    }
  }
  for (size_t i = 0; i < count; ++i) {
    int64_t done = 0;
    if (unbuffered) {
      done = pread_direct(unbuffered->get(), path, offsets[i], lengths[i], out, *bounce);
      if (done < lengths[i]) {
        unbuffered.reset();  // refused: the rest of this call reads buffered
      }
    }
    pread_all(handle, path, offsets[i], lengths[i], out, chunk_bytes, sequential_hint, done);
    out += lengths[i];
  }
}

}  // namespace

int open_retrying(const std::string& path, int flags, unsigned mode) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
  } while (fd < 0 && errno == EINTR);
  return fd;
}

AlignedBuffer::AlignedBuffer(size_t bytes) : size(bytes) {
  void* p = nullptr;
  if (::posix_memalign(&p, kDirectAlign, bytes) != 0) throw std::bad_alloc();
  data.reset(static_cast<char*>(p));
}

void AlignedBuffer::Free::operator()(char* p) const { std::free(p); }

void read_range(const std::string& path, int64_t offset, int64_t nbytes, void* out,
                size_t chunk_bytes, bool sequential_hint, bool direct) {
  check_range(path, offset, nbytes);
  check_chunk(chunk_bytes);
  read_all(path, &offset, &nbytes, 1, static_cast<char*>(out), chunk_bytes, sequential_hint,
           direct);
}

void read_ranges(const std::string& path, const int64_t* offsets, const int64_t* lengths,
                 size_t count, void* out, size_t chunk_bytes, bool sequential_hint,
                 bool direct) {
  for (size_t i = 0; i < count; ++i) check_range(path, offsets[i], lengths[i]);
  check_chunk(chunk_bytes);
  read_all(path, offsets, lengths, count, static_cast<char*>(out), chunk_bytes, sequential_hint,
           direct);
}

bool evict(const std::string& path) {
  Fd fd(path);
  if (!fd.ok()) return false;
  return ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) == 0;
}

}  // namespace gnncore::io
