"""A real local schema registry on loopback, for tests and ``make run``.

``LocalSchemaRegistry`` starts ``rivven-schema`` (a schema registry speaking Confluent's
REST API, Avro, Protobuf and JSON Schema, with compatibility checks; in-memory storage),
which ``make setup`` builds from crates.io into ``.tools/bin``, on a free loopback port,
waits until it answers, and on exit stops it::

    with LocalSchemaRegistry() as registry:
        serde = AvroSerde({"schema.registry.url": registry.url}, schema=ORDER)

``compatibility`` is the registry's default level (``BACKWARD``, Confluent's default).
``suspend()`` / ``resume()`` freeze and thaw the server process (SIGSTOP / SIGCONT): an
outage in which the registry keeps its schemas, as a hung registry does. A registry that
fails to start raises ``SchemaRegistryError`` with the tail of its log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from streaming.testing.ports import free_port

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

    @property
    def url(self) -> str:
        """The registry's base URL, for ``schema.registry.url``."""
        if self.port is None:
            raise SchemaRegistryError("the schema registry is not started")
        return f"http://127.0.0.1:{self.port}"

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """The serdes' registry settings pointing at this registry, plus ``overrides``."""
        return {"schema.registry.url": self.url, **overrides}

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
        self.port = self._fixed_port or free_port()
        command = [
            str(self.binary),
            "--log-level",
            "warn",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--compatibility",
            self.compatibility,
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        _LIVE.add(self)
        try:
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
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
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
