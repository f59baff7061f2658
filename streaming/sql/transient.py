"""Push queries that need a topology: GROUP BY, windows, joins, HAVING, subqueries.

``plan`` (``queries``) hands such a ``... EMIT CHANGES`` query to ``compile_transient``,
which compiles its SELECT with the SQL compiler, over the serving application's declared
tables, into a view whose rows go to a ``RowBuffer`` instead of a topic (errors are
``SqlError`` with line and column, before anything runs). ``TransientPushStream`` runs
that topology as a transient ``KafkaStreams`` application inside the serving process, as
ksqlDB runs a transient push query:

- its own ``application.id`` (``<app id>-push-<8 hex>``, also its consumer group), its
  own temporary state directory (``<state.dir>/push-*``), the serving application's
  client settings (bootstrap servers, security), ``at_least_once``, a 100 ms commit
  interval, no record cache (every update of an aggregate is a row), no query server;
- rows from now on (ksqlDB's ``auto.offset.reset`` latest for push queries): before the
  application starts, the end offsets of the append streams it reads are committed for its
  group, so exactly the records written after ``start()`` returns are read. Upsert and
  global tables are read from their beginning (a join or an aggregation over a table needs
  its current rows), and so are the application's own internal topics (as Kafka Streams
  resets internal topics to earliest whatever ``auto.offset.reset`` says);
- backpressure: the sink processor blocks the transient application's stream thread while
  the buffer (``BUFFER_ROWS`` rows) is full, so a slow reader stops its consumption rather
  than growing memory; a reader that takes nothing for ``STALL_LIMIT_S`` seconds (or
  half the consumer's ``max.poll.interval.ms``, within which it must poll, if less)
  cancels the query, and ``poll`` then raises ``PushQueryFailed`` saying so;
- ``close()`` (the HTTP client disconnected, or the caller is done) closes the
  application, deletes its state directory, its internal topics (``<app id>-push-...-``
  repartition and changelog topics) and its consumer group, so nothing accumulates on the
  broker. Streams still open when the interpreter exits are closed then; what a process
  that died left behind (a ``push-*`` directory naming its application, whose state
  directory lock is free) is deleted, in the background, when a transient push query of
  the serving application starts with the same ``state.dir`` (``sweep_orphans``);
- at most ``MAX_OPEN`` run in one process at once: one more fails to start (the query
  server answers 503).

A push query without any of those clauses tails its table's topic (``PushStream``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp

from streaming.sql.errors import SqlError
from streaming.sql.results import SqlCatalog
from streaming.sql.rewrite import Statement

log = logging.getLogger(__name__)

Row = dict[str, Any]

#: rows the buffer between the transient application and the reader holds
BUFFER_ROWS = 10_000
#: seconds the stream thread waits for room in a full buffer before cancelling the query
STALL_LIMIT_S = 60.0
#: transient push queries one process runs at once (each is an application, a consumer
#: group and internal topics); one more is refused
MAX_OPEN = 16
#: seconds ``close`` waits for the transient application and for topic deletion
CLOSE_TIMEOUT_S = 30.0
#: the view the push query's rows are compiled into
RESULT_VIEW = "push_query"
#: the file in a transient application's state directory that names the application
APPLICATION_FILE = "application.id"

#: settings of the serving application a transient one does not take over
_NOT_INHERITED = (
    "application.server",
    "client.id",
    "errors.dead.letter.queue.topic.name",
    "num.standby.replicas",
    "topology.optimization",
    "cache.max.bytes.buffering",
)


#: client settings (under any prefix) the transient application sets itself
_SET_HERE = ("group.instance.id", "auto.offset.reset", "isolation.level")


class PushQueryFailed(RuntimeError):
    """The transient application behind a push query stopped: the message says why."""


class RowBuffer:
    """A bounded hand-over of rows from a stream thread (``offer``) to a reader (``take``).

    ``offer`` blocks while ``capacity`` rows wait; after ``stall_limit_s`` seconds without
    room it cancels the buffer (``failure`` says why) and drops the row. ``close`` wakes
    both sides; offers after it are dropped."""

    def __init__(self, capacity: int = BUFFER_ROWS, stall_limit_s: float = STALL_LIMIT_S):
        self.capacity = capacity
        self.stall_limit_s = stall_limit_s
        self.failure: str | None = None
        self._rows: deque[Row] = deque()
        self._closed = False
        self._cond = threading.Condition()

    def offer(self, row: Row) -> None:
        with self._cond:
            deadline = time.monotonic() + self.stall_limit_s
            while len(self._rows) >= self.capacity and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.fail(
                        f"push query cancelled: its reader took no rows for "
                        f"{self.stall_limit_s:g} s while {self.capacity} rows waited"
                    )
                    return
                self._cond.wait(min(left, 0.5))
            if self._closed:
                return
            self._rows.append(row)
            self._cond.notify_all()

    def take(self, timeout: float) -> list[Row]:
        """The waiting rows (waiting up to ``timeout`` seconds for one); raises
        ``PushQueryFailed`` once the buffer failed and is drained."""
        with self._cond:
            if not self._rows and self.failure is None and not self._closed:
                self._cond.wait(timeout)
            rows = list(self._rows)
            self._rows.clear()
            self._cond.notify_all()
            if not rows and self.failure is not None:
                raise PushQueryFailed(self.failure)
            return rows

    def fail(self, message: str) -> None:
        """Stop accepting rows; ``take`` raises ``message`` once the rows are read."""
        with self._cond:
            if self.failure is None:
                self.failure = message
            self._closed = True
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


@dataclass(frozen=True)
class TransientQuery:
    """A compiled push query: its topology, the buffer its sink fills, and the tables it
    reads (``stream_topics``: the append streams' topics, read from now on;
    ``topics``: every topic it reads, by table name)."""

    text: str
    topology: Any
    buffer: RowBuffer
    topics: dict[str, str]
    stream_topics: tuple[str, ...]


def needs_topology(select: exp.Select, statement: Statement) -> bool:
    """Whether a push query needs a transient application (else it tails one topic)."""
    from streaming.sql.derived import is_aggregation

    from_ = select.args.get("from_") or select.args.get("from")
    return bool(
        statement.window_tvf is not None
        or select.args.get("joins")
        or select.args.get("having")
        or is_aggregation(select)
        or (from_ is not None and not isinstance(from_.this, exp.Table))
    )


def compile_transient(
    catalog: SqlCatalog, text: str, statement: Statement, select: exp.Select
) -> TransientQuery:
    """Compile a push query into a topology whose rows end in a ``RowBuffer``; a bad query
    raises ``SqlError`` (line and column in ``text``)."""
    from streaming.sql.compiler import Compiler
    from streaming.sql.derived import is_aggregation, outputs

    compiler = Compiler(text)
    compiler.tables.update(catalog.tables)
    name = RESULT_VIEW
    while name in compiler.tables:
        name += "_"
    # an aggregation's result is keyed by all its columns: a push query needs no key, and
    # the compiler wants one for an updating view
    key = tuple(o.name for o in outputs(select, text)) if is_aggregation(select) else ()
    create = exp.Create(this=exp.Table(this=exp.to_identifier(name)), kind="VIEW")
    compiler.derived.define(
        statement,
        select,
        exp.to_identifier(name),
        create,
        names=[],
        kinds={},
        primary_key=key,
        view=True,
    )
    buffer = RowBuffer(BUFFER_ROWS, STALL_LIMIT_S)

    def deliver(_key: Any, row: Any) -> None:
        if isinstance(row, dict):  # a delete (HAVING retraction, merged session): no row
            buffer.offer(row)

    compiler.views[name].foreach(deliver)
    topics = compiler.topics_read
    streams = tuple(
        topic
        for table, topic in topics.items()
        if not compiler.tables[table].is_upsert and not compiler.tables[table].is_global
    )
    return TransientQuery(text, compiler.builder.build(), buffer, topics, streams)


def transient_config(serving: Any, application_id: str, state_dir: Path) -> dict[str, Any]:
    """The config of a transient application of the ``serving`` ``StreamsConfig``: its
    settings (clients, security) with the transient application's own identity."""
    config = {
        k: v
        for k, v in serving.originals.items()
        if k not in _NOT_INHERITED and not k.endswith(_SET_HERE)
    }
    config.update(
        {
            "application.id": application_id,
            "state.dir": str(state_dir),
            "processing.guarantee": "at_least_once",
            "commit.interval.ms": 100,
            "statestore.cache.max.bytes": 0,
            "num.stream.threads": 1,
            "interactive.queries.http.enabled": "false",
            # one instance by construction: no alignment topic to share with others
            "event.time.alignment.across.instances": "false",
            # internal and table topics from their start; streams from the committed ends
            "consumer.auto.offset.reset": "earliest",
            "consumer.isolation.level": "read_committed",
        }
    )
    return config


