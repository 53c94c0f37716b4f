#include "partition/postprocess_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "partition/split_balancer.h"

namespace gnncore {

namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

void check_assignment(Span<int64_t> assignment, int64_t parts) {
  if (parts < 1) throw std::invalid_argument("parts must be >= 1");
  for (size_t v = 0; v < assignment.size; ++v)
    if (assignment[v] < 0 || assignment[v] >= parts)
      throw std::invalid_argument("node " + std::to_string(v) + " is assigned to part " +
                                  std::to_string(assignment[v]) + ", outside [0, " +
                                  std::to_string(parts) + ")");
}

constexpr int64_t kRowsAhead = 8;  // rows between a prefetch and its read

template <typename Id>
void scan_rows(EdgeChunkReader& reader, int64_t chunk_rows, Span<int64_t> a, int64_t first,
               int64_t count, EdgePass& out) {
  const int64_t n = static_cast<int64_t>(a.size);
  const uint64_t groups = static_cast<uint64_t>(count);
  const size_t words = static_cast<size_t>(out.words);
  uint64_t* bits = out.halo_bits.data();
  std::vector<Id> ids;
  int64_t got;
  while ((got = reader.next_raw<Id>(chunk_rows, ids)) > 0) {
    int64_t cut = 0;
    for (int64_t i = 0; i < got; ++i) {
      if (i + kRowsAhead < got) {  // the parts of a later row's ends: misses at scale
        for (int end = 0; end < 2; ++end) {
          const size_t at = static_cast<size_t>(2 * (i + kRowsAhead) + end);
          const uint64_t y = static_cast<uint64_t>(ids[at]);
          if (y < static_cast<uint64_t>(n)) __builtin_prefetch(&a[static_cast<size_t>(y)]);
        }
      }
      const int64_t u = static_cast<int64_t>(ids[static_cast<size_t>(2 * i)]);
      const int64_t v = static_cast<int64_t>(ids[static_cast<size_t>(2 * i + 1)]);
      if (u < 0 || u >= n || v < 0 || v >= n)
        throw std::out_of_range("edge row " + std::to_string(out.rows + i) + " holds (" +
                                std::to_string(u) + ", " + std::to_string(v) +
                                "), a node id outside [0, " + std::to_string(n) + ")");
      const int64_t pu = a[static_cast<size_t>(u)], pv = a[static_cast<size_t>(v)];
      if (pu == pv) continue;
      ++cut;
      if (groups == 0) continue;
      // unsigned: a part below `first` wraps past `groups`
      const uint64_t ku = static_cast<uint64_t>(pu - first);
      const uint64_t kv = static_cast<uint64_t>(pv - first);
      if (kv < groups)  // u lies outside v's part and has a neighbour in it
        bits[kv * words + static_cast<size_t>(u >> 6)] |= uint64_t{1} << (u & 63);
      if (ku < groups)
        bits[ku * words + static_cast<size_t>(v >> 6)] |= uint64_t{1} << (v & 63);
    }
    out.cut += cut;
    out.rows += got;
  }
}

}  // namespace

EdgePass edge_pass(const EdgeFile& file, Span<int64_t> assignment, int64_t parts,
                   int64_t halo_first, int64_t halo_count, int64_t chunk_rows) {
  check_assignment(assignment, parts);
  if (chunk_rows < 1) throw std::invalid_argument("chunk_rows must be >= 1");
  if (halo_first < 0 || halo_count < 0 || halo_first + halo_count > parts)
    throw std::invalid_argument("halo parts [" + std::to_string(halo_first) + ", " +
                                std::to_string(halo_first + halo_count) +
                                ") must lie in [0, " + std::to_string(parts) + ")");
  EdgePass out;
  out.words = (static_cast<int64_t>(assignment.size) + 63) / 64;
  out.halo_bits.assign(static_cast<size_t>(halo_count * out.words), 0);
  EdgeChunkReader reader(file);
  if (file.int64)
    scan_rows<int64_t>(reader, chunk_rows, assignment, halo_first, halo_count, out);
  else
    scan_rows<int32_t>(reader, chunk_rows, assignment, halo_first, halo_count, out);
  return out;
}

