// Thread-count resolution shared by the OpenMP kernels.
#pragma once

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

}  // namespace gnncore
