"""The typed interface of ``gnncore._C``: shipped stubs, options classes, result classes."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import gnncore
from gnncore import _C
from gnncore.partition.edge_stream import EdgeFile

OPTIONS = (
    "GremBisectOptions",
    "FennelOptions",
    "ByteGnnAssignOptions",
    "SplitBalanceOptions",
    "EdgeFileSpec",
)
RESULTS = (
    "GremBisectResult",
    "GremChunkLocal",
    "GremClusterEdges",
    "ByteGnnBlocks",
    "SplitBalanceResult",
)


def _stub(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.setdefault(node.name, node)
    return names


@pytest.fixture(scope="module")
def installed_stub() -> Path:
    return Path(_C.__file__).with_name("_C.pyi")


def test_stub_is_installed_next_to_the_extension(installed_stub):
    assert installed_stub.is_file(), f"no stub at {installed_stub}"
    names = _top_level(_stub(installed_stub))
    for cls in OPTIONS + RESULTS:
        assert isinstance(names.get(cls), ast.ClassDef), f"{cls} missing from the stub"


def test_stub_is_where_type_checkers_resolve_the_package(installed_stub):
    # An editable install keeps gnncore/ in the source tree and _C in site-packages;
    # type checkers resolve gnncore to the former, so the stub must be there too.
    package = Path(gnncore.__file__).parent
    assert (package / "_C.pyi").is_file()
    assert (package / "py.typed").is_file()
    assert (package / "_C.pyi").read_text() == installed_stub.read_text()


def test_stub_declares_every_public_name_of_the_module(installed_stub):
    names = _top_level(_stub(installed_stub))
    public = {n for n in dir(_C) if not n.startswith("_")}
    assert public <= set(names), f"not in the stub: {sorted(public - set(names))}"


def test_stub_signatures_use_the_options_and_result_classes(installed_stub):
    names = _top_level(_stub(installed_stub))
    bisect = names["grem_bisect"]
    assert isinstance(bisect, ast.FunctionDef)
    assert [a.arg for a in bisect.args.args] == [
        "file",
        "members",
        "seed_nodes",
        "seed_sides",
        "options",
    ]
    assert ast.unparse(bisect.args.args[-1].annotation) == "GremBisectOptions"
    assert ast.unparse(bisect.returns) == "GremBisectResult"
    options = names["GremBisectOptions"]
    assert isinstance(options, ast.ClassDef)
    init = next(n for n in options.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.kwonlyargs] == [
        "num_nodes",
        "chunk_rows",
        "capacities",
        "weights",
        "refine",
        "passes",
        "out_paths",
    ]
    capacities = next(
        n for n in options.body if isinstance(n, ast.FunctionDef) and n.name == "capacities"
    )
    assert ast.unparse(capacities.returns) == "tuple[int, int]"


BAD_OPTIONS = [
    (
        _C.GremBisectOptions,
        {"num_nodes": -1, "chunk_rows": 1, "capacities": (1, 1)},
        "GremBisectOptions.num_nodes must be >= 0, got -1",
    ),
    (
        _C.GremBisectOptions,
        {"num_nodes": 4, "chunk_rows": 0, "capacities": (2, 2)},
        "GremBisectOptions.chunk_rows must be >= 1, got 0",
    ),
    (
        _C.GremBisectOptions,
        {"num_nodes": 4, "chunk_rows": 1, "capacities": (2, -2)},
        r"GremBisectOptions.capacities\[1\] must be >= 0, got -2",
    ),
    (
        _C.GremBisectOptions,
        {"num_nodes": 4, "chunk_rows": 1, "capacities": (2, 2), "weights": (0, 1)},
        r"GremBisectOptions.weights\[0\] must be >= 1, got 0",
    ),
    (
        _C.GremBisectOptions,
        {"num_nodes": 4, "chunk_rows": 1, "capacities": (2, 2), "passes": -1},
        "GremBisectOptions.passes must be in",
    ),
    (
        _C.FennelOptions,
        {"parts": 0, "capacity": 4, "alpha": 1.0},
        "FennelOptions.parts must be >= 1",
    ),
    (
        _C.FennelOptions,
        {"parts": 2, "capacity": 4, "alpha": float("nan")},
        "FennelOptions.alpha must be a finite number >= 0, got nan",
    ),
    (
        _C.FennelOptions,
        {"parts": 2, "capacity": 4, "alpha": 1.0, "gamma": 0.5},
        "FennelOptions.gamma must be a finite number >= 1, got 0.5",
    ),
    (_C.ByteGnnAssignOptions, {"parts": 2, "capacity": -1}, "ByteGnnAssignOptions.capacity"),
    (
        _C.ByteGnnAssignOptions,
        {"parts": 2, "capacity": 4, "weights": (1.0, -1.0, 1.0)},
        r"ByteGnnAssignOptions.weights\[1\] must be a finite number >= 0",
    ),
    (
        _C.SplitBalanceOptions,
        {"parts": 2, "lo": (1, 2, 3), "hi": (1, 1, 3), "capacity": 4},
        r"SplitBalanceOptions.hi\[1\] must be >= lo\[1\], got 1",
    ),
    (
        _C.EdgeFileSpec,
        {"path": "x", "offset": -8, "int64": False, "rows": 1},
        "EdgeFileSpec.offset must be >= 0, got -8",
    ),
]


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    BAD_OPTIONS,
    ids=[m.split(" must")[0].replace("\\", "") for *_, m in BAD_OPTIONS],
)
def test_bad_option_values_name_the_field(cls, kwargs, message):
    if cls is _C.EdgeFileSpec:
        path = kwargs.pop("path")
        with pytest.raises(ValueError, match=message):
            cls(path, **kwargs)
    else:
        with pytest.raises(ValueError, match=message):
            cls(**kwargs)


def test_options_are_keyword_only_and_typed():
    with pytest.raises(TypeError):
        _C.GremBisectOptions(4, 1, (2, 2))  # type: ignore[misc]
    with pytest.raises(TypeError):
        _C.GremBisectOptions(num_nodes=4, chunk_rows=1, capacities=(2, 2, 2))
    options = _C.GremBisectOptions(num_nodes=4, chunk_rows=3, capacities=(2, 3))
    assert (options.weights, options.refine, options.passes, options.out_paths) == (
        (1, 1),
        True,
        0,
        ("", ""),
    )
    options.capacities = (5, 6)
    assert options.capacities == (5, 6)
    assert "capacities=(5, 6)" in repr(options)
    fennel = _C.FennelOptions(parts=2, capacity=3, alpha=0.5, seed=-1)
    assert fennel.seed == 2**64 - 1  # any int, reduced modulo 2**64


def test_fields_set_after_construction_are_checked_on_use(tmp_path):
    pairs = np.array([[0, 1], [1, 2], [2, 3]], dtype=np.int64)
    np.save(tmp_path / "e.npy", pairs)
    edges = EdgeFile.from_npy(tmp_path / "e.npy")
    members = np.arange(4, dtype=np.int64)
    options = _C.GremBisectOptions(num_nodes=4, chunk_rows=1, capacities=(2, 2))
    seeds = (np.array([0, 1], dtype=np.int64), np.array([0, 1], dtype=np.int64))
    result = _C.grem_bisect(edges.spec(), members, *seeds, options)
    assert isinstance(result, _C.GremBisectResult)
    assert result.side.dtype == np.int8 and result.side.shape == (4,)
    assert sum(result.sizes) == 4 and result.num_chunks == 3
    options.chunk_rows = 0
    with pytest.raises(ValueError, match="GremBisectOptions.chunk_rows must be >= 1, got 0"):
        _C.grem_bisect(edges.spec(), members, *seeds, options)
    fennel = _C.FennelOptions(parts=2, capacity=4, alpha=0.5)
    fennel.gamma = 0.0
    indptr = np.array([0, 1, 2], dtype=np.int64)
    with pytest.raises(ValueError, match="FennelOptions.gamma"):
        _C.fennel_partition(indptr, np.array([1, 0], dtype=np.int64), fennel)


def test_result_arrays_outlive_their_result():
    blocks = _C.bytegnn_blocks(
        np.array([0, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int64), np.array([0]), 1
    )
    block = blocks.block
    del blocks
    assert block.tolist() == [0, 0]
