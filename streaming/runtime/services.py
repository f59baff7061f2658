"""What a client builds once when it starts and shares with its threads (Kafka's
``StreamThread.create`` arguments, gathered in one frozen object): the topology and its
plan, the settings, the state directory, the process and client ids, the admin client, the
topic caches, the global stores and the standby handover.

``create_services`` builds it for a client (which locks the state directory and checks the
sink topics) and for a worker process (which runs under its client's lock with the
client's process id); both then start their stream threads from it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.lateness import smallest_grace_ms
from streaming.runtime.alignment import AlignmentSettings, AlignmentTable, EventTimeAlignment
from streaming.runtime.assignment import TopologyPlan
from streaming.runtime.bootstrap_probe import check_bootstrap_servers
from streaming.runtime.config import StreamsConfig
from streaming.runtime.state_directory import StateDirectory
from streaming.runtime.topic_limits import TopicLimitsCache
from streaming.runtime.topics import InternalTopicManager, sink_topics

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

    from streaming.runtime.listeners import StandbyHandover


class PartitionCounts:
    """Partition counts of topics: the plan's, then read from the cluster once per topic."""

    def __init__(self, admin: AdminClient, known: dict[str, int]) -> None:
        self._admin = admin
        self._counts = dict(known)

    def __call__(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = InternalTopicManager(self._admin).partition_counts([topic])[topic]
            if count <= 0:
                raise ValueError(f"topic {topic} does not exist")
            self._counts[topic] = count
        return count


def _no_standby() -> StandbyHandover | None:
    return None


@dataclasses.dataclass(frozen=True)
class ClientServices:
    """One client's shared parts, built before any stream thread starts."""

    config: StreamsConfig
    topology: Any
    plan: TopologyPlan
    #: the settings processors and stores see (``StreamsConfig.app_configs``)
    app_configs: dict[str, Any]
    state_directory: StateDirectory
    #: tells the instances of the application apart (standby placement, member names)
    process_id: str
    #: ``client.id`` (or the application id) with the process id
    client_id: str
    #: where every Kafka client of the runtime logs to
    client_logger: logging.Logger
    admin: AdminClient
    #: the admin client's settings (``new_admin`` makes another one, for another thread)
    admin_config: dict[str, Any]
    #: what each topic accepts (timestamps, record size), checked before every write
    topic_limits: TopicLimitsCache
    partition_count: PartitionCounts
    #: the low watermarks of the client's stream threads (event-time alignment)
    alignment: EventTimeAlignment
    #: a ``StateRestoreListener`` told about every changelog restoration, or None
    restore_listener: Any = None
    #: store name -> global store, visible to every task; filled once they are bootstrapped
    global_stores: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: who hands standby state over to a stream thread that activates a task
    standby_handover: Callable[[], StandbyHandover | None] = _no_standby

    def new_admin(self) -> AdminClient:
        """A new admin client with the client's settings."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.admin_config)

    def thread_client_id(self, index: int) -> str:
        """The client id prefix of stream thread ``index``'s Kafka clients."""
        return f"{self.client_id}-StreamThread-{index}"


def alignment_settings(config: StreamsConfig, topology: Any) -> AlignmentSettings:
    """The application's event-time alignment, its drift decided for this topology."""
    return config.alignment.for_grace(smallest_grace_ms(topology))


def create_services(
    config: StreamsConfig,
    topology: Any,
    plan: TopologyPlan,
    *,
    client_logger: logging.Logger,
    process_id: str | None = None,
    alignment_table: str | None = None,
    restore_listener: Any = None,
    standby_handover: Callable[[], StandbyHandover | None] = _no_standby,
) -> ClientServices:
    """The services of a client (``process_id`` None: it locks the state directory and its
    process id comes from there), or of a worker process of the client ``process_id``.

    Fails fast on what cannot work: an unreachable cluster (naming ``bootstrap.servers``),
    missing source or sink topics, a missing dead-letter topic. The state directory is
    unlocked again when it fails."""
    from confluent_kafka.admin import AdminClient

    worker = process_id is not None
    state_directory = StateDirectory(config.state_dir, config.application_id)
    if not worker:
        state_directory.lock()
    try:
        pid = process_id if process_id is not None else state_directory.process_id()
        # the process id tells instances apart in the group (standby placement)
        client_id = f"{config.client_id or config.application_id}-{pid}"
        admin_config = config.clients(client_logger).admin(client_id=f"{client_id}-admin")
        # an unreachable cluster fails here, naming bootstrap.servers (bounded wait)
        check_bootstrap_servers(admin_config, config.bootstrap_timeout_ms / 1000)
        admin = AdminClient(admin_config)
        InternalTopicManager(admin, replication_factor=config.replication_factor).setup(plan)
        if not worker:
            InternalTopicManager(admin).check_sink_topics(sink_topics(topology))
        dead_letters = config.dead_letter_queue_topic
        if dead_letters and not InternalTopicManager(admin).partition_counts([dead_letters]).get(
            dead_letters
        ):
            raise ValueError(
                f"dead-letter topic {dead_letters} does not exist; create it "
                "(errors.dead.letter.queue.topic.name)"
            )
    except BaseException:
        if not worker:
            state_directory.unlock()
        raise
    table = AlignmentTable(alignment_table) if alignment_table is not None else None
    return ClientServices(
        config=config,
        topology=topology,
        plan=plan,
        app_configs=config.app_configs(),
        state_directory=state_directory,
        process_id=pid,
        client_id=client_id,
        client_logger=client_logger,
        admin=admin,
        admin_config=admin_config,
        topic_limits=TopicLimitsCache(admin),
        partition_count=PartitionCounts(admin, dict(plan.partitions)),
        alignment=EventTimeAlignment(alignment_settings(config, topology), table),
        restore_listener=restore_listener,
        standby_handover=standby_handover,
    )
