"""A broker-less ``TopologyTestDriver``, behaving like Kafka Streams' own.

One task runs the whole topology over one partition per topic. Each piped record is
processed, stream-time punctuation runs, the task commits (caches flush), and records
written to internal (repartition) topics are fed back and processed the same way
before ``pipe_input`` returns.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from streaming import serdes as serdes_mod
from streaming.runtime import errors
from streaming.runtime.config_keys import DEAD_LETTER_QUEUE_TOPIC, PROCESSING_HANDLER
from streaming.runtime.task import ConsumerRecord, StreamTask
from streaming.state.api import changelog_topic
from streaming.testing.global_state import GlobalStateTask
from streaming.time import to_millis
from streaming.topology.graph import Topology
from streaming.topology.processor import NO_HEADERS, Headers

DEFAULT_APPLICATION_ID = "dummy-topology-test-driver-app-id"
EMIT_INTERVAL_CONFIG = "__emit.interval.ms.kstreams.windowed.aggregation__"
OUTER_JOIN_EMIT_INTERVAL_CONFIG = "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"


class KeyValue(NamedTuple):
    key: Any
    value: Any


class TestRecord:
    """An output (or input) record: key, value, timestamp and headers."""

    __slots__ = ("headers", "key", "timestamp", "value")
    __test__ = False  # not a pytest test class

    def __init__(
        self, key: Any, value: Any, timestamp: int | None = None, headers: Headers = NO_HEADERS
    ) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    @property
    def record_time(self) -> int | None:
        return self.timestamp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TestRecord) and (
            self.key,
            self.value,
            self.timestamp,
            tuple(self.headers),
        ) == (other.key, other.value, other.timestamp, tuple(other.headers))

    def __hash__(self) -> int:
        return hash((repr(self.key), repr(self.value), self.timestamp))

    def __repr__(self) -> str:
        return f"TestRecord(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp})"


class _Produced(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: Headers


class TopologyTestDriver:
    """Run a topology without a broker: pipe records in, read what it writes out."""

    def __init__(
        self,
        topology: Topology,
        config: dict[str, Any] | None = None,
        *,
        initial_wall_clock_time_ms: int | datetime | None = None,
    ) -> None:
        self.config: dict[str, Any] = dict(config or {})
        self.application_id = self.config.setdefault("application.id", DEFAULT_APPLICATION_ID)
        self.config.setdefault("bootstrap.servers", "dummy-topology-test-driver:9092")
        # like Kafka's driver: emit-on-window-close is not throttled by the wall clock
        self.config.setdefault(EMIT_INTERVAL_CONFIG, 0)
        self.config.setdefault(OUTER_JOIN_EMIT_INTERVAL_CONFIG, 0)
        if isinstance(initial_wall_clock_time_ms, datetime):
            initial_wall_clock_time_ms = int(initial_wall_clock_time_ms.timestamp() * 1000)
        self._wall_clock = (
            int(time.time() * 1000)
            if initial_wall_clock_time_ms is None
            else initial_wall_clock_time_ms
        )
        self.topology = topology
        self._internal = {
            topology.decorate(t, self.application_id) for t in topology.internal_topics
        }
        self._offsets: dict[str, int] = {}
        self._produced: list[_Produced] = []
        self._outputs: dict[str, deque[_Produced]] = {}
        cache_bytes = int(
            self.config.get(
                "statestore.cache.max.bytes",
                self.config.get("cache.max.bytes.buffering", 10 * 1024 * 1024),
            )
        )
        cache = None
        if cache_bytes > 0:
            from streaming.state import ThreadCache

            cache = ThreadCache(cache_bytes)
        # Kafka's driver keeps state under state.dir/<application.id>/0_0 (a temp dir by
        # default, deleted on close).
        self._temp_state_dir: str | None = None
        if self.config.get("state.dir"):
            root = Path(self.config["state.dir"])
        else:
            self._temp_state_dir = tempfile.mkdtemp(prefix="kafka-streams-ttd-")
            root = Path(self._temp_state_dir)
        state_dir = root / self.application_id / "0_0"
        state_dir.mkdir(parents=True, exist_ok=True)
        # Global stores run in a global state task of their own, set up first (like Kafka's
        # driver); piping into a global topic updates them at once.
        self._global: GlobalStateTask | None = None
        global_nodes = topology.global_node_names()
        if global_nodes:
            global_dir = root / self.application_id / "global"
            global_dir.mkdir(parents=True, exist_ok=True)
            self._global = GlobalStateTask(
                topology,
                application_id=self.application_id,
                config=self.config,
                clock=lambda: self._wall_clock,
                cache=cache,
                caching_enabled=cache_bytes > 0,
                state_dir=global_dir,
            )
            self._global.initialize()
        self._task = StreamTask(
            "0_0",
            topology,
            [n for n in topology.nodes if n not in global_nodes],
            application_id=self.application_id,
            config=self.config,
            send=self._send,
            clock=lambda: self._wall_clock,
            cache=cache,
            caching_enabled=cache_bytes > 0,
            state_dir=state_dir,
        )
        if self._global is not None:
            self._task.context.global_stores = self._global.stores
        # like Kafka's driver, changelog writes are produced records too (readable as
        # output topics <application.id>-<store>-changelog)
        self._task.context.changelog_writer = self._log_change
        self._task.initialize()
        self._closed = False
        # Kafka's driver runs the processing exception handler too (KIP-1033, KIP-1034);
        # without one configured a processing error reaches the caller
        handler = self.config.get(PROCESSING_HANDLER)
        self._processing_handler = errors.handler_from_config(handler or "log_and_fail")
        self._dead_letter_topic = self.config.get(DEAD_LETTER_QUEUE_TOPIC) or None
        self._on_error = self._on_processing_error if handler else None

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush and close the task and its stores."""
        if not self._closed:
            self._closed = True
            try:
                try:
                    self._task.close(flush=True)
                    self._capture_outputs()
                finally:
                    if self._global is not None:
                        self._global.close()
            finally:
                if self._temp_state_dir is not None:
                    shutil.rmtree(self._temp_state_dir, ignore_errors=True)

    # -- the producer side of the task ------------------------------------------------

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        record: Any = None,
        partitioner: Any = None,
    ) -> None:
        self._produced.append(_Produced(topic, key, value, timestamp, headers))

    def _log_change(
        self, store: str, key: bytes, value: bytes | None, timestamp: int, headers: Headers = ()
    ) -> None:
        topic = changelog_topic(self.application_id, store)
        stamp = timestamp if timestamp >= 0 else None  # none: Kafka's driver reads a null
        self._produced.append(_Produced(topic, key, value, stamp, tuple(headers)))

    def _capture_outputs(self) -> None:
        produced, self._produced = self._produced, []
        for rec in produced:
            self._outputs.setdefault(rec.topic, deque()).append(rec)
            # Kafka's captureOutputsAndReEnqueueInternalResults: a record written to a topic
            # the topology reads (internal or not) is processed again, and stays readable
            # rec.timestamp is None for a record written without one: passed on unchanged
            if self._task.source_for(rec.topic) is not None:
                self._enqueue(rec.topic, rec.key, rec.value, rec.timestamp, rec.headers)  # type: ignore[arg-type]
            if self._global is not None and rec.topic in self._global.topics:
                self._global.update(rec.topic, rec.key, rec.value, rec.timestamp, rec.headers)  # type: ignore[arg-type]

    def _enqueue(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
    ) -> None:
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        self._task.add_records(
            [ConsumerRecord(topic, 0, offset, timestamp, key, value, tuple(headers))]
        )

    def _complete_all_processable_work(self) -> None:
        task = self._task
        self._capture_outputs()
        while task.process(on_error=self._on_error):
            task.commit()
            self._capture_outputs()

    def _on_processing_error(self, rec: Any, exc: Exception) -> None:
        """A record whose processing raised, as a running application treats it: the
        ``processing.exception.handler`` decides, and with
        ``errors.dead.letter.queue.topic.name`` the record's bytes go to that topic with
        the failure in KIP-1034's headers."""
        context = errors.ErrorHandlerContext(
            rec.topic, rec.partition, rec.offset, rec.timestamp, rec.headers, None, "0_0"
        )
        decision = errors.decide(self._processing_handler, context, rec, exc)
        if self._dead_letter_topic:
            headers = tuple(errors.dead_letter_headers(context, exc))
            self._send(self._dead_letter_topic, rec.raw_key, rec.raw_value, rec.timestamp, headers)
        if decision is errors.Response.FAIL:
            raise exc

    # -- input ------------------------------------------------------------------------

    def pipe_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers = NO_HEADERS,
    ) -> None:
        """Pipe one already-serialised record into ``topic`` and process it fully."""
        if self._closed:
            raise RuntimeError("TopologyTestDriver is closed")
        global_topics = self._global.topics if self._global is not None else ()
        if topic in global_topics:
            self._global.update(topic, key, value, timestamp, headers)  # type: ignore[union-attr]
            return
        if self._task.source_for(topic) is None:
            raise ValueError(
                f"Unknown topic: {topic}. The topology reads from "
                f"{sorted([*(t for t in self._task.sources if t not in self._internal), *global_topics])}."
            )
        self._enqueue(topic, key, value, timestamp, headers)
        self._complete_all_processable_work()

    def create_input_topic(
        self, name: str, key_serde: Any = None, value_serde: Any = None
    ) -> TestInputTopic:
        return TestInputTopic(
            self, name, self._serde(key_serde, "key"), self._serde(value_serde, "value")
        )

    def create_output_topic(
        self, name: str, key_serde: Any = None, value_serde: Any = None
    ) -> TestOutputTopic:
        return TestOutputTopic(
            self, name, self._serde(key_serde, "key"), self._serde(value_serde, "value")
        )

    def _serde(self, serde: Any, which: str) -> Any:
        if serde is not None:
            return serdes_mod.from_config(serde)
        return (
            self._task.context.default_key_serde
            if which == "key"
            else self._task.context.default_value_serde
        )

    def _read(self, topic: str) -> deque[_Produced]:
        return self._outputs.setdefault(topic, deque())

    # -- time -------------------------------------------------------------------------

    def advance_wall_clock_time(self, advance: int | timedelta) -> None:
        """Move the mocked wall clock forward and run due wall-clock punctuations."""
        self._wall_clock += to_millis(advance, "advance")
        self._task.maybe_punctuate_system_time(self._wall_clock)
        self._task.commit()
        self._complete_all_processable_work()

    @property
    def wall_clock_time_ms(self) -> int:
        return self._wall_clock

    # -- stores -----------------------------------------------------------------------

    def metrics(self) -> dict[str, int]:
        """The task's dropped-records counters, as ``KafkaStreams.metrics()`` names them."""
        dropped = self._task.dropped_by_processors
        return {
            "dropped-records-total": sum(dropped.values()),
            "late-records-dropped-total": dropped["late"],
        }

    def get_all_state_stores(self) -> dict[str, Any]:
        stores = dict(self._global.stores) if self._global is not None else {}
        stores.update(self._task.context.stores)
        return stores

    def get_state_store(self, name: str) -> Any:
        store = self._task.context.stores.get(name)
        if store is None and self._global is not None:
            store = self._global.stores.get(name)
        return store

    def get_key_value_store(self, name: str) -> Any:
        from streaming.testing.views import PlainKeyValueView

        store = self.get_state_store(name)
        return None if store is None else PlainKeyValueView.wrap(store)

    def get_timestamped_key_value_store(self, name: str) -> Any:
        return self.get_state_store(name)

    def get_window_store(self, name: str) -> Any:
        from streaming.testing.views import PlainWindowView

        store = self.get_state_store(name)
        return None if store is None else PlainWindowView.wrap(store)

    def get_timestamped_window_store(self, name: str) -> Any:
        return self.get_state_store(name)

    def get_session_store(self, name: str) -> Any:
        return self.get_state_store(name)

    def produced_topic_names(self) -> set[str]:
        """Every topic the topology wrote to, internal topics included (Kafka's
        ``producedTopicNames``)."""
        self._capture_outputs()
        return set(self._outputs)

    def producer_history(self) -> list[tuple[str, bytes | None, bytes | None, int | None]]:
        """Every record written so far (any topic), raw, in write order."""
        return [(r.topic, r.key, r.value, r.timestamp) for q in self._outputs.values() for r in q]


