"""The benchmark harness of gnncore, outside the library: what ``gnncore bench``
runs and what the scripts in ``benchmarks/`` build on.

* :mod:`gnncore_bench.partition`: partitioners side by side, one process each
  (:mod:`gnncore_bench.external`, :mod:`gnncore_bench.external_spec`: outside
  partitioners given as command templates, on a METIS file).
* :mod:`gnncore_bench.sampler`: DENSE against per-layer sampling.
* :mod:`gnncore_bench.plan`: the placement and replication plans' simulated reads.
* :mod:`gnncore_bench.outofcore`: the training modes under one memory limit.
* :mod:`gnncore_bench.distributed`: distributed training by partitioner and world size.
* :mod:`gnncore_bench.scale`: generation, ingestion and partitioning at scale.
* :mod:`gnncore_bench.limits`: a command under a cgroup v1 memory limit, measured.
* :mod:`gnncore_bench.thrash_guard`: a stage killed when it thrashes at that limit.

gnncore never imports this package but from ``gnncore.cli.bench``, which does so
only when a ``bench`` verb runs (``.importlinter`` checks it).
"""
