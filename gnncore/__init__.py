"""gnncore: from a raw edge list to a trained graph neural network.

The library is usable without Dagster: :mod:`gnncore.store` (the on-disk graph
format), :mod:`gnncore.io` (ingestion), :mod:`gnncore.synth` (generator),
:mod:`gnncore.partition`, :mod:`gnncore.sampler`, :mod:`gnncore.train` and the
``gnncore`` command line (:mod:`gnncore.cli`).
"""

import os
import sys

# Batches are sampled (OpenMP in the C++ core) in prefetch threads while torch
# computes (OpenMP too, one shared libgomp): with spinning idle threads the two
# pools starve each other on a busy machine (5x slower epochs measured, see
# docs/BENCHMARKS.md). libgomp reads the policy once, when it is loaded, so it
# is set here, before torch is, unless the user chose one.
if "OMP_WAIT_POLICY" not in os.environ and "torch" not in sys.modules:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

from gnncore.errors import GnnCoreError, InputError  # noqa: E402

__version__ = "0.1.0"

__all__ = ["GnnCoreError", "InputError", "__version__"]
