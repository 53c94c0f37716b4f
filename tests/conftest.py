"""Shared fixtures: small graphs written in the on-disk format, dataset paths."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gnncore.store import create_graph_dir

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATASETS = SHARED / "datasets"

#: The longest files, longest first: the browser files (about 10 minutes each under
#: ``make test``), then by the serial ``--durations`` run of the other files (seconds,
#: docs/TESTING.md). Under pytest-xdist's ``--dist loadfile`` a file runs whole on one
#: worker, handed out in collection order: starting these first keeps one of them from
#: ending the run alone on one worker while the other idles. tests/test_longest_files.py
#: checks that every entry names a file.
LONGEST_FILES = (
    "tests/ui/test_tutorial.py",
    "tests/ui/test_ui_browser.py",
    "tests/pipelines/test_daemon.py",
    "tests/gnncore/distributed/test_distributed_launch.py",
    "tests/gnncore_bench/test_distributed_bench.py",
    "tests/gnncore_bench/test_bench_outofcore.py",
    "tests/assets/test_distributed_pipes.py",
    "tests/gnncore/distributed/test_distributed_training.py",
    "tests/gnncore_bench/test_chain_bench.py",
    "tests/gnncore/train/test_link_training.py",
    # New this session (seconds under load 14-18, not yet in a serial --durations run).
    "tests/assets/test_memory_budget_assets.py",
    "tests/assets/test_auto_mode_asset.py",
    "tests/gnncore_bench/test_external_partitioner.py",
    "tests/gnncore/train/test_layerwise_evaluation.py",
    "tests/pipelines/test_postgres_profile.py",
    "tests/gnncore/train/test_train_checkpoint.py",
    "tests/gnncore/distributed/test_distributed_feature_store.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """On an xdist worker: one intra-op thread for torch and OpenMP, in this process and
    the CLI/torchrun processes it starts (two workers on two cores already use both; more
    threads per worker only contend). A value already set in the environment wins."""
    if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the files of ``LONGEST_FILES`` first (in that order), each file's tests
    kept in their own order; a plain run keeps pytest's order."""
    if not (os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("numprocesses", None)):
        return
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _own_data_root_and_dagster_home(tmp_path_factory: pytest.TempPathFactory):
    """A data root and a DAGSTER_HOME of this session's (each xdist worker's) own, so that
    nothing a test leaves under the defaults (``make``'s ``./data``, ``.dagster_home``)
    is shared between workers or left in the checkout."""
    base = tmp_path_factory.mktemp("session")
    (base / "dagster_home").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNCORE_DATA_ROOT", str(base / "data"))
        mp.setenv("DAGSTER_HOME", str(base / "dagster_home"))
        yield


#: Test files whose Python subprocesses run code that runs nowhere else (torchrun ranks:
#: gnncore.distributed's sources, samplers, feature store; the bench harness's Dagster and
#: distributed children). Under pytest-cov their subprocesses are measured too
#: (:func:`_measure_python_subprocesses`; test_distributed_training.py alone: 635 more
#: lines measured, pytest's CPU with its children 80 -> 100 s); elsewhere a measured
#: child costs about 50% more CPU (a ``gnncore synth`` of 20k nodes: 0.9 -> 1.3 s) for
#: lines the tests measure in-process anyway. ``GNNCORE_COVER_SUBPROCESSES=all``
#: measures every file's children, ``=none`` none.
SUBPROCESS_COVERAGE_FILES = (
    "tests/gnncore/distributed/test_distributed_launch.py",
    "tests/gnncore/distributed/test_distributed_training.py",
    "tests/gnncore/distributed/test_distributed_feature_store.py",
    "tests/gnncore_bench/test_distributed_bench.py",
    "tests/gnncore_bench/test_chain_bench.py",
)


@pytest.fixture(scope="session")
def _subprocess_coverage_config() -> str | None:
    """The coverage settings a measured child starts with (``COVERAGE_PROCESS_CONFIG``),
    or ``None`` when this process is not measured by pytest-cov.

    This is coverage's ``patch = subprocess`` done by hand, in the pytest process that
    measures (each xdist worker, or a plain run), not in xdist's controller: the patch
    set there reaches the workers, which then start a second, discarded measurement at
    start-up (user CPU 51 -> 71 s on a ``-n 2`` run of four files). A child started with
    it starts coverage from coverage's ``.pth`` file with this process's settings
    (``source``, the absolute data file) and writes a parallel data file of its own
    beside it, which pytest-cov combines at the end. A child that ends with ``os._exit``
    or a signal (killed ranks, servers) writes none."""
    try:
        from coverage import Coverage
    except ImportError:  # pragma: no cover - coverage is a test dependency
        return None
    current = Coverage.current()
    if current is None:
        return None
    import copy

    config = copy.copy(current.config)
    config.parallel = True  # a data file per child, never the one the run combines into
    # Ranks fork from a fork server and end with os._exit: a data file of their own
    # after the fork, saved at os._exit.
    config.patch = sorted({*config.patch, "_exit", "fork"})
    return str(config.serialize())