template <typename IndexT>
FileRows<IndexT>::FileRows(Span<int64_t> indptr, const std::string& path, int64_t offset)
    : indptr_(indptr), path_(path), offset_(offset) {
  if (indptr.size == 0 || indptr[0] != 0)
    throw std::invalid_argument("indptr is malformed (must start at 0)");
  for (size_t v = 0; v + 1 < indptr.size; ++v)
    if (indptr[v] > indptr[v + 1]) throw std::invalid_argument("indptr is not non-decreasing");
  if (offset < 0) throw std::invalid_argument("the indices' offset must be >= 0");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw io_error("cannot open", path);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const auto error = io_error("cannot stat", path);
    ::close(fd_);
    throw error;
  }
  const int64_t need = offset + indptr[indptr.size - 1] * static_cast<int64_t>(sizeof(IndexT));
  if (static_cast<int64_t>(st.st_size) < need) {
    ::close(fd_);
    throw std::runtime_error(path + " holds " + std::to_string(st.st_size) +
                             " bytes, fewer than the " + std::to_string(need) +
                             " that indptr and the offset need");
  }
}

template <typename IndexT>
FileRows<IndexT>::~FileRows() {
  if (fd_ >= 0) ::close(fd_);
}

template <typename IndexT>
void FileRows<IndexT>::read_row(NodeId v, std::vector<IndexT>& row) {
  const int64_t begin = indptr_[static_cast<size_t>(v)];
  const int64_t end = indptr_[static_cast<size_t>(v) + 1];
  row.resize(static_cast<size_t>(end - begin));
  char* out = reinterpret_cast<char*>(row.data());
  size_t left = row.size() * sizeof(IndexT);
  off_t at = static_cast<off_t>(offset_ + begin * static_cast<int64_t>(sizeof(IndexT)));
  while (left > 0) {
    const ssize_t got = ::pread(fd_, out, left, at);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot read", path_);
    }
    if (got == 0) throw std::runtime_error("short read from " + path_);
    out += got;
    at += got;
    left -= static_cast<size_t>(got);
  }
  const int64_t n = num_nodes();
  for (size_t j = 0; j < row.size(); ++j) {
    const int64_t u = static_cast<int64_t>(row[j]);
    if (u < 0 || u >= n)
      throw std::out_of_range("neighbour id " + std::to_string(u) + " at CSR position " +
                              std::to_string(begin + static_cast<int64_t>(j)) +
                              " is outside [0, " + std::to_string(n) + ")");
  }
  ++rows_read_;
}

template class FileRows<int32_t>;
template class FileRows<int64_t>;

namespace {

template <typename IndexT>
SplitBalance balance_over_file(Span<int64_t> indptr, const std::string& path, int64_t offset,
                               Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                               std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                               int64_t capacity, int64_t* rows_read) {
  FileRows<IndexT> rows(indptr, path, offset);
  SplitBalance out = balance_splits_over(rows, assignment, split_of, parts, lo, hi, capacity);
  if (rows_read) *rows_read = rows.rows_read();
  return out;
}

}  // namespace

SplitBalance balance_splits_file(Span<int64_t> indptr, const std::string& indices_path,
                                 int64_t indices_offset, bool int64_indices,
                                 Span<int64_t> assignment, Span<int8_t> split_of, int64_t parts,
                                 std::array<int64_t, 3> lo, std::array<int64_t, 3> hi,
                                 int64_t capacity, int64_t* rows_read) {
  if (indptr.size == 0) throw std::invalid_argument("indptr must hold num_nodes + 1 entries");
  const NodeId n = static_cast<NodeId>(indptr.size - 1);
  if (assignment.size != static_cast<size_t>(n))
    throw std::invalid_argument("assignment must have one entry per node");
  check_assignment(assignment, parts);
  if (split_of.size != static_cast<size_t>(n))
    throw std::invalid_argument("split_of must have one entry per node");
  for (size_t v = 0; v < split_of.size; ++v)
    if (split_of[v] < -1 || split_of[v] > 2)
      throw std::invalid_argument("split_of must hold -1, 0, 1 or 2");
  if (capacity < (n + parts - 1) / parts)
    throw std::invalid_argument("capacity · parts must cover every node");
  if (int64_indices)
    return balance_over_file<int64_t>(indptr, indices_path, indices_offset, assignment, split_of,
                                      parts, lo, hi, capacity, rows_read);
  return balance_over_file<int32_t>(indptr, indices_path, indices_offset, assignment, split_of,
                                    parts, lo, hi, capacity, rows_read);
}

}  // namespace gnncore
