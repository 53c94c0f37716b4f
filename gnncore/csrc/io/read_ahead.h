// Sequential reads of a file past the page cache: O_DIRECT reads of whole
// chunks on a thread of their own, a few chunks ahead of the caller, so the
// device's time overlaps the caller's work. Through the page cache the same
// bytes cost a kernel copy each and, under a memory limit that charges the
// cache, the reclaim of the pages read before (the bounded parse of the
// billion-edge CSV, 17.8 GB, in an 8 GiB cgroup: 26-40 s of system time
// buffered, 17-21 s direct); O_DIRECT without reading ahead left the caller
// waiting on every block.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/block_reader.h"

namespace gnncore::io {

constexpr double kCachedShare = 0.5;

class ReadAhead {
 public:
  // Opens `path` with O_DIRECT and starts reading `depth` chunks of
  // `chunk_bytes` (rounded up to the O_DIRECT alignment) ahead; nullptr when the
  // file system refuses O_DIRECT (tmpfs on older kernels, some FUSE) or when
  // kCachedShare of the file's pages are in the page cache already (copying
  // them out beats reading the device again), for the caller to read buffered.
  static std::unique_ptr<ReadAhead> open(const std::string& path, size_t chunk_bytes,
                                         int depth);
  ~ReadAhead();  // stops the thread (after its read in flight)
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Copies the file's next bytes, up to `n`, into `out`; returns how many (fewer
  // only at the end of the file, 0 once it is done). Rethrows a failed read
  // (std::runtime_error naming the path and the byte offset).
  size_t read(char* out, size_t n);
  // Whether reads still go past the page cache: a read the file system refused
  // with O_DIRECT (EINVAL) sends the rest through the cache, as does a short
  // read before the end of the file.
  bool direct() const;

 private:
  struct Chunk {
    explicit Chunk(size_t bytes) : data(bytes) {}
    AlignedBuffer data;
    size_t size = 0;  // bytes read into it
    size_t used = 0;  // bytes handed to the caller
    bool last = false;  // the file ends with it
    std::exception_ptr error;
  };
  ReadAhead(std::string path, int direct_fd, size_t chunk_bytes, int depth);
  void run();  // the reading thread
  size_t fill(char* data, int64_t at, bool& last);

  std::string path_;
  int direct_fd_ = -1;
  int buffered_fd_ = -1;  // opened at a refusal of O_DIRECT
  size_t chunk_bytes_;
  std::vector<Chunk> chunks_;
  uint64_t head_ = 0;  // chunks handed out to the caller in full
  uint64_t tail_ = 0;  // chunks read
  bool stop_ = false;
  bool done_ = false;  // the caller has had the last chunk
  bool direct_ = true;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace gnncore::io
