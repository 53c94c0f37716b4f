"""Hypothesis over the ``.npy`` readers (:mod:`gnncore.store.npy`) and the graph
directory reader on top of them: valid arrays round-trip through every reader;
a corrupt header, a truncated file or a header that lies about the dtype or the
shape raises :class:`InputError` naming the file, and never anything else.

Bounded and derandomized, so it runs in ``make test`` in a few seconds."""

from __future__ import annotations

import io
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gnncore.errors import InputError
from gnncore.store import GraphDir, create_graph_dir
from gnncore.store.npy import inspect_npy, load_npy, npy_blocks, read_npy_header

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

DTYPES = ["<i1", "<i2", "<i4", "<i8", "<u1", "<u4", "<u8", "<f4", "<f8", ">i4", ">f8", "|b1"]


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A directory the examples overwrite (Hypothesis reruns a test body many
    times within one function-scoped fixture, so none is used)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-npy-") as tmp:
        yield Path(tmp)


def npy_bytes(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version, allow_pickle=False)
    return buffer.getvalue()


def header_span(data: bytes) -> tuple[int, int]:
    """``(start, end)`` of the header text of a version 1.0 ``.npy`` file."""
    length = int.from_bytes(data[8:10], "little")
    return 10, 10 + length


def every_reader(file: Path) -> list[Callable[[], object]]:
    """Each public reader of ``file``, as a call returning what it read."""

    def header() -> object:
        with open(file, "rb") as fh:
            return read_npy_header(fh)

    return [
        header,
        lambda: inspect_npy(file),
        lambda: np.asarray(load_npy(file, mmap_mode="r")).copy(),
        lambda: load_npy(file, mmap_mode="c").copy(),
        lambda: load_npy(file, mmap_mode=None),
        lambda: [block.copy() for block in npy_blocks(file, 3)],
    ]


def assert_sound_or_refused(file: Path) -> None:
    """Every reader either refuses ``file`` with an InputError naming it, or
    reads an array whose dtype and shape account for exactly the file's data."""
    for read in every_reader(file):
        try:
            result = read()
        except InputError as exc:
            assert exc.path == file, exc
            assert "\n" not in str(exc)
            continue
        if isinstance(result, np.ndarray):
            info = inspect_npy(file)
            assert result.dtype == info.dtype and result.shape == info.shape
            assert info.offset + result.nbytes == file.stat().st_size


arrays = st.sampled_from(DTYPES).flatmap(
    lambda dtype: hnp.arrays(
        np.dtype(dtype),
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6),
    )
)


@FUZZ
@given(array=arrays, version=st.sampled_from([None, (1, 0), (2, 0)]))
def test_valid_arrays_round_trip(scratch: Path, array: np.ndarray, version) -> None:
    file = scratch / "valid.npy"
    file.write_bytes(npy_bytes(array, version))
    with open(file, "rb") as fh:
        shape, fortran, dtype = read_npy_header(fh)
        offset = fh.tell()
    assert (shape, fortran, dtype) == (array.shape, False, array.dtype)
    info = inspect_npy(file)
    assert (info.shape, info.dtype, info.offset) == (array.shape, array.dtype, offset)
    for mode in ("r", "c", None):
        np.testing.assert_array_equal(load_npy(file, mmap_mode=mode), array)
    blocks = list(npy_blocks(file, 2))
    assert all(block.shape[1:] == array.shape[1:] for block in blocks)
    joined = np.concatenate(blocks) if blocks else np.empty((0, *array.shape[1:]), array.dtype)
    np.testing.assert_array_equal(joined.reshape(array.shape), array)


