"""A real local schema registry on loopback, for tests and ``make run``.

``LocalSchemaRegistry`` starts ``rivven-schema`` (a schema registry speaking Confluent's
REST API, Avro, Protobuf and JSON Schema, with compatibility checks; in-memory storage),
which ``make setup`` builds from crates.io into ``.tools/bin``, on a free loopback port,
waits until it answers, and on exit stops it::

    with LocalSchemaRegistry() as registry:
        serde = AvroSerde({"schema.registry.url": registry.url}, schema=ORDER)

``compatibility`` is the registry's default level (``BACKWARD``, Confluent's default).
``users={"app": "secret"}`` asks for HTTP basic auth and ``tls=True`` serves HTTPS with a
throwaway CA (``ca_path``), both by a front (``registry_gate``) before the server, which has
neither: ``client_config()`` then carries the first user's credentials and the CA.
``suspend()`` / ``resume()`` freeze and thaw the server process (SIGSTOP / SIGCONT): an
outage in which the registry keeps its schemas, as a hung registry does. A registry that
fails to start raises ``SchemaRegistryError`` with the tail of its log.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.testing.ports import free_port
from streaming.testing.registry_gate import RegistryGate

_REPO = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = _REPO / ".tools" / "bin" / "rivven-schema"
_LOG_TAIL_LINES = 40


class SchemaRegistryError(RuntimeError):
    """The local schema registry could not be started or used."""


class LocalSchemaRegistry:
    """One ``rivven-schema`` server on 127.0.0.1 with in-memory storage."""

    def __init__(
        self,
        *,
        port: int | None = None,
        compatibility: str = "BACKWARD",
        binary: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        users: Mapping[str, str] | None = None,
        tls: bool = False,
    ) -> None:
        self.binary = Path(
            binary or os.environ.get("STREAMING_SCHEMA_REGISTRY_BIN") or DEFAULT_BINARY
        )
        self.compatibility = compatibility
        self.startup_timeout = startup_timeout
        self._fixed_port = port
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self.users = dict(users or {})
        self.tls = tls
        self._gate: RegistryGate | None = None
        self._backend_port: int | None = None

    @property
    def secured(self) -> bool:
        """Whether a front asks for credentials or speaks TLS."""
        return bool(self.users) or self.tls

    @property
    def ca_path(self) -> Path | None:
        """The CA a client trusts for the registry's TLS (None without TLS)."""
        return None if self._gate is None else self._gate.ca_path

    @property
    def url(self) -> str:
        """The registry's base URL, for ``schema.registry.url``."""
        if self.port is None:
            raise SchemaRegistryError("the schema registry is not started")
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """The serdes' registry settings pointing at this registry (with the first user's
        credentials and the CA when secured), plus ``overrides``."""
        config: dict[str, Any] = {"schema.registry.url": self.url}
        if self.users:
            user, password = next(iter(self.users.items()))
            config["basic.auth.user.info"] = f"{user}:{password}"
        if self.ca_path is not None:
            config["schema.registry.ssl.ca.location"] = str(self.ca_path)
        return {**config, **overrides}

    @property
    def log_path(self) -> Path:
        """The file the server's output goes to."""
        if self._dir is None:
            raise SchemaRegistryError("the schema registry is not started")
        return self._dir / "registry.log"

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> LocalSchemaRegistry:
        """Start the server and wait until it answers ``GET /subjects``."""
        if self.process is not None:
            raise SchemaRegistryError("the schema registry is already started")
        if not self.binary.is_file():
            raise SchemaRegistryError(
                f"no schema registry binary at {self.binary}: run `make setup` (it builds "
                "rivven-schema with cargo) or set STREAMING_SCHEMA_REGISTRY_BIN"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="local-schema-registry-"))
        self._backend_port = free_port() if self.secured else (self._fixed_port or free_port())
        command = [
            str(self.binary),
            "--log-level",
            "warn",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self._backend_port),
            "--compatibility",
            self.compatibility,
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        _LIVE.add(self)
        try:
            if self.secured:
                self._gate = RegistryGate(
                    self._backend_port,
                    users=self.users,
                    tls_dir=self._dir / "tls" if self.tls else None,
                )
                self.port = self._gate.port
            else:
                self.port = self._backend_port
            self._wait_until_ready()
            self.set_compatibility(self.compatibility)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SchemaRegistryError(
                    f"the schema registry exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                self.request("GET", "/subjects", timeout=1.0)
                return
            except (OSError, SchemaRegistryError):
                if time.monotonic() > deadline:
                    raise SchemaRegistryError(
                        f"the schema registry did not answer on {self.url} within "
                        f"{self.startup_timeout:.0f} s:\n{self.log_tail()}"
                    ) from None
                time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its directory."""
        if self._gate is not None:
            self._gate.close()
            self._gate = None
        proc = self.process
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.process = None
        self.port = None
        self._backend_port = None
        _LIVE.discard(self)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def suspend(self) -> None:
        """Freeze the server (SIGSTOP): requests hang until ``resume()``."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a suspended server (SIGCONT)."""
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is None or self.process.poll() is not None:
            raise SchemaRegistryError("the schema registry is not running")
        self.process.send_signal(sig)

    # ------------------------------------------------------------------ REST helpers

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0) -> Any:
        """One call of the registry's REST API, its JSON answer decoded; an error answer
        raises ``SchemaRegistryError`` with the registry's message."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if self.users:
            user, password = next(iter(self.users.items()))
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        context = None
        if self.ca_path is not None:
            context = ssl.create_default_context(cafile=str(self.ca_path))
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise SchemaRegistryError(
                f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}"
            ) from exc
        return json.loads(raw) if raw else None

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """Set the compatibility level of ``subject``, or the registry's default."""
        path = "/config" if subject is None else f"/config/{subject}"
        self.request("PUT", path, {"compatibility": level})

    def subjects(self) -> list[str]:
        """The registered subjects."""
        return list(self.request("GET", "/subjects"))

    def versions(self, subject: str) -> list[int]:
        """The versions registered under ``subject``."""
        return list(self.request("GET", f"/subjects/{subject}/versions"))

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's output."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, SchemaRegistryError) as exc:
            return f"(no log: {exc})"


_LIVE: set[LocalSchemaRegistry] = set()


@atexit.register
def _stop_live_registries() -> None:
    for registry in list(_LIVE):
        with contextlib.suppress(Exception):
            registry.stop(timeout=2.0)
