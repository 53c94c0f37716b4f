"""New local MLflow stores from a migrated, empty template database.

MLflow's ``SqlAlchemyStore`` builds a new SQLite store by running its alembic
migrations (about 1.5 to 3 s, every new data root), then inserts the Default
experiment (id 0) when the store has none. :func:`seed_database` does the first
part by copying a database that MLflow's own migration routine
(``mlflow.store.db.utils._initialize_tables``, what ``SqlAlchemyStore`` calls)
built once, into a per-user cache, keyed by the MLflow version and the alembic
head revision (:func:`template_path`). The template holds no experiment, so
MLflow still creates the Default experiment itself when it first opens the copy,
with the artifact location of that store (``SqlAlchemyStore`` derives it from
its default artifact root at that moment): nothing path-dependent is copied.

A template is checked before each use (:func:`is_template`: SQLite's
``quick_check``, the head revision, every table MLflow's models declare, no
experiment) and rebuilt when it fails; it is written to a temporary file and
renamed into place, so concurrent processes only ever see a whole template.
Anything that goes wrong here (an unwritable cache, an MLflow whose internals
moved) leaves the database absent, and MLflow then migrates it as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

_log = logging.getLogger(__name__)

#: Environment variable naming the cache folder (default ``$XDG_CACHE_HOME/gnncore``,
#: else ``~/.cache/gnncore``).
CACHE_ENV = "GNNCORE_CACHE_DIR"


def cache_dir() -> Path:
    """The per-user cache folder of gnncore (``$GNNCORE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/gnncore``, else ``~/.cache/gnncore``); not created here."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gnncore"


def head_revision() -> str:
    """The alembic head revision of the installed MLflow's tracking schema."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def template_path(folder: str | os.PathLike[str] | None = None) -> Path:
    """Where the template of the installed MLflow lives:
    ``<folder or cache_dir()>/mlflow-store-<mlflow version>-<head revision>.db``."""
    import mlflow

    return Path(folder or cache_dir()) / f"mlflow-store-{mlflow.__version__}-{head_revision()}.db"


def _expected_tables() -> set[str]:
    """The tables MLflow's SQLAlchemy models declare (tracking and registry)."""
    import mlflow.store.model_registry.dbmodels.models  # noqa: F401  (registers tables)
    import mlflow.store.tracking.dbmodels.models  # noqa: F401
    from mlflow.store.db.base_sql_model import Base

    return set(Base.metadata.tables)


def is_template(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a sound, fully migrated, empty MLflow store of the
    installed MLflow: SQLite's ``quick_check`` passes, ``alembic_version`` holds
    exactly the head revision, every declared table exists, and there is no
    experiment (so MLflow creates the Default one, with the right artifact
    location, on first open)."""
    try:
        head = head_revision()
        expected = _expected_tables()
        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        with sqlite3.connect(uri, uri=True) as db:
            if db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                return False
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not expected <= tables or "alembic_version" not in tables:
                return False
            if db.execute("SELECT version_num FROM alembic_version").fetchall() != [(head,)]:
                return False
            return bool(db.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 0)
    except (sqlite3.Error, OSError, ImportError, AttributeError):
        return False


def build_template(path: str | os.PathLike[str]) -> Path:
    """Migrate a new empty SQLite database with MLflow's own routine and move it,
    checked, to ``path`` (a temporary file beside it, then a rename)."""
    import sqlalchemy
    from mlflow.store.db.utils import _initialize_tables

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.unlink(name)  # SQLite creates the file; an empty one is not a database yet
    try:
        engine = sqlalchemy.create_engine(f"sqlite:///{name}")
        try:
            _initialize_tables(engine)
        finally:
            engine.dispose()
        if not is_template(name):
            raise RuntimeError(f"MLflow's migrations did not give a sound template ({name})")
        os.replace(name, target)
    finally:
        if os.path.exists(name):
            os.unlink(name)
    return target


def ensure_template(folder: str | os.PathLike[str] | None = None) -> Path:
    """The checked template of the installed MLflow, built (or rebuilt, when the
    cached file is corrupt or another store's) as needed."""
    path = template_path(folder)
    if path.exists() and is_template(path):
        return path
    if path.exists():
        _log.warning("rebuilding the MLflow store template %s: it failed its checks", path)
    return build_template(path)


def seed_database(database: str | os.PathLike[str]) -> bool:
    """Create the SQLite file ``database`` of a new MLflow store as a copy of the
    template (:func:`ensure_template`); ``True`` when it did. An existing file is
    never touched; on any failure the database stays absent (MLflow then runs
    its migrations itself) and the reason is logged."""
    target = Path(database)
    if target.exists():
        return False
    try:
        template = ensure_template()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            shutil.copyfile(template, name)
            os.link(name, target)  # atomic, and never replaces a store made meanwhile
        except FileExistsError:
            return False
        finally:
            os.unlink(name)
    except Exception as error:  # noqa: BLE001 - any failure: MLflow migrates as before
        _log.warning("new MLflow store %s: no template (%s); MLflow migrates it", target, error)
        return False
    return True
