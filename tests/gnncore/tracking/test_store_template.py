"""New SQLite MLflow stores come from a migrated, empty template (gnncore.tracking.template)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import mlflow
import pytest

from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
from gnncore.tracking.template import (
    CACHE_ENV,
    ensure_template,
    head_revision,
    is_template,
    seed_database,
    template_path,
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder of this module's own, holding a copy of the user's template
    (built once per user and MLflow version: no migration here when it exists)."""
    folder = tmp_path_factory.mktemp("cache")
    shutil.copyfile(ensure_template(), template_path(folder))
    return folder


@pytest.fixture
def own_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


def _schema(database: Path) -> dict[str, object]:
    """What a store's schema and seeded rows are, order aside: MLflow's own
    migrations vary, run to run, the order of the indexes and of the clauses in a
    table rebuilt by a batch migration (each clause is on a line of its own)."""
    with sqlite3.connect(database) as db:
        objects = {
            (
                kind,
                name,
                table,
                frozenset(line.strip().rstrip(",") for line in (sql or "").splitlines()),
            )
            for kind, name, table, sql in db.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        }
        return {
            "objects": objects,
            "alembic": db.execute("SELECT * FROM alembic_version").fetchall(),
            "workspaces": db.execute("SELECT * FROM workspaces").fetchall(),
            "experiments": db.execute(
                "SELECT experiment_id, name, lifecycle_stage, workspace FROM experiments"
                " WHERE experiment_id = 0"
            ).fetchall(),
        }


def test_template_is_keyed_by_mlflow_version_and_head(own_cache: Path) -> None:
    path = template_path()
    assert path.parent == own_cache
    assert path.name == f"mlflow-store-{mlflow.__version__}-{head_revision()}.db"
    assert is_template(path)


def test_a_seeded_store_equals_a_migrated_one_and_works(own_cache: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh" / "mlflow.db"
    fresh.parent.mkdir()
    mlflow.MlflowClient(f"sqlite:///{fresh}").search_experiments()  # MLflow migrates it

    root = tmp_path / "root"
    uri = default_tracking_uri(root)
    tracker = MlflowTracker(uri, experiment="seeded")
    seeded = Path(uri.removeprefix("sqlite:///"))
    assert _schema(seeded) == _schema(fresh)

    # The Default experiment was made at first open, for this store, not the template's.
    default = tracker.client.get_experiment("0")
    assert default.name == "Default"
    assert str(own_cache) not in default.artifact_location

    note = tmp_path / "note.txt"
    note.write_text("hello")
    with tracker.start_run("r") as run:
        run.log_params({"lr": 0.01})
        run.log_metrics({"loss": 0.5}, step=1)
        run.log_artifact(note)
    found = tracker.client.search_runs([tracker.experiment_id], "metrics.loss < 1")
    assert [r.info.run_id for r in found] == [run.run_id]
    assert found[0].data.params == {"lr": "0.01"}
    artifacts = root / "mlflow" / "artifacts"
    assert [p.name for p in artifacts.rglob("note.txt")] == ["note.txt"]


def test_the_default_artifact_location_follows_the_store(own_cache: Path, tmp_path: Path) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    database = tmp_path / "a" / "mlflow.db"
    assert seed_database(database)
    store = SqlAlchemyStore(f"sqlite:///{database}", str(tmp_path / "a" / "art"))
    location = store.get_experiment("0").artifact_location
    assert location.rstrip("/").endswith(f"{tmp_path}/a/art/0")


def test_an_existing_database_is_left_alone(own_cache: Path, tmp_path: Path) -> None:
    database = tmp_path / "mlflow.db"
    database.write_bytes(b"not mine to replace")
    assert not seed_database(database)
    assert database.read_bytes() == b"not mine to replace"


def test_foreign_templates_fail_the_checks(own_cache: Path, tmp_path: Path) -> None:
    good = template_path()
    stale = tmp_path / "stale.db"
    stale.write_bytes(good.read_bytes())
    with sqlite3.connect(stale) as db:
        db.execute("UPDATE alembic_version SET version_num = 'older'")
    used = tmp_path / "used.db"
    used.write_bytes(good.read_bytes())
    mlflow.MlflowClient(f"sqlite:///{used}").search_experiments()  # now holds Default
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:8192])
    assert is_template(good)
    assert not is_template(stale)
    assert not is_template(used)
    assert not is_template(truncated)
    assert not is_template(tmp_path / "absent.db")


def test_a_corrupt_template_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = template_path()
    path.parent.mkdir()
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    database = tmp_path / "root" / "mlflow.db"
    assert seed_database(database)
    assert is_template(path)
    assert [e.name for e in mlflow.MlflowClient(f"sqlite:///{database}").search_experiments()] == [
        "Default"
    ]
    assert not list(path.parent.glob("*.tmp"))  # no temporary file left behind


def test_an_unwritable_cache_falls_back_to_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))  # a folder under a file
    database = tmp_path / "root" / "mlflow.db"
    assert not seed_database(database)
    assert not database.exists()  # MLflow migrates it on first open, as without a template