class TestInputTopic:
    """Pipes records into one input topic of a ``TopologyTestDriver``."""

    __test__ = False

    def __init__(
        self, driver: TopologyTestDriver, topic: str, key_serde: Any, value_serde: Any
    ) -> None:
        self.driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._auto_time: int | None = None
        self._advance = 0

    def _time(self, timestamp: int | datetime | None) -> int:
        if isinstance(timestamp, datetime):
            return int(timestamp.timestamp() * 1000)
        if timestamp is not None:
            return timestamp
        if self._auto_time is not None:
            ts = self._auto_time
            self._auto_time += self._advance
            return ts
        return self.driver.wall_clock_time_ms

    def pipe_input(
        self,
        key: Any = None,
        value: Any = None,
        timestamp: int | datetime | None = None,
        headers: Headers = NO_HEADERS,
    ) -> None:
        """Pipe one record; without a timestamp it gets the driver's wall-clock time."""
        ts = self._time(timestamp)
        self.driver.pipe_raw(
            self.topic,
            self.key_serde.serialize(self.topic, key),
            self.value_serde.serialize(self.topic, value),
            ts,
            headers,
        )

    def pipe_value(self, value: Any, timestamp: int | datetime | None = None) -> None:
        self.pipe_input(None, value, timestamp)

    def pipe_record(self, record: TestRecord) -> None:
        self.pipe_input(record.key, record.value, record.timestamp, record.headers)

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        for key, value in pairs:
            self.pipe_input(key, value)

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        for value in values:
            self.pipe_input(None, value)

    def pipe_records(self, records: Iterable[TestRecord]) -> None:
        for record in records:
            self.pipe_record(record)

    def advance_time(self, advance: int | timedelta) -> None:
        """With ``auto_advance``: move the next auto timestamp forward."""
        if self._auto_time is None:
            self._auto_time = self.driver.wall_clock_time_ms
        self._auto_time += to_millis(advance, "advance")

    def auto_advance(self, start: int, advance: int | timedelta = 0) -> TestInputTopic:
        """Give records piped without a timestamp ``start``, ``start + advance``, ..."""
        self._auto_time = start
        self._advance = to_millis(advance, "advance")
        return self


