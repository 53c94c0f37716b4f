// The older kernel's buffer pool (compiled with -Dgnncore=gnncore_old): the
// driver returns that kernel's output buffers to it, as Python would.
#include <cstdint>
#include <vector>

#include "sampler/buffer_pool.h"

void old_give(std::vector<int64_t>&& v) {
  gnncore::sampling::BufferPool::instance().give(std::move(v));
}
