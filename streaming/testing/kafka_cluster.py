"""A real local Apache Kafka (KRaft) cluster on loopback, for tests and ``make run``.

``LocalKafkaCluster(nodes=1)`` formats KRaft storage with ``kafka.tools.StorageTool``, starts
one ``kafka.Kafka`` JVM per node (each a combined broker+controller, from the jars that
``make setup`` copies to ``.jars/kafka``, configured by ``platform/kafka/server.properties``)
on free loopback ports, waits until every broker answers, and on exit stops them (SIGTERM,
then SIGKILL) and removes its temporary directory::

    with LocalKafkaCluster() as kafka:
        kafka.create_topic("orders", partitions=4)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})

``nodes=3`` gives replication factor 3 and ``min.insync.replicas=2`` (also for the
transaction state log). A broker that fails to start raises ``KafkaClusterError`` with the
tail of its log and what to fix.

A cluster without ``data_dir`` is throwaway: its storage is removed on exit, and lives in
memory (``/dev/shm``) where there is one with room, as a busy disk's fsync stalls would freeze
the broker for seconds. It keeps every record whatever its timestamp
(``log.retention.ms=-1``), and it runs no retention check for a week
(``log.retention.check.interval.ms``): tests and benchmarks write fixed event times long past,
which time-based retention would delete at its next check, between a write and the read that
follows it. That covers topics with a ``retention.ms`` of their own too: the changelogs of
window and session stores (the store's retention plus
``windowstore.changelog.additional.retention.ms``, a day) would lose their older records, and
a task restoring such a store after a move or a failure would restore part of it.

``data_dir=`` keeps the storage (topics, offsets, the cluster id) across starts, under the
retention of ``server.properties``; ``port=``
fixes the first broker's client port instead of a free one (its controller listens on
``port + 1``, node ``n`` on ``port + 2(n-1)`` and the next), so a kept cluster comes back at
the same address; a taken port raises ``PortInUseError``.

``sasl_users={"alice": "secret"}`` adds a ``SASL_SSL`` listener to every node (TLS from a
throwaway CA, SASL ``PLAIN`` and ``SCRAM-SHA-256/512`` for those users; the ``PLAINTEXT``
listener stays for the brokers themselves): ``sasl_ssl_bootstrap_servers`` and
``sasl_ssl_client_config(user, password, mechanism=...)`` give what a client needs.

For fault-injection tests: ``stop_node(node_id, kill=...)`` / ``restart_node(node_id)``, and
who leads what right now: ``partition_leader(topic, p)``, ``group_coordinator(group)``,
``transaction_coordinator(transactional_id)`` (Kafka's hash of the id onto
``__transaction_state``), ``transactional_ids(prefix)``, ``active_controller()`` (the KRaft
quorum leader), ``under_replicated()`` / ``wait_fully_replicated()``.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from streaming.testing.jvm_cds import CdsArchive

_REPO = Path(__file__).resolve().parents[2]
_PLATFORM = _REPO / "platform" / "kafka"
DEFAULT_JARS_DIR = _REPO / ".jars" / "kafka"
SERVER_PROPERTIES = _PLATFORM / "server.properties"
LOG4J_CONFIG = _PLATFORM / "log4j2.properties"

# Fast start and a small footprint beat peak throughput for a test broker: C1 only, serial GC.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)

_TEMP_PREFIX = "local-kafka-"
#: where throwaway storage goes when it has this much room left
_MEMORY_DIR = Path("/dev/shm")
_MEMORY_DIR_MIN_FREE = 4 << 30
_OWNER_FILE = "owner.pid"
_LOG_TAIL_LINES = 40
_QUIET = logging.getLogger("streaming.testing.kafka_cluster.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class KafkaClusterError(RuntimeError):
    """The local Kafka cluster could not be started or used."""


class JavaNotFoundError(KafkaClusterError):
    """No Java runtime to start the broker with."""


class PortInUseError(KafkaClusterError):
    """A fixed port of ``LocalKafkaCluster(port=...)`` is taken by another process."""

    def __init__(self, port: int) -> None:
        super().__init__(
            f"port {port} is in use by another process; stop it or choose another port"
        )
        self.port = port


#: what a cluster without ``data_dir`` sets over ``server.properties``
THROWAWAY_BROKER_CONFIG = {
    "log.retention.ms": -1,
    "log.retention.check.interval.ms": 7 * 24 * 3_600_000,
}

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True)
class PartitionState:
    """One partition in the cluster metadata: its leader (-1: none), replicas and ISR."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class KafkaNode:
    """One combined broker+controller JVM of a ``LocalKafkaCluster``."""

    node_id: int
    broker_port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    sasl_ssl_port: int | None = None

    @property
    def address(self) -> str:
        """The broker's ``host:port`` on loopback."""
        return f"127.0.0.1:{self.broker_port}"

    @property
    def log_path(self) -> Path:
        """The file the broker's stdout and stderr (its log) go to."""
        return self.directory / "server.log"

    @property
    def config_path(self) -> Path:
        """The node's filled-in ``server.properties``."""
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        """The node's ``log.dirs`` (KRaft metadata and topic partitions)."""
        return self.directory / "data"

    @property
    def pid(self) -> int | None:
        """The JVM's process id, None when not started."""
        return None if self.process is None else self.process.pid

    def is_running(self) -> bool:
        """True while the node's JVM is alive."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the node's log."""
        return _tail(self.log_path, lines)


