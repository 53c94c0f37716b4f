"""How fast the sources of a part's cut edges come off storage
(``gnncore.train.core.partrows.gather_rows``): rows per second and bytes read
for several thread counts and merge gaps, on one part of a partitioned store.

Reads ``--rows`` of the part's distinct cut sources (ascending) from the
store's ``features.npy`` with ``O_DIRECT`` (nothing stays in the page cache, so
repeated runs read from storage alike)::

    .venv/bin/python benchmarks/cut_rows.py /tmp/s45 --part 5 --rows 60000 \\
        --threads 1 4 16 --gap 0 4096 16384

``--untrained-model DIR`` instead writes an untrained GraphSAGE node model of
the store's feature width as a model directory (``DIR/gnncore``), for
``benchmarks/predict_memory.py --model`` when its accuracy is irrelevant.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from gnncore.outofcore.store import PartitionedStore
from gnncore.train.core.partrows import coalesce, gather_rows, npy_ranges


def cut_sources(store: PartitionedStore, part: int) -> np.ndarray:
    """The distinct sources, ascending, of the edges into ``part`` from other parts."""
    lo, hi = int(store.offsets[part]), int(store.offsets[part + 1])
    src = store.in_edges(part)[:, 0]
    return np.unique(src[(src < lo) | (src >= hi)])


def save_untrained_model(folder: Path, width: int, hidden: int, classes: int) -> Path:
    """An untrained 2-layer GraphSAGE (``width -> hidden -> classes``, seed 0) as a
    model directory; returns its ``gnncore`` folder."""
    import torch

    from gnncore.train import build_model
    from gnncore.train.spec import ModelSpec

    torch.manual_seed(0)
    module = build_model("sage", width, hidden, classes, 2, 0.0).eval()
    architecture = {"model": "sage", "in_channels": width, "hidden": hidden,
                    "out_channels": classes, "num_layers": 2, "dropout": 0.0,
                    "heads": 1}  # fmt: skip
    spec = ModelSpec("node", architecture, preprocessing={"normalize_features": False})
    spec.save(folder / "gnncore", module)
    return folder / "gnncore"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a partitioned store with features")
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--rows", type=int, default=60_000, help="cut rows read per setting")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--gap", type=int, nargs="+", default=[0, 4096, 16384], help="bytes")
    parser.add_argument("--untrained-model", type=Path, default=None, metavar="DIR")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--classes", type=int, default=8)
    args = parser.parse_args()
    store = PartitionedStore.open(args.store)
    features = np.load(store.path / "features.npy", mmap_mode="r")
    width, row_bytes = int(features.shape[1]), int(features[0].nbytes)
    if args.untrained_model is not None:
        print(save_untrained_model(args.untrained_model, width, args.hidden, args.classes))
        return
    ids = cut_sources(store, args.part)[: args.rows]
    reader = npy_ranges(store.path / "features.npy")
    for threads in args.threads:
        for gap in args.gap:
            start = time.perf_counter()
            gather_rows(reader, ids, width, row_bytes, threads=threads, gap_bytes=gap)
            seconds = time.perf_counter() - start
            ranges = coalesce(ids, row_bytes, gap)
            read = int((ranges[:, 1] - ranges[:, 0]).sum()) * row_bytes
            print(json.dumps({"threads": threads, "gap_bytes": gap, "rows": len(ids),
                              "reads": len(ranges), "bytes": read,
                              "seconds": round(seconds, 3),
                              "rows_per_second": round(len(ids) / seconds)}))  # fmt: skip


if __name__ == "__main__":
    main()
