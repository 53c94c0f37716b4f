"""The training entry points: pick the training mode of a config and run it.

They sit on their own floor, above the out-of-core batch sources
(:mod:`gnncore.outofcore`) and distributed training (:mod:`gnncore.distributed`,
which ``gnncore train --nproc`` starts), and above :mod:`gnncore.train`, which
computes (:func:`~gnncore.train.fitting.fit`) and records (:mod:`gnncore.train.record`):

* :func:`train_graph_dir` trains on a graph directory in one call, tracked
  (the CLI's and Dagster's entry): node classification or link prediction,
  in the mode of ``config.mode``, reading the plans and store of
  :class:`RunInputs`, recorded and checkpointed as :class:`RunRecording` says;
* :func:`resolve_mode` and :func:`choose_mode` (:mod:`gnncore.modes.choose`):
  what mode ``auto`` trains in, from the graph and the memory budget;
* :func:`node_data` and :func:`open_store`: the stores (or batch source) a
  node-classification mode reads.
"""

from gnncore.modes.choose import ModeChoice, choose_mode, resolve_mode, training_bytes
from gnncore.modes.graph_dir import train_graph_dir
from gnncore.modes.node_data import NodeData, node_data, open_store
from gnncore.modes.run import RunInputs, RunRecording

__all__ = [
    "ModeChoice",
    "NodeData",
    "RunInputs",
    "RunRecording",
    "choose_mode",
    "node_data",
    "open_store",
    "resolve_mode",
    "train_graph_dir",
    "training_bytes",
]
