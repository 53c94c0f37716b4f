"""Loading the code location stays light: Dagster imports `pipelines.definitions`
in the webserver, the daemon and every step process of a multiprocess run, so
torch, PyG and MLflow (seconds each) load only in the steps that use them."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "torch_geometric", "mlflow")


def _modules_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_code_location_imports_no_torch_pyg_or_mlflow() -> None:
    loaded = _modules_after("import pipelines.definitions")
    assert "dagster" in loaded
    heavy = [name for name in loaded if name.split(".")[0] in HEAVY]
    assert not heavy, f"importing pipelines.definitions loaded {sorted(heavy)[:10]}"


def test_the_lazy_names_still_resolve_to_the_heavy_modules() -> None:
    loaded = _modules_after(
        "from gnncore.train import NodeTask, NodeTrainConfig, fit\n"
        "from gnncore.sampler import SAMPLER_MODES, build_sampler\n"
        "assert SAMPLER_MODES == ('dense', 'per-layer')\n"
        "assert NodeTask.__module__ == 'gnncore.train.node.task'\n"
        "assert fit.__module__ == 'gnncore.train.fitting'\n"
        "assert build_sampler.__module__ == 'gnncore.sampler.factory'"
    )
    assert "torch" in loaded and "torch_geometric" in loaded


def test_no_lazy_name_is_shadowed_by_a_submodule() -> None:
    """Importing a submodule sets the package attribute of its name, so a lazy
    name equal to a submodule's (``fit`` beside ``fit.py``) would resolve to
    the module once anything imported it."""
    import importlib
    import pkgutil

    import gnncore.distributed
    import gnncore.sampler
    import gnncore.store
    import gnncore.tracking
    import gnncore.train

    packages = (gnncore.distributed, gnncore.sampler, gnncore.store, gnncore.tracking)
    for package in (*packages, gnncore.train):
        submodules = {info.name for info in pkgutil.iter_modules(package.__path__)}
        clashes = sorted(submodules & set(package.__all__))
        assert not clashes, f"{package.__name__}: names shadowed by submodules: {clashes}"
        for name in package.__all__:
            value = getattr(importlib.import_module(package.__name__), name)
            assert not isinstance(value, type(importlib)), f"{package.__name__}.{name}"
