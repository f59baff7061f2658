"""A Spark standalone cluster (one master, one worker) on loopback, for tests.

Both daemons are started from pyspark's own scripts (``pyspark/bin/spark-class``, with
``SPARK_HOME`` = the pyspark package directory), on ``127.0.0.1`` with free ports, logs,
pid files, local and work directories under a given folder, and small heaps. ``start``
returns once the master's web UI JSON shows the worker ``ALIVE``; ``stop`` kills each
daemon's process group (the worker's executors and their Python workers with it).

``driver_conf`` gives the Spark settings a driver in this process needs to run its work on
the cluster: the ``spark://`` master URL, a loopback driver address, a small executor on
this virtualenv's Python.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The pyspark package directory: the Spark distribution pip installs."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("Spark standalone needs Java 17+: no JAVA_HOME and no java on PATH")
    return found


def _tail(path: Path, lines: int = 40) -> str:
    if not path.is_file():
        return f"({path} missing)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class StandaloneSpark:
    """One Spark standalone master and one worker on loopback, under ``root``."""

    def __init__(
        self,
        root: Path,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
    ) -> None:
        self.root = Path(root)
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.home = spark_home()
        self.spark_class = self.home / "bin" / "spark-class"
        self.master_port = free_port()
        self.master_ui_port = free_port()
        self.worker_port = free_port()
        self.worker_ui_port = free_port()
        self.log_dir = self.root / "logs"
        self.work_dir = self.root / "work"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{LOOPBACK}:{self.master_ui_port}"

    @property
    def worker_ui(self) -> str:
        return f"http://{LOOPBACK}:{self.worker_ui_port}"

    def env(self) -> dict[str, str]:
        """The daemons' environment: this Spark, loopback, folders under ``root``."""
        env = dict(os.environ)
        for name in ("SPARK_CONF_DIR", "SPARK_ENV_LOADED", "SPARK_MASTER_HOST"):
            env.pop(name, None)
        conf_dir = self.root / "conf"  # empty: no spark-defaults.conf or spark-env.sh
        dirs = {
            "SPARK_CONF_DIR": conf_dir,
            "SPARK_LOG_DIR": self.log_dir,
            "SPARK_PID_DIR": self.root / "pids",
            "SPARK_LOCAL_DIRS": self.root / "local",
            "SPARK_WORKER_DIR": self.work_dir,
        }
        for name, path in dirs.items():
            path.mkdir(parents=True, exist_ok=True)
            env[name] = str(path)
        java = _java()
        env.update(
            SPARK_HOME=str(self.home),
            JAVA_HOME=str(Path(java).resolve().parents[1]),
            SPARK_LOCAL_IP=LOOPBACK,
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_DAEMON_JAVA_OPTS="-XX:+UseSerialGC",
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        )
        return env

    def _launch(self, name: str, *args: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = (self.log_dir / f"{name}.out").open("wb")
        try:
            self._procs[name] = subprocess.Popen(
                [str(self.spark_class), *args],
                env=self.env(),
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills it whole
            )
        finally:
            log.close()

    def start(self, timeout: float = 120.0) -> StandaloneSpark:
        """Start the master, then the worker; return once the worker is registered."""
        if not os.access(self.spark_class, os.X_OK):
            raise RuntimeError(f"pyspark's spark-class script is missing: {self.spark_class}")
        _java()
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._launch(
                "master",
                MASTER_CLASS,
                "--host",
                LOOPBACK,
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_ui_port),
            )
            self._wait(lambda s: s.get("status") == "ALIVE", "the master to be ALIVE", timeout)
            self._launch(
                "worker",
                WORKER_CLASS,
                self.master_url,
                "--host",
                LOOPBACK,
                "--port",
                str(self.worker_port),
                "--webui-port",
                str(self.worker_ui_port),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.work_dir),
            )
            self._wait(lambda s: self.alive_workers(s) > 0, "the worker to register", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready: Any, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"Spark {name} exited with {proc.returncode} while waiting for {what}:\n"
                        f"{self.logs()}"
                    )
            try:
                if ready(self.master_state()):
                    return
            except OSError:
                pass  # the web UI is not up yet
            time.sleep(0.5)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}:\n{self.logs()}")

    def master_state(self) -> dict[str, Any]:
        """The master web UI's JSON: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    def worker_state(self) -> dict[str, Any]:
        """The worker web UI's JSON: its executors."""
        with urllib.request.urlopen(f"{self.worker_ui}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    @staticmethod
    def alive_workers(state: dict[str, Any]) -> int:
        return sum(1 for w in state.get("workers", ()) if w.get("state") == "ALIVE")

    def applications(self, name: str) -> list[dict[str, Any]]:
        """The master's active and completed applications called ``name``."""
        state = self.master_state()
        apps = [*state.get("activeapps", ()), *state.get("completedapps", ())]
        return [a for a in apps if a.get("name") == name]

    def wait_for_app(self, name: str, state: str, timeout: float = 30.0) -> dict[str, Any]:
        """The application ``name`` once the master reports it in ``state``."""
        deadline = time.monotonic() + timeout
        while True:
            apps = [a for a in self.applications(name) if a.get("state") == state]
            if apps:
                return apps[0]
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"application {name!r} not {state} after {timeout}s: {self.applications(name)}"
                )
            time.sleep(0.5)

    def driver_conf(self, app_name: str) -> dict[str, str]:
        """Spark settings for a driver in this process running on this cluster."""
        return {
            "spark.master": self.master_url,
            "spark.app.name": app_name,
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.cores.max": str(self.cores),
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": "512m",
            "spark.executor.extraJavaOptions": "-XX:+UseSerialGC",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
            "spark.executorEnv.PYTHONPATH": str(REPO),
        }

    def logs(self) -> str:
        """The tails of the daemons' and executors' logs."""
        parts = [f"--- {p.name} ---\n{_tail(p)}" for p in sorted(self.log_dir.glob("*"))]
        parts += [
            f"--- {p.relative_to(self.work_dir)} ---\n{_tail(p)}"
            for p in sorted(self.work_dir.glob("*/*/stderr"))
        ]
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill the worker (with its executors), then the master; each process group."""
        for name in ("worker", "master"):
            proc = self._procs.pop(name, None)
            if proc is None:
                continue
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=15)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # a process group may outlive its leader (an executor still exiting)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> StandaloneSpark:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
