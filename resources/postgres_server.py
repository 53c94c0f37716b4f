"""A throwaway PostgreSQL server for the ``postgres`` storage profile.

``make postgres`` starts one in ``$(DATA_ROOT)/postgres`` and prints the
variables the profile reads; the PostgreSQL profile test starts one in a
temporary directory. Both go through :class:`LocalPostgres`: ``initdb`` with a
password-protected superuser, ``pg_ctl start`` listening on 127.0.0.1 only
(TCP, scram-sha-256) with its unix socket inside the server's directory, bounded
waits, and ``pg_ctl stop -m immediate`` at the end.

PostgreSQL refuses to run as root. Run as root, the server runs as the
``postgres`` system user (created by Debian's ``postgresql`` package; ``nobody``
when it is absent), which then owns the server's directory; that directory's
parents must let it through (``/tmp`` does; so does a data root under a
world-readable tree).

The binaries come from ``$GNNCORE_PG_BIN``, else the newest
``/usr/lib/postgresql/<version>/bin`` (Debian's layout), else ``initdb`` on
``PATH``. This module never imports Dagster; the profile's settings themselves
(``GNNCORE_PG_*``, ``GNNCORE_MLFLOW_URI``) are documented in README.md
"Production storage (PostgreSQL)".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

DEFAULT_USER = "gnncore"
DEFAULT_DATABASES = ("dagster", "mlflow")
#: The SQLAlchemy scheme of the profile's URLs: psycopg2 (the ``postgres`` extra installs it).
SQLALCHEMY_SCHEME = "postgresql+psycopg2"


def find_pg_bin() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``."""
    candidates: list[Path] = []
    if os.environ.get("GNNCORE_PG_BIN"):
        candidates.append(Path(os.environ["GNNCORE_PG_BIN"]))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(s) if s.isdigit() else 0 for s in p.parent.name.split(".")],
        reverse=True,
    )
    candidates.extend(versions)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged account the server runs as; ``None`` runs it as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _check_traversable(folder: Path, owner: pwd.struct_passwd) -> None:
    """Raise unless ``owner`` may enter ``folder`` and each of its parents."""
    import grp

    groups = {owner.pw_gid} | {g.gr_gid for g in grp.getgrall() if owner.pw_name in g.gr_mem}
    for path in (folder, *folder.parents):
        st = path.stat()
        if st.st_uid == owner.pw_uid:
            ok = st.st_mode & 0o100
        elif st.st_gid in groups:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            raise PermissionError(
                f"the server runs as {owner.pw_name!r}, which cannot enter {path} "
                f"(mode {st.st_mode & 0o777:o}); use a folder it can reach, e.g. under /tmp"
            )


