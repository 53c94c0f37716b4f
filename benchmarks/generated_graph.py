"""The generated graphs the training benchmarks run on, built once and reused.

:func:`cached_graph` writes the built-in planted-partition graph of
``params`` (``nodes``, ``features``, ``avg_degree``, ``classes``,
``communities_per_class``, ``seed`` and the split fractions) with
:func:`gnncore.synth.generate_graph`, the splits replaced by the subsets a
benchmark chooses from the generator's own (small validation and test sets
keep evaluation affordable). A ``<out>.params.json`` beside the graph records
the parameters: a later run with the same ones reuses the graph.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: ``choose(y, splits, rng) -> (train, val, test)``: the subsets of the
#: generator's ``splits`` (given its labels ``y``) the graph keeps.
Chooser = Callable[
    [np.ndarray, tuple[np.ndarray, ...], np.random.Generator],
    tuple[np.ndarray, np.ndarray, np.ndarray],
]


def cached_graph(out: Path, params: dict[str, Any], name: str, choose: Chooser) -> dict[str, Any]:
    """Write the graph of ``params`` into ``out`` (manifest name ``name``) unless
    the same one is there; ``choose`` picks its splits, with a generator seeded
    ``params["seed"] + 1``. Returns ``params`` with ``reused`` (and ``seconds``)."""
    from gnncore.synth import SynthSpec, generate_graph, labels, node_table
    from gnncore.synth import split as split_nodes

    record = out.parent / f"{out.name}.params.json"
    if (out / "manifest.json").is_file() and record.is_file():
        if json.loads(record.read_text()) == params:
            print(f"reusing graph {out}", file=sys.stderr)
            return {"reused": True, **params}
    print(f"writing graph {out} ({params})", file=sys.stderr)
    started = time.perf_counter()
    spec = SynthSpec(
        num_nodes=params["nodes"],
        avg_degree=params["avg_degree"],
        num_classes=params["classes"],
        num_features=params["features"],
        seed=params["seed"],
        communities_per_class=params["communities_per_class"],
    )
    y = labels(spec, node_table(spec)[0])
    chosen = choose(y, split_nodes(spec, y), np.random.default_rng(params["seed"] + 1))
    generate_graph(out, spec, name=name, splits=chosen, details={"splits": params})
    record.write_text(json.dumps(params))
    seconds = time.perf_counter() - started
    print(f"graph written in {seconds:.0f} s", file=sys.stderr)
    return {"reused": False, "seconds": seconds, **params}
