"""How much disk ``gnncore bench scale`` needs: the generated CSV (computed), the
graph directory's fixed-size files (exact), and the measured sizes of the
compressed files, ingestion's scratch and the partitions (with a margin); how
many edges the free disk holds."""

from __future__ import annotations

from gnncore.sizes import format_size

#: Graph directory bytes fixed by the format per canonical undirected edge
#: (node ids below 2**31): indices.npy int32 and eid.npy int64 of both
#: directions, edges_shuffled.npy's int32 pair (8 + 16 + 8), and per node
#: (indptr.npy, int64). Exact: no margin.
GRAPH_FIXED_BYTES_PER_EDGE = 32
GRAPH_FIXED_BYTES_PER_NODE = 8
#: The compressed files' bytes: edges.parquet (zstd) per edge, node_ids.parquet
#: per node. Measured: 3.84 B/edge and 2.0 B/node at 20M edges and 2M nodes;
#: at 200M edges and 20M nodes the graph held 7.41 GB, 0.86 GB past its fixed
#: files: about 4.1 B/edge (wider ids compress less).
GRAPH_PARQUET_BYTES_PER_EDGE = 4.5
GRAPH_PARQUET_BYTES_PER_NODE = 3
#: Bounded ingestion's scratch at its peak beyond the finished graph. Its
#: sorted key runs are delta-coded (2.9 B/edge at 20M edges and 2M nodes,
#: about 4 at 100M nodes: the gaps grow with the node count), and the
#: shuffle's buckets (as much again) are written while edges_shuffled.npy (8
#: B/edge) is not yet, and removed as it is written. Measured: the run
#: folder's peak during ingestion was the CSV plus the finished graph, to the
#: byte, at 200M edges (10.79 GB: 3.38 + 7.41); 1 B/edge covers the bigger
#: runs and buckets of larger graphs.
INGEST_SCRATCH_BYTES_PER_EDGE = 1
#: A partition directory per node (relabelling maps, halos, split codes):
#: measured 47 B/node at 2M nodes, 50 at 20M (p = 16).
PARTITION_BYTES_PER_NODE = 56
#: A partitioner's temporary files per edge: GREM's chunk files (5.2 B/edge
#: at 200M edges), KaMinPar's ParHIP copy of the graph (8.8 B/edge).
PARTITION_SCRATCH_BYTES_PER_EDGE = 10
#: Margin on the measured sizes (the compressed files, scratch, partition
#: directories); the CSV's and the fixed-size files' are computed exactly.
DISK_MARGIN = 1.15
#: Free space left to the machine's other users (at most a tenth of what is free).
DISK_RESERVE = 4 << 30


def csv_bytes(num_edges: int, num_nodes: int) -> int:
    """Expected size of the generated CSV: two ids and two separators a line,
    ids taken as uniform over ``[0, num_nodes)``."""
    digits, low, width = 0, 0, 1
    while low < num_nodes:
        high = min(10**width, num_nodes)
        digits += (high - low) * width
        low, width = high, width + 1
    mean_digits = digits / max(num_nodes, 1)
    return int(num_edges * (2 * mean_digits + 2)) + len("src,dst\n")


def estimate_disk(num_edges: int, num_nodes: int, methods: int = 1, keep: bool = False) -> int:
    """Peak bytes the run needs on the work directory's file system.

    Ingestion holds the CSV, its scratch and the graph directory at once; then
    the CSV goes and each partition directory and the partitioner's temporary
    files sit beside the graph until measured (with ``keep``, everything
    stays). The CSV's size is computed (:func:`csv_bytes`), the graph's
    fixed-size files exactly; the measured sizes (this module's constants)
    get :data:`DISK_MARGIN`.
    """
    csv = csv_bytes(num_edges, num_nodes)
    graph: float = num_edges * GRAPH_FIXED_BYTES_PER_EDGE + num_nodes * GRAPH_FIXED_BYTES_PER_NODE
    graph += DISK_MARGIN * (
        num_edges * GRAPH_PARQUET_BYTES_PER_EDGE + num_nodes * GRAPH_PARQUET_BYTES_PER_NODE
    )
    scratch = DISK_MARGIN * num_edges * INGEST_SCRATCH_BYTES_PER_EDGE
    partition = DISK_MARGIN * num_nodes * PARTITION_BYTES_PER_NODE
    partition_scratch = DISK_MARGIN * num_edges * PARTITION_SCRATCH_BYTES_PER_EDGE
    if keep:
        peak = csv + graph + max(scratch, methods * partition + partition_scratch)
    else:
        peak = max(csv + scratch + graph, graph + partition + partition_scratch)
    return int(peak)


def default_nodes(num_edges: int) -> int:
    """Nodes of a graph of ``num_edges`` edges: average degree 20, as the
    20M-edge benchmark graphs."""
    return max(num_edges // 10, 16)


def disk_room(free_bytes: int) -> int:
    """What a run may use of ``free_bytes``: all but :data:`DISK_RESERVE` (or a
    tenth, when that is less), left to the machine's other users."""
    return free_bytes - min(DISK_RESERVE, free_bytes // 10)


def largest_fitting(free_bytes: int, methods: int = 1, keep: bool = False) -> int:
    """The most edges (whole millions, average degree 20) whose
    :func:`estimate_disk` fits in :func:`disk_room`."""
    room = disk_room(free_bytes)
    low, high = 0, 1
    while estimate_disk(high * 10**6, default_nodes(high * 10**6), methods, keep) <= room:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        fits = estimate_disk(mid * 10**6, default_nodes(mid * 10**6), methods, keep) <= room
        low, high = (mid, high) if fits else (low, mid)
    return low * 10**6


def edge_count(edges: int | str, free: int, methods: int, keep: bool) -> tuple[int, str]:
    """The edges to generate and how they were chosen (given, or the most that fit)."""
    if edges == "max":
        num_edges = largest_fitting(free, methods, keep)
        if num_edges < 10**6:
            raise ValueError(f"{format_size(free)} free holds no 1M-edge run")
        return num_edges, f"max: the largest that fits {format_size(free)} free"
    if isinstance(edges, int) and edges > 0:
        return edges, "given"
    raise ValueError(f"edges must be a positive integer or 'max'; got {edges!r}")


def disk_needed(num_edges: int, num_nodes: int, free: int, methods: int, keep: bool) -> int:
    """The run's disk estimate; ``ValueError`` when ``free`` cannot hold it."""
    needed = estimate_disk(num_edges, num_nodes, methods, keep)
    if needed > disk_room(free):
        raise ValueError(
            f"the run needs about {format_size(needed)} of disk "
            f"({num_edges:,} edges, {num_nodes:,} nodes) and {format_size(free)} is free "
            f"(of which {format_size(free - disk_room(free))} is left to others); "
            f"use fewer --edges or --edges max (here about "
            f"{largest_fitting(free, methods, keep):,})"
        )
    return needed