class TestOutputTopic:
    """Reads what the topology wrote to one topic, deserialised."""

    __test__ = False

    def __init__(
        self, driver: TopologyTestDriver, topic: str, key_serde: Any, value_serde: Any
    ) -> None:
        self.driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde

    def _decode(self, rec: Any) -> TestRecord:
        return TestRecord(
            self.key_serde.deserialize(self.topic, rec.key),
            self.value_serde.deserialize(self.topic, rec.value),
            rec.timestamp,
            rec.headers,
        )

    def read_record(self) -> TestRecord:
        queue = self.driver._read(self.topic)
        if not queue:
            raise LookupError(f"Empty topic: {self.topic}")
        return self._decode(queue.popleft())

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> KeyValue:
        rec = self.read_record()
        return KeyValue(rec.key, rec.value)

    def read_records_to_list(self) -> list[TestRecord]:
        queue = self.driver._read(self.topic)
        out = [self._decode(r) for r in queue]
        queue.clear()
        return out

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[KeyValue]:
        return [KeyValue(r.key, r.value) for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for r in self.read_records_to_list():
            if r.key is None:
                raise ValueError("read_key_values_to_map() cannot handle null keys")
            out[r.key] = r.value
        return out

    def get_queue_size(self) -> int:
        return len(self.driver._read(self.topic))

    def is_empty(self) -> bool:
        return not self.driver._read(self.topic)