@pytest.fixture(scope="session", autouse=True)
def _measured_rank_server(_subprocess_coverage_config: str | None):
    """Start the fork server that ``spawn_local``'s ranks fork from at the session's
    start, measured when this process is: it serves every later launch of the
    session, so which file's launch came first on this worker must not decide
    whether the ranks are measured."""
    unmeasured = os.environ.get("GNNCORE_COVER_SUBPROCESSES") == "none"
    if _subprocess_coverage_config is None or unmeasured:
        yield
        return
    from gnncore.distributed.launch.forked import start_rank_server

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COVERAGE_PROCESS_CONFIG", _subprocess_coverage_config)
        start_rank_server()
    yield


@pytest.fixture(scope="module", autouse=True)
def _measure_python_subprocesses(
    request: pytest.FixtureRequest, _subprocess_coverage_config: str | None
):
    """Measure the Python subprocesses of the test files in ``SUBPROCESS_COVERAGE_FILES``
    (see ``GNNCORE_COVER_SUBPROCESSES``) when pytest-cov measures this process. Module
    scope, so that the file's module fixtures (ranks started once per file) see it."""
    choice = os.environ.get("GNNCORE_COVER_SUBPROCESSES", "listed")
    listed = request.node.nodeid.split("::")[0] in SUBPROCESS_COVERAGE_FILES
    wanted = choice == "all" or (choice == "listed" and listed)
    if _subprocess_coverage_config is None or not wanted or "COVERAGE_PROCESS_CONFIG" in os.environ:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COVERAGE_PROCESS_CONFIG", _subprocess_coverage_config)
        yield


def _forget_a_dead_dagster_instance_context() -> None:
    """Forget a Dagster definitions-state storage whose instance is gone.

    Entering a ``DagsterInstance`` sets a context variable that Definitions loading
    reads (``DefsStateStorage.get()``); one left set after its instance was
    collected made a later ``dg.materialize`` on the same worker fail with
    "Attempted to resolve undefined DagsterInstance weakref" (a fresh-clone run at
    703b16a). Only looked at once something imported dagster."""
    import sys

    base = sys.modules.get("dagster._core.storage.defs_state.base")
    current = getattr(base, "_current_storage", None)
    storage = current.get() if current is not None else None
    ref = getattr(storage, "_instance_weakref", None)
    if current is not None and ref is not None and ref() is None:
        current.set(None)


@pytest.fixture(autouse=True)
def _no_dead_dagster_instance_context():
    """:func:`_forget_a_dead_dagster_instance_context` before and after each test."""
    _forget_a_dead_dagster_instance_context()
    yield
    _forget_a_dead_dagster_instance_context()


