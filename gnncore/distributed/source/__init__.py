"""The batch sources of the ranks, one file per mode.

Each is what one rank hands the shared training loop in place of a
single-process loader: its training batches per epoch, its evaluation, and the
hooks the loop calls (``main_process``, ``wrap_model``, ``reduce_sum``,
``adapt``, ``random_state``):

- :mod:`~gnncore.distributed.source.node`: :class:`DistBatchSource`, sampled
  node-classification batches (modes ``in_memory`` and ``mmap``).
- :mod:`~gnncore.distributed.source.link`: :class:`DistLinkSource`, sampled
  link-prediction batches and the ranking of the evaluation across ranks.
- :mod:`~gnncore.distributed.source.sancus`: :class:`SancusSource`, full-graph
  GCN batches of mode ``sancus``.
- :mod:`~gnncore.distributed.source.base`: what the sampled sources share
  (:class:`RankSource`, :func:`split_batches`, the per-rank figures).
"""

from gnncore.distributed.source.base import RankFigures, RankSource, peak_rss_mb, split_batches
from gnncore.distributed.source.link import DistLinkSource
from gnncore.distributed.source.node import DistBatchSource, DistEvalBatches
from gnncore.distributed.source.sancus import SancusSource

__all__ = [
    "DistBatchSource",
    "DistEvalBatches",
    "DistLinkSource",
    "RankFigures",
    "RankSource",
    "SancusSource",
    "peak_rss_mb",
    "split_batches",
]