class LocalKafkaCluster:
    """A local KRaft Kafka cluster of ``nodes`` combined broker+controller JVMs on loopback."""

    def __init__(
        self,
        nodes: int = 1,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        broker_config: Mapping[str, Any] | None = None,
        jvm_options: Sequence[str] | None = None,
        jars_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 90.0,
        shutdown_timeout: float = 10.0,
        class_data_sharing: bool = True,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        self.num_nodes = nodes
        throwaway = {} if data_dir is not None else THROWAWAY_BROKER_CONFIG
        self.broker_config = {
            k: _prop_value(v) for k, v in {**throwaway, **(broker_config or {})}.items()
        }
        self.jvm_options = tuple(DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options)
        self.jars_dir = Path(
            jars_dir or os.environ.get("STREAMING_KAFKA_JARS") or DEFAULT_JARS_DIR
        ).resolve()
        self.startup_timeout = startup_timeout
        self.shutdown_timeout = shutdown_timeout
        self.class_data_sharing = class_data_sharing
        self.sasl_users = dict(sasl_users or {})
        self._tls: Any = None
        self._cds: CdsArchive | None = None
        self._cds_recorder: KafkaNode | None = None
        if port is not None and not 0 < port <= 65536 - 2 * nodes:
            raise ValueError(f"port must leave room for {2 * nodes} ports, got {port}")
        self.port = port
        self._keep_data = data_dir is not None
        self._root: Path | None = Path(data_dir).resolve() if data_dir is not None else None
        self.nodes: list[KafkaNode] = []
        self.cluster_id: str | None = None
        self.start_seconds: float | None = None
        self._lock = threading.RLock()
        self._admin_for_roles: Any = None

    # ------------------------------------------------------------------ properties

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` of every broker, for ``bootstrap.servers``."""
        if not self.nodes:
            raise KafkaClusterError("the cluster is not started")
        return ",".join(node.address for node in self.nodes)

    @property
    def replication_factor(self) -> int:
        """The default replication factor: 3 for three or more nodes, else the node count."""
        return min(3, self.num_nodes)

    @property
    def min_insync_replicas(self) -> int:
        """``min.insync.replicas``: 2 when replicated, else 1."""
        return 2 if self.replication_factor >= 3 else 1

    @property
    def directory(self) -> Path:
        """The cluster's root directory (node dirs, configs, logs, data)."""
        if self._root is None:
            raise KafkaClusterError("the cluster is not started")
        return self._root

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        """``host:port`` of every broker's ``SASL_SSL`` listener (needs ``sasl_users``)."""
        if not self.sasl_users:
            raise KafkaClusterError("the cluster has no SASL_SSL listener (pass sasl_users=)")
        if not self.nodes:
            raise KafkaClusterError("the cluster is not started")
        return ",".join(f"127.0.0.1:{node.sasl_ssl_port}" for node in self.nodes)

    def sasl_ssl_client_config(
        self, username: str, password: str, *, mechanism: str = "SCRAM-SHA-256"
    ) -> dict[str, Any]:
        """librdkafka settings for the ``SASL_SSL`` listener: the cluster's CA is trusted."""
        return {
            "bootstrap.servers": self.sasl_ssl_bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": username,
            "sasl.password": password,
            "ssl.ca.location": str(self._tls.ca_path),
        }

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """A confluent-kafka config dict pointing at this cluster, plus ``overrides``."""
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalKafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> LocalKafkaCluster:
        """Format storage, start every node and wait until all brokers answer."""
        with self._lock:
            if self.nodes:
                raise KafkaClusterError("the cluster is already started")
            java = find_java()
            classpath = self._classpath()
            if self.class_data_sharing:
                self._cds = CdsArchive(java, self.jars_dir)
            _sweep_stale_temp_dirs()
            if self.port is not None:
                check_ports_free(range(self.port, self.port + 2 * self.num_nodes))
            began = time.monotonic()
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=_throwaway_parent()))
                (self._root / _OWNER_FILE).write_text(str(os.getpid()))
            else:
                self._root.mkdir(parents=True, exist_ok=True)
            _LIVE.add(self)
            try:
                for attempt in range(3):
                    self._configure_nodes()
                    self._format(java, classpath)
                    for node in self.nodes:
                        self._launch(java, classpath, node)
                    try:
                        self._wait_until_ready(began + self.startup_timeout)
                        break
                    except _PortTaken as exc:
                        self._terminate_all(kill_after=2.0)
                        self.nodes = []
                        if self.port is not None:  # fixed ports: another try gets the same
                            raise PortInUseError(self.port) from exc
                        if attempt == 2:
                            raise
            except BaseException:
                self.stop()
                raise
            self.start_seconds = time.monotonic() - began
            return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node (SIGTERM, wait, SIGKILL) and delete temporary data.

        A multi-node cluster whose data is thrown away gets at most 3 s of grace: its last
        node always waits out a quorum it cannot reach, and nothing of it is kept anyway.
        """
        with self._lock:
            if timeout is None:
                timeout = self.shutdown_timeout
                if self.num_nodes > 1 and not self._keep_data:
                    timeout = min(timeout, 3.0)
            self._terminate_all(kill_after=timeout)
            self.nodes = []
            self._admin_for_roles = None
            _LIVE.discard(self)
            if self._root is not None and not self._keep_data:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None

    def stop_node(self, node_id: int, *, kill: bool = False, timeout: float = 15.0) -> None:
        """Stop one node: SIGKILL when ``kill``, else SIGTERM then SIGKILL after ``timeout``."""
        node = self.node(node_id)
        if node.process is None:
            return
        if kill:
            _signal(node.process, signal.SIGKILL)
            node.process.wait()
        else:
            _stop_processes([node.process], timeout)
        self._finish_cds()

    def restart_node(self, node_id: int, *, timeout: float | None = None) -> None:
        """Start a stopped node again on the same ports and data, and wait until it answers."""
        node = self.node(node_id)
        if node.is_running():
            raise KafkaClusterError(f"node {node_id} is still running")
        self._launch(find_java(), self._classpath(), node)
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        self._wait_until_ready(deadline, nodes=[node])

    def node(self, node_id: int) -> KafkaNode:
        """The node with ``node.id`` ``node_id``."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} (nodes: {[n.node_id for n in self.nodes]})")

    # ------------------------------------------------------------------ admin helpers

    def admin(self, **overrides: Any) -> Any:
        """A confluent-kafka ``AdminClient`` for this cluster."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config(logger=_QUIET, **overrides))

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create topic ``name`` and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        new = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor or self.replication_factor,
            config={k: _prop_value(v) for k, v in (config or {}).items()},
        )
        admin = self.admin()
        futures = admin.create_topics([new], request_timeout=timeout, operation_timeout=timeout)
        try:
            futures[name].result(timeout=timeout)
        except Exception as exc:
            raise KafkaClusterError(f"could not create topic {name!r}: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            meta = admin.list_topics(topic=name, timeout=max(0.1, deadline - time.monotonic()))
            topic = meta.topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise KafkaClusterError(f"topic {name!r} has no leader for every partition")
            time.sleep(0.05)

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        """Delete topic ``name`` (the deletion completes on the brokers afterwards)."""
        admin = self.admin()  # held until the answer: a client destroyed first fails the future
        futures = admin.delete_topics([name], operation_timeout=timeout)
        futures[name].result(timeout=timeout)

    def list_topics(self, *, timeout: float = 10.0) -> set[str]:
        """Names of the cluster's topics (internal ones included)."""
        return set(self.admin().list_topics(timeout=timeout).topics)

    # ------------------------------------------------------------------ roles (chaos tests)
    #
    # Which node leads what, for tests that bounce a particular broker (the system tests of
    # Kafka Streams: the partition leader, the transaction or group coordinator, the active
    # controller). Every answer comes from the cluster itself, never from a cached guess.

    def running_node_ids(self) -> list[int]:
        """``node.id`` of every node whose JVM is alive."""
        return [n.node_id for n in self.nodes if n.is_running()]

    def registered_brokers(self, *, timeout: float = 5.0) -> set[int]:
        """Brokers the cluster metadata lists now (a killed one leaves once it is fenced).

        From a metadata request, which any live broker answers (librdkafka sends
        ``describe_cluster`` to the "controller" of the metadata, possibly the dead node)."""
        return set(self._roles_admin().list_topics(timeout=timeout).brokers)

    def partition_state(
        self, topics: Sequence[str] | None = None, *, timeout: float = 5.0
    ) -> dict[tuple[str, int], PartitionState]:
        """Leader, replicas and ISR of every partition of ``topics`` (all topics, internal
        ones included, when None), from the cluster metadata."""
        admin = self._roles_admin()
        out: dict[tuple[str, int], PartitionState] = {}
        if topics is None:
            meta = admin.list_topics(timeout=timeout)
            selected = list(meta.topics.values())
        else:
            selected = []
            for name in topics:
                topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
                if topic is None or topic.error is not None:
                    raise KafkaClusterError(
                        f"no topic {name!r}: {None if topic is None else topic.error}"
                    )
                selected.append(topic)
        for topic in selected:
            for pid, part in topic.partitions.items():
                out[(topic.topic, pid)] = PartitionState(
                    topic.topic, pid, part.leader, tuple(part.replicas), tuple(part.isrs)
                )
        return out

    def partition_leader(
        self, topic: str, partition: int = 0, *, timeout: float = 5.0, within: float = 30.0
    ) -> int:
        """The node leading ``topic``-``partition`` (-1 while it has no leader); requests of
        ``timeout`` seconds retried for ``within`` seconds (``_retried``)."""
        from confluent_kafka import TopicCollection

        def lookup() -> int:
            admin = self._roles_admin()
            future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)
            desc = future[topic].result(timeout=timeout + 1)
            for info in desc.partitions:
                if info.id == partition:
                    return -1 if info.leader is None else int(info.leader.id)
            raise KafkaClusterError(f"topic {topic!r} has no partition {partition}")

        return _retried(lookup, within)

    def under_replicated(
        self, topics: Sequence[str] | None = None, *, timeout: float = 5.0
    ) -> list[PartitionState]:
        """Partitions without a leader or whose ISR lacks one of their replicas."""
        states = self.partition_state(topics, timeout=timeout)
        return [s for s in states.values() if s.leader < 0 or set(s.isr) != set(s.replicas)]

    def wait_fully_replicated(
        self, topics: Sequence[str] | None = None, *, timeout: float = 60.0
    ) -> float:
        """Wait until every partition (of ``topics``, else of all topics) has a leader and
        a full ISR; returns the seconds waited. Raises ``KafkaClusterError`` on timeout."""
        began = time.monotonic()
        deadline = began + timeout
        last: Any = None
        while True:
            try:
                last = self.under_replicated(topics, timeout=min(5.0, max(0.5, timeout)))
                if not last:
                    return time.monotonic() - began
            except Exception as exc:  # a metadata request during a leader change
                last = exc
            if time.monotonic() > deadline:
                raise KafkaClusterError(
                    f"partitions still under-replicated after {timeout:.0f}s: {last}"
                )
            time.sleep(0.2)

    def group_coordinator(
        self, group_id: str, *, timeout: float = 5.0, within: float = 30.0
    ) -> int:
        """The broker coordinating consumer group ``group_id`` (FindCoordinator, through
        ``describe_consumer_groups``; the group need not exist yet); retried for ``within``
        seconds (``_retried``)."""

        def lookup() -> int:
            admin = self._roles_admin()
            future = admin.describe_consumer_groups([group_id], request_timeout=timeout)
            desc = future[group_id].result(timeout=timeout + 1)
            if desc.coordinator is None:
                raise KafkaClusterError(f"no coordinator for group {group_id!r}")
            return int(desc.coordinator.id)

        return _retried(lookup, within)

    def coordinator_partition(self, key: str, internal_topic: str, *, timeout: float = 5.0) -> int:
        """The partition of ``internal_topic`` (``__consumer_offsets`` or
        ``__transaction_state``) owning a group or transactional id, computed as Kafka
        does: ``Utils.abs(key.hashCode()) % partition count``, Java's ``String.hashCode``."""
        meta = self._roles_admin().list_topics(topic=internal_topic, timeout=timeout)
        topic = meta.topics.get(internal_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise KafkaClusterError(
                f"{internal_topic} does not exist yet (created on first use by the cluster)"
            )
        return kafka_abs(java_string_hash(key)) % len(topic.partitions)

    def transaction_coordinator(self, transactional_id: str, *, timeout: float = 5.0) -> int:
        """The broker coordinating ``transactional_id``: the leader of its partition of
        ``__transaction_state`` (confluent-kafka has no DescribeTransactions)."""
        partition = self.coordinator_partition(
            transactional_id, TRANSACTION_STATE_TOPIC, timeout=timeout
        )
        return self.partition_leader(TRANSACTION_STATE_TOPIC, partition, timeout=timeout)

    def transactional_ids(self, prefix: str = "", *, timeout: float = 15.0) -> dict[str, int]:
        """Transactional ids the cluster knows (starting with ``prefix``) and the partition
        of ``__transaction_state`` holding each: the keys of that log, read to its end
        (Kafka's ``ListTransactions``, which confluent-kafka lacks)."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        admin = self._roles_admin()
        meta = admin.list_topics(topic=TRANSACTION_STATE_TOPIC, timeout=timeout)
        topic = meta.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or topic.error is not None:
            return {}
        consumer = Consumer(
            self.client_config(
                **{
                    "group.id": f"roles-reader-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_uncommitted",
                    "logger": _QUIET,
                }
            )
        )
        found: dict[str, int] = {}
        errors: list[str] = []
        try:
            ends: dict[int, int] = {}
            for pid in topic.partitions:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(TRANSACTION_STATE_TOPIC, pid), timeout=timeout
                )
                if high > 0:
                    ends[pid] = high
            if not ends:
                return {}
            consumer.assign(
                [TopicPartition(TRANSACTION_STATE_TOPIC, p, OFFSET_BEGINNING) for p in ends]
            )
            pending = set(ends)
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=500, timeout=0.5):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(msg.partition())
                        else:
                            errors.append(str(err))
                        continue
                    # a record has its offset and partition (the stubs say Optional)
                    if msg.offset() + 1 >= ends[msg.partition()]:  # type: ignore[operator,index]
                        pending.discard(msg.partition())
                    txn_id = _decode_transaction_log_key(msg.key())
                    if txn_id is not None and txn_id.startswith(prefix):
                        found[txn_id] = msg.partition()  # type: ignore[assignment]
            if pending:
                raise KafkaClusterError(
                    f"could not read {TRANSACTION_STATE_TOPIC} partitions {sorted(pending)} "
                    f"to their end offsets {[ends[p] for p in sorted(pending)]} within "
                    f"{timeout:.0f}s (consumer errors: {errors[-3:]})"
                )
        finally:
            consumer.close()
        return found

    def active_controller(self, *, timeout: float = 15.0) -> int:
        """The node leading the KRaft controller quorum (the active controller).

        In KRaft, ``describe_cluster().controller`` names a random live broker (clients
        cannot reach the controllers), so the answer comes from the ``quorum-state`` file
        each voter keeps in ``__cluster_metadata-0``: the leader of the highest epoch among
        running nodes, once that leader is itself running."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self._quorum_leader()
            if leader is not None and self.node(leader).is_running():
                return leader
            if time.monotonic() > deadline:
                raise KafkaClusterError(
                    f"no active KRaft controller among running nodes {self.running_node_ids()} "
                    f"within {timeout:.0f}s"
                )
            time.sleep(0.1)

    def metadata_controller(self, *, timeout: float = 5.0) -> int:
        """The ``controller`` of ``describe_cluster`` (in KRaft: a random live broker, see
        ``active_controller`` for the real one)."""
        desc = self._roles_admin().describe_cluster(request_timeout=timeout).result(timeout + 1)
        return -1 if desc.controller is None else desc.controller.id

    def _quorum_leader(self) -> int | None:
        best: tuple[int, int] | None = None  # (epoch, leader)
        for node in self.nodes:
            if not node.is_running():
                continue
            path = node.data_dir / "__cluster_metadata-0" / "quorum-state"
            try:
                state = json.loads(path.read_text())
                epoch, leader = int(state["leaderEpoch"]), int(state["leaderId"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if best is None or epoch > best[0]:
                best = (epoch, leader)
        if best is None or best[1] < 0:
            return None  # an election in progress
        return best[1]

    def _roles_admin(self) -> Any:
        with self._lock:
            if self._admin_for_roles is None:
                self._admin_for_roles = self.admin(
                    **{
                        "socket.connection.setup.timeout.ms": 2000,
                        "reconnect.backoff.max.ms": 500,
                        "topic.metadata.refresh.interval.ms": 1000,
                    }
                )
            return self._admin_for_roles

    # ------------------------------------------------------------------ internals

    def _classpath(self) -> str:
        jars = sorted(self.jars_dir.glob("kafka_2.13-*.jar")) if self.jars_dir.is_dir() else []
        if not jars:
            raise KafkaClusterError(
                f"the Kafka broker jars are missing from {self.jars_dir}: run `make setup` "
                "(it copies org.apache.kafka:kafka_2.13 and its dependencies from "
                "platform/kafka/pom.xml with Maven)"
            )
        return str(self.jars_dir / "*")

    def _configure_nodes(self) -> None:
        if self.port is not None:  # stable: the stored quorum config names these ports
            ports = list(range(self.port, self.port + 2 * self.num_nodes))
        else:
            ports = _free_ports(2 * self.num_nodes)
        sasl_ports = _free_ports(self.num_nodes) if self.sasl_users else []
        root = self.directory
        self.nodes = [
            KafkaNode(
                node_id=i + 1,
                broker_port=ports[2 * i],
                controller_port=ports[2 * i + 1],
                directory=root / f"node-{i + 1}",
                sasl_ssl_port=sasl_ports[i] if sasl_ports else None,
            )
            for i in range(self.num_nodes)
        ]
        if self.sasl_users and self._tls is None:
            from streaming.testing.tls import write_server_tls

            self._tls = write_server_tls(root / "tls")
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        template = string.Template(SERVER_PROPERTIES.read_text())
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            text = template.substitute(
                node_id=node.node_id,
                quorum_voters=voters,
                broker_port=node.broker_port,
                controller_port=node.controller_port,
                log_dir=node.data_dir,
                replication_factor=self.replication_factor,
                min_insync_replicas=self.min_insync_replicas,
                # a killed node of several is fenced within 3 s, so that its partitions
                # move on; the only node has no one to hand them to, and fencing it because
                # a heartbeat came late (a loaded machine) takes every partition offline
                broker_session_timeout_ms=3000 if self.num_nodes > 1 else 9000,
            )
            if self.sasl_users:
                text += self._sasl_ssl_properties(node)
            if self.broker_config:
                text += "\n# broker_config overrides\n" + "".join(
                    f"{key}={value}\n" for key, value in self.broker_config.items()
                )
            node.config_path.write_text(text)

    def _sasl_ssl_properties(self, node: KafkaNode) -> str:
        """A SASL_SSL listener beside PLAINTEXT (which the brokers keep among themselves)."""
        plain_users = " ".join(
            f'user_{name}="{password}"' for name, password in self.sasl_users.items()
        )
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return (
            "\n# SASL_SSL listener (sasl_users)\n"
            f"listeners=PLAINTEXT://127.0.0.1:{node.broker_port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port},"
            f"SASL_SSL://127.0.0.1:{node.sasl_ssl_port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.broker_port},"
            f"SASL_SSL://127.0.0.1:{node.sasl_ssl_port}\n"
            "listener.security.protocol.map="
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL\n"
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
            "listener.name.sasl_ssl.plain.sasl.jaas.config="
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};\n"
            f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={scram}\n"
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}\n"
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.location={self._tls.keystore_path}\n"
        )

    def _scram_options(self) -> list[str]:
        """``StorageTool format --add-scram`` for every user and SCRAM mechanism."""
        return [
            option
            for name, password in self.sasl_users.items()
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            for option in ("--add-scram", f"{mechanism}=[name={name},password={password}]")
        ]

    def _format(self, java: str, classpath: str) -> None:
        existing = {_read_cluster_id(node.data_dir) for node in self.nodes}
        if len(existing) == 1 and None not in existing:
            self.cluster_id = existing.pop()  # a kept data_dir, formatted by an earlier run
            return
        if existing != {None}:
            raise KafkaClusterError(
                f"{self.directory} holds KRaft storage of another cluster layout "
                f"(cluster ids {sorted(map(str, existing))}): delete it or use another data_dir"
            )
        self.cluster_id = _random_cluster_id()
        procs = []
        for node in self.nodes:
            cmd = [
                java,
                *self.jvm_options,
                *(self._cds.options() if self._cds else ()),
                f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                self.cluster_id,
                "--config",
                str(node.config_path),
                *self._scram_options(),
            ]
            log = node.directory / "format.log"
            with log.open("wb") as out:
                procs.append(
                    (node, log, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
                )
        for node, log, proc in procs:
            if proc.wait() != 0:
                raise KafkaClusterError(
                    f"formatting the KRaft storage of node {node.node_id} failed "
                    f"(exit code {proc.returncode}); check broker_config and {node.config_path}."
                    f"\n--- tail of {log} ---\n{_tail(log, _LOG_TAIL_LINES)}"
                )

    def _launch(self, java: str, classpath: str, node: KafkaNode) -> None:
        cds: list[str] = []
        if self._cds is not None:
            # Only a single node records the archive: its SIGTERM exit is quick and clean.
            if self.num_nodes == 1 and self._cds_recorder is None:
                cds = self._cds.recording_options()
                if any(opt.startswith("-XX:ArchiveClassesAtExit") for opt in cds):
                    self._cds_recorder = node
            else:
                cds = self._cds.options()
        cmd = [
            java,
            *self.jvm_options,
            *cds,
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(node.config_path),
        ]
        with node.log_path.open("ab") as out:
            node.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                start_new_session=True,
                preexec_fn=_die_with_parent_hook(),
            )

    def _wait_until_ready(self, deadline: float, nodes: Sequence[KafkaNode] | None = None) -> None:
        waiting = list(nodes if nodes is not None else self.nodes)
        pending = list(waiting)
        while pending:
            self._check_alive(waiting)
            pending = [n for n in pending if not _port_open(n.broker_port)]
            if time.monotonic() > deadline:
                self._timeout(pending)
            if pending:
                time.sleep(0.05)
        expected = {n.node_id for n in self.nodes if n.is_running()}
        admin = None
        while True:
            self._check_alive(waiting)
            try:
                admin = admin or self.admin(
                    **{"socket.connection.setup.timeout.ms": 1000, "reconnect.backoff.max.ms": 200}
                )
                brokers = set(admin.list_topics(timeout=1.0).brokers)
                if expected <= brokers:
                    return
            except Exception:  # the broker answers but is not ready yet
                pass
            if time.monotonic() > deadline:
                self._timeout(waiting)
            time.sleep(0.05)

    def _check_alive(self, nodes: Sequence[KafkaNode]) -> None:
        for node in nodes:
            if node.process is not None and node.process.poll() is not None:
                tail = node.log_tail()
                if "Address already in use" in tail:
                    raise _PortTaken(tail)
                raise KafkaClusterError(
                    f"Kafka node {node.node_id} exited with code {node.process.returncode} "
                    f"while starting; check broker_config / {node.config_path} and the log "
                    f"{node.log_path}.\n--- tail of {node.log_path} ---\n{tail}"
                )

    def _timeout(self, nodes: Sequence[KafkaNode]) -> None:
        tails = "\n".join(f"--- tail of {n.log_path} ---\n{n.log_tail()}" for n in nodes)
        raise KafkaClusterError(
            f"Kafka nodes {[n.node_id for n in nodes]} did not answer within "
            f"{self.startup_timeout:.0f}s (a loaded machine may need a larger "
            f"startup_timeout).\n{tails}"
        )

    def _terminate_all(self, *, kill_after: float) -> None:
        procs = [n.process for n in self.nodes if n.process is not None]
        _stop_processes(procs, kill_after)
        self._finish_cds()

    def _finish_cds(self) -> None:
        recorder = self._cds_recorder
        if recorder is not None and self._cds is not None and not recorder.is_running():
            self._cds.finish()
            self._cds_recorder = None


class _PortTaken(KafkaClusterError):
    """A node lost the race for its port to another process; retried with new ports."""


# ---------------------------------------------------------------------- module helpers

_LIVE: set[LocalKafkaCluster] = set()


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop(timeout=5.0)


def _stop_processes(procs: Sequence[subprocess.Popen[bytes]], kill_after: float) -> None:
    live = [p for p in procs if p.poll() is None]
    for proc in live:
        _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + kill_after
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)


def find_java() -> str:
    """The ``java`` of ``JAVA_HOME`` or PATH; ``JavaNotFoundError`` saying how to get one."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise JavaNotFoundError(
            "java was not found: the local Kafka broker needs Java 17+ on PATH or in "
            "JAVA_HOME (e.g. apt-get install openjdk-17-jre-headless)"
        )
    return java


T = TypeVar("T")


def _retried(lookup: Callable[[], T], within: float) -> T:
    """``lookup``, retried on client errors for ``within`` seconds: right after a broker
    restart an admin request can time out while the cluster elects a controller or moves
    leaders ("Failed while waiting for controller")."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + within
    while True:
        try:
            return lookup()
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def check_ports_free(ports: Sequence[int]) -> None:
    """Raise ``PortInUseError`` for the first of ``ports`` another process listens on.

    SO_REUSEADDR as the JVM sets it: connections of an earlier run in TIME_WAIT do not
    count, a listening socket does."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as exc:
                raise PortInUseError(port) from exc


def _random_cluster_id() -> str:
    """A random Kafka ``Uuid`` in its base64 form, as ``StorageTool random-uuid`` prints."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _read_cluster_id(data_dir: Path) -> str | None:
    meta = data_dir / "meta.properties"
    if not meta.exists():
        return None
    for line in meta.read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    return None


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit signed, over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` but 0 for ``Integer.MIN_VALUE``."""
    return 0 if n == -(1 << 31) else abs(n)


def _decode_transaction_log_key(raw: bytes | None) -> str | None:
    """The transactional id of a ``__transaction_state`` key (version int16, then a string
    of int16 length); None for anything else."""
    if raw is None or len(raw) < 4:
        return None
    length = int.from_bytes(raw[2:4], "big", signed=True)
    if length < 0 or len(raw) < 4 + length:
        return None
    return raw[4 : 4 + length].decode("utf-8", "replace")


def _prop_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(data.splitlines()[-lines:])


def _die_with_parent_hook() -> Any:
    """A preexec_fn making the JVM get SIGKILL if this process dies (Linux, main thread only)."""
    if (
        not sys.platform.startswith("linux")
        or threading.current_thread() is not threading.main_thread()
    ):
        return None  # PR_SET_PDEATHSIG fires when the forking *thread* exits
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return hook


def _throwaway_parent() -> Path | None:
    """``/dev/shm`` when it is a writable directory with room; None: the temp directory."""
    try:
        roomy = shutil.disk_usage(_MEMORY_DIR).free >= _MEMORY_DIR_MIN_FREE
    except OSError:
        return None
    return _MEMORY_DIR if roomy and os.access(_MEMORY_DIR, os.W_OK) else None


def _sweep_stale_temp_dirs() -> None:
    """Remove temp dirs of earlier clusters whose owning process died without cleaning up."""
    parents = {Path(tempfile.gettempdir()), _MEMORY_DIR}
    for path in (p for parent in parents for p in parent.glob(_TEMP_PREFIX + "*")):
        try:
            owner = int((path / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not _pid_alive(owner):
            shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
