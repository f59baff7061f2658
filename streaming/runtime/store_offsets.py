"""Where the stores of a task (active or standby) continue restoring from their changelogs.

The task's checkpoint file (``state_directory``) lists the offsets of its persistent stores
when it closes cleanly (and, under at-least-once, now and then while it runs). Where each
store resumes, by kind:

- a transactional store (exactly-once: ``streaming.state.api.TransactionalStore``) keeps the
  changelog offsets of its content itself, written with the content in one batch at every
  commit, crash or not: it resumes from them, whatever the checkpoint file says, and its
  files are never deleted for want of a checkpoint;
- any other persistent store resumes from the checkpoint file; without one its files are
  deleted before it opens (they may be ahead of the changelog);
- an in-memory store replays its whole changelog.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.runtime.state_directory import wipe_task_dir
from streaming.state.api import keeps_offsets, transactional_layer

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Checkpoint = dict[TopicPartition, int]


def prepare_task_dir(
    task_dir: Path,
    stores: Mapping[str, Any],
    checkpoint: Checkpoint | None,
    *,
    transactional: bool,
) -> None:
    """Before ``stores`` (built, not open) open: without a checkpoint, delete the files of
    every store but those that keep their own offsets (``transactional`` mode)."""
    if checkpoint is not None:
        return
    keep = {name for name, store in stores.items() if transactional and keeps_offsets(store)}
    wiped = wipe_task_dir(task_dir, keep=keep)
    if wiped:
        log.info(
            "No checkpoint in %s: deleted %s (restored from their changelogs)",
            task_dir,
            ", ".join(sorted(wiped)),
        )


def restore_start(store: Any, tp: TopicPartition, checkpoint: Checkpoint | None) -> int | None:
    """The offset of changelog partition ``tp`` that restoring the open ``store`` starts
    from; None: the beginning."""
    if not getattr(store, "persistent", True):
        return None
    layer = transactional_layer(store)
    if layer is not None:
        return layer.committed_offset(*tp)
    return None if checkpoint is None else checkpoint.get(tp)


def commit_restored(store: Any, tp: TopicPartition, offset: int) -> None:
    """A restored batch of ``store`` (transactional) ended before ``offset``: commit it."""
    store.commit({tp: offset})
