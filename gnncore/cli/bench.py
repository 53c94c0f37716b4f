"""``gnncore bench partition GRAPH_DIR --parts 2,4,8,16 --methods ... --out DIR``.

``gnncore bench sampling GRAPH_DIR --fanouts 15,10,5 [--fanouts 30,20,10]
--batch-size 1000 --out DIR [--batches N]``: DENSE vs per-layer sampling.

``gnncore bench plans placement GRAPH_DIR --out DIR [--devices 4 --cache-fraction
0.1 ...]``: the feature placement against random and METIS partition layouts;
``gnncore bench plans replication GRAPH_DIR --out DIR [--parts 4 --rates
0,0.001,0.01,0.05 ...]``: HDR's cross-partition neighbour ids by rate
(:mod:`gnncore_bench.plan`).

``gnncore bench out-of-core GRAPH_DIR --budget SIZE --epochs E --out DIR
[--modes in_memory,mmap,hierbatching] [--parts P] [--static-fraction F]``:
each training mode in its own process under one kernel-enforced memory budget,
cold page cache (:mod:`gnncore_bench.outofcore`).

``gnncore bench distributed GRAPH_DIR --nproc 1,2,4 --partitioners
random,metis,grem --out DIR [--fanouts 10,5 --batch-size 1000 --mode train]
[--fanouts 15,10,5 --batch-size 100 --mode sample] [--epochs E]``: distributed
training per partitioner and world size, each configuration in its own process
tree: epoch time, remote feature rows and bytes per epoch, per-rank peak RSS,
test accuracy (:mod:`gnncore_bench.distributed`).

``gnncore bench scale --edges N|max --budget 8GiB --out DIR --work-dir DIR
[--methods grem:0.01,grem:0.1,metis,kaminpar] [--parts 16] [--threads 2]``:
a generated CSV ingested and partitioned, every stage a process under the same
cgroup memory limit (:mod:`gnncore_bench.scale`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnncore.cli.main import json_option
from gnncore.cli.partition import add_method_arguments, settings_from
from gnncore.errors import InputError
from gnncore.progress import on_terminal
from gnncore.sizes import parse_size

HAS_SUBCOMMANDS = True


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    part = sub.add_parser(
        "partition", help="partitioners side by side, one process each", parents=[json_option()]
    )
    part.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    part.add_argument("--parts", type=_ints, default=[2, 4, 8, 16])
    part.add_argument(
        "--methods", type=lambda t: [m for m in t.split(",") if m], default=["metis", "grem"]
    )
    part.add_argument("--out", type=Path, required=True, metavar="DIR")
    part.add_argument(
        "--shuffles",
        type=int,
        default=1,
        help="run grem/greedy on this many orders of the edge stream",
    )
    from gnncore_bench.external_spec import add_external_arguments  # stdlib only

    add_external_arguments(part)
    add_method_arguments(part)

    samp = sub.add_parser(
        "sampling", help="DENSE vs per-layer neighbour sampling", parents=[json_option()]
    )
    samp.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    samp.add_argument(
        "--fanouts",
        type=_ints,
        action="append",
        default=None,
        help="fanouts from the targets outward; repeat for several (default: 15,10,5)",
    )
    samp.add_argument("--batch-size", type=int, default=1000)
    samp.add_argument("--batches", type=int, default=50)
    samp.add_argument("--out", type=Path, required=True, metavar="DIR")
    samp.add_argument("--seed", type=int, default=0)
    samp.add_argument(
        "--threads", type=int, default=0, help="kernel threads; 0: every CPU this process may use"
    )

    plans = sub.add_parser("plans", help="the plans' simulator tables (placement, replication)")
    add_plans_arguments(plans)

    ooc = sub.add_parser(
        "out-of-core",
        help="training modes (in_memory, mmap, hierbatching) under one memory budget",
        parents=[json_option()],
    )
    add_out_of_core_arguments(ooc)

    distributed = sub.add_parser(
        "distributed",
        help="distributed training by partitioner and world size (remote rows, time, memory)",
        parents=[json_option()],
    )
    add_distributed_arguments(distributed)

    scale = sub.add_parser(
        "scale",
        help="CSV generation, ingestion and partitioners, each under one cgroup memory limit",
        parents=[json_option()],
    )
    add_scale_arguments(scale)
    from gnncore_bench.chain import CHAIN_HELP, add_chain_arguments  # the chain, Dagster

    add_chain_arguments(sub.add_parser("chain", help=CHAIN_HELP, parents=[json_option()]))


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench scale``."""
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.scale import DEFAULT_METHODS, Method

    def edges(text: str) -> int | str:
        if text == "max":
            return text
        try:
            value = int(float(text))  # 1e9 and 1000000000 alike
        except ValueError:
            raise argparse.ArgumentTypeError(f"a number of edges or 'max'; got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"edges must be positive; got {text!r}")
        return value

    def methods(text: str) -> list[str]:
        chosen = [m for m in text.split(",") if m]
        try:
            for m in chosen:
                Method.parse(m)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not chosen:
            raise argparse.ArgumentTypeError("name at least one method")
        return chosen

    parser.add_argument(
        "--edges",
        type=edges,
        required=True,
        metavar="N",
        help="undirected edges to generate (e.g. 1e9), or max: the most the disk holds",
    )
    parser.add_argument("--nodes", type=int, default=None, help="default: edges / 10")
    parser.add_argument(
        "--budget",
        type=parse_size,
        required=True,
        metavar="SIZE",
        help="memory limit of every stage, page cache included (e.g. 8GiB)",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument(
        "--work-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="where the CSV, graph and partitions are written (removed at the end)",
    )
    parser.add_argument("--methods", type=methods, default=list(DEFAULT_METHODS), metavar="M1,M2")
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument(
        "--threads", type=int, default=2, help="OMP_NUM_THREADS and KaMinPar's threads"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per stage")
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=120.0,
        help="kill a stage thrashing at the limit (major faults, no OOM kill) this long; 0: never",
    )
    parser.add_argument("--keep", action="store_true", help="keep the CSV, graph and partitions")
    parser.add_argument("--seed", type=int, default=0)


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench distributed``: ``--fanouts`` may repeat, one sampling setting each;
    ``--batch-size`` and ``--mode`` then repeat as often (or once, for all)."""
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.distributed import MODES

    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--nproc", type=_ints, default=[1, 2, 4], metavar="N1,N2")
    parser.add_argument(
        "--partitioners",
        type=lambda t: [m for m in t.split(",") if m],
        default=["random", "metis", "grem"],
        metavar="M1,M2",
        help="partitioning methods for every world size above 1 (1 process: the baseline)",
    )
    parser.add_argument(
        "--fanouts",
        type=_ints,
        action="append",
        default=None,
        metavar="F1,F2",
        help="fanouts of one sampling setting; repeat for several (default: 10,5)",
    )
    parser.add_argument(
        "--batch-size", type=int, action="append", help="global batch per setting (default: 1000)"
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the ranks train: cpu, or cuda (one GPU per rank with nccl, GPUs shared "
        "by the ranks with --backend gloo) (default: cpu)",
    )
    parser.add_argument(
        "--backend",
        choices=("gloo", "nccl"),
        default=None,
        help="process-group backend (default: nccl with --device cuda, else gloo)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        action="append",
        default=None,
        help="train (full training) or sample (one pass of the training batches "
        "sampled and gathered, no model) for each setting (default: train)",
    )
    parser.add_argument("--epochs", type=int, default=3, help="epochs per configuration")
    parser.add_argument("--model", default="sage")
    parser.add_argument(
        "--prefetch-workers", type=int, default=1, help="sampling threads per rank (0: in the loop)"
    )
    parser.add_argument(
        "--grem-chunk", type=float, default=0.01, help="GREM chunk, a fraction of the edges"
    )
    parser.add_argument(
        "--replication-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="above 0: every partitioner also runs as <method>+hdr, with an HDR plan "
        "replicating that share of the nodes (highest degree) on every rank",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="partitions and rank data (default OUT/work; reused when current)",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="OMP_NUM_THREADS per rank; 0: CPUs / N"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per configuration")
    parser.add_argument("--seed", type=int, default=0)


def add_out_of_core_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench out-of-core``."""
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.outofcore import MODES

    def modes(text: str) -> list[str]:
        chosen = [m for m in text.split(",") if m]
        bad = [m for m in chosen if m not in MODES]
        if bad or not chosen:
            raise argparse.ArgumentTypeError(f"modes are some of {','.join(MODES)}; got {text!r}")
        return chosen

    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument(
        "--budget",
        type=parse_size,
        required=True,
        metavar="SIZE",
        help="memory limit of every training process, page cache included (e.g. 1GiB)",
    )
    parser.add_argument("--epochs", type=int, required=True, metavar="E")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--modes", type=modes, default=list(MODES), metavar="M1,M2")
    parser.add_argument("--parts", type=int, default=64, help="partitions of the store")
    parser.add_argument("--static-fraction", type=float, default=0.01)
    parser.add_argument(
        "--partition-method",
        choices=("metis", "grem"),
        default=None,
        help="default: metis when it fits in half the available memory, else grem",
    )
    parser.add_argument(
        "--hierbatching-budget",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="hierbatching's --memory-budget, the whole process's (its mega-batches are "
        "sized from it less what the process holds; default --budget)",
    )
    parser.add_argument(
        "--in-memory-budget",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="the in_memory run's limit instead of --budget, making it the accuracy "
        "reference when everything in RAM does not fit the budget",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="partition, store and run data (default OUT/work; a matching store is reused)",
    )
    parser.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS; 0: every CPU")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per mode")
    parser.add_argument("--seed", type=int, default=0)
    train = parser.add_argument_group("passed to every `gnncore train`")
    train.add_argument("--model", default=None)
    train.add_argument("--hidden", type=int, default=None)
    train.add_argument("--fanouts", default=None, metavar="F1,F2")
    train.add_argument("--eval-fanouts", default=None, metavar="F1,F2")
    train.add_argument("--batch-size", type=int, default=None)
    train.add_argument("--mega-batch-parts", type=int, default=None)
    train.add_argument("--mega-batch-passes", type=int, default=None)


def _floats(text: str) -> list[float]:
    return [float(t) for t in text.split(",") if t]


def add_plans_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench plans placement|replication``."""
    from gnncore.plan.estimators import ESTIMATORS
    from gnncore.sampler.factory import SAMPLER_MODES

    sub = parser.add_subparsers(dest="plans", metavar="PLAN", required=True)
    place = sub.add_parser(
        "placement",
        help="feature placement against random and METIS partition layouts (simulated reads)",
        parents=[json_option()],
    )
    rep = sub.add_parser(
        "replication",
        help="HDR: cross-partition neighbour ids by replication rate over METIS (simulated)",
        parents=[json_option()],
    )
    for plan in (place, rep):
        plan.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
        plan.add_argument("--out", type=Path, required=True, metavar="DIR")
        plan.add_argument("--batch-size", type=int, default=1024)
        plan.add_argument("--epochs", type=int, default=1, help="simulated epochs")
        plan.add_argument("--seed", type=int, default=0)
        plan.add_argument("--sampler", choices=SAMPLER_MODES, default="dense")
    place.add_argument("--devices", type=int, default=4)
    place.add_argument(
        "--cache-fraction", type=float, default=0.1, help="cache per device, share of the nodes"
    )
    place.add_argument("--fanouts", type=_ints, default=[10, 5], metavar="F1,F2")
    place.add_argument("--alpha", type=float, default=0.0, help="peer-read cost C_gpu / C_cpu")
    place.add_argument("--estimator", choices=ESTIMATORS, default="spmv")
    place.add_argument("--repeats", type=int, default=3, help="placement timings (median)")
    place.add_argument("--no-metis", action="store_true", help="skip the METIS layout")
    place.add_argument(
        "--no-own-cache-rows",
        action="store_true",
        help="skip the partition layouts replayed without peer reads",
    )
    rep.add_argument("--parts", type=int, default=4)
    rep.add_argument("--rates", type=_floats, default=[0.0, 0.001, 0.01, 0.05], metavar="R1,R2")
    rep.add_argument("--fanouts", type=_ints, default=[25, 10], metavar="F1,F2")
    rep.add_argument("--train-nodes", choices=("auto", "split", "all"), default="auto")
    rep.add_argument(
        "--direction",
        choices=("in", "both"),
        default="in",
        help="adjacency sampled: the graph's rows (in) or in- and out-neighbours (both)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.what == "out-of-core":
        return _run_out_of_core(args)
    if args.what == "sampling":
        return _run_sampling(args)
    if args.what == "distributed":
        return _run_distributed(args)
    if args.what == "plans":
        return _run_plans(args)
    if args.what == "scale":
        return _run_scale(args)
    if args.what == "chain":  # gnncore_bench.chain sets args.run
        return _reported(args.work or args.resume, lambda: args.run(args))
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.partition import bench_partition

    return _reported(
        args.graph_dir,
        lambda: bench_partition(
            args.graph_dir,
            args.out,
            args.methods,
            args.parts,
            seed=args.seed,
            imbalance=args.imbalance,
            settings=settings_from(args),
            shuffles=args.shuffles,
            progress=not args.no_progress and on_terminal(),
            externals=args.external,
            external_timeout=args.external_timeout,
        ),
    )


def _reported(path: Path, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What a bench verb returns: ``run()``'s summary, its Markdown table printed
    (and left out of the JSON). A ``ValueError`` (a setting the benchmark
    refuses) becomes an :class:`~gnncore.errors.InputError` naming ``path``."""
    try:
        result = run()
    except ValueError as exc:
        raise InputError(str(exc), path) from exc
    print(result.pop("markdown"))
    return result


def _run_sampling(args: argparse.Namespace) -> dict[str, Any]:
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.sampler import bench_sampling

    return _reported(
        args.graph_dir,
        lambda: bench_sampling(
            args.graph_dir,
            args.fanouts or [[15, 10, 5]],
            args.batch_size,
            args.batches,
            args.out,
            seed=args.seed,
            num_threads=args.threads,
        ),
    )


def _run_plans(args: argparse.Namespace) -> dict[str, Any]:
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.plan import bench_placement
    from gnncore_bench.plan_replication import bench_replication

    def run() -> dict[str, Any]:
        if args.plans == "placement":
            return bench_placement(
                args.graph_dir,
                devices=args.devices,
                cache_fraction=args.cache_fraction,
                fanouts=args.fanouts,
                batch_size=args.batch_size,
                epochs=args.epochs,
                seed=args.seed,
                sampler=args.sampler,
                alpha=args.alpha,
                estimator=args.estimator,
                metis=not args.no_metis,
                repeats=args.repeats,
                own_cache_rows=not args.no_own_cache_rows,
                out_dir=args.out,
            )
        return bench_replication(
            args.graph_dir,
            parts=args.parts,
            rates=args.rates,
            fanouts=args.fanouts,
            batch_size=args.batch_size,
            epochs=args.epochs,
            seed=args.seed,
            sampler=args.sampler,
            train_nodes=args.train_nodes,
            direction=args.direction,
            out_dir=args.out,
        )

    return _reported(args.graph_dir, run)


def _run_out_of_core(args: argparse.Namespace) -> dict[str, Any]:
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.outofcore import bench_out_of_core

    train_args: list[str] = []
    for option in (
        "model",
        "hidden",
        "fanouts",
        "eval_fanouts",
        "batch_size",
        "mega_batch_parts",
        "mega_batch_passes",
    ):
        value = getattr(args, option)
        if value is not None:
            train_args += ["--" + option.replace("_", "-"), str(value)]
    return _reported(
        args.graph_dir,
        lambda: bench_out_of_core(
            args.graph_dir,
            args.out,
            args.budget,
            args.epochs,
            modes=args.modes,
            parts=args.parts,
            static_fraction=args.static_fraction,
            train_args=train_args,
            work_dir=args.work_dir,
            partition_method=args.partition_method,
            hierbatching_budget_bytes=args.hierbatching_budget,
            in_memory_budget_bytes=args.in_memory_budget,
            threads=args.threads or None,
            timeout=args.timeout,
            seed=args.seed,
        ),
    )


def _run_distributed(args: argparse.Namespace) -> dict[str, Any]:
    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.distributed import Setting, bench_distributed

    fanouts = args.fanouts or [[10, 5]]

    def per_setting(values: list[Any] | None, default: Any, option: str) -> list[Any]:
        if not values:
            return [default] * len(fanouts)
        if len(values) == 1:
            return values * len(fanouts)
        if len(values) != len(fanouts):
            raise InputError(
                f"{option} is given {len(values)} times for {len(fanouts)} --fanouts",
                args.graph_dir,
            )
        return values

    sizes = per_setting(args.batch_size, 1000, "--batch-size")
    modes = per_setting(args.mode, "train", "--mode")

    def run() -> dict[str, Any]:
        layers = [len(f) for f in fanouts]
        settings = [
            Setting(f"{n}-layer" if layers.count(n) == 1 else f"{n}-layer-{i + 1}", tuple(f), b, m)
            for i, (n, f, b, m) in enumerate(zip(layers, fanouts, sizes, modes))
        ]
        return bench_distributed(
            args.graph_dir,
            args.out,
            nproc=args.nproc,
            partitioners=args.partitioners,
            settings=settings,
            epochs=args.epochs,
            model=args.model,
            grem_chunk=args.grem_chunk,
            work_dir=args.work_dir,
            seed=args.seed,
            threads=args.threads or None,
            timeout=args.timeout,
            replication_rate=args.replication_rate,
            device=args.device,
            backend=args.backend,
            prefetch_workers=args.prefetch_workers,
        )

    return _reported(args.graph_dir, run)


def _run_scale(args: argparse.Namespace) -> dict[str, Any]:
    import signal
    import sys

    # lazy: gnncore_bench (the harness) loads only when a bench verb runs
    from gnncore_bench.scale import bench_scale

    # SIGTERM (kill, a job scheduler) unwinds like Ctrl-C: the running stage is
    # killed and the run folder removed; a background job ignores SIGINT.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return _reported(
        args.work_dir,
        lambda: bench_scale(
            args.out,
            args.work_dir,
            args.budget,
            args.edges,
            nodes=args.nodes,
            methods=args.methods,
            parts=args.parts,
            threads=args.threads,
            timeout=args.timeout,
            stall_seconds=args.stall_seconds or None,
            keep=args.keep,
            seed=args.seed,
        ),
    )
