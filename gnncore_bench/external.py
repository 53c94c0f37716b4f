"""Outside partitioners in ``gnncore bench partition``: a command template run
on a METIS-format copy of the graph, its partition file read back and scored.

``--external NAME=CMD`` names a partitioner the project does not ship (HeiStream,
KaHIP, KaMinPar's or METIS' own binaries, a script). ``CMD`` is split like a
shell line (:func:`shlex.split`, no shell runs it), then these placeholders are
filled in each argument (``{{`` and ``}}`` are literal braces):

* ``{metis_graph}`` (required): the graph in METIS text format,
* ``{parts}``: the part count ``k``,
* ``{output}``: where the tool must write its partition file; without it the
  file is looked for at ``{metis_graph}.part.{parts}`` (what ``gpmetis``
  writes); tools with another fixed name are given their output option
  (HeiStream / KaHIP: ``--output_filename={output}``),
* ``{seed}``, ``{threads}`` (``--threads``; 0: every CPU this process may use)
  and ``{imbalance}`` (``--imbalance``, e.g. 0.03).

Each run gets its own directory ``OUT/partitions/NAME-pK/``, with
``{metis_graph}`` a symbolic link there to the one METIS file
(``OUT/graph.metis``, written once per bench run and timed on its own), so
files a tool writes beside its input stay with that run; its stdout and
stderr are kept there as ``NAME.stdout`` / ``NAME.stderr``. The command runs
in the bench's own working directory (relative paths in ``CMD`` mean what
they mean on the command line), so a tool that writes a fixed name there
(HeiStream's ``tmppartition<k>``) must be given ``{output}``. The command
runs under :func:`gnncore_bench.limits.run_limited`, as every built-in
method does: ``seconds`` is its wall time (reading the
METIS file included), the peak RSS is the kernel's ``ru_maxrss`` of the
process and the descendants it waited for. The partition file (one 0-based
part id per line, one line per node) is validated and scored with the same
cut and balance code as the built-in methods
(:func:`gnncore.partition.metrics.partition_metrics`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.errors import GnnCoreError, InputError
from gnncore.partition.base import symmetric_graph
from gnncore.partition.metrics import partition_metrics
from gnncore.store import GraphDir
from gnncore_bench.external_spec import DEFAULT_TIMEOUT, ExternalPartitioner

#: The METIS graph file's name in the bench's output directory.
METIS_GRAPH_NAME = "graph.metis"
#: Adjacency entries formatted at a time when writing the METIS file.
METIS_WRITE_CHUNK = 1 << 20
#: Characters of a failed command's stderr kept in its error message.
STDERR_TAIL = 2000


class ExternalRunError(GnnCoreError):
    """An external partitioner failed: a non-zero exit, a timeout, or no start."""


def write_metis_graph(
    graph_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    chunk: int = METIS_WRITE_CHUNK,
) -> dict[str, Any]:
    """Write the graph's undirected simple adjacency as a METIS text file.

    The header is ``n m`` (undirected edges counted once); line ``i + 1``
    lists node ``i``'s 1-based neighbours (empty for an isolated node). The
    adjacency is the symmetric, deduplicated CSR every built-in method
    partitions (:func:`gnncore.partition.base.symmetric_graph`); self-loops,
    which ingestion drops already, are dropped here too. Written a ``chunk`` of
    entries at a time to ``path``'s sibling ``.tmp`` file, then renamed.

    Returns:
        dict: ``path``, ``nodes``, ``edges``, ``bytes``, ``seconds`` (the whole
        write) and ``self_loops_dropped``.

    Raises:
        ValueError: The adjacency is not symmetric (an odd entry count).
    """
    started = time.perf_counter()
    sym = symmetric_graph(GraphDir.open(graph_dir))
    indptr = np.asarray(sym.indptr, dtype=np.int64)
    blocks = _row_blocks(indptr, chunk)
    entries = sum(int(lengths.sum()) for lengths, _ in _blocks(sym, indptr, blocks))
    loops = int(indptr[-1]) - entries
    if entries % 2:
        raise ValueError(f"the adjacency has {entries} entries: not symmetric")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="ascii") as out:
        out.write(f"{sym.num_nodes} {entries // 2}\n")
        for lengths, ids in _blocks(sym, indptr, blocks):
            out.write(_lines([str(i) for i in (ids + 1).tolist()], lengths))
        size = out.tell()
    os.replace(tmp, path)
    return {
        "path": str(path),
        "nodes": sym.num_nodes,
        "edges": entries // 2,
        "bytes": size,
        "seconds": time.perf_counter() - started,
        "self_loops_dropped": loops,
    }


def _row_blocks(indptr: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """Node ranges ``[begin, end)`` of about ``chunk`` adjacency entries each."""
    n, blocks, begin = len(indptr) - 1, [], 0
    while begin < n:
        end = int(np.searchsorted(indptr, indptr[begin] + chunk, side="right")) - 1
        end = min(max(end, begin + 1), n)
        blocks.append((begin, end))
        begin = end
    return blocks


def _blocks(
    sym: Any, indptr: np.ndarray, blocks: list[tuple[int, int]]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per node range: the rows' lengths and their neighbour ids, self-loops dropped."""
    for begin, end in blocks:
        ids = np.asarray(sym.indices[indptr[begin] : indptr[end]], dtype=np.int64)
        lengths = np.diff(indptr[begin : end + 1])
        rows = np.repeat(np.arange(begin, end, dtype=np.int64), lengths)
        loop = ids == rows
        if loop.any():
            ids = ids[~loop]
            lengths = lengths - np.bincount(rows[loop] - begin, minlength=end - begin)
        yield lengths, ids


