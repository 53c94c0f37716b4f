// The gnncore._C extension: each concern registers its own functions.
#include <nanobind/nanobind.h>

#include "parallel.h"

namespace nb = nanobind;

namespace gnncore::bind {
void bind_graph(nb::module_& m);
void bind_sampler(nb::module_& m);
void bind_dense(nb::module_& m);
void bind_biased(nb::module_& m);
void bind_synth(nb::module_& m);
void bind_grem(nb::module_& m);
void bind_vertex_stream(nb::module_& m);
void bind_bytegnn(nb::module_& m);
void bind_postprocess(nb::module_& m);
void bind_plan(nb::module_& m);
void bind_block_reader(nb::module_& m);
void bind_external_sort(nb::module_& m);
void bind_edge_keys(nb::module_& m);
void bind_edge_text(nb::module_& m);
void bind_postprocess_stream(nb::module_& m);
}  // namespace gnncore::bind

NB_MODULE(_C, m) {
  m.doc() = "gnncore C++ core: CSR building, graph generation, sampling.";
  gnncore::bind::bind_graph(m);
  gnncore::bind::bind_sampler(m);
  gnncore::bind::bind_dense(m);
  gnncore::bind::bind_biased(m);
  gnncore::bind::bind_synth(m);
  gnncore::bind::bind_vertex_stream(m);
  gnncore::bind::bind_bytegnn(m);
  gnncore::bind::bind_postprocess(m);
  gnncore::bind::bind_grem(m);
  gnncore::bind::bind_plan(m);
  gnncore::bind::bind_block_reader(m);
  gnncore::bind::bind_external_sort(m);
  gnncore::bind::bind_edge_keys(m);
  gnncore::bind::bind_edge_text(m);
  gnncore::bind::bind_postprocess_stream(m);
  m.def(
      "set_num_threads",
      [](int threads) {
        if (threads < 1) throw nb::value_error("threads must be >= 1");
#ifdef GNNCORE_WITH_OPENMP
        omp_set_num_threads(threads);
#endif
      },
      nb::arg("threads"),
      "Threads of the OpenMP kernels called from this thread from now on "
      "(their default is OpenMP's, e.g. OMP_NUM_THREADS; no effect without OpenMP).");
  m.def(
      "num_threads", [] { return gnncore::resolve_threads(0); },
      "Threads the OpenMP kernels called from this thread use by default (1 without OpenMP).");
}
