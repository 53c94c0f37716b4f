// A file written sequentially past the page cache (O_DIRECT), its writes
// behind the caller: two aligned buffers take turns, one filled by the caller
// while a thread of the writer's own writes the other's whole blocks. A
// buffered write copies every byte into a page of the page cache, a fresh one
// on this project's VMs, and those pages stay charged to a memory cgroup
// until reclaimed: the billion's mapped key run (about 4 GB, read back from
// the disk anyway by the next phase) cost its writing thread a fifth of its
// time in the kernel's copy and page clearing. The last partial block goes
// through the caller's plain descriptor, so the file is exactly its bytes.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "io/block_reader.h"

namespace gnncore::io {

class WriteBehind {
 public:
  // `path`, just created and empty, opened again with O_DIRECT; `plain_fd` is
  // its ordinary descriptor (kept open by the caller past finish()). Buffers
  // of `buffer_bytes` each, rounded up to whole blocks, two at least (a
  // hand-off keeps up to a block's bytes). nullptr where the file
  // system refuses O_DIRECT at open, or where GNNCORE_DIRECT_WRITE is "0"
  // (then the caller writes through the page cache as before).
  static std::unique_ptr<WriteBehind> open(const std::string& path, int plain_fd,
                                           size_t buffer_bytes);
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;
  ~WriteBehind();  // waits for the write in flight (its error dropped)

  // The buffer the caller fills, and its size.
  char* data() const;
  size_t capacity() const;

  // Queues the whole blocks of the first `used` bytes of data() to be written
  // at offset(), after waiting for the other buffer's write; the bytes after
  // them (less than a block) move to the front of the other buffer, which
  // data() becomes. Returns how many moved. Throws std::system_error for a
  // failed write (a refused O_DIRECT write is redone through plain_fd, and
  // every later one goes that way).
  size_t hand_off(size_t used);

  // hand_off(used), then waits, and writes the bytes left through plain_fd.
  // Returns the file's size. The writer takes no more bytes after it.
  int64_t finish(size_t used);

  // Bytes queued so far: the file offset of data()'s first byte.
  int64_t offset() const { return offset_; }

 private:
  WriteBehind(std::string path, int plain_fd, int direct_fd, size_t buffer_bytes);
  void run();
  void write_out(const char* p, size_t n, int64_t offset, bool direct);
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::string path_;
  int plain_fd_, direct_fd_;
  AlignedBuffer buffers_[2];
  int filling_ = 0;
  int64_t offset_ = 0;
  bool direct_ = true;  // false once a direct write was refused
  // the write in flight
  const char* job_data_ = nullptr;
  size_t job_size_ = 0;
  int64_t job_offset_ = 0;
  bool pending_ = false, closing_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_;
};

}  // namespace gnncore::io
