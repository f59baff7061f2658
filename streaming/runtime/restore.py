"""Restoring stores from their changelogs (Kafka's ``StoreChangelogReader``).

A separate consumer (no consumer group, ``read_committed``, partition EOF events on) is
assigned the changelog partitions of the tasks to restore, each from the offset its store
resumes from (``store_offsets``) or the beginning, and reads until the end (the last stable
offset under exactly-once). Records go in batches to each store's restore callback; a
transactional store commits each batch with the offset after it (``on_batch``), so that a
restore cut short resumes where it stopped. A ``StateRestoreListener`` (or the log) hears
about the start, each batch and the end, per changelog partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streaming.runtime.failures import Kind, RetriableStreamsException, calling, classify
from streaming.runtime.messages import changelog_entry, offset_of, topic_partition

log = logging.getLogger(__name__)

#: a restore that receives nothing for this long gives control back to the stream thread
NO_PROGRESS_S = 5.0


class StateRestoreListener(Protocol):
    """Kafka's ``StateRestoreListener`` (all three methods are optional here)."""

    def on_restore_start(
        self, topic_partition: Any, store_name: str, start: int, end: int
    ) -> None: ...

    def on_batch_restored(
        self, topic_partition: Any, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None: ...

    def on_restore_end(
        self, topic_partition: Any, store_name: str, total_restored: int
    ) -> None: ...


@dataclass
class RestoreProgress:
    """Progress of one changelog partition (also what ``metrics()`` reports)."""

    store: str
    topic: str
    partition: int
    start: int
    end: int
    restored: int = 0
    done: bool = False


@dataclass
class RestoreRequest:
    """One store of one task to restore: its changelog partition and where to start."""

    store: str
    topic: str
    partition: int
    start: int | None  # None: from the beginning
    callback: Callable[[Iterable[tuple[bytes, bytes | None, int]]], None]
    #: a source topic serving as changelog: restore stops at this (committed) offset, and
    #: records without a key are skipped, as the source node skips them
    limit: int | None = None
    #: called with the offset after each batch once ``callback`` applied it (a
    #: transactional store commits the batch with it)
    on_batch: Callable[[int], None] | None = None


class ChangelogReader:
    """Restores changelog partitions with a dedicated consumer."""

    def __init__(self, consumer: Consumer, listener: Any = None, *, batch_size: int = 2000) -> None:
        self.consumer = consumer
        self.listener = listener
        self.batch_size = batch_size
        self.progress: dict[tuple[str, int], RestoreProgress] = {}

    def end_offset(self, topic: str, partition: int, timeout: float = 10.0) -> int:
        """The changelog partition's end offset (high watermark)."""
        return self._watermarks(topic, partition, timeout)[1]

    def _watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        try:
            with calling(f"reading the end offset of {topic}-{partition}"):
                return self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout, cached=False
                )
        except RetriableStreamsException:
            # the leader may have moved: refresh the metadata so the next try asks the new one
            try:
                self.consumer.list_topics(topic, timeout=2.0)
            except KafkaException as exc:
                log.debug("metadata refresh for %s failed: %s", topic, exc)
            raise

    def restore(self, requests: list[RestoreRequest], should_stop: Callable[[], bool]) -> int:
        """Restore every request to the end of its changelog; returns the records restored."""
        pending: dict[tuple[str, int], RestoreRequest] = {}
        assign = []
        for req in requests:
            low, high = self._watermarks(req.topic, req.partition, 10.0)
            if req.limit is not None:
                high = min(high, req.limit)
            start = low if req.start is None else max(req.start, low)
            tp_key = (req.topic, req.partition)
            prog = RestoreProgress(req.store, req.topic, req.partition, start, high)
            self.progress[tp_key] = prog
            if start >= high:
                prog.done = True
                continue
            self._call("on_restore_start", req, start, high)
            log.info(
                "Restoring store %s from %s-%s offsets %s..%s",
                req.store,
                req.topic,
                req.partition,
                start,
                high,
            )
            pending[tp_key] = req
            assign.append(
                TopicPartition(
                    req.topic, req.partition, OFFSET_BEGINNING if req.start is None else start
                )
            )
        if not pending:
            return 0
        self.consumer.assign(assign)
        total = 0
        last_progress = time.monotonic()
        try:
            while pending:
                if should_stop():
                    return total
                msgs = self.consumer.consume(num_messages=self.batch_size, timeout=0.2)
                if msgs:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > NO_PROGRESS_S:
                    # brokers away or leaders moving: give the loop back, resume later
                    raise RetriableStreamsException(
                        f"restoring {sorted(pending)} made no progress for {NO_PROGRESS_S:.0f} s"
                    )
                batches: dict[tuple[str, int], list[tuple[bytes, bytes | None, int]]] = {}
                last: dict[tuple[str, int], int] = {}
                eof: list[tuple[str, int]] = []
                for msg in msgs:
                    err = msg.error()
                    tp_key = topic_partition(msg)
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            eof.append(tp_key)
                            continue
                        if classify(err) is Kind.FATAL:
                            raise KafkaException(err)
                        log.debug("Restore consumer error: %s", err)
                        continue
                    if tp_key not in pending:
                        continue
                    if offset_of(msg) >= self.progress[tp_key].end:
                        eof.append(tp_key)  # past a source changelog's committed offset
                        continue
                    if msg.key() is None and pending[tp_key].limit is not None:
                        last[tp_key] = offset_of(msg)
                        batches.setdefault(tp_key, [])
                        continue
                    # changelog records have keys (null-key source records were skipped above)
                    batches.setdefault(tp_key, []).append(changelog_entry(msg))
                    last[tp_key] = offset_of(msg)
                for tp_key, batch in batches.items():
                    req = pending[tp_key]
                    if batch:
                        req.callback(batch)
                    if req.on_batch is not None:
                        req.on_batch(last[tp_key] + 1)
                    req.start = last[tp_key] + 1  # a retried restore resumes here
                    prog = self.progress[tp_key]
                    prog.restored += len(batch)
                    total += len(batch)
                    self._call("on_batch_restored", req, last[tp_key], len(batch))
                    if last[tp_key] + 1 >= prog.end:
                        eof.append(tp_key)
                for tp_key in eof:
                    done = pending.pop(tp_key, None)
                    if done is None:
                        continue
                    req = done
                    prog = self.progress[tp_key]
                    prog.done = True
                    self._call("on_restore_end", req, prog.restored)
                    log.info(
                        "Restored store %s from %s-%s: %s records",
                        req.store,
                        req.topic,
                        req.partition,
                        prog.restored,
                    )
        finally:
            self.consumer.unassign()
        return total

    def _call(self, method: str, req: RestoreRequest, *args: Any) -> None:
        if self.listener is None:
            return
        fn = getattr(self.listener, method, None)
        if fn is None:
            return
        try:
            fn(TopicPartition(req.topic, req.partition), req.store, *args)
        except Exception:
            log.exception("State restore listener %s failed", method)
