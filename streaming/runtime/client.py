"""``StreamsClient``: runs a topology against a Kafka cluster (the runtime of Kafka's
``KafkaStreams``; ``streaming.KafkaStreams`` adds the HTTP query server on top of it).

    app = KafkaStreams(builder.build(), {"application.id": "revenue",
                                         "bootstrap.servers": "localhost:9092"})
    app.start()
    ...
    app.close()

``start()`` validates the topology against the cluster (source topics exist, joined topics
are co-partitioned), creates the internal topics, takes the state directory lock and starts
the stream threads (``num.stream.threads``, default 1), which join the consumer group
``application.id``. States follow Kafka's ``KafkaStreams.State``.

With more than one stream thread and ``stream.workers = processes`` (the default) each
stream thread runs in a worker process of its own (``runtime.worker``), since CPython
threads share one core: the client keeps the state-directory lock, the global and standby
threads and the state, and reads the workers' stores and counters through them
(``StreamRunner``: a stream thread and a worker process look alike to the client).
Processors then run in the workers: what they change in this process (a list a
``foreach`` appends to) is not seen here; ``stream.workers = threads`` keeps them in one
process.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import shutil
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from streaming.errors import IllegalStateException, InvalidStateStoreException
from streaming.runtime.alignment import ALIGNMENT_TABLE, AlignmentTable, EventTimeAlignment
from streaming.runtime.alignment_exchange import AlignmentExchange, start_alignment_exchange
from streaming.runtime.assignment import TopologyPlan, task_id
from streaming.runtime.client_log import client_logger
from streaming.runtime.config import StreamsConfig
from streaming.runtime.errors import StreamThreadExceptionResponse
from streaming.runtime.global_thread import GlobalStreamThread
from streaming.runtime.metadata import (
    NOT_AVAILABLE,
    UNAVAILABLE_HOST,
    AssignmentDirectory,
    HostInfo,
    KeyQueryMetadata,
    StreamsMetadata,
)
from streaming.runtime.partitioner import default_partition
from streaming.runtime.queries import view_for
from streaming.runtime.runner import StreamRunner
from streaming.runtime.services import ClientServices, alignment_settings, create_services
from streaming.runtime.standby import StandbyManager
from streaming.runtime.store_provider import StoreProvider
from streaming.runtime.thread import StreamThread
from streaming.runtime.worker_process import WorkerProcess

if TYPE_CHECKING:
    from streaming.runtime.metrics import ThreadStatus

log = logging.getLogger(__name__)


class State(enum.Enum):
    """Kafka's ``KafkaStreams.State``."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_running_or_rebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)


