"""Which instance hosts which task: metadata for interactive queries.

Kafka Streams puts ``application.server`` into its consumer-group subscription user data;
librdkafka gives no access to that, so each stream thread's consumer carries it in its
``client.id`` (``<app>-<process>-StreamThread-<n>-consumer@host:port``) and the owners of
tasks are read from the consumer group description (``AdminClient.describe_consumer_groups``:
every member's ``client_id`` and partition assignment). The map is cached and refreshed
after every local rebalance (under the eager range assignor every member sees every
rebalance) or when older than ``MAX_AGE_S``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streaming.runtime.assignment import TopologyPlan

log = logging.getLogger(__name__)

MAX_AGE_S = 10.0


@dataclass(frozen=True, order=True)
class HostInfo:
    """``application.server`` of an instance."""

    host: str
    port: int

    @staticmethod
    def parse(text: str | None) -> HostInfo:
        if not text or ":" not in text:
            return UNAVAILABLE_HOST
        host, _, port = text.rpartition(":")
        try:
            return HostInfo(host, int(port))
        except ValueError:
            return UNAVAILABLE_HOST

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


UNAVAILABLE_HOST = HostInfo("unavailable", -1)


@dataclass(frozen=True)
class KeyQueryMetadata:
    """Where a key's store partition lives (Kafka's ``KeyQueryMetadata``)."""

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo]
    partition: int


NOT_AVAILABLE = KeyQueryMetadata(UNAVAILABLE_HOST, frozenset(), -1)


@dataclass
class StreamsMetadata:
    """One instance: its host, the stores it hosts and its input partitions."""

    host_info: HostInfo
    state_store_names: set[str] = field(default_factory=set)
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)

    def host(self) -> str:
        return self.host_info.host

    def port(self) -> int:
        return self.host_info.port


def process_from_client_id(client_id: str | None) -> str:
    """The instance part of a stream thread's consumer client id (before ``-StreamThread-``)."""
    text = client_id or ""
    return text.split("-StreamThread-", 1)[0] if "-StreamThread-" in text else text


def server_from_client_id(client_id: str | None) -> str | None:
    """The ``host:port`` a stream thread's consumer client id carries, if any."""
    if not client_id or "@" not in client_id:
        return None
    return client_id.rsplit("@", 1)[1] or None


class AssignmentDirectory:
    """Task -> host map of the whole application, from the consumer group description."""

    def __init__(
        self,
        plan: TopologyPlan,
        admin: Any,
        group_id: str,
        local: Callable[[], tuple[HostInfo, set[str], set[tuple[str, int]]]],
        new_admin: Callable[[], Any] | None = None,
    ) -> None:
        self.plan = plan
        self.admin = admin
        #: makes a fresh admin client: one that lived through a broker restart can keep
        #: timing out on group requests (and librdkafka has crashed on such a client)
        self._new_admin = new_admin
        self.group_id = group_id
        self._local = local
        self._lock = threading.Lock()
        self._instances: list[StreamsMetadata] = []
        self._task_owner: dict[str, HostInfo] = {}
        self._task_process: dict[str, str] = {}
        self._processes: list[str] = []
        self._process_host: dict[str, HostInfo] = {}
        self._fetched_at = 0.0
        self._stale = True

    def invalidate(self) -> None:
        self._stale = True

    def _refresh(self) -> None:
        now = time.monotonic()
        if not self._stale and now - self._fetched_at < MAX_AGE_S:
            return
        instances: dict[HostInfo, StreamsMetadata] = {}
        try:
            future = self.admin.describe_consumer_groups([self.group_id], request_timeout=10)[
                self.group_id
            ]
            description = future.result(timeout=10)
            members = description.members
        except Exception as exc:
            log.warning("Could not describe consumer group %s: %s", self.group_id, exc)
            members = []
            if self._new_admin is not None:
                self.admin = self._new_admin()
        task_process: dict[str, str] = {}
        process_host: dict[str, HostInfo] = {}
        for member in members:
            host = HostInfo.parse(server_from_client_id(member.client_id))
            tps = {
                (tp.topic, tp.partition)
                for tp in (member.assignment.topic_partitions if member.assignment else [])
            }
            meta = instances.setdefault(host, StreamsMetadata(host))
            meta.topic_partitions |= tps
            process = process_from_client_id(member.client_id)
            process_host[process] = host
            for task in self.plan.tasks_for_partitions(tps):
                task_process[task] = process
        local_host, _local_tasks, local_tps = self._local()
        if local_host != UNAVAILABLE_HOST:
            meta = instances.setdefault(local_host, StreamsMetadata(local_host))
            meta.topic_partitions |= local_tps
        owners: dict[str, HostInfo] = {}
        for meta in instances.values():
            meta.tasks = set(self.plan.tasks_for_partitions(meta.topic_partitions))
            for task in meta.tasks:
                owners[task] = meta.host_info
                sub = self.plan.subtopology_by_id[int(task.split("_")[0])]
                meta.state_store_names.update(sub.stores)
        self._instances = sorted(instances.values(), key=lambda m: m.host_info)
        self._task_owner = owners
        self._task_process = task_process
        self._process_host = process_host
        self._processes = sorted(process_host)
        self._fetched_at = now
        self._stale = False

    def all_metadata(self) -> list[StreamsMetadata]:
        with self._lock:
            self._refresh()
            return list(self._instances)

    def owner(self, task: str) -> HostInfo | None:
        with self._lock:
            self._refresh()
            owner = self._task_owner.get(task)
            if owner is None and self._fetched_at and not self._stale:
                # a task unknown right after a rebalance: look again once
                self._stale = True
                self._refresh()
                owner = self._task_owner.get(task)
            return owner

    # -- standby replicas -----------------------------------------------------------------

    def _standby_processes(self, task: str, replicas: int) -> list[str]:
        """The instances keeping standby copies of ``task``: the next ``replicas`` instances
        after the active one in sorted order (every instance computes the same answer)."""
        active = self._task_process.get(task)
        processes = self._processes
        if active is None or replicas <= 0 or len(processes) < 2:
            return []
        start = processes.index(active) if active in processes else 0
        ring = [processes[(start + i) % len(processes)] for i in range(1, len(processes))]
        return ring[:replicas]

    def standby_tasks(self, process: str, replicas: int, stateful: set[str]) -> set[str]:
        """The stateful tasks instance ``process`` keeps standby copies of."""
        with self._lock:
            self._refresh()
            return {task for task in stateful if process in self._standby_processes(task, replicas)}

    def standby_hosts(self, task: str, replicas: int) -> frozenset[HostInfo]:
        with self._lock:
            self._refresh()
            return frozenset(
                self._process_host[p]
                for p in self._standby_processes(task, replicas)
                if self._process_host.get(p, UNAVAILABLE_HOST) != UNAVAILABLE_HOST
            )
