"""One line for every bad file: ``.npy`` headers numpy cannot parse, corrupt
offsets, ids and splits are refused with one :class:`InputError` naming the
file (and the row) by ``validate`` and by every verb that reads a graph,
before its work starts (``GraphDir.check_structure``)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.store import GraphDir, create_graph_dir
from gnncore.store import graph_dir as graph_dir_module


@pytest.fixture(scope="module")
def clean_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound 400-node graph with features, labels and splits (copied per test)."""
    return planted_graph(tmp_path_factory.mktemp("structure") / "graph")


@pytest.fixture
def graph(clean_graph: Path, tmp_path: Path) -> Path:
    """A private copy of the sound graph, free to corrupt."""
    return Path(shutil.copytree(clean_graph, tmp_path / "graph"))


def edit(graph: Path, name: str, change: Callable[[np.ndarray], None]) -> Path:
    """Rewrite ``name.npy`` of ``graph`` after ``change`` (same dtype, shape and
    size, so the manifest's checks pass: only the values are wrong)."""
    file = graph / f"{name}.npy"
    array = np.load(file)
    change(array)
    np.save(file, array)
    return file


def cut_header(file: Path) -> None:
    """Drop the header's closing brace: numpy's parser then fails with
    ``tokenize.TokenError`` ("EOF in multi-line statement"), same file size."""
    data = bytearray(file.read_bytes())
    data[data.index(b"}")] = ord(" ")
    file.write_bytes(bytes(data))


def one_error_line(capsys: pytest.CaptureFixture[str], verb: str) -> str:
    """The single line the failed verb printed on stderr."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gnncore {verb}: error: "), err
    return lines[0]


def train_args(graph: Path, root: Path) -> list[str]:
    return [
        "train",
        str(graph),
        "--epochs",
        "1",
        "--hidden",
        "8",
        "--device",
        "cpu",
        "--no-progress",
        "--data-root",
        str(root),
    ]


# Malformed headers -------------------------------------------------------------


@pytest.mark.parametrize("verb", ["validate", "train"])
@pytest.mark.parametrize("name", ["labels", "indices"])
def test_malformed_npy_header_is_one_line_naming_the_file(
    graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, name: str
) -> None:
    cut_header(graph / f"{name}.npy")
    args = ["validate", str(graph)] if verb == "validate" else train_args(graph, tmp_path / "root")
    assert main(args) == 1
    line = one_error_line(capsys, verb)
    assert f"{graph / name}.npy: not a valid .npy file" in line
    assert "EOF in multi-line statement" in line
    assert not (tmp_path / "root").exists()  # refused before MLflow or checkpoints


# Which file validate blames --------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "row", "problem"),
    [
        (lambda a: a.__setitem__(slice(5, 7), a[5:7][::-1].copy()), 6, "below the previous row's"),
        (lambda a: a.__setitem__(0, 1), 0, "first offset is 1, not 0"),
        (lambda a: a.__setitem__(-1, a[-1] - 1), 400, "last offset is"),
    ],
    ids=["decreasing", "first", "last"],
)
def test_validate_blames_a_corrupt_indptr_on_indptr(
    graph: Path, capsys: pytest.CaptureFixture[str], change, row: int, problem: str
) -> None:
    edit(graph, "indptr", change)
    assert main(["validate", str(graph)]) == 1
    line = one_error_line(capsys, "validate")
    assert line.startswith(f"gnncore validate: error: {graph / 'indptr.npy'}: row {row}: ")
    assert problem in line


# Corrupt values: train refuses them before training ------------------------------


def _out_of_range_index(a: np.ndarray) -> None:
    a[10] = 10**6


def _decreasing_indptr(a: np.ndarray) -> None:
    a[5], a[6] = a[6], a[5]


def _train_id_out_of_range(a: np.ndarray) -> None:
    a[3] = 400


def _train_id_negative(a: np.ndarray) -> None:
    a[3] = -1


def _train_id_repeated(a: np.ndarray) -> None:
    a[7] = a[2]


CORRUPTIONS = {
    "index-out-of-range": ("indices", _out_of_range_index, "row 1: node id 1000000"),
    "decreasing-indptr": ("indptr", _decreasing_indptr, "row 6: offset"),
    "train-id-out-of-range": ("train_idx", _train_id_out_of_range, "row 3: node id 400 is outside"),
    "train-id-negative": ("train_idx", _train_id_negative, "row 3: node id -1 is outside"),
    "train-id-repeated": ("train_idx", _train_id_repeated, "row 7: node"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_train_refuses_corrupt_values_in_one_line_before_training(
    graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    name, change, where = CORRUPTIONS[case]
    edit(graph, name, change)
    root = tmp_path / "root"
    assert main(train_args(graph, root)) == 1
    line = one_error_line(capsys, "train")
    assert f"{graph / name}.npy: {where}" in line
    assert not root.exists()  # no MLflow run, no checkpoint: nothing started


# Every verb that reads a graph -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the verbs read besides the graph, made from the sound graph: a
    partition and a registered model (a corrupt copy of the graph still matches
    both, since its manifest is unchanged)."""

    partition: Path
    tracking_uri: str
    model: str