_TRANSITIONS = {
    State.CREATED: {State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.REBALANCING: {
        State.RUNNING,
        State.REBALANCING,
        State.PENDING_SHUTDOWN,
        State.PENDING_ERROR,
    },
    State.RUNNING: {State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.PENDING_SHUTDOWN: {State.NOT_RUNNING},
    State.NOT_RUNNING: set(),
    State.PENDING_ERROR: {State.ERROR},
    State.ERROR: set(),
}


class StreamsClient:
    """A Kafka Streams application instance: a topology, its config, its stream threads."""

    # the module's State enum, also reachable as KafkaStreams.State (as in Kafka); a type
    # alias, so that the annotations below (which resolve State here) name the enum class
    State: TypeAlias = State

    def __init__(self, topology: Any, config: dict[str, Any] | StreamsConfig) -> None:
        if hasattr(topology, "build") and not hasattr(topology, "nodes"):
            # a StreamsBuilder: built with this config (``topology.optimization``)
            topology = topology.build(
                config.originals if isinstance(config, StreamsConfig) else config
            )
        self.topology = topology
        self.config = StreamsConfig.from_mapping(config)
        wanted = self.config.originals.get("topology.optimization")
        if wanted not in (None, "none") and not getattr(topology, "optimizations", None):
            log.warning(
                "topology.optimization=%s is set but the topology was built without it: pass "
                "the StreamsBuilder (or build it with builder.build(config)) to apply it",
                wanted,
            )
        self.plan = TopologyPlan(
            topology,
            self.config.application_id,
            window_additional_retention_ms=self.config.window_changelog_additional_retention_ms,
        )
        self._state = State.CREATED
        self._state_lock = threading.RLock()
        self._state_listener: Callable[[State, State], None] | None = None
        self._exception_handler: Callable[[BaseException], Any] | None = None
        self.restore_listener: Any = None
        self.client_logger = client_logger()
        #: what start() builds and the threads share (None before start)
        self._services: ClientServices | None = None
        self.threads: list[StreamThread] = []
        #: the worker processes running the stream threads (stream.workers = processes)
        self.workers: list[WorkerProcess] = []
        #: the topology and config as the workers get them (pickled once)
        self._payload: bytes | None = None
        self._thread_index = 0
        self._directory: AssignmentDirectory | None = None
        #: this instance's low watermarks for the others, and theirs for it (None: off)
        self._alignment_exchange: AlignmentExchange | None = None
        self.host_info = HostInfo.parse(self.config.application_server)
        self._errors: list[BaseException] = []
        self.global_thread: GlobalStreamThread | None = None
        self.standby: StandbyManager | None = None
        #: the running local tasks' stores, for reads (``store()``, workers, query serving)
        self.store_provider = StoreProvider(self._runners, self._require_store_reads)

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> State:
        """The current ``State``."""
        return self._state

    def set_state_listener(self, listener: Callable[[State, State], None] | None) -> None:
        """``listener(new_state, old_state)`` on every state change (call before start)."""
        if self._state is not State.CREATED:
            raise IllegalStateException("set_state_listener is only allowed in state CREATED")
        self._state_listener = listener

    def set_uncaught_exception_handler(
        self, handler: Callable[[BaseException], StreamThreadExceptionResponse | str]
    ) -> None:
        """``handler(exception)`` decides REPLACE_THREAD / SHUTDOWN_CLIENT /
        SHUTDOWN_APPLICATION when a stream thread dies (default: SHUTDOWN_CLIENT)."""
        if self._state is not State.CREATED:
            raise IllegalStateException(
                "set_uncaught_exception_handler is only allowed in state CREATED"
            )
        self._exception_handler = handler

    def set_global_state_restore_listener(self, listener: Any) -> None:
        """A ``StateRestoreListener`` told about every changelog restoration."""
        if self._state is not State.CREATED:
            raise IllegalStateException("the restore listener can only be set in state CREATED")
        self.restore_listener = listener

    def _set_state(self, new: State) -> bool:
        with self._state_lock:
            old = self._state
            if new is old and new is not State.REBALANCING:
                return True
            if new not in _TRANSITIONS[old]:
                return False
            self._state = new
        if new is not old:
            log.info(
                "KafkaStreams %s: state %s -> %s", self.config.application_id, old.name, new.name
            )
            if self._state_listener is not None:
                try:
                    self._state_listener(new, old)
                except Exception:
                    log.exception("state listener failed")
        return True

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def process_id(self) -> str:
        """This instance's process id (from its state directory; empty before start)."""
        return self._services.process_id if self._services is not None else ""

    def start(self) -> None:
        """Create internal topics and start the stream threads (fails fast on bad setups)."""
        with self._state_lock:
            if self._state is not State.CREATED:
                raise IllegalStateException(
                    f"KafkaStreams can only be started once (state is {self._state.name})"
                )
            if self.config.worker_processes:
                services = self._start_workers()
            else:
                services = self._start_client()
                for _ in range(self.config.num_stream_threads):
                    self._start_thread(services)
            if self.config.num_standby_replicas > 0:
                assert self._directory is not None
                self.standby = StandbyManager(services, self._directory, self.local_tasks)
                self.standby.start()

    def _start_workers(self) -> ClientServices:
        """Spawn the worker processes (they load while this client sets itself up), then
        let them all start their stream threads at once: they join the group together."""
        payload = self._worker_payload()
        workers: list[WorkerProcess] = []
        try:
            for index in range(1, self.config.num_stream_threads + 1):
                workers.append(self._new_worker(index, payload))
            services = self._start_client()
        except BaseException:
            for worker in workers:
                worker.kill()
            raise
        self._thread_index = len(workers)
        self.workers = [worker.start(services) for worker in workers]
        return services

    def _new_worker(self, index: int, payload: bytes) -> WorkerProcess:
        return WorkerProcess(self.config.application_id, index, payload, self, lambda: self.standby)

    def _worker_payload(self) -> bytes:
        """The topology and config for the worker processes (fails fast when they cannot
        be sent)."""
        import cloudpickle

        if self._payload is not None:
            return self._payload
        try:
            self._payload = bytes(cloudpickle.dumps((self.topology, self.config.originals)))
            return self._payload
        except Exception as exc:
            raise ValueError(
                f"num.stream.threads={self.config.num_stream_threads} runs worker processes, "
                f"and the topology or config cannot be sent to them ({type(exc).__name__}: "
                f"{exc}); make them picklable, or set stream.workers=threads"
            ) from exc

    def _start_client(self) -> ClientServices:
        """Everything before the stream threads: state directory, admin client, internal
        topics, global stores, serving."""
        cfg = self.config
        services = create_services(
            cfg,
            self.topology,
            self.plan,
            client_logger=self.client_logger,
            restore_listener=self.restore_listener,
            standby_handover=lambda: self.standby,
        )
        try:
            if cfg.worker_processes and cfg.alignment.enabled:
                # the workers' low watermarks meet in a table in the state directory
                table = AlignmentTable(services.state_directory.path / ALIGNMENT_TABLE, create=True)
                services = dataclasses.replace(
                    services,
                    alignment=EventTimeAlignment(alignment_settings(cfg, self.topology), table),
                )
            self._directory = AssignmentDirectory(
                self.plan,
                services.admin,
                cfg.application_id,
                self._local_assignment,
                new_admin=services.new_admin,
            )
            if self.topology.global_stores:
                # like Kafka, the global stores are complete before any task starts
                self.global_thread = GlobalStreamThread(services, "global", self)
                self.global_thread.bootstrap()
                services.global_stores.update(self.global_thread.stores)
            self._alignment_exchange = start_alignment_exchange(services)
            self._start_serving()
        except BaseException:
            self._stop_serving()
            self._close_alignment_exchange()
            if self.global_thread is not None:
                self.global_thread.close()
                self.global_thread = None
            services.state_directory.unlock()
            raise
        self._services = services
        if self.global_thread is not None:
            self.global_thread.start()
        self._set_state(State.REBALANCING)
        return services

    def _close_alignment_exchange(self) -> None:
        if self._alignment_exchange is not None:
            self._alignment_exchange.close()
            self._alignment_exchange = None

    def _start_serving(self) -> None:
        """Start what serves this client's state to others, before any stream thread (none
        here; ``streaming.KafkaStreams`` starts its HTTP query server)."""

    def _stop_serving(self) -> None:
        """Stop what ``_start_serving`` started (called on a failed start and on close)."""

    def _start_thread(self, services: ClientServices) -> None:
        """Start the next stream thread of this process."""
        self._thread_index += 1
        thread = StreamThread.create(services, self._thread_index, self)
        self.threads.append(thread)
        thread.start()

    def _runners(self) -> list[StreamRunner]:
        """The stream threads, or the worker processes that run them."""
        return list(self.workers) if self.workers else list(self.threads)

    def close(self, timeout: float | None = None) -> bool:
        """Stop the threads (committing and checkpointing); True if done within ``timeout``."""
        with self._state_lock:
            if self._state is State.CREATED:
                self._set_state(State.PENDING_SHUTDOWN)
                self._set_state(State.NOT_RUNNING)
                return True
            if self._state in (State.NOT_RUNNING, State.ERROR):
                return True
            if self._state is not State.PENDING_ERROR:
                self._set_state(State.PENDING_SHUTDOWN)
            threads = list(self.threads)
        if threading.current_thread() in threads or any(
            threading.current_thread() is w._monitor for w in self.workers
        ):
            # called from a stream thread (e.g. a handler): finish in the background
            threading.Thread(target=self._finish_close, args=(timeout,), daemon=True).start()
            return False
        return self._finish_close(timeout)

    def _finish_close(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._stop_serving()
        runners = self._runners()
        for runner in runners:
            runner.shutdown()
        for runner in runners:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            runner.join(remaining)
        if any(r.is_alive() for r in runners):
            return False
        self.threads = []
        self.workers = []
        if self.standby is not None:
            self.standby.shutdown()
            if self.standby is not threading.current_thread():
                self.standby.join(
                    None if deadline is None else max(0.0, deadline - time.monotonic())
                )
        if self.global_thread is not None:
            self.global_thread.shutdown()
            if self.global_thread is not threading.current_thread():
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self.global_thread.join(remaining)
                if self.global_thread.is_alive():
                    return False
        self._close_alignment_exchange()
        if self._services is not None:
            self._services.state_directory.unlock()
        with self._state_lock:
            if self._state is State.PENDING_ERROR:
                self._set_state(State.ERROR)
            else:
                self._set_state(State.NOT_RUNNING)
        return True

    def cleanup(self) -> None:
        """Delete this application's local state directory (only while not running)."""
        if self._state.is_running_or_rebalancing() or self._state is State.PENDING_SHUTDOWN:
            raise IllegalStateException(
                "cleanup() is only allowed when the application is not running"
            )
        path = self.config.state_dir / self.config.application_id
        shutil.rmtree(path, ignore_errors=True)

    clean_up = cleanup

    def wait_until(self, state: State, timeout: float = 60.0) -> bool:
        """Block until the application reaches ``state`` (True) or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._state is state:
                return True
            if self._state in (State.ERROR, State.NOT_RUNNING) and state not in (
                State.ERROR,
                State.NOT_RUNNING,
            ):
                return False
            time.sleep(0.02)
        return self._state is state

    def __enter__(self) -> StreamsClient:
        if self._state is State.CREATED:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- thread callbacks -----------------------------------------------------------------

    def on_thread_state_change(self, thread: Any) -> None:
        from streaming.runtime import thread as t

        with self._state_lock:  # workers report from several monitor threads
            if self._state not in (State.REBALANCING, State.RUNNING):
                return
            states = [th.state for th in self._runners() if th.is_alive() or th is thread]
            if thread.state in (t.PARTITIONS_REVOKED, t.PARTITIONS_ASSIGNED, t.STARTING):
                self._set_state(State.REBALANCING)
            elif states and all(s == t.THREAD_RUNNING for s in states):
                self._set_state(State.RUNNING)

    def on_assignment_change(self) -> None:
        if self._directory is not None:
            self._directory.invalidate()
        if self.standby is not None:
            self.standby.invalidate()

    def on_thread_finished(self, thread: Any, exc: BaseException | None) -> None:
        if exc is None:
            return
        self._errors.append(exc)
        response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if self._exception_handler is not None:
            try:
                result = self._exception_handler(exc)
                response = (
                    result
                    if isinstance(result, StreamThreadExceptionResponse)
                    else StreamThreadExceptionResponse(str(result).lower())
                )
            except Exception:
                log.exception("uncaught exception handler failed; shutting down the client")
        if self._state in (State.PENDING_SHUTDOWN, State.NOT_RUNNING, State.ERROR):
            return
        if response is StreamThreadExceptionResponse.REPLACE_THREAD:
            log.warning("Replacing stream thread %s after: %s", thread.name, exc)
            with self._state_lock:
                if not self._set_state(State.REBALANCING):
                    return  # closing meanwhile
                assert self._services is not None  # a thread ran, so the client started
                try:
                    if thread not in self.workers:
                        if thread in self.threads:
                            self.threads.remove(thread)
                        self._start_thread(self._services)
                        return
                    # the same index: its static membership and transactional id take over
                    # at once from a killed worker (fencing its open transaction)
                    self.workers.remove(thread)
                    worker = self._new_worker(thread.index, self._worker_payload())
                    self.workers.append(worker.start(self._services))
                    return
                except Exception as start_exc:
                    log.exception("Starting a stream thread to replace %s failed", thread.name)
                    self._errors.append(start_exc)
        if response is StreamThreadExceptionResponse.SHUTDOWN_APPLICATION:
            log.error(
                "SHUTDOWN_APPLICATION requested: librdkafka cannot signal the other instances "
                "through the group protocol; shutting down this client"
            )
        self._set_state(State.PENDING_ERROR)
        threading.Thread(target=self._finish_close, args=(None,), daemon=True).start()

    def on_global_thread_failure(self, exc: BaseException) -> None:
        self._errors.append(exc)
        if self._state in (State.PENDING_SHUTDOWN, State.NOT_RUNNING, State.ERROR):
            return
        self._set_state(State.PENDING_ERROR)
        threading.Thread(target=self._finish_close, args=(None,), daemon=True).start()

    # -- interactive queries --------------------------------------------------------------

    def _statuses(self) -> list[ThreadStatus]:
        """Every stream thread's status (a worker process's by asking it)."""
        return [runner.status() for runner in self._runners()]

    def _local_assignment(self) -> tuple[HostInfo, set[str], set[tuple[str, int]]]:
        tasks: set[str] = set()
        tps: set[tuple[str, int]] = set()
        for status in self._statuses():
            tasks.update(status.tasks)
            tps.update(status.assigned)
        return self.host_info, tasks, tps

    def _require_store_reads(self) -> None:
        if not self._state.is_running_or_rebalancing():
            raise InvalidStateStoreException(
                f"KafkaStreams is not running. State is {self._state.name}."
            )

    def store(self, name: str) -> Any:
        """A read-only view (key-value / window / session) of store ``name`` on this instance."""
        builder = self.topology.store_builders.get(name)
        global_thread = self.global_thread
        if global_thread is not None and name in global_thread.stores:
            lock, store = global_thread.lock, global_thread.stores[name]
            return view_for(builder, name, lambda: [(lock, store)])
        if builder is None or name not in self.plan.store_to_subtopology:
            raise InvalidStateStoreException(
                f"Cannot get state store {name} because no such store is registered in the "
                "topology."
            )
        self._require_store_reads()
        return view_for(builder, name, lambda: self.store_provider.stores(name))

    def metadata_for_key(
        self,
        store_name: str,
        key: Any,
        key_serde: Any = None,
        *,
        partitioner: Callable[..., int | None] | None = None,
    ) -> KeyQueryMetadata:
        """Which instance hosts ``key`` of ``store_name`` (Kafka's ``queryMetadataForKey``)."""
        self._require_running()
        try:
            sub = self.plan.subtopology_for_store(store_name)
        except KeyError:
            raise InvalidStateStoreException(
                f"no store {store_name} in the topology (or it is a global store)"
            ) from None
        if not sub.num_tasks or not sub.source_topics:
            return NOT_AVAILABLE
        topic = sub.source_topics[0]
        partition = None
        if partitioner is not None:
            partition = partitioner(topic, key, None, sub.num_tasks)
        if partition is None:
            serde = key_serde if key_serde is not None else self.config.default_key_serde
            raw = serde.serialize(topic, key)
            if raw is None:
                raise ValueError("metadata_for_key needs a non-null key")
            partition = default_partition(raw, sub.num_tasks)
        assert self._directory is not None
        tid = task_id(sub.id, partition)
        owner = self._directory.owner(tid)
        standbys = (
            self._directory.standby_hosts(tid, self.config.num_standby_replicas)
            if self.config.num_standby_replicas and sub.changelogs
            else frozenset()
        )
        return KeyQueryMetadata(owner or UNAVAILABLE_HOST, standbys, partition)

    query_metadata_for_key = metadata_for_key

    def all_metadata(self) -> list[StreamsMetadata]:
        """Every instance of the application with its stores and partitions."""
        self._require_running()
        assert self._directory is not None
        return self._directory.all_metadata()

    def all_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances hosting (some partition of) ``store_name``."""
        return [m for m in self.all_metadata() if store_name in m.state_store_names]

    def local_tasks(self) -> dict[str, str]:
        """Task id -> task state of the tasks on this instance."""
        return {tid: state for status in self._statuses() for tid, state in status.tasks.items()}

    def _require_running(self) -> None:
        if not self._state.is_running_or_rebalancing():
            raise IllegalStateException(
                f"KafkaStreams is not running. State is {self._state.name}."
            )

    # -- metrics --------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Counters: processed records and rate, commits, restore progress, lag, drops."""
        statuses = self._statuses()
        ms = [st.metrics for st in statuses]
        commits = sum(m.commits for m in ms)
        lag: dict[str, int] = {}
        restore: dict[str, dict[str, Any]] = {}
        for status in statuses:
            for (topic, partition), value in status.lag.items():
                lag[f"{topic}-{partition}"] = value
            restore.update(status.restore)
        return {
            "state": self._state.name,
            "threads": len([st for st in statuses if st.alive]),
            "tasks": sorted(tid for st in statuses for tid in st.tasks),
            "standby-tasks": self.standby.standby_task_ids() if self.standby is not None else [],
            "process-total": sum(m.processed for m in ms),
            "process-rate": sum(st.process_rate for st in statuses),
            "commit-total": commits,
            "commit-latency-avg": (sum(m.commit_latency_total_ms for m in ms) / commits)
            if commits
            else 0.0,
            "commit-latency-max": max((m.commit_latency_max_ms for m in ms), default=0.0),
            "punctuate-total": sum(m.punctuations for m in ms),
            "rebalance-total": sum(m.rebalances for m in ms),
            "aborted-transactions-total": sum(m.aborted_transactions for m in ms),
            "dropped-records-total": sum(m.dropped_records for m in ms),
            "late-records-dropped-total": sum(m.late_records_dropped for m in ms),
            "restore-records-total": sum(m.restored_records for m in ms),
            "restore-progress": restore,
            "consumer-lag": lag,
            "consumer-lag-max": max(lag.values(), default=0),
            "records-sent-total": sum(st.records_sent for st in statuses),
            "producer-replacements-total": sum(m.producer_replacements for m in ms),
            "alignment-waits-total": sum(m.alignment_waits for m in ms),
            # a thread retrying a retriable failure (broker down, leader moving) is stalled
            # until it makes progress again, and fails after task.timeout.ms
            "stalled-threads": len([st for st in statuses if st.stalled]),
            "stalled-seconds-max": max((st.stalled_seconds for st in statuses), default=0.0),
            "stall-reason": next((st.stall_reason for st in statuses if st.stalled), None),
            "stalls-total": sum(st.stalls_total for st in statuses),
        }