def _lines(tokens: list[str], lengths: np.ndarray) -> str:
    lines, pos = [], 0
    for length in lengths.tolist():
        lines.append(" ".join(tokens[pos : pos + length]))
        pos += length
    return "\n".join(lines) + "\n"


def read_partition(path: str | os.PathLike[str], num_nodes: int, parts: int) -> np.ndarray:
    """A METIS-style partition file as ``int64[num_nodes]``: line ``i + 1``
    holds node ``i``'s 0-based part id (blank lines at the end are ignored).

    Raises:
        InputError: Naming the file and, where one is at fault, the line: the
            file is missing, has a line count other than ``num_nodes``, a line
            that is not an integer, or a part id outside ``[0, parts)``.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("the partitioner wrote no partition file here", path)
    lines = path.read_text(encoding="ascii", errors="replace").rstrip().splitlines()
    if len(lines) != num_nodes:
        line = min(len(lines), num_nodes) + 1
        raise InputError(
            f"{len(lines)} lines for {num_nodes} nodes (one part id per node); "
            f"line {line} is the first {'extra' if len(lines) > num_nodes else 'missing'} one",
            path,
            line=line,
        )
    try:
        assignment = np.array(lines, dtype=np.int64)
    except (ValueError, OverflowError):
        for number, text in enumerate(lines, 1):
            try:
                value = int(text)
            except ValueError:
                raise InputError(
                    f"{text!r} is not a part id (an integer)", path, line=number
                ) from None
            if not 0 <= value < parts:
                raise InputError(
                    f"part id {value} is outside [0, {parts})", path, line=number
                ) from None
        raise
    bad = np.flatnonzero((assignment < 0) | (assignment >= parts))
    if len(bad):
        first = int(bad[0])
        raise InputError(
            f"part id {int(assignment[first])} is outside [0, {parts}) "
            f"({len(bad)} line(s) out of range)",
            path,
            line=first + 1,
        )
    return assignment


def run_external(
    external: ExternalPartitioner,
    graph_dir: str | os.PathLike[str],
    metis_graph: str | os.PathLike[str],
    run_dir: str | os.PathLike[str],
    parts: int,
    seed: int = 0,
    imbalance: float = 0.03,
    threads: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Run ``external`` on the METIS file, read its partition back, score it.

    ``run_dir`` is emptied and gets a link to ``metis_graph``, the default
    partition file and the command's stdout and stderr (see the module's docs);
    the command runs in this process's working directory.

    Returns:
        dict: A row like the built-in methods' (``method``, ``parts``,
        ``seed``, ``edge_cut_fraction``, ``max_part_ratio``,
        ``split_balance``, ``seconds``, ``peak_rss_bytes``,
        ``command_peak_rss_bytes``, ``process_peak_rss_bytes``: the three peak
        figures are the one ``ru_maxrss`` of the command), plus ``external``:
        True, ``command``, ``partition_file``, ``read_seconds`` (reading and
        checking the file) and ``score_seconds``; ``threads`` where the
        command uses ``{threads}``.

    Raises:
        ExternalRunError: The command exited non-zero, timed out or did not
            start (the message ends with its stderr's tail).
        InputError: The partition file is missing or malformed (names the
            file and line).
    """
    from gnncore_bench.limits import run_limited

    run_dir = Path(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    graph_file = _link(Path(metis_graph), run_dir)
    output = external.output_path(graph_file, parts, run_dir / "partition.txt")
    threads = threads or len(os.sched_getaffinity(0))
    argv = external.command(
        metis_graph=graph_file,
        parts=parts,
        output=output,
        seed=seed,
        threads=threads,
        imbalance=imbalance,
    )
    load = os.getloadavg()[0]
    done = run_limited(argv, None, timeout=timeout, capture_dir=run_dir, capture_name=external.name)
    if not done.ok:
        stderr = (run_dir / f"{external.name}.stderr").read_text(errors="replace").strip()
        why = f"timed out after {timeout:g} s" if done.timed_out else f"exited {done.exit_code}"
        raise ExternalRunError(
            f"external partitioner {external.name} p={parts} {why}: {shlex.join(argv)}"
            + (f"\n{stderr[-STDERR_TAIL:]}" if stderr else " (no stderr)")
        )
    graph = GraphDir.open(graph_dir)
    started = time.perf_counter()
    assignment = read_partition(output, graph.num_nodes, parts)
    read = time.perf_counter()
    metrics = partition_metrics(graph, assignment, parts)
    return {
        "method": external.name,
        "parts": parts,
        "seed": seed,
        **({"threads": threads} if "threads" in external.fields else {}),
        "external": True,
        "command": argv,
        "partition_file": str(output),
        "edge_cut_fraction": metrics.edge_cut_fraction,
        "max_part_ratio": metrics.max_part_ratio,
        "split_balance": metrics.split_balance,
        "seconds": done.wall_seconds,
        "wall_seconds": done.wall_seconds,
        "peak_rss_bytes": done.peak_rss_bytes,
        "command_peak_rss_bytes": done.peak_rss_bytes,
        "process_peak_rss_bytes": done.peak_rss_bytes,
        "load_average": load,
        "read_seconds": read - started,
        "score_seconds": time.perf_counter() - read,
    }


def _link(target: Path, run_dir: Path) -> Path:
    """``run_dir/<target's name>`` linking to ``target`` (the target itself
    where no symbolic link can be made)."""
    link = run_dir / target.name
    try:
        link.symlink_to(target.resolve())
    except OSError:
        return target
    return link
