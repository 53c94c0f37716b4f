// Bindings for the synthetic graph generator.
#include <new>
#include <stdexcept>

#include "bind/common.h"
#include "synth/planted_partition.h"

namespace gnncore::bind {

template <typename T>
using InMatrix = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
template <typename T>
using OutMatrix = nb::ndarray<T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

void bind_synth(nb::module_& m) {
  nb::class_<PlantedPartition>(m, "PlantedPartition",
                               R"doc(Edge stream of a degree-corrected planted-partition graph.

Built once from ``community`` (int64[N], ids in ``[0, num_communities)``) and
``theta`` (float64[N] propensities). Edge ``e`` picks ``src`` proportionally to
``theta``; with probability ``intra_fraction`` it picks ``dst`` proportionally
to ``theta`` inside ``src``'s community, otherwise inside the other
communities. A self-loop is redrawn up to three times. Edge ``e`` depends only
on ``(seed, e)``, so any chunking and any thread count give the same stream.)doc")
      .def(
          "__init__",
          [](PlantedPartition* self, InArray<int64_t> community, InArray<double> theta,
             int64_t num_communities, double intra_fraction, nb::int_ seed) {
            const uint64_t s = seed_of(seed);
            nb::gil_scoped_release release;
            new (self) PlantedPartition(span_of(community), span_of(theta), num_communities,
                                        intra_fraction, s);
          },
          nb::arg("community"), nb::arg("theta"), nb::arg("num_communities"),
          nb::arg("intra_fraction"), nb::arg("seed"))
      .def_prop_ro("num_nodes", &PlantedPartition::num_nodes)
      .def_prop_ro("num_communities", &PlantedPartition::num_communities)
      .def(
          "generate",
          [](const PlantedPartition& self, int64_t first, int64_t count, int num_threads) {
            if (count < 0) throw std::invalid_argument("count must be non-negative");
            std::vector<NodeId> src(static_cast<size_t>(count)), dst(static_cast<size_t>(count));
            {
              nb::gil_scoped_release release;
              self.generate(first, MutSpan<NodeId>{src.data(), src.size()},
                            MutSpan<NodeId>{dst.data(), dst.size()}, num_threads);
            }
            return ArrayPair<NodeId>(to_numpy(std::move(src)), to_numpy(std::move(dst)));
          },
          nb::arg("first"), nb::arg("count"), nb::arg("num_threads") = 0,
          "Edges ``[first, first + count)`` of the stream as ``(src int64, dst int64)``.");

  m.def(
      "fill_features",
      [](InMatrix<float> centroids, InArray<int64_t> labels, int64_t start_row, nb::int_ seed,
         double noise, OutMatrix<float> out, int num_threads) {
        if (out.shape(1) != centroids.shape(1))
          throw std::invalid_argument("out and centroids differ in their number of columns");
        const uint64_t s = seed_of(seed);
        nb::gil_scoped_release release;
        fill_features(Span<float>{centroids.data(), centroids.size()},
                      static_cast<int64_t>(centroids.shape(0)),
                      static_cast<int64_t>(centroids.shape(1)), span_of(labels), start_row, s,
                      noise, MutSpan<float>{out.data(), out.size()}, num_threads);
      },
      nb::arg("centroids"), nb::arg("labels"), nb::arg("start_row"), nb::arg("seed"),
      nb::arg("noise"), nb::arg("out").noconvert(), nb::arg("num_threads") = 0,
      R"doc(Write class-conditional features into ``out`` (float32[rows, F], C-contiguous).

Row ``i`` of ``out`` is node ``r = start_row + i``:
``centroids[labels[r]] + noise * z`` with ``z`` standard normal drawn from
counters keyed by ``(seed, r)``, so a row is the same whichever chunk writes
it. ``labels`` holds every node's class (int64[N]).)doc");
}

}  // namespace gnncore::bind