@FUZZ
@given(
    array=arrays,
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_random_header_bytes_are_refused_or_read_soundly(
    scratch: Path, array: np.ndarray, edits: list[tuple[int, int]]
) -> None:
    """Overwrite bytes of the magic, the length field or the header text."""
    data = bytearray(npy_bytes(array, (1, 0)))
    _, end = header_span(bytes(data))
    for where, value in edits:
        data[where % end] = value
    file = scratch / "mutated.npy"
    file.write_bytes(bytes(data))
    assert_sound_or_refused(file)


@FUZZ
@given(array=arrays, keep=st.floats(0, 1, exclude_max=True))
def test_truncated_files_are_refused(scratch: Path, array: np.ndarray, keep: float) -> None:
    data = npy_bytes(array)
    cut = int(keep * len(data))
    _, end = header_span(data)
    file = scratch / "truncated.npy"
    file.write_bytes(data[:cut])
    # a cut within the header fails every reader; one within the data (the
    # header is whole) every reader but the header's own
    readers = every_reader(file) if cut < end else every_reader(file)[1:]
    for read in readers:
        with pytest.raises(InputError) as caught:
            read()
        assert caught.value.path == file


header_texts = st.one_of(
    # dtype and shape lies: any plausible dict, over data of another array
    st.fixed_dictionaries(
        {
            "descr": st.sampled_from([*DTYPES, "O", "<U3", "V4", "<M8[s]", "x", "", "<i9"]),
            "fortran_order": st.sampled_from([False, True]),
            "shape": st.lists(st.integers(-3, 2**40), max_size=3).map(tuple),
        }
    ).map(repr),
    # broken syntax: cut the text of a real header anywhere, add junk
    st.tuples(st.integers(0, 60), st.text(max_size=12)).map(
        lambda cut_junk: (
            "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }"[: cut_junk[0]] + cut_junk[1]
        )
    ),
    st.text(max_size=40),
)


@FUZZ
@given(text=header_texts, data=st.binary(max_size=64))
def test_header_texts_that_lie_are_refused(scratch: Path, text: str, data: bytes) -> None:
    """A version 1.0 file with any header text over any data: an InputError
    naming the file, unless the header describes the data exactly."""
    encoded = text.encode("latin1", errors="replace")
    pad = -(10 + len(encoded) + 1) % 64
    header = encoded + b" " * pad + b"\n"
    file = scratch / "lying.npy"
    file.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data)
    assert_sound_or_refused(file)


# The graph directory reader ------------------------------------------------------


@pytest.fixture(scope="module")
def sound_graph(scratch: Path) -> Path:
    out = scratch / "sound-graph"
    with create_graph_dir(out, name="fuzz") as w:
        w.write_topology(5, np.array([0, 0, 1, 2, 3]), np.array([1, 2, 3, 3, 4]), directed=False)
        w.save_array("features", np.arange(15, dtype=np.float32).reshape(5, 3))
        w.save_array("labels", np.array([0, 1, 1, 0, 1]))
        w.num_features, w.num_classes = 3, 2
        w.save_splits([0, 1], [2], [3, 4])
    return out


NPY_FILES = [
    "indptr.npy",
    "indices.npy",
    "eid.npy",
    "edges_shuffled.npy",
    "features.npy",
    "labels.npy",
    "train_idx.npy",
    "val_idx.npy",
    "test_idx.npy",
]


@FUZZ
@given(
    name=st.sampled_from(NPY_FILES),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=0, max_size=3),
    keep=st.one_of(st.none(), st.floats(0, 1, exclude_max=True)),
)
def test_graph_dir_refuses_a_corrupt_npy_naming_it(
    scratch: Path, sound_graph: Path, name: str, edits: list[tuple[int, int]], keep
) -> None:
    """Corrupt one file's header bytes (or truncate it) in a copy of a sound
    graph: opening, checking and validating the graph raise InputError naming
    that file, or succeed when nothing that matters changed (header padding)."""
    graph = scratch / "graph"
    shutil.rmtree(graph, ignore_errors=True)
    shutil.copytree(sound_graph, graph)
    file = graph / name
    data = bytearray(file.read_bytes())
    _, end = header_span(bytes(data))
    for where, value in edits:
        data[where % end] = value
    if keep is not None:
        data = data[: int(keep * len(data))]
    file.write_bytes(bytes(data))
    try:
        g = GraphDir.open(graph)
        g.check_structure()
        g.validate()
        for array in (n.removesuffix(".npy") for n in NPY_FILES):
            np.asarray(g.array(array)).sum()
    except InputError as exc:
        assert exc.path == file, exc
        return
    # accepted: then the file still describes the sound array
    np.testing.assert_array_equal(
        np.load(file, allow_pickle=False), np.load(sound_graph / name, allow_pickle=False)
    )
    assert math.isfinite(float(np.asarray(g.features()).sum()))
