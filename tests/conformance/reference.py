"""The Java reference: Apache Kafka Streams' own TopologyTestDriver, driven over a pipe.

`JavaReference` compiles ``tests/conformance/java/*.java`` when the class files are missing or
older than the sources, starts ONE JVM running ``Harness`` and exchanges JSON lines with it:

request  ``{"id": n, "family": str, "params": {...}, "caching": bool,
            "inputs": [{"topic": str, "key": str|None, "value": int|None, "ts": int}, ...]}``
response ``{"id": n, "outputs": {topic: [[key, value, ts], ...]}, "error": None|str}``

``run(requests)`` sends a whole batch before reading the answers (the JVM works on them with a
small thread pool, answers come back in completion order and are matched by id).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java"
JARS_DIR = REPO_ROOT / ".jars" / "streams"
CLASSES_DIR = REPO_ROOT / ".jars" / "harness-classes"
MAIN_CLASS = "Harness"
JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


class HarnessError(RuntimeError):
    """The Java side could not be built or started, or died."""


def _classpath(*entries: Path | str) -> str:
    return os.pathsep.join(str(e) for e in entries)


def _check_jars() -> None:
    if not JARS_DIR.is_dir() or not any(JARS_DIR.glob("kafka-streams-test-utils-*.jar")):
        raise HarnessError(
            f"the Kafka Streams reference jars are missing from {JARS_DIR}: run `make setup` "
            "(it runs `mvn -f tests/conformance/java/pom.xml dependency:copy-dependencies "
            "-DoutputDirectory=.jars/streams`)"
        )


def _sources() -> list[Path]:
    return sorted(JAVA_SRC.glob("*.java"))


def classes_are_stale() -> bool:
    sources = _sources()
    classes = list(CLASSES_DIR.glob("*.class")) if CLASSES_DIR.is_dir() else []
    if not classes or not (CLASSES_DIR / f"{MAIN_CLASS}.class").exists():
        return True
    newest_source = max(p.stat().st_mtime for p in sources)
    oldest_class = min(p.stat().st_mtime for p in classes)
    expected = {p.stem for p in sources}
    present = {p.stem.split("$", 1)[0] for p in classes}
    return newest_source > oldest_class or not expected <= present


def compile_harness(force: bool = False) -> Path:
    """Compile the harness into .jars/harness-classes if needed; return that folder."""
    _check_jars()
    if not force and not classes_are_stale():
        return CLASSES_DIR
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessError("javac not found: a JDK 17 is needed for the conformance tests")
    CLASSES_DIR.parent.mkdir(parents=True, exist_ok=True)
    # Compile into a scratch folder and swap it in, so concurrent sessions never see half a build.
    scratch = Path(tempfile.mkdtemp(prefix="harness-classes-", dir=CLASSES_DIR.parent))
    try:
        proc = subprocess.run(
            [
                javac,
                "-nowarn",
                "-d",
                str(scratch),
                "-cp",
                _classpath(JARS_DIR / "*"),
                *map(str, _sources()),
            ],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        if proc.returncode != 0:
            raise HarnessError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
        old = None
        if CLASSES_DIR.exists():
            old = CLASSES_DIR.with_name(f"{CLASSES_DIR.name}.old-{os.getpid()}")
            CLASSES_DIR.rename(old)
        scratch.rename(CLASSES_DIR)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    return CLASSES_DIR


class JavaReference:
    """One long-lived JVM running the Kafka Streams TopologyTestDriver harness."""

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads or int(os.environ.get("HARNESS_THREADS", "2"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._stderr_thread: threading.Thread | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> JavaReference:
        if self._proc is not None:
            return self
        classes = compile_harness()
        java = shutil.which("java")
        if java is None:
            raise HarnessError("java not found: a JDK 17 is needed for the conformance tests")
        env = dict(os.environ, HARNESS_THREADS=str(self._threads))
        self._proc = subprocess.Popen(
            [java, *JVM_FLAGS, "-cp", _classpath(classes, JARS_DIR / "*"), MAIN_CLASS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
        )
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name="java-reference-stderr", daemon=True
        )
        self._stderr_thread.start()
        # Fail fast (with the JVM's stderr) if it cannot start.
        self._exchange([{"command": "ping"}])
        return self

    def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):  # the JVM may already be gone
                    proc.stdin.close()
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            if self._stderr_thread is not None:
                self._stderr_thread.join(timeout=5)
            if proc.stderr is not None:
                proc.stderr.close()

    def __enter__(self) -> JavaReference:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- requests

    def run(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send a batch of trace requests; return the responses in request order.

        Each request: ``{"family", "params", "caching", "inputs"}`` (an "id" is assigned here).
        Each response: ``{"outputs": {topic: [[key, value, ts], ...]} | None, "error": str|None}``.
        """
        if self._proc is None:
            self.start()
        return self._exchange(requests)

    def run_one(
        self, family: str, params: dict[str, Any], inputs: Iterable[dict[str, Any]], caching: bool
    ) -> dict[str, Any]:
        return self.run(
            [{"family": family, "params": params, "caching": caching, "inputs": list(inputs)}]
        )[0]

    def _exchange(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        with self._lock:
            ids = list(range(self._next_id, self._next_id + len(requests)))
            self._next_id += len(requests)
            payload = b"".join(
                orjson.dumps({**req, "id": i}) + b"\n" for i, req in zip(ids, requests, strict=True)
            )
            write_error: list[BaseException] = []

            def write() -> None:
                try:
                    proc.stdin.write(payload)
                    proc.stdin.flush()
                except BaseException as e:  # broken pipe: reported with stderr below
                    write_error.append(e)

            # Write from a thread: a big batch would otherwise fill both pipes and deadlock.
            writer = threading.Thread(target=write, name="java-reference-writer", daemon=True)
            writer.start()
            by_id: dict[int, dict[str, Any]] = {}
            while len(by_id) < len(ids):
                line = proc.stdout.readline()
                if not line:
                    writer.join(timeout=5)
                    try:
                        rc = proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        rc = None
                    message = (
                        f"the Java reference harness died (exit code {rc}, write error "
                        f"{write_error or None}); its stderr:\n{self.stderr_tail()}"
                    )
                    self.close()  # the next run() starts a fresh JVM
                    raise HarnessError(message)
                response = orjson.loads(line)
                by_id[response["id"]] = response
            writer.join()
            return [by_id[i] for i in ids]


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/conformance/reference.py [--force]``: compile the harness (for make setup)
    and check that the JVM answers."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--force", action="store_true", help="recompile even if up to date")
    args = parser.parse_args(argv)
    try:
        print(f"harness classes: {compile_harness(force=args.force)}")
        with JavaReference(threads=1) as ref:
            response = ref.run_one(
                "stateless", {}, [{"topic": "input", "key": "a", "value": 2, "ts": 0}], False
            )
    except HarnessError as exc:
        print(exc)
        return 1
    print(f"reference harness answers: {response}")
    return 0 if response["error"] is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
