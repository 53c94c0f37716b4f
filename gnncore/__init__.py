"""gnncore: from a raw edge list to a trained graph neural network.

The library is usable without Dagster: :mod:`gnncore.store` (the on-disk graph
format), :mod:`gnncore.io` (ingestion), :mod:`gnncore.synth` (generator),
:mod:`gnncore.partition`, :mod:`gnncore.sampler`, :mod:`gnncore.train` and the
``gnncore`` command line (:mod:`gnncore.cli`).
"""

from gnncore.errors import GnnCoreError, InputError

__version__ = "0.1.0"

__all__ = ["GnnCoreError", "InputError", "__version__"]
