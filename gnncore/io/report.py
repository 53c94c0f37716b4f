"""The summary an ingestion returns (and the CLI prints as JSON)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gnncore.usage import StageUsage


@dataclass(frozen=True)
class IngestReport:
    """What one :func:`gnncore.io.ingest` call read, dropped and wrote.

    Attributes:
        format (str): The input format that was read (``edgelist``, ``parquet``,
            ``ogb``, ``planetoid`` or ``kg``), after auto-detection.
        source (str): The input file or directory.
        out_dir (str): The graph directory written.
        num_nodes (int): Nodes in the graph directory.
        num_input_edges (int): Edge rows read from the input (for ``kg``: the
            training triples; for ``planetoid``: the columns of PyG's
            ``edge_index``, which lists each undirected edge twice).
        self_loops_removed (int): Input rows with ``src == dst`` that were dropped.
        duplicates_removed (int): Repeated rows that were dropped (for undirected
            graphs ``(u, v)`` and ``(v, u)`` are the same edge).
        num_canonical_edges (int): Rows of ``edges.parquet`` (each undirected edge once).
        num_edges (int): Stored adjacency entries (an undirected edge counts twice).
        directed (bool): Whether the graph was stored as directed.
        num_features (int): Feature columns (0 when the input has none).
        num_classes (int): Label classes (0 when the input has no labels).
        num_relations (int): Relation types (``kg`` only, else 0).
        seconds (float): Wall time of the ingestion.
        details (dict): Format-specific facts (separator, header, id type, split
            sizes, ...); also recorded in the manifest's ``stats``.
        phases (dict): Seconds per phase: bounded-memory ingestion's own
            (``parse``, ``remap``, ``sort/dedup``, ``csr``, ``shuffle``,
            ``write``, ``checksums``), else the stages the ingestion reported
            (``reading edges``, ``remapping ids``, ``canonical edges``, ...).
        peak_rss_bytes (int, optional): The process's peak resident set size
            when the ingestion ended (``VmHWM``: the whole process's peak so
            far, not the ingestion's alone).
        memory_budget (int, optional): The memory budget in bytes
            (bounded-memory ingestion), ``None`` for in-memory ingestion.
        input_bytes (int): Size of the input files (and node table).
        output_bytes (int): Size of the graph directory as ingestion wrote it
            (:func:`~gnncore.io.ingest_versioned` then adds its lineage record,
            this report among it, to the manifest).
        storage_read_bytes / storage_written_bytes (int, optional): Bytes the
            process read from and wrote to storage while ingesting, spills
            included (``/proc/self/io``; ``None`` where unavailable).
    """

    format: str
    source: str
    out_dir: str
    num_nodes: int
    num_input_edges: int
    self_loops_removed: int
    duplicates_removed: int
    num_canonical_edges: int
    num_edges: int
    directed: bool
    num_features: int = 0
    num_classes: int = 0
    num_relations: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    peak_rss_bytes: int | None = None
    memory_budget: int | None = None
    input_bytes: int = 0
    output_bytes: int = 0
    storage_read_bytes: int | None = None
    storage_written_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (plain ints, floats, strings, dicts)."""
        return asdict(self)

    def with_usage(self, usage: StageUsage, phases: dict[str, float]) -> IngestReport:
        """This report with what the stage cost: ``usage``'s peak RSS and bytes,
        and ``phases`` where the ingestion path measured none of its own."""
        return replace(
            self,
            phases=self.phases or phases,
            peak_rss_bytes=usage.peak_rss_bytes,
            input_bytes=usage.input_bytes,
            output_bytes=usage.output_bytes,
            storage_read_bytes=usage.storage_read_bytes,
            storage_written_bytes=usage.storage_written_bytes,
        )
