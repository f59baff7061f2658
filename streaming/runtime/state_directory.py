"""Local state layout: ``state.dir/<application.id>/<task>/`` with a ``.checkpoint`` file.

The checkpoint holds, per changelog partition of a persistent store, the offset restoration
continues from (Kafka's ``OffsetCheckpoint`` text format: version, count, then ``topic
partition offset`` lines). No checkpoint next to a store's files means they may be ahead of
or behind the changelog (a crash, or an exactly-once task that was running), so they are
deleted and the store is rebuilt from the changelog, unless the store is transactional
(exactly-once): such a store keeps its offsets in its own files, written with its content,
and resumes from those (``store_offsets``).

The application directory also holds the process id (``kafka-streams-process-metadata``)
and a lock file so that two instances never share one state directory, and one lock file
per task (``.task-<task>.lock``, Kafka's task directory lock): a stream thread or worker
process holds it while the task's stores are open, so that the next owner of a task moved
by a rebalance waits until the last one has closed it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Collection
from pathlib import Path

from streaming.errors import ConfigException
from streaming.runtime.config_keys import STATE_DIR

log = logging.getLogger(__name__)

CHECKPOINT_FILE = ".checkpoint"
PROCESS_FILE = "kafka-streams-process-metadata"
LOCK_FILE = ".lock"


class StateDirectoryLocked(RuntimeError):
    """Another KafkaStreams instance uses this state directory."""


class TaskDirectoryLocked(RuntimeError):
    """A task's directory stayed locked by its previous owner for too long."""


class StateDirectoryUnusable(ConfigException):
    """``state.dir`` cannot be created or written: the message names the path, the reason
    and what to do."""


def _first_non_directory(path: Path) -> Path | None:
    """The first component of ``path`` that exists and is not a directory, if any."""
    for part in [*reversed(path.parents), path]:
        try:
            if part.exists() and not part.is_dir():
                return part
        except OSError:  # e.g. a parent that cannot be searched
            return None
    return None


def unusable_state_dir(root: Path, path: Path, exc: OSError, doing: str) -> StateDirectoryUnusable:
    """The ``ConfigException`` for ``exc`` (raised while ``doing``) under ``state.dir``."""
    blocker = _first_non_directory(path)
    if blocker is not None or exc.errno in (errno.ENOTDIR, errno.EEXIST):
        where = f"{blocker} is a file, not a directory" if blocker else str(exc.strerror)
        fix = f"set {STATE_DIR} to a directory (it is created if missing)"
    elif exc.errno == errno.EROFS:
        where = "it is on a read-only file system"
        fix = f"set {STATE_DIR} to a writable directory"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        where = f"permission denied for user {_user()}"
        fix = f"make it writable by that user, or set {STATE_DIR} to a directory it can write"
    elif exc.errno == errno.ENOSPC:
        where = "the disk is full"
        fix = f"free space, or set {STATE_DIR} to another disk"
    else:
        where = exc.strerror or str(exc)
        fix = f"set {STATE_DIR} to a writable directory"
    return StateDirectoryUnusable(
        f"{STATE_DIR} {str(root)!r} cannot be used: {doing} {str(path)!r} failed ({where}); {fix}"
    )


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # pragma: no cover - not on POSIX / no passwd entry
        return str(os.geteuid())


class StateDirectory:
    """The application's state directory: task dirs, process id, exclusive lock.

    Creating it creates ``state.dir/<application.id>`` and checks that files can be written
    there: ``StateDirectoryUnusable`` (a ``ConfigException``) says why not and what to do."""

    def __init__(self, root: Path, application_id: str) -> None:
        self.root = Path(root)
        self.path = self.root / application_id
        self._lock_fd: int | None = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unusable_state_dir(self.root, self.path, exc, "creating") from None
        probe = self.path / f".write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
            probe.unlink()
        except OSError as exc:
            raise unusable_state_dir(self.root, self.path, exc, "writing a file in") from None

    def lock(self) -> None:
        """Take the exclusive lock of this application's state directory."""
        try:
            fd = os.open(self.path / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            raise unusable_state_dir(
                self.root, self.path, exc, "creating the lock file in"
            ) from None
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

    def lock_task(self, task_id: str, *, timeout_s: float = 0.0) -> TaskLock:
        """Hold task ``task_id``'s directory lock, waiting up to ``timeout_s`` while its last
        owner (another stream thread or worker process) still has the task open."""
        fd = os.open(self.path / f".task-{task_id}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return TaskLock(fd)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise TaskDirectoryLocked(
                        f"task {task_id}'s state directory is still held by its previous owner "
                        f"after {timeout_s:.0f} s"
                    ) from None
                time.sleep(0.02)

    def task_dir(self, task_id: str) -> Path:
        path = self.path / task_id
        path.mkdir(parents=True, exist_ok=True)
        return path


class TaskLock:
    """A held task directory lock (released by ``release()``, or when the process ends)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None


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


def wipe_task_dir(task_dir: Path, keep: Collection[str] = ()) -> list[str]:
    """Delete every store of a task but the directories named in ``keep`` (the others are
    rebuilt from their changelogs); the names of the store directories deleted."""
    wiped = []
    if task_dir.exists():
        for child in task_dir.iterdir():
            if child.name in keep:
                continue
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
                wiped.append(child.name)
            else:
                with contextlib.suppress(OSError):
                    child.unlink()
    return wiped
