"""The settings of every Kafka client a ``KafkaStreams`` instance creates, built in one
place from its ``StreamsConfig``: the stream threads' consumer and producer, the restore,
standby and global consumers, and the admin client.

Each is the runtime's defaults, then the user's prefixed settings (``consumer.``,
``restore.consumer.``, ``producer.`` ...), then what the runtime relies on and the user
cannot change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streaming.runtime.config import StreamsConfig

#: defaults of every client: connect to every broker at once. librdkafka's default
#: (``enable.sparse.connections``) connects to a broker only once a request needs it, about
#: 50 ms later: each new client's first request after the bootstrap metadata waited for it
#: (a new admin client's second metadata request took 55 ms against 1.5 ms, and an
#: application's start paid it for each of its clients in turn, 0.15 s in all). Connections
#: kept for good retry on their own backoff, which librdkafka lets grow to 10 s while a
#: broker is away: it stops at 1 s, Kafka's Java clients' default (first output after a
#: 30 s broker outage 2.5 s after its return against 9.1 s, and once a lost group session)
CLIENT_DEFAULTS: dict[str, Any] = {
    "enable.sparse.connections": False,
    "reconnect.backoff.max.ms": 1000,
}
#: defaults of the consumers that read changelogs and global topics: librdkafka waits
#: ``fetch.queue.backoff.ms`` (1 s by default) before it fetches again once its queue is
#: full, and a restore spent most of its time in that wait instead of reading
STATE_CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}

#: how often a stream thread's consumer heartbeats (librdkafka's and Kafka's default: 3 s)
MAIN_CONSUMER_HEARTBEAT_MS = 500
#: how long a transaction may stay open before the broker aborts it
TRANSACTION_TIMEOUT_MS = 10_000
#: how long a transactional producer waits to fill a batch (Kafka Streams' ``linger.ms``)
TRANSACTIONAL_LINGER_MS = 100
#: ... and one whose acknowledgements pace other producers' sources (librdkafka's default)
PACED_LINGER_MS = 5
#: librdkafka's names of that setting
_LINGER_NAMES = frozenset({"linger.ms", "queue.buffering.max.ms"})
#: the batch a transactional producer sends without waiting for ``linger.ms`` (librdkafka's
#: ``batch.size`` is 1 MB, Kafka Streams' producer's 16 KB)
TRANSACTIONAL_BATCH_BYTES = 65_536


@dataclass(frozen=True)
class ClientConfigs:
    """The client settings of one instance; ``logger`` receives librdkafka's log lines."""

    config: StreamsConfig
    logger: Any = None

    def _base(self, client_id: str) -> dict[str, Any]:
        base: dict[str, Any] = {
            "bootstrap.servers": self.config.bootstrap_servers,
            "client.id": client_id,
        }
        if self.logger is not None:
            base["logger"] = self.logger
        return base

    def main_consumer(self, *, client_id: str, group_instance_id: str | None) -> dict[str, Any]:
        """The stream thread's group consumer: offsets committed by the runtime (in the
        transaction under exactly-once), the range assignor, ``read_committed`` under
        exactly-once.

        It fetches again 10 ms after its queue of prefetched records filled
        (``fetch.queue.backoff.ms``, 1 s by default), and a fetch waits at most 100 ms on the
        broker for data (``fetch.wait.max.ms``, 500 ms by default): a partition whose
        offset is known only after a fetch went out (every newly assigned one) waits for
        that fetch to return, which over partitions without data took the whole 500 ms
        after each assignment.

        It heartbeats every 500 ms (``heartbeat.interval.ms``, 3 s by default): a member
        learns of a rebalance only from its next heartbeat, so when a client's second stream
        thread or worker process joined a fraction of a second after the first (or another
        instance joined), the first kept the whole assignment for up to 3 s before the group
        rebalanced (two worker processes: 3.4-3.8 s from start to running, 1.0 s now)."""
        settings: dict[str, Any] = {
            **self._base(client_id),
            **CLIENT_DEFAULTS,
            "group.id": self.config.application_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "isolation.level": "read_committed" if self.config.exactly_once else "read_uncommitted",
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 100,
            "heartbeat.interval.ms": MAIN_CONSUMER_HEARTBEAT_MS,
        }
        settings.update(self.config.consumer)
        settings.pop("group.instance.id", None)
        if group_instance_id:
            settings["group.instance.id"] = group_instance_id
        return settings

    def producer(
        self, *, client_id: str, transactional_id: str | None, paced: bool = False
    ) -> dict[str, Any]:
        """The stream thread's producer: Java's partitioner (murmur2), errors-only delivery
        reports; transactional and idempotent with ``transactional_id`` (exactly-once), and
        then a delivery report for every record (the record collector takes the changelog
        offsets of the transactional stores from them), whatever the user's settings say.

        A transactional producer fills batches for up to 100 ms (``linger.ms``, Kafka
        Streams' default; librdkafka's is 5 ms): its records are invisible to
        ``read_committed`` readers until the commit, whose flush sends what lingers at once,
        and fewer, larger batches cost less CPU per record. Like Kafka Streams' producer it
        sends a batch once it is full, at 64 KB (``batch.size``): with librdkafka's 1 MB,
        under load every record of a commit interval waited for the commit's flush to be
        sent (1.3 to 1.6 s of flushing per 1,000,000 records of the windowed aggregation,
        against 0.4 s). ``paced``: event-time alignment paces other producers by what this
        one has appended, so it lingers 5 ms: each round of that pacing waits for its
        acknowledgements (a backlog on four partitions, two worker processes: 23.2 s to
        catch up with 100 ms, 12.4 s with 5 ms). The user's ``linger.ms`` (or ``queue.buffering.max.ms``) and ``batch.size`` win."""
        settings: dict[str, Any] = {
            **self._base(client_id),
            **CLIENT_DEFAULTS,
            "partitioner": "murmur2_random",
            "delivery.report.only.error": True,
        }
        if transactional_id is not None:
            settings["transactional.id"] = transactional_id
            settings["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
            settings["enable.idempotence"] = True
            if not _LINGER_NAMES & self.config.producer.keys():
                settings["linger.ms"] = PACED_LINGER_MS if paced else TRANSACTIONAL_LINGER_MS
            settings["batch.size"] = TRANSACTIONAL_BATCH_BYTES
        settings.update(self.config.producer)
        if transactional_id is not None:
            settings["delivery.report.only.error"] = False
        return settings

    def state_consumer(
        self,
        *,
        role: str,
        client_id: str,
        user: Mapping[str, Any] | None = None,
        partition_eof: bool = True,
    ) -> dict[str, Any]:
        """A restore, standby or global consumer (``role``): the defaults above, then the
        user's (``user``: ``restore_consumer`` unless given), then what the runtime relies
        on: assigned partitions read committed from the start, never a group."""
        fixed: dict[str, Any] = {
            **self._base(client_id),
            "group.id": f"{self.config.application_id}-{role}-unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
        if partition_eof:
            fixed["enable.partition.eof"] = True
        given = self.config.restore_consumer if user is None else user
        return {**CLIENT_DEFAULTS, **STATE_CONSUMER_DEFAULTS, **given, **fixed}

    def admin(self, *, client_id: str) -> dict[str, Any]:
        """The admin client (internal topics, metadata, the assignment directory)."""
        return {**self._base(client_id), **CLIENT_DEFAULTS, **self.config.admin}


def main_consumer_membership(
    settings: Mapping[str, Any], process_id: str, index: int
) -> tuple[str | None, bool]:
    """The ``group.instance.id`` of stream thread ``index``'s consumer, and whether the
    thread leaves the group when it closes.

    - ``group.instance.id`` set by the user: ``<it>-<index>``, and no leave on close (KIP-345
      as in Kafka Streams: an instance restarted within ``session.timeout.ms`` gets its
      partitions back without a rebalance);
    - set to ``""``: none, dynamic membership;
    - unset: ``<process id>-<index>`` (the process id is kept in ``state.dir``, so a restart
      has the same ids), leaving the group on close like a dynamic member. librdkafka ends
      its session by itself after ``session.timeout.ms`` without an answer from the
      coordinator (a broker outage) and joins again; a dynamic member gets a new member id
      and the coordinator holds the rebalance until the old member's session expires too
      (45 s after the broker is back), a static member takes its old place at once. The
      same goes for an instance killed and restarted."""
    given = settings.get("group.instance.id")
    if given is not None:
        given = str(given).strip()
        return (f"{given}-{index}", False) if given else (None, False)
    if not process_id:
        return None, False
    return f"{process_id}-{index}", True
