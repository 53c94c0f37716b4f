// Paired A/B of the DENSE kernel (sample_dense_pyg) in one process: the kernel of
// an older revision, compiled into namespace gnncore_old, against the working
// tree's, on the same random 1,000-seed batches (fanouts 15,10,5) of a graph
// directory with int32 indices, alternating which goes first. Prints per arm
// the median wall and CPU ms per batch and minor page faults, then the median
// over batches of new/old (wall and CPU). Both arms return their output
// buffers to their pools, as the Python wrapper does. Built and run by run.sh.
//
// Arguments: GRAPH_DIR BATCHES THREADS [ONLY: 0 old only, 1 new only].
// Environment: CHECK=1 compares the outputs batch by batch; HUGE=1 runs both
// arms on a 2 MiB huge-page copy of the CSR; PAIRHUGE=1 runs the new kernel in
// both arms, on the file mapping ("old") and on a huge-page copy ("new");
// COPY=1 runs on a 4 KiB anonymous copy.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "types.h"
#include "sampler/neighbor.h"
#include "sampler/dense.h"
#include "sampler/buffer_pool.h"
namespace gnncore_old {
using NodeId = int64_t;
template <typename T> struct Span { const T* data = nullptr; size_t size = 0; };
struct NeighborSample {
  std::vector<NodeId> node; std::vector<int64_t> row, col, edge, num_sampled_nodes, num_sampled_edges;
};
template <typename IndexT>
NeighborSample sample_dense_pyg(Span<int64_t>, Span<IndexT>, Span<NodeId>, const std::vector<int64_t>&, uint64_t, int);
}
void old_give(std::vector<int64_t>&& v);
template <typename T> static const T* load_npy(const std::string& path, size_t* n) {
  int fd = open(path.c_str(), O_RDONLY); struct stat st; fstat(fd, &st);
  const char* p = (const char*)mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  uint16_t hl; memcpy(&hl, p + 8, 2); size_t off = 10 + hl;
  *n = (st.st_size - off) / sizeof(T); return (const T*)(p + off);
}
static double now(clockid_t c) { timespec t; clock_gettime(c, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static long minflt() { rusage r; getrusage(RUSAGE_SELF, &r); return r.ru_minflt; }
int main(int argc, char** argv) {
  std::string dir = argv[1]; int batches = atoi(argv[2]); int threads = atoi(argv[3]);
  int only = argc > 4 ? atoi(argv[4]) : -1;  // -1 both, 0 old only, 1 new only
  bool copy = getenv("COPY") != nullptr;    // run on an anonymous copy of the CSR
  bool check = getenv("CHECK") != nullptr;  // compare the outputs
  std::vector<int64_t> fan = {15, 10, 5};
  size_t np_, ni; const int64_t* ip = load_npy<int64_t>(dir + "/indptr.npy", &np_);
  const int32_t* ix = load_npy<int32_t>(dir + "/indices.npy", &ni);
  std::vector<int64_t> ipc; std::vector<int32_t> ixc;
  if (copy) { ipc.assign(ip, ip + np_); ixc.assign(ix, ix + ni); ip = ipc.data(); ix = ixc.data(); }
  const int64_t* ip_file = ip; const int32_t* ix_file = ix;
  if (getenv("HUGE") || getenv("PAIRHUGE")) {
    size_t b1 = (np_ * 8 + (2 << 20) - 1) & ~size_t((2 << 20) - 1), b2 = (ni * 4 + (2 << 20) - 1) & ~size_t((2 << 20) - 1);
    void* a = aligned_alloc(2 << 20, b1); void* c = aligned_alloc(2 << 20, b2);
    madvise(a, b1, MADV_HUGEPAGE); madvise(c, b2, MADV_HUGEPAGE);
    memcpy(a, ip, np_ * 8); memcpy(c, ix, ni * 4); ip = (const int64_t*)a; ix = (const int32_t*)c;
    system(("grep AnonHugePages /proc/" + std::to_string(getpid()) + "/smaps_rollup").c_str());
  }
  const int64_t N = np_ - 1; std::mt19937_64 g(0);
  std::vector<double> tw[2], tc[2], pf[2]; double edges = 0;
  for (int b = -2; b < batches; ++b) {
    std::vector<int64_t> seeds;
    while (seeds.size() < 1000) seeds.push_back((int64_t)(g() % N));
    std::sort(seeds.begin(), seeds.end()); seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
    uint64_t s = g();
    std::vector<std::vector<int64_t>> keep[2];
    for (int k = 0; k < 2; ++k) {
      int which = (b + k) & 1;
      if (only >= 0 && which != only) continue;
      double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID); long f0 = minflt();
      size_t e;
      if (which == 0 && getenv("PAIRHUGE")) {
        auto r = gnncore::sample_dense_pyg<int32_t>({ip_file, np_}, {ix_file, ni}, {seeds.data(), seeds.size()}, fan, s, threads);
        e = r.row.size(); if (only < 0 && check) keep[0] = {r.row, r.node, r.col, r.edge, r.num_sampled_nodes, r.num_sampled_edges};
        auto& p = gnncore::sampling::BufferPool::instance(); p.give(std::move(r.node)); p.give(std::move(r.row)); p.give(std::move(r.col)); p.give(std::move(r.edge));
      } else if (which == 0) {
        auto r = gnncore_old::sample_dense_pyg<int32_t>({ip, np_}, {ix, ni}, {seeds.data(), seeds.size()}, fan, s, threads);
        e = r.row.size(); if (only < 0 && check) keep[0] = {r.row, r.node, r.col, r.edge, r.num_sampled_nodes, r.num_sampled_edges};
        old_give(std::move(r.node)); old_give(std::move(r.row)); old_give(std::move(r.col)); old_give(std::move(r.edge));
      } else {
        auto r = gnncore::sample_dense_pyg<int32_t>({ip, np_}, {ix, ni}, {seeds.data(), seeds.size()}, fan, s, threads);
        e = r.row.size(); if (only < 0 && check) keep[1] = {r.row, r.node, r.col, r.edge, r.num_sampled_nodes, r.num_sampled_edges};
        if (!getenv("NOPOOL")) { auto& p = gnncore::sampling::BufferPool::instance(); p.give(std::move(r.node)); p.give(std::move(r.row)); p.give(std::move(r.col)); p.give(std::move(r.edge)); }
      }
      double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID); long f1 = minflt();
      if (b >= 0) { tw[which].push_back(w1 - w0); tc[which].push_back(c1 - c0); pf[which].push_back(f1 - f0); edges += e; }
    }
    if (b < 3 && only < 0 && keep[0] != keep[1]) { printf("MISMATCH at batch %d\n", b); return 1; }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  double ep = edges / batches / (only < 0 ? 2 : 1);
  for (int w = 0; w < 2; ++w) if (!tw[w].empty())
    printf("%s: wall median %.2f ms (%.1fM e/s), cpu median %.2f ms, minflt/batch %.0f\n", w ? "new" : "old",
           1e3 * med(tw[w]), ep / med(tw[w]) / 1e6, 1e3 * med(tc[w]), med(pf[w]));
  if (only < 0) {
    std::vector<double> ratio, rc; for (int i = 0; i < batches; ++i) { ratio.push_back(tw[1][i] / tw[0][i]); rc.push_back(tc[1][i] / tc[0][i]); }
    printf("threads %d edges/batch %.0f, paired new/old wall %.3f cpu %.3f\n", threads, ep, med(ratio), med(rc));
  }
}
