"""``gnncore partition`` keeps out of its process what partitioning does not use
(issue 28, item 2): Polars, PyArrow, torch, PyG, MLflow and pandas are tens of
MiB of RSS each, every one of them on the whole command's peak."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import planted_graph

HEAVY = ("polars", "pyarrow", "torch", "torch_geometric", "mlflow", "pandas")


def test_the_partition_verb_imports_none_of_the_heavy_libraries(tmp_path: Path) -> None:
    graph = planted_graph(tmp_path / "g", num_nodes=300)
    code = (
        "import json, sys\n"
        "from gnncore.cli.main import main\n"
        f"rc = main(['partition', {str(graph)!r}, {str(tmp_path / 'out')!r}, "
        "'--method', 'grem', '--parts', '4', '--chunk', '0.2', '--no-progress'])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules "
        f"if m.split('.')[0] in {HEAVY!r})]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    rc, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert rc == 0, done.stderr
    assert (tmp_path / "out" / "assignment.npy").exists()
    assert loaded == [], f"the partition verb imported {loaded}"