@contextlib.contextmanager
def one_intra_op_thread() -> Iterator[None]:
    """Torch at one intra-op thread inside the block, as the subprocesses the tests
    start run (``OMP_NUM_THREADS=1``): a run that compares exactly against one of
    them can go in the test's own process, without an interpreter that imports
    torch, PyG and MLflow again (about 9 s CPU)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def require_dataset(*parts: str) -> Path:
    """Path under ../shared/datasets, or skip the test saying why."""
    path = DATASETS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"dataset {path} is absent (it lives in ../shared beside the repo)")
    return path


def planted_graph(
    out: Path,
    num_nodes: int = 400,
    communities: int = 4,
    degree: int = 8,
    features: int = 16,
    seed: int = 0,
    noise: float = 0.8,
) -> Path:
    """A small undirected planted-partition graph with features, labels, splits."""
    rng = np.random.default_rng(seed)
    community = np.arange(num_nodes) % communities
    m = num_nodes * degree // 2
    src = rng.integers(0, num_nodes, m)
    same = rng.random(m) < 0.9
    other = rng.integers(0, num_nodes // communities, m) * communities + community[src]
    dst = np.where(same, np.minimum(other, num_nodes - 1), rng.integers(0, num_nodes, m))
    keep = src != dst
    u, v = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    key = np.unique(u * num_nodes + v)
    x = np.eye(communities, features, dtype=np.float32)[community]
    x += noise * rng.standard_normal((num_nodes, features)).astype(np.float32)
    perm = rng.permutation(num_nodes)
    n_train, n_val = num_nodes // 5, num_nodes // 5
    with create_graph_dir(out, name="planted") as w:
        w.write_topology(num_nodes, key // num_nodes, key % num_nodes, directed=False)
        w.save_array("features", x)
        w.save_array("labels", community.astype(np.int64))
        w.num_features, w.num_classes = features, communities
        w.save_splits(perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :])
    return out


def opens_direct(directory: Path) -> bool:
    """Whether ``directory``'s file system opens files with ``O_DIRECT`` (tmpfs
    and some overlays refuse it)."""
    probe = directory / ".direct-probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644))
    except (AttributeError, OSError):
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def resident_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache (``mincore`` over a map of it)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]  # fmt: skip
    size = path.stat().st_size
    vec = (ctypes.c_ubyte * (-(-size // mmap.PAGESIZE)))()
    with open(path, "rb") as f:
        ptr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
    if ptr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
    try:
        if libc.mincore(ctypes.c_void_p(ptr), ctypes.c_size_t(size), vec) != 0:
            raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
    finally:
        libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))
    return sum(v & 1 for v in vec)


@pytest.fixture
def direct_io(tmp_path: Path) -> None:
    """Skips the test unless ``tmp_path``'s filesystem opens files with ``O_DIRECT``
    (:func:`opens_direct`) and ``GNNCORE_DIRECT_WRITE=0`` does not switch it off."""
    from gnncore.store.direct_write import direct_write_enabled

    if not direct_write_enabled():
        pytest.skip("direct I/O is switched off or missing on this platform")
    if not opens_direct(tmp_path):
        pytest.skip("this filesystem has no O_DIRECT")


@pytest.fixture
def refuse_direct_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.open`` refuses ``O_DIRECT`` with EINVAL, as tmpfs and some overlays answer
    (the direct-write and direct-read tests of ``gnncore.store``)."""
    real_open = os.open

    def no_direct(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct)


@pytest.fixture
def small_graph(tmp_path: Path) -> Path:
    """A 400-node, 4-community graph directory."""
    return planted_graph(tmp_path / "graph")


def tiny_kg(
    out: Path,
    entities: int = 80,
    communities: int = 8,
    relations: int = 3,
    triples: int = 1600,
    seed: int = 0,
) -> Path:
    """A knowledge graph directory (ingested from generated ``train/valid/test.txt``)
    in which relation ``r`` joins community ``c`` to community ``(c + r + 1) % C``:
    a model that learns the relations ranks the right community first."""
    from gnncore.io import ingest

    rng = np.random.default_rng(seed)
    head = rng.integers(0, entities, triples)
    rel = rng.integers(0, relations, triples)
    target_community = (head % communities + rel + 1) % communities
    tail = rng.integers(0, entities // communities, triples) * communities + target_community
    lines = [f"e{h}\tr{r}\te{t}" for h, r, t in zip(head, rel, tail)]
    raw = out.parent / f"{out.name}-raw"
    raw.mkdir(parents=True, exist_ok=True)
    cut_valid, cut_test = int(triples * 0.8), int(triples * 0.9)
    for name, part in (
        ("train", lines[:cut_valid]),
        ("valid", lines[cut_valid:cut_test]),
        ("test", lines[cut_test:]),
    ):
        (raw / f"{name}.txt").write_text("\n".join(part) + "\n")
    ingest(raw, out, format="kg", name="tiny-kg")
    return out


def assert_batch_matches_graph(batch, graph, train) -> None:
    """A NodeLoader batch over ``graph`` is consistent with it: the seeds come
    first, the features are the sampled nodes' rows, and every edge is the CSR
    entry its ``e_id`` names (source = ``indices[e_id]``, in the target's row)."""
    x = np.asarray(graph.features())
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    n_id = batch.n_id.numpy()
    np.testing.assert_array_equal(n_id[: batch.batch_size], train[batch.input_id].numpy())
    np.testing.assert_array_equal(batch.x.numpy(), x[n_id])
    e_id = batch.e_id.numpy()
    np.testing.assert_array_equal(indices[e_id], n_id[batch.edge_index[0].numpy()])
    dst = n_id[batch.edge_index[1].numpy()]
    assert np.all((indptr[dst] <= e_id) & (e_id < indptr[dst + 1]))


def assert_same_predictions(got: pa.Table, expected: pa.Table) -> None:
    """Two ``predictions.parquet`` tables hold the same predictions: every column
    equal, the probabilities within float tolerance (a partitioned store's
    order projects the layers that narrow before aggregating, which sums in
    another order: ``gnncore.train.core.projected``)."""
    assert got.column_names == expected.column_names
    for column in got.column_names:
        if column == "probabilities":
            a = np.array(got[column].to_pylist(), dtype=np.float32)
            b = np.array(expected[column].to_pylist(), dtype=np.float32)
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        else:
            assert got[column].equals(expected[column]), column
