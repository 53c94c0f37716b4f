// Bindings for the vertex-stream partitioners (LDG, Fennel).
#include <nanobind/stl/string.h>

#include <string>

#include "bind/common.h"
#include "partition/vertex_stream.h"

namespace gnncore::bind {

template <typename IndexT>
static OutArray<int64_t> ldg_as(InArray<int64_t> indptr, InArray<IndexT> indices, int64_t parts,
                                int64_t capacity, nb::int_ seed) {
  const uint64_t s = seed_of(seed);
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = ldg_partition<IndexT>(span_of(indptr), span_of(indices), parts, capacity, s);
  }
  return to_numpy(std::move(out));
}

// Fennel's options; validate() runs on construction and on every use.
struct FennelOptions {
  int64_t parts = 1;
  int64_t capacity = 0;
  double alpha = 0;
  double gamma = 1.5;
  uint64_t seed = 0;

  void validate() const {
    static const char* cls = "FennelOptions";
    check_field(parts >= 1, cls, "parts", ">= 1", parts);
    check_field(capacity >= 0, cls, "capacity", ">= 0", capacity);
    check_field(finite_at_least(alpha, 0.0), cls, "alpha", "a finite number >= 0", alpha);
    check_field(finite_at_least(gamma, 1.0), cls, "gamma", "a finite number >= 1", gamma);
  }
};

template <typename IndexT>
static OutArray<int64_t> fennel_as(InArray<int64_t> indptr, InArray<IndexT> indices,
                                   const FennelOptions& o) {
  o.validate();
  std::vector<int64_t> out;
  {
    nb::gil_scoped_release release;
    out = fennel_partition<IndexT>(span_of(indptr), span_of(indices), o.parts, o.capacity,
                                   o.alpha, o.gamma, o.seed);
  }
  return to_numpy(std::move(out));
}

static void bind_fennel_options(nb::module_& m) {
  nb::class_<FennelOptions>(m, "FennelOptions",
                            R"doc(Options of ``fennel_partition``.

Checked when built and again by ``fennel_partition``: a bad value raises
``ValueError`` naming the field, e.g. ``FennelOptions.gamma must be a finite
number >= 1, got 0.5``.)doc")
      .def(
          "__init__",
          [](FennelOptions* self, int64_t parts, int64_t capacity, double alpha, double gamma,
             nb::int_ seed) {
            FennelOptions o{parts, capacity, alpha, gamma, seed_of(seed)};
            o.validate();
            new (self) FennelOptions(o);
          },
          nb::kw_only(), nb::arg("parts"), nb::arg("capacity"), nb::arg("alpha"),
          nb::arg("gamma") = 1.5, nb::arg("seed") = 0)
      .def_rw("parts", &FennelOptions::parts, "Number of parts (>= 1).")
      .def_rw("capacity", &FennelOptions::capacity,
              "Hard node cap per part; ``capacity · parts`` must cover every node.")
      .def_rw("alpha", &FennelOptions::alpha, "The load weight ``α`` (finite, >= 0).")
      .def_rw("gamma", &FennelOptions::gamma, "The load exponent ``γ`` (finite, >= 1).")
      .def_prop_rw(
          "seed", [](const FennelOptions& o) { return o.seed; },
          [](FennelOptions& o, nb::int_ seed) { o.seed = seed_of(seed); },
          "Seed of the stream order (any int, reduced modulo 2**64).")
      .def("__repr__", [](const FennelOptions& o) {
        return "FennelOptions(parts=" + std::to_string(o.parts) +
               ", capacity=" + std::to_string(o.capacity) +
               ", alpha=" + nb::cast<std::string>(nb::repr(nb::float_(o.alpha))) +
               ", gamma=" + nb::cast<std::string>(nb::repr(nb::float_(o.gamma))) +
               ", seed=" + std::to_string(o.seed) + ")";
      });
}

void bind_vertex_stream(nb::module_& m) {
  bind_fennel_options(m);
  m.def(
      "stream_order",
      [](NodeId num_nodes, nb::int_ seed) {
        const uint64_t s = seed_of(seed);
        std::vector<NodeId> out;
        {
          nb::gil_scoped_release release;
          out = stream_order(num_nodes, s);
        }
        return to_numpy(std::move(out));
      },
      nb::arg("num_nodes"), nb::arg("seed"),
      "The nodes sorted by their splitmix64 key ``stream(seed, v)``: the seeded random "
      "order in which LDG and Fennel visit them.");
  // int64 first: an array that needs converting is copied to int64, not narrowed.
  m.def("ldg_partition", &ldg_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("seed"));
  m.def("ldg_partition", &ldg_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("parts"), nb::arg("capacity"), nb::arg("seed"),
        R"doc(LDG over a symmetric CSR: node v (in ``stream_order``) goes to
argmax_i |P_i ∩ N(v)|·(1 − |P_i|/capacity) among parts below ``capacity``;
ties to the least loaded part, then the lowest id. Returns int64[N].)doc");
  m.def("fennel_partition", &fennel_as<int64_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("options"));
  m.def("fennel_partition", &fennel_as<int32_t>, nb::arg("indptr"), nb::arg("indices"),
        nb::arg("options"),
        R"doc(Fennel over a symmetric CSR with ``options`` (a ``FennelOptions``): node v
(in ``stream_order(N, seed)``) goes to argmax_i |P_i ∩ N(v)| −
alpha·gamma·|P_i|^(gamma−1) among parts below ``capacity``; ties to the least
loaded part, then the lowest id. Returns int64[N]. Releases the GIL.)doc");
}

}  // namespace gnncore::bind
