r"""``gnncore bench distributed``: remote feature rows, time and memory by partitioner.

:func:`bench_distributed` partitions a graph with each partitioner into
``nproc`` parts (``gnncore.partition``; reused when current) and runs every
(sampling setting, partitioner, ``nproc``) configuration in its own child
process (``python -m gnncore_bench.distributed_child SPEC``), which starts the
ranks: a clean process tree per configuration, so each rank's peak RSS
(``ru_maxrss``, reported by the rank itself) is that configuration's alone.
One process is the baseline: a world of one rank owning the whole graph
(a one-part partition), where nothing is remote.

A setting (:class:`Setting`) is a list of fanouts, a global batch size and
a mode:

* ``train``: :func:`~gnncore.distributed.training.train_distributed` for
  ``epochs`` epochs (early stopping off). The figures per epoch are those the
  ranks log (``dist_remote_rows``, ``dist_remote_bytes``, ``rank<r>_*``):
  feature-store gathers of the *training* batches only. Epoch time is the
  training pass (``train_s`` of rank 0, evaluation not included).
* ``sample``: no model. Each rank builds the same
  :class:`~gnncore.distributed.source.node.DistBatchSource` as training and
  draws ``epochs`` epochs of its training batches (sampling across ranks,
  then gathering ``x`` and ``y`` through the distributed feature store), the
  very batches training would draw with the same seed. Epoch time is that of
  sampling and gathering (the slowest rank). No test accuracy.

Per configuration: ``epoch_s`` (median over epochs), remote rows and bytes
per epoch (summed over the ranks, mean over epochs), the remote share (rows
fetched from other ranks over all rows gathered), the time split, each
rank's peak RSS and the size of its rank data, the test accuracy (``train``),
and the remote rows against those of ``random`` at the same world size and
setting. Written as ``distributed.json`` and ``distributed.md`` in ``out_dir``
(the JSON after every configuration, so an interrupted run keeps what it
measured).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gnncore_bench.distributed_report import to_markdown

MODES = ("train", "sample")
#: The baseline's label: one process, a one-part partition.
SINGLE = "single"
#: The module each configuration runs in, as ``python -m CHILD SPEC_JSON RESULT_JSON``.
CHILD = "gnncore_bench.distributed_child"


@dataclass(frozen=True)
class Setting:
    """One sampling setting of the benchmark: ``name`` labels it in the tables."""

    name: str
    fanouts: tuple[int, ...]
    batch_size: int
    mode: str = "train"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode is one of {', '.join(MODES)}; got {self.mode!r}")
        if not self.fanouts or any(f < 1 for f in self.fanouts):
            raise ValueError(f"fanouts must be positive; got {self.fanouts}")
        if self.batch_size < 1:
            raise ValueError(f"batch size must be positive; got {self.batch_size}")


def _log(message: str) -> None:
    print(f"[bench distributed] {message}", file=sys.stderr, flush=True)


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _partition(
    graph_dir: Path,
    work: Path,
    method: str,
    parts: int,
    seed: int,
    grem_chunk: float,
) -> dict[str, Any]:
    from gnncore.partition.run import MethodSettings, partition_graph

    out = work / "partitions" / f"{method}-p{parts}"
    settings = MethodSettings(chunk=grem_chunk) if method in ("grem", "greedy") else None
    report = partition_graph(
        graph_dir, out, method, parts, seed=seed, settings=settings, reuse=True
    )
    _log(
        f"partition {method} p={parts}: edge cut {report.metrics.edge_cut_fraction:.3f}"
        + (" (reused)" if report.reused else f" in {report.seconds:.1f} s")
    )
    return {
        "dir": str(out),
        "method": method,
        "parts": parts,
        "edge_cut_fraction": report.metrics.edge_cut_fraction,
        "seconds": report.seconds,
        "reused": report.reused,
        "params": report.params,
    }


#: Suffix of a partitioner's configurations with an HDR replication plan.
HDR = "+hdr"


def _replication(graph_dir: Path, work: Path, partition_dir: str, key: str, rate: float) -> str:
    """An HDR replication plan of ``rate`` on the partition (reused when current)."""
    from gnncore.plan.replication import ReplicationSettings, plan_replication

    out = work / "plans" / f"{key}-hdr{rate:g}"
    report = plan_replication(
        graph_dir, partition_dir, out, ReplicationSettings(rate=rate), reuse=True
    )
    _log(f"replication plan {key} rate {rate:g}: {out}" + (" (reused)" if report.reused else ""))
    return str(out)


def _summarise(raw: dict[str, Any], ranks_dir: Path) -> dict[str, Any]:
    epochs = raw["per_epoch"]
    remote = sum(e["remote_rows"] for e in epochs)
    rows = remote + sum(e["local_rows"] for e in epochs)

    def median(key: str) -> float | None:
        values = [e[key] for e in epochs if e.get(key) is not None]
        return statistics.median(values) if values else None

    per_rank = raw["per_rank"]
    for r in per_rank:
        r["rank_data_bytes"] = _dir_bytes(ranks_dir / f"rank_{r['rank']}")
    n = len(epochs)
    return {
        "epochs_run": n,
        "epoch_s": median("epoch_s"),
        "epoch_s_all": [e["epoch_s"] for e in epochs],
        "sample_s": median("sample_s"),
        "exchange_s": median("exchange_s"),
        "compute_s": median("compute_s"),
        "stall_s": median("stall_s"),
        "eval_s": median("eval_s"),
        "remote_rows_per_epoch": remote / n if n else None,
        "remote_rows_epoch1": epochs[0]["remote_rows"] if n else None,
        "local_rows_per_epoch": (rows - remote) / n if n else None,
        "remote_bytes_per_epoch": sum(e["remote_bytes"] for e in epochs) / n if n else None,
        "remote_share": remote / rows if rows else 0.0,
        "peak_rss_mb": [r["peak_rss_mb"] for r in per_rank],
        "per_rank": per_rank,
        "per_epoch": epochs,
        "test_accuracy": raw.get("test_accuracy"),
        "best_val_accuracy": raw.get("best_val_accuracy"),
        "wall_s": raw.get("wall_s"),
        "launcher_peak_rss_mb": raw.get("launcher_peak_rss_mb"),
    }


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def bench_distributed(
    graph_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    nproc: Sequence[int] = (1, 2, 4),
    partitioners: Sequence[str] = ("random", "metis", "grem"),
    settings: Sequence[Setting] | None = None,
    *,
    fanouts: Sequence[int] = (10, 5),
    batch_size: int = 1000,
    mode: str = "train",
    epochs: int = 3,
    model: str = "sage",
    grem_chunk: float = 0.01,
    work_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    threads: int | None = None,
    timeout: float = 3600.0,
    collective_timeout: float = 300.0,
    replication_rate: float = 0.0,
    device: str = "cpu",
    backend: str | None = None,
    prefetch_workers: int = 1,
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring).

    Args:
        graph_dir: A graph directory with features, labels and splits.
        out_dir: Gets ``distributed.json``, ``distributed.md`` and ``runs/``
            (each configuration's spec, result and log).
        nproc: World sizes; 1 is the one-process baseline (run once per setting).
        partitioners: ``gnncore partition`` methods, for every world size above 1.
        settings: Sampling settings; default one, from ``fanouts``,
            ``batch_size`` and ``mode``.
        epochs: Epochs per configuration (``train``: trained, early stopping
            off; ``sample``: sampled).
        grem_chunk: GREM's (and greedy's) chunk, a fraction of the edges.
        work_dir: Partitions (``partitions/<method>-p<n>``) and rank data
            (``ranks/<method>-p<n>``); reused when current. Default ``out_dir/work``.
        threads: ``OMP_NUM_THREADS`` of each rank; default the CPUs this process
            may use divided by the world size (at least 1).
        timeout: Seconds one configuration may take.
        collective_timeout: Seconds a collective may wait for its peers.
        replication_rate: Above 0, every partitioner above 1 rank also runs as
            ``<method>+hdr``: the same partition with an HDR replication plan of
            that rate (``gnncore plan replication``), whose replicated rows every
            rank holds and serves locally.
        device: Where the ranks train: ``cpu``, or ``cuda`` (one GPU per rank
            under NCCL; GPUs shared by the ranks under gloo).
        backend: ``gloo`` or ``nccl`` (default: NCCL for a CUDA device, else gloo;
            :func:`~gnncore.distributed.training.train_distributed`).

    Returns:
        dict: What ``distributed.json`` holds, plus ``markdown``.
    """
    from gnncore.store import GraphDir

    graph_dir = Path(graph_dir).absolute()
    out = Path(out_dir).absolute()
    work = Path(work_dir).absolute() if work_dir is not None else out / "work"
    settings = list(settings or [Setting("default", tuple(fanouts), batch_size, mode)])
    nproc = _checked(nproc, partitioners, settings, epochs)
    graph = GraphDir.open(graph_dir)
    m = graph.manifest
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    partitions, plan = _partitions(
        graph_dir, work, nproc, partitioners, seed, grem_chunk, replication_rate
    )
    result: dict[str, Any] = {
        "graph_dir": str(graph_dir),
        "dataset": m.name,
        "num_nodes": int(m.num_nodes),
        "num_edges": int(m.num_canonical_edges),
        "num_features": int(m.num_features),
        "graph_bytes": _dir_bytes(graph_dir),
        "feature_bytes": int(m.num_nodes) * int(m.num_features) * 4,
        "epochs": epochs,
        "model": model,
        "seed": seed,
        "grem_chunk": grem_chunk,
        "replication_rate": replication_rate,
        "cpus": cpus,
        "device": device,
        "backend": backend or ("nccl" if device.startswith("cuda") else "gloo"),
        "gpu": _gpu_name(device),
        "prefetch_workers": prefetch_workers,
        "settings": [asdict(s) for s in settings],
        "partitions": partitions,
        "configs": [],
    }

    def save() -> None:
        (out / "distributed.json").write_text(json.dumps(result, indent=2, default=str) + "\n")

    common = {
        "graph_dir": str(graph_dir),
        "epochs": epochs,
        "model": model,
        "seed": seed,
        "timeout": timeout,
        "collective_timeout": collective_timeout,
        "device": device,
        "backend": backend,
        "prefetch_workers": prefetch_workers,
    }
    for setting in settings:
        for method, n in plan:
            key = f"{method}-p{n}"
            threads_here = threads or max(1, cpus // n)
            entry = _run_config(
                setting, method, n, partitions[key], common, runs, work, threads_here, timeout
            )
            result["configs"].append(entry)
            save()

    _compare(result)
    result["load_average"] = os.getloadavg()
    markdown = to_markdown(result)
    save()
    (out / "distributed.md").write_text(markdown + "\n")
    return {**result, "markdown": markdown}


def _checked(
    nproc: Sequence[int], partitioners: Sequence[str], settings: list[Setting], epochs: int
) -> list[int]:
    """The world sizes, sorted and distinct; ``ValueError`` for a setting refused."""
    from gnncore.partition.run import METHODS

    sizes = sorted({int(n) for n in nproc})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"--nproc must be positive integers; got {sizes}")
    bad = [p for p in partitioners if p not in METHODS]
    if bad:
        raise ValueError(f"unknown partitioners {bad}; choose from {', '.join(METHODS)}")
    if len({s.name for s in settings}) != len(settings):
        raise ValueError(f"settings need distinct names; got {[s.name for s in settings]}")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1; got {epochs}")
    return sizes


