"""Local state layout: ``state.dir/<application.id>/<task>/`` with a ``.checkpoint`` file.

The checkpoint holds, per changelog partition, the offset restoration continues from (Kafka's
``OffsetCheckpoint`` text format: version, count, then ``topic partition offset`` lines). No
checkpoint next to existing store files means the files may be ahead of or behind the
changelog (a crash, or an exactly-once task that was running), so the task directory is
wiped and the stores are rebuilt from the changelog.

The application directory also holds the process id (``kafka-streams-process-metadata``)
and a lock file so that two instances never share one state directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

CHECKPOINT_FILE = ".checkpoint"
PROCESS_FILE = "kafka-streams-process-metadata"
LOCK_FILE = ".lock"


class StateDirectoryLocked(RuntimeError):
    """Another KafkaStreams instance uses this state directory."""


class StateDirectory:
    """The application's state directory: task dirs, process id, exclusive lock."""

    def __init__(self, root: Path, application_id: str) -> None:
        self.path = Path(root) / application_id
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the exclusive lock of this application's state directory."""
        fd = os.open(self.path / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateDirectoryLocked(
                f"state directory {self.path} is used by another KafkaStreams instance; give "
                "each instance of the application its own state.dir"
            ) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def process_id(self) -> str:
        """A UUID kept across restarts of this instance (Kafka's process metadata file)."""
        meta = self.path / PROCESS_FILE
        try:
            return str(uuid.UUID(json.loads(meta.read_text())["processId"]))
        except (OSError, ValueError, KeyError, TypeError):
            pid = str(uuid.uuid4())
            meta.write_text(json.dumps({"processId": pid}))
            return pid

    def task_dir(self, task_id: str) -> Path:
        path = self.path / task_id
        path.mkdir(parents=True, exist_ok=True)
        return path


def read_checkpoint(task_dir: Path) -> dict[tuple[str, int], int] | None:
    """The checkpointed changelog offsets, or None when there is no (valid) checkpoint."""
    path = task_dir / CHECKPOINT_FILE
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return None
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown checkpoint version {lines[0]!r}")
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError("truncated")
        return out
    except (ValueError, IndexError) as exc:
        log.warning("Ignoring corrupt checkpoint %s: %s", path, exc)
        return None


def write_checkpoint(task_dir: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Atomically write the checkpoint file."""
    path = task_dir / CHECKPOINT_FILE
    tmp = path.with_suffix(".tmp")
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    with open(tmp, "w") as f:
        f.write(f"0\n{len(offsets)}\n{body}")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def delete_checkpoint(task_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (task_dir / CHECKPOINT_FILE).unlink()


def wipe_task_dir(task_dir: Path) -> None:
    """Delete every store of a task (its state is rebuilt from the changelogs)."""
    if task_dir.exists():
        for child in task_dir.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    child.unlink()
