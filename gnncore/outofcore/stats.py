"""What an epoch of an out-of-core source read, wrote and waited for.

Both batch sources walk a sequence of *steps* -- HierBatching's mega-batches or a
partition buffer's states -- each reading the partitions it lacks (in a prefetch
thread) before it trains; :class:`StepStats` sums them per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepStats:
    """Per-epoch sums over the steps; ``swaps``: partitions read after the first
    step (BETA: Eq. 5.2; Alg. 7: ``p − c``)."""

    steps: int = 0
    partitions_read: int = 0
    swaps: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    load_seconds: float = 0.0
    wait_seconds: float = 0.0
    read_seconds: float = 0.0

    def record(
        self, read: int, nbytes: int, seconds: float, wait: float, read_seconds: float = 0.0
    ) -> None:
        """One step: ``read`` partitions (``nbytes``) loaded in ``seconds``, of
        which training waited ``wait``; ``read_seconds`` of the load were spent
        in the store's reads (where the source times them)."""
        self.steps += 1
        self.partitions_read += read
        if self.steps > 1:
            self.swaps += read
        self.bytes_read += nbytes
        self.load_seconds += seconds
        self.wait_seconds += wait
        self.read_seconds += read_seconds

    def figures(
        self, prefix: str, steps_name: str, written: bool = False, reads_timed: bool = False
    ) -> dict[str, float]:
        """Scalars to log with the epoch: ``{prefix}{steps_name}``,
        ``{prefix}partitions_read``, ``..swaps``, ``..bytes_read`` (and
        ``..bytes_written`` when ``written``), ``..load_s``, ``..wait_s`` (and
        ``..read_s``, the seconds inside the reads, when ``reads_timed``)."""
        figures = {
            f"{prefix}{steps_name}": float(self.steps),
            f"{prefix}partitions_read": float(self.partitions_read),
            f"{prefix}swaps": float(self.swaps),
            f"{prefix}bytes_read": float(self.bytes_read),
        }
        if written:
            figures[f"{prefix}bytes_written"] = float(self.bytes_written)
        figures[f"{prefix}load_s"] = self.load_seconds
        figures[f"{prefix}wait_s"] = self.wait_seconds
        if reads_timed:
            figures[f"{prefix}read_s"] = self.read_seconds
        return figures
