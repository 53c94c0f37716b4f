// Thread-count resolution shared by the OpenMP kernels.
#pragma once
#include <cstddef>

#ifdef GNNCORE_WITH_OPENMP
#include <omp.h>
#endif

namespace gnncore {

// `num_threads` > 0 is taken as is; 0 means OpenMP's default (1 without OpenMP).
inline int resolve_threads(int num_threads) {
#ifdef GNNCORE_WITH_OPENMP
  return num_threads > 0 ? num_threads : omp_get_max_threads();
#else
  (void)num_threads;
  return 1;
#endif
}

// Inside a parallel region: this thread's index in its team and the team's
// size (OpenMP may start fewer threads than asked for, so a region that cuts
// its work by thread cuts it by the team it got); 0 and 1 without OpenMP.
inline size_t thread_index() {
#ifdef GNNCORE_WITH_OPENMP
  return static_cast<size_t>(omp_get_thread_num());
#else
  return 0;
#endif
}
inline size_t team_size() {
#ifdef GNNCORE_WITH_OPENMP
  return static_cast<size_t>(omp_get_num_threads());
#else
  return 1;
#endif
}

}  // namespace gnncore
