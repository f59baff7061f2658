"""Event-time alignment across the instances of one application.

Each client publishes its stream threads' combined report (low watermark, source backlog,
records queued) to the compacted internal topic ``<application.id>-event-time-alignment``,
keyed by its process id, and reads the other instances' reports from it; their combination
is one more report of its ``EventTimeAlignment`` (``PEERS``). A topic rather than the
consumer group's metadata: the group's member metadata travels only with a rebalance, and
librdkafka's consumer offers no assignor hook to carry it, while the alignment needs fresh
watermarks every few hundred milliseconds. A report older than ``PEER_STALE_MS`` (an
instance killed without withdrawing it) holds no one back; a closing client withdraws its
own with a tombstone.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from streaming.runtime.alignment import (
    BEFORE_ANY,
    AlignmentReport,
    EventTimeAlignment,
    combine_reports,
)
from streaming.runtime.config_keys import EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES
from streaming.runtime.topics import InternalTopicError, InternalTopicManager

if TYPE_CHECKING:
    from streaming.runtime.services import ClientServices

log = logging.getLogger(__name__)

#: the internal topic's name after the application id
ALIGNMENT_TOPIC_SUFFIX = "-event-time-alignment"
#: the topic's settings: one partition, compacted (only each instance's last report counts)
ALIGNMENT_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
    "min.compaction.lag.ms": "0",
}
#: how long the exchange waits for the others' reports before it looks at its own again:
#: while behind, each report goes out as soon as it changes, and an instance may run at
#: most the drift ahead of the others' last report, so this wait bounds its catch-up pace
EXCHANGE_INTERVAL_S = 0.02
#: how often a report that is not behind (or did not change) goes out, to stay fresh
REFRESH_MS = 1_000
#: a report not refreshed for this long belongs to an instance that ended without
#: withdrawing it
PEER_STALE_MS = 5_000


def alignment_topic(application_id: str) -> str:
    return f"{application_id}{ALIGNMENT_TOPIC_SUFFIX}"


def encode(report: AlignmentReport, now_ms: int) -> bytes:
    return orjson.dumps(
        {"low": report.low, "backlog": report.backlog, "queued": report.queued, "at": now_ms}
    )


def decode(value: bytes) -> tuple[AlignmentReport, int]:
    """A published report and when (wall clock ms) it was published."""
    data = orjson.loads(value)
    return AlignmentReport(data["low"], int(data["backlog"]), bool(data["queued"])), int(data["at"])


class PeerReports:
    """The other instances' last reports, by process id, and when each was published.

    An instance that does not know its partitions' event time yet (it starts, rebalances or
    restores: ``BEFORE_ANY``) holds the others for at most the idle time, as an empty
    partition does: a peer restoring a large store must not stall the whole application."""

    def __init__(self, idle_ms: int) -> None:
        self.idle_ms = idle_ms
        self._reports: dict[bytes, tuple[AlignmentReport, int]] = {}
        #: since when (publish time) each peer has reported BEFORE_ANY without a break
        self._unknown_since: dict[bytes, int] = {}

    def update(self, key: bytes, value: bytes | None) -> None:
        """A published report, or a tombstone (None) withdrawing one."""
        if value is None:
            self._reports.pop(key, None)
            self._unknown_since.pop(key, None)
            return
        report, at = self._reports[key] = decode(value)
        if report.low == BEFORE_ANY:
            self._unknown_since.setdefault(key, at)
        else:
            self._unknown_since.pop(key, None)

    def combined(self, now_ms: int) -> AlignmentReport | None:
        """The fresh reports as one (None: no other instance holds anyone back)."""
        fresh = []
        for key, (report, at) in self._reports.items():
            if now_ms - at > PEER_STALE_MS:
                continue
            since = self._unknown_since.get(key)
            if since is not None and now_ms - since >= self.idle_ms:
                report = AlignmentReport(None, report.backlog, report.queued)
            fresh.append(report)
        return combine_reports(fresh)


class AlignmentExchange:
    """The thread that publishes this client's report and keeps the others' current."""

    def __init__(
        self,
        alignment: EventTimeAlignment,
        *,
        process_id: str,
        topic: str,
        producer_config: dict[str, Any],
        consumer_config: dict[str, Any],
    ) -> None:
        self.alignment = alignment
        self.topic = topic
        self._key = process_id.encode()
        self._producer = Producer(producer_config)
        self._consumer = Consumer(consumer_config)
        self._peers = PeerReports(alignment.settings.idle_ms)
        self._published: tuple[AlignmentReport | None, int] = (None, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{topic}-exchange", daemon=True)

    def start(self) -> None:
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread.start()

    def close(self) -> None:
        """Stop, and withdraw this client's report."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        try:
            self._producer.produce(self.topic, key=self._key, value=None)
            self._producer.flush(5)
        except (KafkaException, BufferError, SystemError) as exc:
            # SystemError: confluent-kafka can end a flush that met a fatal error so
            log.warning("withdrawing the event-time alignment report failed: %s", exc)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.exchange_once(wait_s=EXCHANGE_INTERVAL_S)
            except KafkaException as exc:  # an outage: the peers' reports go stale meanwhile
                log.debug("event-time alignment exchange: %s", exc)
                self._stop.wait(EXCHANGE_INTERVAL_S)

    def exchange_once(self, wait_s: float = 0.0) -> None:
        """Publish this client's report if it changed while it matters (behind, or just no
        longer behind) or to keep it fresh, read what the others published (waiting up to
        ``wait_s`` for it), and hand their combination to the alignment."""
        now = int(time.time() * 1000)
        mine = self.alignment.local_summary(now)
        last, at = self._published
        due = now - at >= REFRESH_MS
        if (mine != last and (due or self._behind(mine, now) or self._behind(last, now))) or (
            mine is not None and due
        ):
            # None: no thread of this client reports (any more), a tombstone withdraws it
            value = None if mine is None else encode(mine, now)
            self._producer.produce(self.topic, key=self._key, value=value)
            self._published = (mine, now)
        self._producer.poll(0)
        for msg in self._consumer.consume(num_messages=500, timeout=wait_s):
            key, value = msg.key(), msg.value()
            if msg.error() is None and key is not None and key != self._key:
                self._peers.update(key, value)
        self.alignment.set_peers(self._peers.combined(now), now)

    def _behind(self, report: AlignmentReport | None, now_ms: int) -> bool:
        settings = self.alignment.settings
        return report is not None and settings.behind(report.low, report.backlog, now_ms)


def start_alignment_exchange(services: ClientServices) -> AlignmentExchange | None:
    """Create the alignment topic if needed and start exchanging reports through it (None:
    alignment, or alignment across instances, is off)."""
    cfg = services.config
    if not (cfg.alignment.enabled and cfg.alignment.across_instances):
        return None
    topic = alignment_topic(cfg.application_id)
    topics = InternalTopicManager(services.admin, replication_factor=cfg.replication_factor)
    try:
        topics.ensure({topic: (1, dict(ALIGNMENT_TOPIC_CONFIG))})
    except InternalTopicError as exc:
        raise InternalTopicError(
            f"{exc}; the instances of the application align by event time through it "
            f"(create it, or set {EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES}=false)"
        ) from exc
    clients = cfg.clients(services.client_logger)
    client_id = f"{services.client_id}-alignment"
    exchange = AlignmentExchange(
        services.alignment,
        process_id=services.process_id,
        topic=topic,
        producer_config=clients.producer(client_id=f"{client_id}-producer", transactional_id=None),
        consumer_config=clients.state_consumer(
            role="alignment", client_id=f"{client_id}-consumer", partition_eof=False
        ),
    )
    exchange.start()
    return exchange