@pytest.fixture(scope="module")
def inputs(clean_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    from gnncore.modes import RunRecording, train_graph_dir
    from gnncore.partition import partition_graph
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
    from gnncore.tracking.registry import ModelRegistry, registered_model_name
    from gnncore.train import NodeTrainConfig

    base = tmp_path_factory.mktemp("inputs")
    partition_graph(clean_graph, base / "partition", method="random", parts=2)
    uri = default_tracking_uri(base / "root")
    config = NodeTrainConfig(hidden=8, epochs=1, batch_size=64, device="cpu")
    result = train_graph_dir(
        clean_graph, config, recording=RunRecording(tracking=MlflowTracker(uri), progress=False)
    )
    registry = ModelRegistry(uri)
    name = registered_model_name("node", GraphDir.open(clean_graph).manifest.name)
    registry.promote(registry.register(name, str(result.model_uri), str(result.run_id)))
    return Inputs(base / "partition", uri, f"models:/{name}@production")


def verb_args(verb: str, graph: Path, tmp: Path, inputs: Inputs) -> list[str]:
    """A command line of ``verb`` on ``graph`` that succeeds on the sound graph."""
    out, part = str(tmp / "out"), str(inputs.partition)
    return {
        "validate": ["validate", str(graph)],
        "partition": ["partition", str(graph), out, "--parts", "2", "--method", "random"],
        "store": ["store", str(graph), part, out, "--no-progress"],
        "ranks": ["ranks", str(graph), part, out],
        "plan-placement": ["plan", "placement", str(graph), out, "--no-progress"],
        "plan-replication": ["plan", "replication", str(graph), part, out, "--no-progress"],
        "train": train_args(graph, tmp / "root"),
        "predict": [
            "predict",
            str(graph),
            out,
            "--model",
            inputs.model,
            "--mlflow-uri",
            inputs.tracking_uri,
            "--device",
            "cpu",
            "--no-progress",
        ],
    }[verb]


VERBS = [
    "validate",
    "partition",
    "store",
    "ranks",
    "plan-placement",
    "plan-replication",
    "train",
    "predict",
]


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_runs_on_the_sound_graph(
    graph: Path, tmp_path: Path, inputs: Inputs, verb: str
) -> None:
    """The command lines below are sound: only the corruption makes them fail."""
    assert main(verb_args(verb, graph, tmp_path, inputs)) == 0


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("case", ["index-out-of-range", "train-id-repeated"])
def test_every_verb_refuses_a_corrupt_array_naming_file_and_row(
    graph: Path,
    tmp_path: Path,
    inputs: Inputs,
    capsys: pytest.CaptureFixture[str],
    verb: str,
    case: str,
) -> None:
    name, change, where = CORRUPTIONS[case]
    edit(graph, name, change)
    assert main(verb_args(verb, graph, tmp_path, inputs)) == 1
    line = one_error_line(capsys, verb.split("-")[0])
    assert f"{graph / name}.npy: {where}" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "root").exists()


# check_structure, case by case ------------------------------------------------------


def write_small(out: Path, **extra: np.ndarray) -> Path:
    """A 6-node undirected graph with labels (class 2 unused) and splits."""
    with create_graph_dir(out, name="small") as w:
        src, dst = np.array([0, 0, 1, 2, 3, 4]), np.array([1, 2, 3, 3, 4, 5])
        w.write_topology(6, src, dst, directed=False)
        w.save_array("labels", np.array([0, 1, 1, 0, -1, 1]))
        w.num_classes = 3
        w.save_splits([0, 1], [2], [3, 5])
        for name, array in extra.items():
            w.save_array(name, array)
    return out


