// Large sequential reads of byte ranges of a file straight into a caller's
// buffer: a loop of pread(2) calls of at most `chunk_bytes` each, retried on
// EINTR and continued after short reads. The out-of-core store reads a
// partition's feature rows or an edge bucket as one contiguous range of an
// .npy file this way instead of through page faults on a memory map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace gnncore::io {

constexpr size_t kDefaultChunkBytes = size_t{8} << 20;  // 8 MiB per pread

// A failed read. `error()` is the errno of the failing call (open, pread), or 0
// when the file ends before the range does (the message then says "ends early
// (truncated)"). The message names the path, the byte offset and the error.
class BlockReadError : public std::runtime_error {
 public:
  BlockReadError(const std::string& message, std::string path, int error)
      : std::runtime_error(message), path_(std::move(path)), error_(error) {}
  const std::string& path() const { return path_; }
  int error() const { return error_; }
  bool truncated() const { return error_ == 0; }

 private:
  std::string path_;
  int error_;
};

// open(2) of `path` with `flags | O_CLOEXEC` (and `mode` for a file it
// creates), retried when interrupted (EINTR): the descriptor, or -1 with errno
// set.
int open_retrying(const std::string& path, int flags, unsigned mode = 0);

// Block size O_DIRECT reads are aligned to (offsets, lengths and buffer).
constexpr size_t kDirectAlign = 4096;

// A buffer aligned for O_DIRECT reads (to kDirectAlign), freed on scope exit;
// throws std::bad_alloc.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes);
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data;
  size_t size;
};

// Reads bytes [offset, offset + nbytes) of `path` into `out` (nbytes bytes).
// With `sequential_hint`, first advises the kernel that the range will be read
// sequentially (posix_fadvise POSIX_FADV_SEQUENTIAL; a refused hint is ignored).
// With `direct`, reads with O_DIRECT: the device copies straight into an aligned
// bounce buffer of about `chunk_bytes`, bypassing the page cache (no kernel copy,
// no cached pages to reclaim under a memory limit), and the wanted bytes are
// copied out of it; where the file system refuses O_DIRECT (tmpfs, some FUSE
// mounts: EINVAL at open or at the first read) the read goes through the page
// cache instead. Throws std::invalid_argument for a negative offset or size, a
// zero chunk or a range past the largest file offset, and BlockReadError when the
// file cannot be opened or read or ends before the range does.
void read_range(const std::string& path, int64_t offset, int64_t nbytes, void* out,
                size_t chunk_bytes = kDefaultChunkBytes, bool sequential_hint = true,
                bool direct = false);

// Reads the ranges [offsets[i], offsets[i] + lengths[i]) of `path`, in order,
// into consecutive regions of `out` (sum(lengths) bytes), opening the file once.
// Same options and errors as read_range.
void read_ranges(const std::string& path, const int64_t* offsets, const int64_t* lengths,
                 size_t count, void* out, size_t chunk_bytes = kDefaultChunkBytes,
                 bool sequential_hint = true, bool direct = false);

// Asks the kernel to drop `path`'s cached pages (posix_fadvise POSIX_FADV_DONTNEED
// over the whole file; dirty pages are not written back first, so call it on files
// already on disk). Returns whether the file could be opened and the advice was taken.
bool evict(const std::string& path);

}  // namespace gnncore::io
