"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, started per test run.

``LocalPostgres`` runs ``initdb`` into a fresh directory, starts ``postgres`` on a free
loopback port (its unix socket in that directory, nothing under /var/run), waits for
``pg_isready`` and creates the database; ``stop()`` shuts it down and deletes everything.
Password authentication over TCP (scram-sha-256), as a client in a cluster connects.

PostgreSQL refuses to run as root: when the tests run as root (CI), the server runs as
Debian's ``postgres`` system user (created by the package), in a directory owned by it.
Missing server binaries raise ``PostgresNotInstalled`` (``.ci/run`` installs the package).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresNotInstalled(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def server_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding ``postgres`` and ``initdb``
    (``$PG_BINDIR`` overrides)."""
    override = os.environ.get("PG_BINDIR")
    candidates = (
        [override]
        if override
        else sorted(
            glob.glob("/usr/lib/postgresql/*/bin"),
            key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
            reverse=True,
        )
    )
    for path in candidates:
        if all(os.access(Path(path) / exe, os.X_OK) for exe in ("postgres", "initdb")):
            return Path(path)
    raise PostgresNotInstalled(
        "PostgreSQL's server binaries were not found (/usr/lib/postgresql/*/bin/postgres); "
        "install Debian's package: apt-get install postgresql (.ci/run does it when missing)"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(os.environ.get("PG_TEST_USER", "postgres"))
    except KeyError:
        raise PostgresNotInstalled(
            "running as root, and there is no 'postgres' user to run PostgreSQL as "
            "(Debian's postgresql package creates it)"
        ) from None
    return entry.pw_uid, entry.pw_gid


class LocalPostgres:
    """One PostgreSQL server on 127.0.0.1:<port> with database ``database``, owned by
    ``user`` (a superuser) with ``password``."""

    def __init__(
        self,
        *,
        database: str = "dagster",
        user: str = "dagster",
        password: str = "dagster-test",
        start_timeout: float = 60.0,
    ) -> None:
        self.database = database
        self.user = user
        self.password = password
        self.host = "127.0.0.1"
        self.port = 0
        self.start_timeout = start_timeout
        self.bindir = server_bindir()
        self.run_as = _server_user()
        self.root: Path | None = None
        self.proc: subprocess.Popen | None = None

    # -- what clients need ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def dagster_env(self) -> dict[str, str]:
        """The variables ``platform/cluster/dagster.yaml`` reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.database,
        }

    @property
    def log_file(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- lifecycle -----------------------------------------------------------------------

    def _run(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(
            args,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
            **{**self._as_server_user(), **kwargs},
        )

    def _as_server_user(self) -> dict:
        assert self.root is not None
        kwargs: dict = {"cwd": self.root, "env": {**os.environ, "LC_ALL": "C", "LANG": "C"}}
        if self.run_as is not None:
            uid, gid = self.run_as
            kwargs.update(user=uid, group=gid, extra_groups=[])
        return kwargs

    def start(self) -> LocalPostgres:
        # its own directory straight under /tmp: pytest's tmp dirs (0700, root's) are not
        # reachable by the postgres user
        self.root = Path(tempfile.mkdtemp(prefix="pytest-postgres-"))
        data, sockets = self.root / "data", self.root / "socket"
        sockets.mkdir()
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.run_as is not None:
            for path in (self.root, sockets, pwfile):
                os.chown(path, *self.run_as)
        try:
            self._run(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    self.user,
                    f"--pwfile={pwfile}",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "--encoding=UTF8",
                    "--no-locale",
                    "--no-sync",
                ]
            )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed: {exc.stderr or exc.stdout}") from exc
        pwfile.unlink()
        for attempt in range(3):
            self.port = free_port()
            self._start_server(data, sockets)
            try:
                self._wait_ready()
                break
            except _ServerExited:
                if attempt == 2 or "could not bind" not in self.log_tail():
                    raise RuntimeError(
                        f"postgres exited at start (code {self.proc.returncode}):\n"
                        f"{self.log_tail()}"
                    ) from None
        self._createdb()
        return self

    def _start_server(self, data: Path, sockets: Path) -> None:
        log = open(self.log_file, "ab")  # noqa: SIM115 - the server's, closed with it
        try:
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D",
                    str(data),
                    "-h",
                    self.host,
                    "-p",
                    str(self.port),
                    "-k",
                    str(sockets),
                    # a test database: no durability needed, faster on a small machine
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=100",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **self._as_server_user(),
            )
        finally:
            log.close()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise _ServerExited()
            ready = subprocess.run(
                [
                    str(self.bindir / "pg_isready"),
                    "-h",
                    self.host,
                    "-p",
                    str(self.port),
                    "-d",
                    "postgres",
                    "-t",
                    "2",
                ],
                capture_output=True,
                timeout=10,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"postgres did not accept connections in {self.start_timeout:.0f} s:\n{self.log_tail()}"
        )

    def _createdb(self) -> None:
        """Create the database over TCP with the password (checks the client's way in)."""
        try:
            self._run(
                [
                    str(self.bindir / "createdb"),
                    "-h",
                    self.host,
                    "-p",
                    str(self.port),
                    "-U",
                    self.user,
                    self.database,
                ],
                env={**os.environ, "PGPASSWORD": self.password, "LC_ALL": "C"},
            )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"createdb failed: {exc.stderr}") from exc

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: disconnect clients, checkpoint), SIGKILL after
        ``timeout``; then delete the data directory."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # the server's backends are its children, in its session: none may be left
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _ServerExited(Exception):
    pass