_OPEN: set[TransientPushStream] = set()
_OPEN_LOCK = threading.Lock()


def _close_open_streams() -> None:
    with _OPEN_LOCK:
        streams = list(_OPEN)
    for stream in streams:
        with contextlib.suppress(Exception):
            stream.close()


atexit.register(_close_open_streams)


class TransientPushStream:
    """The rows of a compiled push query, from a transient ``KafkaStreams`` application
    (see the module docstring); the same interface as ``PushStream``: ``start``,
    ``poll``, iteration, ``close``, a context manager."""

    def __init__(self, query: TransientQuery, serving_config: Any) -> None:
        self.query = query
        self.serving_config = serving_config
        self.application_id = f"{serving_config.application_id}-push-{uuid.uuid4().hex[:8]}"
        self.state_dir: Path | None = None
        self.streams: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._committed = False
        self._cleaned = threading.Event()

    def _clients(self) -> Any:
        """The transient application's Kafka client settings (``ClientConfigs``): its
        group, the serving application's connection and security settings."""
        from streaming.runtime.config import StreamsConfig

        state_dir = self.state_dir or Path(self.serving_config.state_dir)
        config = transient_config(self.serving_config, self.application_id, state_dir)
        return StreamsConfig.from_mapping(config).clients()

    def start(self, timeout: float = 10.0) -> TransientPushStream:
        """Commit the streams' end offsets for the application's group, then start it: a
        record written to a stream after this returns is read."""
        from streaming.runtime.client import StreamsClient
        from streaming.runtime.errors import StreamThreadExceptionResponse

        with _OPEN_LOCK:
            if len(_OPEN) >= MAX_OPEN:
                raise RuntimeError(
                    f"{len(_OPEN)} push queries with GROUP BY, windows or joins are running in "
                    f"this process (at most {MAX_OPEN}): close one, or retry later"
                )
            _OPEN.add(self)
        parent = Path(self.serving_config.state_dir)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            with _OPEN_LOCK:  # a sweep sees it named and open, or not at all
                self.state_dir = Path(tempfile.mkdtemp(prefix="push-", dir=parent))
                (self.state_dir / APPLICATION_FILE).write_text(self.application_id)
            _sweep(self.serving_config)
            config = transient_config(self.serving_config, self.application_id, self.state_dir)
            self._commit_stream_ends(timeout)
            streams = StreamsClient(self.query.topology, config)
            buffer = self.query.buffer
            # the stream thread waits on a full buffer without polling: it gives up well
            # within max.poll.interval.ms, before the consumer would be out of its group
            poll_ms = (
                self._clients()
                .main_consumer(client_id="-", group_instance_id=None)
                .get("max.poll.interval.ms", 300_000)
            )
            buffer.stall_limit_s = min(buffer.stall_limit_s, int(poll_ms) / 2000)
            errors: list[BaseException] = []

            def on_error(exc: BaseException) -> StreamThreadExceptionResponse:
                errors.append(exc)
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

            def on_state(new: Any, _old: Any) -> None:
                if new.name in ("PENDING_ERROR", "ERROR"):
                    why = f": {errors[-1]}" if errors else ""
                    buffer.fail(f"push query stopped: its application failed{why}")

            streams.set_uncaught_exception_handler(on_error)
            streams.set_state_listener(on_state)
            self.streams = streams
            streams.start()
        except BaseException:
            self.close()
            raise
        return self

    def _commit_stream_ends(self, timeout: float) -> None:
        """Check every topic read exists; commit each stream topic's end offsets for the
        application's group."""
        from confluent_kafka import Consumer, TopicPartition

        settings = self._clients().main_consumer(
            client_id=f"{self.application_id}-start", group_instance_id=None
        )
        consumer = Consumer(settings)
        try:
            offsets = []
            for table, topic in sorted(self.query.topics.items()):
                meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
                if meta is None or meta.error is not None or not meta.partitions:
                    raise SqlError(
                        f"topic {topic} of table {table} does not exist", line=1, column=1
                    )
                if topic not in self.query.stream_topics:
                    continue
                for partition in sorted(meta.partitions):
                    tp = TopicPartition(topic, partition)
                    _low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
                    offsets.append(TopicPartition(topic, partition, high))
            if offsets:
                self._committed = True  # the group exists from here on: close deletes it
                consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()

    def poll(self, timeout: float = 0.5) -> list[Row]:
        """The rows that arrived within ``timeout`` seconds; ``PushQueryFailed`` when the
        application stopped or the query was cancelled."""
        if self._closed:
            raise PushQueryFailed("push query closed")
        if self.streams is None:
            raise RuntimeError("TransientPushStream.poll before start()")
        return self.query.buffer.take(timeout)

    def __iter__(self) -> Iterator[Row]:
        while not self._closed:
            yield from self.poll()

    def close(self) -> None:
        """Close the application and delete its state directory, internal topics and
        consumer group; a second call waits for the first one's clean-up."""
        with self._lock:
            closing, self._closed = self._closed, True
        if closing:
            self._cleaned.wait(2 * CLOSE_TIMEOUT_S)
            return
        self.query.buffer.close()
        streams, self.streams = self.streams, None
        try:
            if streams is not None:
                if not streams.close(CLOSE_TIMEOUT_S):
                    log.warning("push query %s did not close in time", self.application_id)
                with contextlib.suppress(Exception):
                    streams.cleanup()
            if streams is not None or self._committed:
                delete_broker_state(self._clients(), self.application_id)
        finally:
            if self.state_dir is not None:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            with _OPEN_LOCK:
                _OPEN.discard(self)
            self._cleaned.set()

    def __enter__(self) -> TransientPushStream:
        return self if self.streams is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def delete_broker_state(clients: Any, application_id: str) -> bool:
    """Delete a transient application's internal topics and consumer group (best effort:
    False when something was not deleted, the reason logged)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(clients.admin(client_id=f"{application_id}-cleanup"))
    prefix = f"{application_id}-"
    done = True
    try:
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if topics:
            for topic, future in admin.delete_topics(topics, request_timeout=10).items():
                try:
                    future.result(CLOSE_TIMEOUT_S)
                except Exception as exc:
                    log.warning("could not delete the push query topic %s: %s", topic, exc)
                    done = False
        for future in admin.delete_consumer_groups([application_id], request_timeout=10).values():
            try:
                future.result(CLOSE_TIMEOUT_S)
            except KafkaException as exc:
                if "GROUP_ID_NOT_FOUND" not in str(exc):  # never created: nothing to delete
                    raise
    except Exception as exc:
        log.warning("cleaning up push query %s: %s", application_id, exc)
        return False
    return done


_SWEEPING = threading.Lock()


def _sweep(serving: Any) -> None:
    """Sweep the serving application's orphaned push queries (``sweep_orphans``) on a
    daemon thread, unless a sweep is running (one a broker could not finish is retried
    when the next push query starts)."""
    if not _SWEEPING.acquire(blocking=False):
        return

    def run() -> None:
        try:
            sweep_orphans(serving)
        except Exception as exc:  # best effort: the next push query sweeps again
            log.warning("sweeping orphaned push queries: %s", exc)
        finally:
            _SWEEPING.release()

    threading.Thread(target=run, name="push-query-sweep", daemon=True).start()


def sweep_orphans(serving: Any) -> list[str]:
    """Delete what transient push queries of the ``serving`` application left behind when
    their process died (no ``close``): each ``<state.dir>/push-*`` directory naming an
    application ``<app id>-push-...`` that no push query of this process runs and whose
    state directory lock nobody holds, with that application's internal topics and
    consumer group. Returns the swept application ids.

    Safe while other instances of the application run: an instance has a ``state.dir``
    of its own (its lock), so these directories are this instance's. A process whose
    state directory is gone leaves topics and a group this does not find (see docs/sql/queries.md)."""
    from streaming.runtime.config import StreamsConfig

    parent = Path(serving.state_dir)
    prefix = f"{serving.application_id}-push-"
    orphans: list[tuple[str, Path]] = []
    with _OPEN_LOCK:
        live = {stream.state_dir for stream in _OPEN}
        for path in sorted(parent.glob("push-*")):
            if path in live or not path.is_dir():
                continue
            try:
                application_id = (path / APPLICATION_FILE).read_text().strip()
            except OSError:
                continue
            if application_id.startswith(prefix) and not _locked(path / application_id):
                orphans.append((application_id, path))
    swept = []
    for application_id, path in orphans:
        config = transient_config(serving, application_id, path)
        clients = StreamsConfig.from_mapping(config).clients()
        if delete_broker_state(clients, application_id):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(application_id)
            log.info("deleted the orphaned push query %s", application_id)
    return swept


def _locked(app_dir: Path) -> bool:
    """Whether a running application holds the lock of its state directory ``app_dir``."""
    import fcntl
    import os

    from streaming.runtime.state_directory import LOCK_FILE

    try:
        fd = os.open(app_dir / LOCK_FILE, os.O_RDWR)
    except OSError:
        return False  # never locked (the application did not start)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False