def _partitions(
    graph_dir: Path,
    work: Path,
    nproc: list[int],
    partitioners: Sequence[str],
    seed: int,
    grem_chunk: float,
    replication_rate: float,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, int]]]:
    """Every partition the configurations train on, by ``<method>-p<n>`` (an
    ``+hdr`` one adds its replication plan), and the ``(method, n)`` to run."""
    partitions: dict[str, dict[str, Any]] = {}
    plan: list[tuple[str, int]] = []
    for n in nproc:
        for method in [SINGLE] if n == 1 else list(partitioners):
            key = f"{method}-p{n}"
            partitions[key] = _partition(
                graph_dir, work, "random" if method == SINGLE else method, n, seed, grem_chunk
            )
            plan.append((method, n))
            if replication_rate > 0 and n > 1:
                hdr = f"{method}{HDR}-p{n}"
                partitions[hdr] = {
                    **partitions[key],
                    "replication_dir": _replication(
                        graph_dir, work, partitions[key]["dir"], key, replication_rate
                    ),
                }
                plan.append((f"{method}{HDR}", n))
    return partitions, plan


def _run_config(
    setting: Setting,
    method: str,
    n: int,
    partition: dict[str, Any],
    common: dict[str, Any],
    runs: Path,
    work: Path,
    threads: int,
    timeout: float,
) -> dict[str, Any]:
    """One configuration in its own process (``python -m gnncore_bench.distributed_child``):
    its spec, result and log under ``runs``; what it measured, or why not."""
    key = f"{method}-p{n}"
    name = f"{setting.name}-{key}"
    spec = {
        **common,
        "partition_dir": partition["dir"],
        "replication_dir": partition.get("replication_dir"),
        "ranks_dir": str(work / "ranks" / key),
        "nproc": n,
        "mode": setting.mode,
        "fanouts": list(setting.fanouts),
        "batch_size": setting.batch_size,
    }
    spec_path, result_path, log_path = (
        runs / f"{name}{s}" for s in (".spec.json", ".json", ".log")
    )
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    result_path.unlink(missing_ok=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [sys.executable, "-m", CHILD, str(spec_path), str(result_path)]
    _log(f"{name}: {setting.mode}, fanouts {setting.fanouts}, batch {setting.batch_size}")
    started = time.perf_counter()
    entry: dict[str, Any] = {
        "setting": setting.name,
        "mode": setting.mode,
        "fanouts": list(setting.fanouts),
        "batch_size": setting.batch_size,
        "partitioner": method,
        "nproc": n,
        "threads_per_rank": threads,
        "edge_cut_fraction": partition["edge_cut_fraction"] if n > 1 else 0.0,
    }
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout + 60
            )
        status = "ok" if proc.returncode == 0 and result_path.is_file() else "failed"
    except subprocess.TimeoutExpired:
        status = "timed out"
    entry["status"] = status
    entry["process_wall_s"] = time.perf_counter() - started
    if status == "ok":
        raw = json.loads(result_path.read_text())
        entry.update(_summarise(raw, work / "ranks" / key))
        _log(
            f"{name}: epoch {entry['epoch_s']:.2f} s, remote rows/epoch "
            f"{entry['remote_rows_per_epoch']:,.0f} (share {entry['remote_share']:.3f})"
        )
    else:
        entry["error"] = _tail(log_path)
        _log(f"{name}: {status}\n{entry['error']}")
    return entry


def _gpu_name(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(torch.device(device)) if torch.cuda.is_available() else None


def _compare(result: dict[str, Any]) -> None:
    """Each configuration's remote rows against ``random``'s (same setting and
    world size): ``remote_rows_vs_random``; and ``metis_vs_random`` per setting
    and world size."""
    by_key = {
        (c["setting"], c["nproc"], c["partitioner"]): c
        for c in result["configs"]
        if c.get("status") == "ok"
    }
    ratios: dict[str, dict[str, float | None]] = {}
    for (setting, n, method), c in by_key.items():
        base = by_key.get((setting, n, "random"))
        c["remote_rows_vs_random"] = (
            c["remote_rows_per_epoch"] / base["remote_rows_per_epoch"]
            if base and base["remote_rows_per_epoch"]
            else None
        )
        if method != "random" and n > 1:
            ratios.setdefault(setting, {})[f"{method}_p{n}"] = c["remote_rows_vs_random"]
    result["remote_rows_vs_random"] = ratios


__all__ = ["MODES", "Setting", "bench_distributed", "to_markdown"]