@pytest.mark.parametrize(
    ("name", "change", "row", "problem"),
    [
        ("indptr", lambda a: a.__setitem__(0, -1), 0, "first offset is -1, not 0"),
        ("indptr", lambda a: a.__setitem__(3, a[4] + 1), 4, "below the previous row's"),
        ("indptr", lambda a: a.__setitem__(6, a[6] + 1), 6, "last offset is 13, not 12"),
        ("indices", lambda a: a.__setitem__(5, 6), 2, "node id 6 (entry 5) is outside [0, 6)"),
        ("indices", lambda a: a.__setitem__(11, -3), 5, "node id -3 (entry 11)"),
        ("eid", lambda a: a.__setitem__(4, 6), 4, "edge id 6 is outside [0, 6)"),
        ("edges_shuffled", lambda a: a.__setitem__((2, 0), a[2, 1]), 2, "is not u < v"),
        ("edges_shuffled", lambda a: a.__setitem__((3, 1), 6), 3, "is not u < v"),
        ("labels", lambda a: a.__setitem__(2, 3), 2, "label 3 is outside [0, 3)"),
        ("labels", lambda a: a.__setitem__(2, -2), 2, "label -2 is outside"),
        ("val_idx", lambda a: a.__setitem__(0, 6), 0, "node id 6 is outside [0, 6)"),
        ("test_idx", lambda a: a.__setitem__(1, 3), 1, "node 3 is repeated"),
        ("test_idx", lambda a: a.__setitem__(0, 1), 0, "node 1 is also in another split"),
        ("test_idx", lambda a: a.__setitem__(1, 4), 1, "split holds node 4, which is unlabelled"),
    ],
)
def test_check_structure_names_file_and_row(
    tmp_path: Path, name: str, change, row: int, problem: str
) -> None:
    g = write_small(tmp_path / "g")
    GraphDir.open(g).check_structure()  # sound before the edit
    edit(g, name, change)
    with pytest.raises(InputError) as caught:
        GraphDir.open(g).check_structure()
    error = caught.value
    assert (error.path, error.row) == (g / f"{name}.npy", row)
    assert problem in error.problem
    with pytest.raises(InputError) as again:  # validate runs the same check first
        GraphDir.open(g).validate()
    assert str(again.value) == str(error)


def test_check_structure_checks_triples(tmp_path: Path) -> None:
    triples = np.array([[0, 0, 1], [2, 0, 3], [4, 0, 5]], dtype=np.int64)
    g = write_small(tmp_path / "g", train_triples=triples)
    GraphDir.open(g).check_structure()
    edit(g, "train_triples", lambda a: a.__setitem__((1, 2), 9))
    with pytest.raises(InputError, match=r"train_triples\.npy: row 1: triple \(2, 0, 9\)"):
        GraphDir.open(g).check_structure()


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 22])
def test_blockwise_checks_find_what_whole_array_checks_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """check_structure reads arrays in blocks of CHECK_ENTRIES entries: whatever
    the block size (corruption at a block boundary included), it names the row
    a whole-array reference names."""
    g = planted_graph(tmp_path / "g", num_nodes=60, degree=4, features=4)
    monkeypatch.setattr(graph_dir_module, "CHECK_ENTRIES", block)
    GraphDir.open(g).check_structure()
    clean = {name: np.load(g / f"{name}.npy") for name in ("indptr", "indices", "train_idx")}
    rng = np.random.default_rng(block)
    for _ in range(12):
        name = str(rng.choice(list(clean)))
        bad = clean[name].copy()
        spot = int(rng.integers(1, len(bad) - 1))
        if name == "indptr":
            bad[spot] = bad[spot - 1] - 1  # decreases at `spot`
            expected = int(np.flatnonzero(bad[1:] < bad[:-1])[0]) + 1
        elif name == "indices":
            bad[spot] = 60 + spot
            expected = int(np.searchsorted(clean["indptr"], spot, side="right")) - 1
        else:
            bad[spot] = bad[spot - 1]  # repeats the row before
            expected = spot
        np.save(g / f"{name}.npy", bad)
        with pytest.raises(InputError) as caught:
            GraphDir.open(g).check_structure()
        assert (caught.value.path, caught.value.row) == (g / f"{name}.npy", expected)
        np.save(g / f"{name}.npy", clean[name])


def test_check_structure_runs_once_per_graph_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verbs and the library functions they call both check: the second
    call on the same object reads nothing."""
    g = GraphDir.open(write_small(tmp_path / "g"))
    g.check_structure()
    reads: list[str] = []
    real = graph_dir_module.npy_blocks

    def recording(path: Path, rows: int):
        reads.append(Path(path).name)
        return real(path, rows)

    monkeypatch.setattr(graph_dir_module, "npy_blocks", recording)
    g.check_structure()
    assert reads == []
    GraphDir.open(g.path).check_structure()  # a new object checks again
    assert {"indptr.npy", "indices.npy", "train_idx.npy"} <= set(reads)
