"""The ``filesystem`` sink: rows appended to files that become visible only when the task
commits, so that under exactly-once every committed row is in exactly one visible file.

A task writes the rows of one commit (an *epoch*) to one hidden in-progress file per
partition directory, ``.part-<app>-<task>-<epoch>-<n>.inprogress``. The commit makes them
visible in two steps, as Flink's two-phase commit sink does:

1. ``flush`` (before the task's transaction commits) closes them as pending files,
   ``.part-...-<n>.pending``, and the processor has put the epoch in the task's processor
   metadata, which the transaction commits with the input offsets;
2. ``commit`` (after the transaction committed) renames them to ``part-...-<n>``.

A task closed without committing (an aborted transaction, a failure) deletes its
in-progress files and leaves its pending ones hidden. When it starts again it finds them
(also those of a task that died between 1 and 2): those of an epoch up to the committed
one are renamed (their transaction committed), later ones deleted (``FileSink.recover``). Without exactly-once
(no transactional stores) ``flush`` makes the files visible at once: at least once.

Flink rolls a part file by its rolling policy too (size, time); here a file holds one
commit's rows of one partition and ``'sink.rolling-policy.*'`` is not read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from streaming.sql.filesystem import DEFAULT_PARTITION, FileFormat, partition_dir
from streaming.state.api import StateStore
from streaming.topology.processor import Processor, Record

_INPROGRESS = ".inprogress"
_PENDING = ".pending"


class FileSink(StateStore):
    """The open part files of one task of a filesystem sink (a store, so that the runtime
    commits it with the task: ``TransactionalStore`` under exactly-once)."""

    def __init__(
        self,
        name: str,
        root: Path,
        file_format: FileFormat,
        partition_keys: tuple[str, ...],
        default_partition: str = DEFAULT_PARTITION,
    ) -> None:
        self.name = name
        self.root = root
        self.format = file_format
        self.partition_keys = partition_keys
        self.default_partition = default_partition
        #: exactly-once: files become visible on ``commit``, not on ``flush``
        self.transactional = False
        self.prefix = "part"
        self.epoch = 0
        self._open = False
        #: partition directory -> (its in-progress file, the file's path)
        self._files: dict[str, tuple[BinaryIO, Path]] = {}
        #: the pending files of the epoch being committed
        self._pending: list[Path] = []
        #: the part files opened in this epoch (a flush before the commit closes some)
        self._count = 0
        self._written = 0

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: Any, root: StateStore) -> None:
        self.transactional = bool(getattr(context, "transactional_state", False))
        app = hashlib.sha1(str(context.application_id).encode()).hexdigest()[:8]
        self.prefix = f"part-{app}-{context.task_id}"
        self.root.mkdir(parents=True, exist_ok=True)
        self._open = True

    def write(self, row: Mapping[str, Any]) -> None:
        """Append ``row`` to its partition's in-progress file."""
        directory = partition_dir(row, self.partition_keys, self.default_partition)
        entry = self._files.get(directory)
        if entry is None:
            folder = self.root / directory if directory else self.root
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f".{self.prefix}-{self.epoch}-{self._count}{_INPROGRESS}"
            entry = self._files[directory] = (path.open("wb"), path)
            self._count += 1
        line = self.format.line(row)
        entry[0].write(line)
        self._written += len(line)

    def flush(self) -> None:
        """Close the in-progress files as pending ones (exactly-once: synced to disk first,
        as their transaction is about to commit) or visible ones."""
        for handle, path in self._files.values():
            handle.flush()
            if self.transactional:
                os.fsync(handle.fileno())
            handle.close()
            pending = path.with_name(path.name.removesuffix(_INPROGRESS) + _PENDING)
            path.rename(pending)
            self._pending.append(pending)
        self._files.clear()
        if not self.transactional:
            self._publish()

    def _publish(self) -> None:
        for pending in self._pending:
            pending.rename(visible_name(pending))
        self._pending.clear()
        self._written = 0
        self._count = 0
        self.epoch += 1

    # -- TransactionalStore (exactly-once) ---------------------------------------------

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """The task's transaction committed: its pending files become visible."""
        self.flush()
        self._publish()

    def committed_offset(self, topic: str, partition: int) -> int | None:
        return None  # no changelog

    @property
    def uncommitted_bytes(self) -> int:
        return self._written

    def recover(self, committed_epoch: int | None) -> None:
        """At the task's start: publish this task's pending files of epochs up to
        ``committed_epoch`` (their transaction committed), delete the rest of its hidden
        files, and continue after the committed epoch."""
        for path in sorted(self.root.rglob(f".{self.prefix}-*")):
            epoch = _epoch_of(path, self.prefix)
            done = committed_epoch is not None and epoch is not None and epoch <= committed_epoch
            if done and path.name.endswith(_PENDING):
                path.rename(visible_name(path))
            else:
                path.unlink(missing_ok=True)
        self.epoch = 0 if committed_epoch is None else committed_epoch + 1

    def close(self) -> None:
        """Close without a commit: the in-progress files are dropped (no transaction has
        their rows); pending files stay hidden for ``recover`` to decide (their
        transaction may have committed without the task learning it)."""
        for handle, path in self._files.values():
            handle.close()
            path.unlink(missing_ok=True)
        self._files.clear()
        self._pending.clear()
        self._written = 0
        self._count = 0
        self._open = False


def visible_name(hidden: Path) -> Path:
    """``.part-...-<n>.pending`` -> ``part-...-<n>``."""
    name = hidden.name.removeprefix(".").removesuffix(_PENDING).removesuffix(_INPROGRESS)
    return hidden.with_name(name)


def _epoch_of(path: Path, prefix: str) -> int | None:
    rest = visible_name(path).name.removeprefix(prefix + "-")
    epoch, _, _ = rest.partition("-")
    return int(epoch) if epoch.isdigit() else None


class FileSinkBuilder:
    """Builds a task's ``FileSink`` (a ``StoreBuilder`` without changelog or cache)."""

    caching_enabled = False
    logging_enabled = False
    log_config: dict[str, Any] = {}
    persistent = False

    def __init__(self, name: str, make: Any) -> None:
        self.name = name
        self._make = make

    def build(self) -> FileSink:
        sink: FileSink = self._make()
        return sink


class FileSinkProcessor(Processor):
    """Writes each row to the task's ``FileSink``; the epoch of its files goes into the
    processor metadata that the task commits with its input offsets."""

    def __init__(self, store: str) -> None:
        self.store_name = store
        self.marked = -1

    def init(self, context: Any) -> None:
        super().init(context)
        self.sink: FileSink = context.get_state_store(self.store_name)
        committed = getattr(context, "processor_metadata_for_key", lambda key: None)(self.key)
        self.sink.recover(committed)

    @property
    def key(self) -> str:
        return f"{self.store_name}-epoch"

    def process(self, record: Record) -> None:
        if record.value is None:
            return
        if self.marked != self.sink.epoch:
            self.marked = self.sink.epoch
            self.context.add_processor_metadata_key_value(self.key, self.sink.epoch)  # type: ignore[attr-defined]
        self.sink.write(record.value)
