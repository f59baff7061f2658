"""Global state (Kafka's ``GlobalStreamThread`` / ``GlobalStateUpdateTask``).

Every instance holds the whole of each global store. At ``start()`` the global nodes
(``Topology.global_node_names()``) run in a task of their own under
``state.dir/<application.id>/global``: a consumer without a group reads every partition of
the global topics from the checkpoint (or, without one, from the beginning after wiping
the stores) up to the end, before the stream threads start. Then a thread keeps reading new
records, flushing the stores and writing the checkpoint every ``commit.interval.ms``.
Records are processed with their own timestamps; the global topic is the changelog.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streaming.errors import StreamsException
from streaming.runtime import errors
from streaming.runtime.messages import topic_partition
from streaming.runtime.partition_group import StampedRecord
from streaming.runtime.state_directory import read_checkpoint, wipe_task_dir, write_checkpoint
from streaming.runtime.task import ConsumerRecord, StreamTask
from streaming.topology.processor import NO_HEADERS

if TYPE_CHECKING:
    from streaming.runtime.listeners import GlobalThreadListener
    from streaming.runtime.services import ClientServices

log = logging.getLogger(__name__)


class GlobalStreamThread(threading.Thread):
    """Bootstraps and then keeps up to date the global stores of one instance."""

    def __init__(
        self, services: ClientServices, directory: str, listener: GlobalThreadListener
    ) -> None:
        super().__init__(name=f"{services.config.application_id}-GlobalStreamThread", daemon=True)
        self.services = services
        self.listener = listener
        self.config = services.config
        topology = services.topology
        self.topics = list(topology.global_topics())
        self.task_dir = services.state_directory.task_dir(directory)
        self.lock = threading.RLock()
        self.task = StreamTask(
            "global",
            topology,
            topology.global_node_names(),
            application_id=self.config.application_id,
            config=services.app_configs,
            send=self._no_output,
            clock=lambda: int(time.time() * 1000),
            state_dir=self.task_dir,
            cache=None,
            caching_enabled=False,
        )
        self.offsets: dict[tuple[str, int], int] = {}
        self.processed = 0
        self.exception: BaseException | None = None
        self._stop_event = threading.Event()
        self._consumer: Consumer | None = None

    @staticmethod
    def _no_output(topic: str, *args: Any, **kwargs: Any) -> None:
        raise StreamsException(f"a global store processor cannot write to topic {topic}")

    @property
    def stores(self) -> dict[str, Any]:
        """Store name -> global store (what every task context gets as ``global_stores``)."""
        return self.task.context.stores

    # -- bootstrap ------------------------------------------------------------------------

    def bootstrap(self, timeout: float = 300.0) -> None:
        """Open the stores and read the global topics to their end (called by ``start()``)."""
        checkpoint = read_checkpoint(self.task_dir)
        if checkpoint is None:
            wipe_task_dir(self.task_dir)
        self.task.initialize()
        cfg = self.config
        self._consumer = Consumer(
            cfg.clients(self.services.client_logger).state_consumer(
                role="global",
                client_id=f"{self.services.client_id}-global-consumer",
                user=cfg.global_consumer,
            )
        )
        meta = self._consumer.list_topics(timeout=30)
        assignment = []
        for topic in self.topics:
            tm = meta.topics.get(topic)
            if tm is None or tm.error is not None or not tm.partitions:
                raise ValueError(f"global topic {topic} does not exist; create it before starting")
            for partition in sorted(tm.partitions):
                start = (checkpoint or {}).get((topic, partition))
                self.offsets[(topic, partition)] = start if start is not None else 0
                assignment.append(
                    TopicPartition(topic, partition, OFFSET_BEGINNING if start is None else start)
                )
        self._consumer.assign(assignment)
        pending = {(tp.topic, tp.partition) for tp in assignment}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"global state bootstrap did not reach the end of {pending}")
            pending -= self._poll(0.2)
        self._checkpoint()
        log.info("Global stores %s bootstrapped", sorted(self.stores))

    # -- loop -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        last_flush = time.monotonic()
        try:
            while not self._stop_event.is_set():
                self._poll(self.config.poll_ms / 1000.0)
                now = time.monotonic()
                if (now - last_flush) * 1000 >= self.config.commit_interval_ms:
                    self._checkpoint()
                    last_flush = now
        except BaseException as exc:
            self.exception = exc
            log.error("Global stream thread failed: %s", exc, exc_info=exc)
            self.listener.on_global_thread_failure(exc)
        finally:
            self.close()

    def _poll(self, timeout: float) -> set[tuple[str, int]]:
        """Process one batch; returns the partitions that reached their end."""
        assert self._consumer is not None
        reached: set[tuple[str, int]] = set()
        msgs = self._consumer.consume(num_messages=1000, timeout=timeout)
        if not msgs:
            return reached
        with self.lock:
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached.add(topic_partition(msg))
                        continue
                    if err.fatal():
                        raise KafkaException(err)
                    log.warning("Global consumer error: %s", err)
                    continue
                self._process(msg)
        return reached

    def _process(self, msg: Any) -> None:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        headers = msg.headers()
        source = self.task.sources[topic]
        try:
            key = source.key_serde.deserialize(topic, msg.key())
            value = source.value_serde.deserialize(topic, msg.value())
        except Exception as exc:
            raw = ConsumerRecord(
                topic, partition, offset, msg.timestamp()[1], msg.key(), msg.value()
            )
            ctx = errors.ErrorHandlerContext(
                topic, partition, offset, raw.timestamp, (), source.name, "global"
            )
            if errors.decide(self.config.deserialization_handler, ctx, raw, exc) is (
                errors.Response.FAIL
            ):
                raise StreamsException(
                    f"Deserialization exception handler is set to fail upon a deserialization "
                    f"error. A deserialization error occurred for {topic}-{partition} at offset "
                    f"{offset}: {exc}"
                ) from exc
            self.offsets[(topic, partition)] = offset + 1
            return
        self.task.process_stamped(
            StampedRecord(
                topic,
                partition,
                offset,
                msg.timestamp()[1],
                key,
                value,
                tuple(headers) if headers else NO_HEADERS,
            )
        )
        self.offsets[(topic, partition)] = offset + 1
        self.processed += 1

    def _checkpoint(self) -> None:
        with self.lock:
            self.task.flush()
            for store in self.stores.values():
                inner = store.inner() if hasattr(store, "inner") else store
                force = getattr(inner, "force_flush", None)
                if force is not None:
                    force()
            write_checkpoint(self.task_dir, dict(self.offsets))

    def close(self) -> None:
        """Flush, checkpoint and close the global stores and the consumer."""
        if self._consumer is None:
            return
        try:
            if self.exception is None:
                self._checkpoint()
            with self.lock:
                self.task.close(flush=self.exception is None)
        finally:
            consumer, self._consumer = self._consumer, None
            consumer.close()