@dataclass
class LocalPostgres:
    """One PostgreSQL cluster in ``base_dir`` (``data/``, ``run/``, ``server.log``).

    Args:
        base_dir (Path): Where the cluster lives; created if missing. An existing
            cluster there is reused (its superuser and password must match).
        port (int, optional): TCP port on ``host``; ``0`` picks a free one.
            (default: :obj:`0`)
        user (str, optional): The superuser ``initdb`` creates.
            (default: :obj:`"gnncore"`)
        password (str, optional): Its password. (default: :obj:`"gnncore"`)
        host (str, optional): The only address the server listens on.
            (default: :obj:`"127.0.0.1"`)
        pg_bin (Path, optional): The binaries' folder. (default:
            :func:`find_pg_bin`)
    """

    base_dir: Path
    port: int = 0
    user: str = DEFAULT_USER
    password: str = DEFAULT_USER
    host: str = "127.0.0.1"
    pg_bin: Path | None = None
    _owner: pwd.struct_passwd | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir).absolute()
        if self.pg_bin is None:
            self.pg_bin = find_pg_bin()
        if self.pg_bin is None:
            raise FileNotFoundError(
                "no PostgreSQL binaries (initdb, pg_ctl, postgres): install Debian's "
                "'postgresql' package (make sysdeps) or set GNNCORE_PG_BIN"
            )
        if not self.port:
            self.port = free_port(self.host)
        self._owner = _server_user()

    # Paths and URLs ---------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir / "run"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    def url(self, database: str = "postgres", scheme: str = "postgresql") -> str:
        """``postgresql://user:password@host:port/database`` (libpq, ``psycopg2.connect``)."""
        auth = f"{quote(self.user, safe='')}:{quote(self.password, safe='')}"
        return f"{scheme}://{auth}@{self.host}:{self.port}/{database}"

    def sqlalchemy_url(self, database: str) -> str:
        """The same URL naming the psycopg2 driver, as MLflow's store wants it
        (SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3)."""
        return self.url(database, scheme=SQLALCHEMY_SCHEME)

    def env(self, dagster_db: str = "dagster", mlflow_db: str = "mlflow") -> dict[str, str]:
        """The variables the ``postgres`` profile reads, pointing at this server."""
        return {
            "GNNCORE_PG_HOST": self.host,
            "GNNCORE_PG_PORT": str(self.port),
            "GNNCORE_PG_USER": self.user,
            "GNNCORE_PG_PASSWORD": self.password,
            "GNNCORE_PG_DB": dagster_db,
            "GNNCORE_MLFLOW_URI": self.sqlalchemy_url(mlflow_db),
        }

    # Lifecycle --------------------------------------------------------------

    def _run(
        self, args: list[str], timeout: float, check: bool = True, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL tool as the server's user; with ``check``, raise with its
        output (and the server log's tail) when it fails."""
        assert self.pg_bin is not None
        cmd = [str(self.pg_bin / args[0]), *args[1:]]
        owner = self._owner
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        if owner is not None:
            env.update(HOME=owner.pw_dir, USER=owner.pw_name, LOGNAME=owner.pw_name)
            kwargs.update(user=owner.pw_uid, group=owner.pw_gid, extra_groups=[])
        done = subprocess.run(
            cmd,
            env=env,
            cwd=self.base_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )
        if check and done.returncode != 0:
            log = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )
        return done

    def _prepare_dirs(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self._owner is not None:
            _check_traversable(self.base_dir.parent, self._owner)
        self.socket_dir.mkdir(exist_ok=True)
        if self._owner is not None:
            for path in (self.base_dir, self.socket_dir):
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        self.base_dir.chmod(0o700)

    def initdb(self, timeout: float = 120.0) -> None:
        """Create the cluster unless ``data/`` already holds one."""
        if (self.data_dir / "PG_VERSION").exists():
            return
        self._prepare_dirs()
        pwfile = self.base_dir / ".pwfile"
        pwfile.write_text(self.password + "\n")
        try:
            if self._owner is not None:
                os.chown(pwfile, self._owner.pw_uid, self._owner.pw_gid)
            pwfile.chmod(0o600)
            self._run(
                [
                    "initdb",
                    "-D",
                    str(self.data_dir),
                    "-U",
                    self.user,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-locale",
                ],
                timeout=timeout,
            )
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self, timeout: float = 60.0) -> LocalPostgres:
        """``initdb`` if needed, then start the server and wait until it accepts
        connections (at most ``timeout`` seconds)."""
        self.initdb(timeout=max(timeout, 60.0))
        self._prepare_dirs()
        options = (
            f"-c listen_addresses={self.host} -p {self.port} "
            f"-c unix_socket_directories={self.socket_dir} "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            [
                "pg_ctl",
                "start",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                str(int(timeout)),
                "-o",
                options,
            ],
            timeout=timeout + 15,
        )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until a login over TCP succeeds."""
        import psycopg2

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg2.connect(self.url(), connect_timeout=5).close()
                return
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def running(self) -> bool:
        """Whether a server runs on this cluster (``pg_ctl status``)."""
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        status = self._run(["pg_ctl", "status", "-D", str(self.data_dir)], 30, check=False)
        return status.returncode == 0

    def stop(self, timeout: float = 30.0) -> bool:
        """``pg_ctl stop -m immediate``; ``False`` (and nothing done) when no server runs."""
        if not self.running():
            return False
        self._run(
            ["pg_ctl", "stop", "-D", str(self.data_dir), "-m", "immediate", "-w"],
            timeout=timeout,
        )
        return True

    def create_database(self, name: str) -> None:
        """Create database ``name`` (owned by the superuser) unless it exists."""
        import psycopg2
        from psycopg2 import sql

        conn = psycopg2.connect(self.url(), connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        finally:
            conn.close()

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_postgres(
    base_dir: Path, databases: tuple[str, ...] = DEFAULT_DATABASES, **kwargs: Any
) -> Iterator[LocalPostgres]:
    """A started server with ``databases`` created; always stopped on exit."""
    server = LocalPostgres(Path(base_dir), **kwargs)
    try:
        server.start()
        for name in databases:
            server.create_database(name)
        yield server
    finally:
        server.stop()


# The `make postgres` entry point --------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m resources.postgres_server",
        description="Start or stop a local throwaway PostgreSQL for the postgres profile.",
    )
    parser.add_argument("action", choices=["start", "stop", "env"])
    parser.add_argument("dir", type=Path, help="the server's folder (data/, run/, server.log)")
    args = parser.parse_args(argv)
    env = os.environ
    server = LocalPostgres(
        args.dir,
        port=int(env.get("GNNCORE_PG_PORT", "5432")),
        user=env.get("GNNCORE_PG_USER", DEFAULT_USER),
        password=env.get("GNNCORE_PG_PASSWORD", DEFAULT_USER),
        host=env.get("GNNCORE_PG_HOST", "127.0.0.1"),
    )
    dagster_db = env.get("GNNCORE_PG_DB", "dagster")
    mlflow_db = env.get("GNNCORE_PG_MLFLOW_DB", "mlflow")
    if args.action == "stop":
        stopped = server.stop()
        print(f"{'stopped the' if stopped else 'no'} PostgreSQL server in {server.data_dir}")
        return 0
    if args.action == "start" and server.running():
        print(f"a server already runs in {server.data_dir}")
    elif args.action == "start":
        server.start()
        server.create_database(dagster_db)
        server.create_database(mlflow_db)
        print(f"PostgreSQL listens on {server.host}:{server.port} (log: {server.log_file})")
        print("# The postgres profile reads (make ... PROFILE=postgres sets these defaults):")
    for key, value in server.env(dagster_db, mlflow_db).items():
        print(f"export {key}='{value}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
