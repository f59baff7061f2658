"""Core state-store contracts: the store base class and the context the runtime provides."""

from __future__ import annotations

import pathlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Kafka's ``statestore.cache.max.bytes`` default (10 MiB).
DEFAULT_CACHE_MAX_BYTES = 10 * 1024 * 1024
CACHE_MAX_BYTES_CONFIG = "statestore.cache.max.bytes"
CACHE_MAX_BYTES_BUFFERING_CONFIG = "cache.max.bytes.buffering"  # deprecated Kafka name

#: A changelog record handed to a restore callback: (key bytes, value bytes or None, timestamp).
ChangelogRecord = tuple[bytes, bytes | None, int]
#: Called by the runtime with batches of changelog records to rebuild a store.
RestoreCallback = Callable[[Iterable[ChangelogRecord]], None]


@dataclass(frozen=True, slots=True)
class RecordContext:
    """Immutable metadata of the record being processed (Kafka's ProcessorRecordContext)."""

    timestamp: int = -1
    offset: int = -1
    partition: int = -1
    topic: str | None = None
    headers: Any = field(default=())


#: Context used for entries that were never written by a record (clean cache reads).
EMPTY_RECORD_CONTEXT = RecordContext(-1, -1, -1, "", ())


@runtime_checkable
class StateStoreContext(Protocol):
    """What a store needs from the runtime (Kafka's StateStoreContext + InternalProcessorContext).

    Required attributes / methods:

    * ``application_id``, ``task_id`` (e.g. ``"0_0"``), ``state_dir`` (``Path`` or None: persistent
      stores then use a temporary directory deleted on close), ``app_configs`` (dict),
      ``default_key_serde`` / ``default_value_serde`` (used when a builder got ``None`` serdes).
    * ``record_context()`` -> the current record's context (``timestamp``, ``offset``,
      ``partition``, ``topic``, ``headers``) or None; it must be treated as immutable (replace,
      never mutate, it between records: caches keep a reference per dirty entry).
    * ``set_record_context(ctx)``: caching stores swap in a flushed entry's context while they
      write it downstream and forward it, then restore the previous one (like Kafka).
    * ``register(store, restore_callback)``: the runtime later feeds changelog records
      ``(key, value, timestamp)`` batches into ``restore_callback``.
    * ``log_change(store_name, key, value, timestamp, headers=())``: write one changelog
      record (a negative timestamp: none, the producer's clock).

    Optional: ``cache`` - a shared :class:`~streaming.state.cache.ThreadCache`; when missing or
    None each caching store creates a private cache sized from ``app_configs``
    (``statestore.cache.max.bytes``, default 10 MiB). ``transactional_state`` - when true
    (exactly-once), persistent stores are transactional (:class:`TransactionalStore`): their
    writes reach disk only when the runtime commits them.
    """

    application_id: str
    task_id: str
    state_dir: pathlib.Path | None
    app_configs: dict
    default_key_serde: Any
    default_value_serde: Any

    def record_context(self) -> Any: ...

    def set_record_context(self, record_context: Any) -> None: ...

    def register(self, store: StateStore, restore_callback: RestoreCallback) -> None: ...

    def log_change(
        self,
        store_name: str,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> None: ...


def changelog_topic(application_id: str, store_name: str) -> str:
    """Kafka's ProcessorStateManager.storeChangelogTopic: the topic passed to store serdes."""
    return f"{application_id}-{store_name}-changelog"


def cache_max_bytes(app_configs: dict | None) -> int:
    """Read the cache budget from configs the way Kafka does (new name wins over deprecated)."""
    if app_configs:
        for name in (CACHE_MAX_BYTES_CONFIG, CACHE_MAX_BYTES_BUFFERING_CONFIG):
            if name in app_configs and app_configs[name] is not None:
                return int(app_configs[name])
    return DEFAULT_CACHE_MAX_BYTES


class StateStore:
    """Base of every store: a named, openable, flushable unit of task state."""

    name: str

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        raise NotImplementedError

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


@runtime_checkable
class TransactionalStore(Protocol):
    """A persistent store that holds its writes in memory until ``commit`` writes them to
    disk in one atomic step together with the changelog offsets they bring it to, and keeps
    those offsets itself (KIP-892). Reads see the uncommitted writes. Closing it without a
    commit drops them: the store reopens at its last commit. Writes of ``restore_batch``
    wait for the next commit as well (the runtime commits after each restored batch)."""

    #: open in transactional mode (an exactly-once task's store)
    transactional: bool

    def committed_offset(self, topic: str, partition: int) -> int | None:
        """Where restoring from the changelog partition continues: every record before it
        is in the store; None when no commit recorded one."""
        ...

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write the uncommitted writes and ``offsets`` (changelog partition -> next offset)
        in one batch; offsets not given keep their committed value."""
        ...

    @property
    def uncommitted_bytes(self) -> int:
        """Key and value bytes written since the last commit."""
        ...


def transactional_layer(store: StateStore) -> TransactionalStore | None:
    """The layer of ``store`` that is open in transactional mode (its innermost), if any."""
    inner = store.inner() if isinstance(store, WrappedStateStore) else store
    if getattr(inner, "transactional", False) and isinstance(inner, TransactionalStore):
        return inner
    return None


def keeps_offsets(store: StateStore) -> bool:
    """Whether ``store`` (built, not yet open) keeps its changelog offsets itself when it is
    opened in transactional mode: the RocksDB stores of this package do."""
    inner = store.inner() if isinstance(store, WrappedStateStore) else store
    return bool(getattr(inner, "keeps_offsets", False))


class WrappedStateStore(StateStore):
    """A store layer delegating lifecycle calls to the store it wraps (Kafka's WrappedStateStore)."""

    def __init__(self, wrapped: StateStore) -> None:
        self.wrapped = wrapped
        self.name = wrapped.name

    @property
    def persistent(self) -> bool:
        return self.wrapped.persistent

    @property
    def is_open(self) -> bool:
        return self.wrapped.is_open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.wrapped.init(context, root)

    def flush(self) -> None:
        self.wrapped.flush()

    def close(self) -> None:
        self.wrapped.close()

    def inner(self) -> StateStore:
        """The innermost (bytes) store."""
        store = self.wrapped
        while isinstance(store, WrappedStateStore):
            store = store.wrapped
        return store

    def find_layer(self, cls: type) -> Any:
        """The first layer (self included) that is an instance of ``cls``, or None."""
        store: StateStore = self
        while True:
            if isinstance(store, cls):
                return store
            if not isinstance(store, WrappedStateStore):
                return None
            store = store.wrapped


class StateDirHandle:
    """A store directory: ``state_dir / name`` or a temp dir removed on release."""

    __slots__ = ("_temp", "path")

    def __init__(self, context: StateStoreContext, name: str) -> None:
        state_dir = getattr(context, "state_dir", None)
        if state_dir is None:
            self._temp: str | None = tempfile.mkdtemp(prefix=f"state-{name}-")
            self.path = pathlib.Path(self._temp)
        else:
            self._temp = None
            self.path = pathlib.Path(state_dir) / name
            self.path.mkdir(parents=True, exist_ok=True)

    def release(self) -> None:
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None


class InMemoryStateStoreContext:
    """Simple concrete StateStoreContext for tests and the test driver: no-op changelog/register.

    ``logged`` collects ``(store_name, key, value, timestamp)`` tuples when ``capture_changelog``
    is set; ``registered`` maps store names to their restore callbacks.
    """

    def __init__(
        self,
        application_id: str = "app",
        task_id: str = "0_0",
        state_dir: pathlib.Path | str | None = None,
        app_configs: dict | None = None,
        default_key_serde: Any = None,
        default_value_serde: Any = None,
        cache: Any = None,
        capture_changelog: bool = False,
        transactional_state: bool = False,
    ) -> None:
        self.application_id = application_id
        self.task_id = task_id
        self.state_dir = None if state_dir is None else pathlib.Path(state_dir)
        self.app_configs = dict(app_configs or {})
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self.cache = cache
        self.capture_changelog = capture_changelog
        self.transactional_state = transactional_state
        self.logged: list[tuple[str, bytes, bytes | None, int]] = []
        self.registered: dict[str, RestoreCallback] = {}
        self._record_context: Any = None

    def record_context(self) -> Any:
        return self._record_context

    def set_record_context(self, record_context: Any) -> None:
        self._record_context = record_context

    def set_time(self, timestamp: int, **kwargs: Any) -> None:
        """Convenience: set a fresh record context with this timestamp."""
        self._record_context = RecordContext(timestamp=timestamp, **kwargs)

    def register(self, store: StateStore, restore_callback: RestoreCallback) -> None:
        self.registered[store.name] = restore_callback

    def log_change(
        self,
        store_name: str,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> None:
        if self.capture_changelog:
            self.logged.append((store_name, key, value, timestamp))
