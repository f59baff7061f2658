"""Exactly-once commits of transactional stores, without a broker: the stores are written
only after the Kafka transaction committed, with the changelog offsets read once its records
were acknowledged; a failed commit leaves them at the previous one; the uncommitted-bytes
limit asks for a commit and holds processing back; where each kind of store resumes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming import serdes
from streaming.errors import ConfigException
from streaming.runtime.commit import Committer
from streaming.runtime.config import DEFAULT_UNCOMMITTED_MAX_BYTES, StreamsConfig
from streaming.runtime.failures import RetriableStreamsException, Stall
from streaming.runtime.state_directory import write_checkpoint
from streaming.runtime.store_offsets import prepare_task_dir, restore_start
from streaming.runtime.task_manager import TaskManager
from streaming.state import InMemoryStateStoreContext, Stores
from streaming.state.api import StateStore
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore

BASE = {"application.id": "app", "bootstrap.servers": "localhost:9092"}
TP = ("app-kv-changelog", 0)


class _Producer:
    """The transactional calls, recorded in ``log``; ``fail_commit`` makes the commit fail."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.fail_commit = False

    def send_offsets_to_transaction(self, *args):
        self.log.append("send_offsets")

    def commit_transaction(self, *args):
        if self.fail_commit:
            raise RetriableStreamsException("the coordinator is away")
        self.log.append("commit_transaction")

    def begin_transaction(self):
        self.log.append("begin_transaction")


class _Task:
    """An active task of one transactional key-value store (a real RocksDB one)."""

    changelogs = {"kv": TP[0]}
    transactional_changelogs = [TP]

    def __init__(self, store: RocksDBKeyValueStore, log: list[str]) -> None:
        self.store = store
        self.transactional = {"kv": store}
        self.log = log
        self.commit_needed = True
        self.stream_task = SimpleNamespace(commit_requested=False)
        self.offsets_prepared = False
        self.offsets_read_at = 0.0
        self.logged_since_checkpoint = 1
        self.end = 0
        self._prepared: dict = {}

    def flush(self):
        self.log.append("flush")

    def committable_offsets(self, position):
        return {("in", 0): 7}

    def commit_metadata(self):
        return {("in", 0): ""}, False

    @property
    def uncommitted_bytes(self):
        return self.store.uncommitted_bytes

    def prepare_offsets(self, ends):
        self.log.append("prepare_offsets")
        if ends is not None:
            self._prepared = {TP: ends[TP]}
            self.offsets_prepared = True

    def commit_stores(self):
        self.log.append("commit_stores")
        prepared, self._prepared = self._prepared, {}
        self.store.commit(prepared)


@pytest.fixture
def committed(tmp_path):
    """A committer of one task with a transactional store, its call log and its producer."""
    log: list[str] = []
    store = RocksDBKeyValueStore("kv")
    store.init(InMemoryStateStoreContext(state_dir=tmp_path, transactional_state=True), store)
    task = _Task(store, log)
    manager = SimpleNamespace(running=lambda: [task], assigned=[])
    producer = _Producer(log)
    collector = SimpleNamespace(sent=1, flush=lambda timeout: log.append("collector.flush"))
    committer = Committer(
        name="t",
        config=StreamsConfig.from_mapping({**BASE, "processing.guarantee": "exactly_once_v2"}),
        internal_topics=set,
        task_manager=manager,  # type: ignore[arg-type]
        stall=Stall("t", 300_000, 100),
        metrics=SimpleNamespace(record_commit=lambda ms: None),  # type: ignore[arg-type]
        position=lambda tp: None,
        changelog_end=lambda topic, partition: 0,
        log_end_offsets=lambda tps: dict.fromkeys(tps, 42),
        consumer=SimpleNamespace(consumer_group_metadata=lambda: "group"),  # type: ignore[arg-type]
        producer=producer,  # type: ignore[arg-type]
        collector=collector,  # type: ignore[arg-type]
    )
    committer.needs_init = False
    yield SimpleNamespace(
        committer=committer, log=log, producer=producer, store=store, path=tmp_path
    )
    committer.close()
    store.close()


def _reopened(path) -> RocksDBKeyValueStore:
    store = RocksDBKeyValueStore("kv")
    store.init(InMemoryStateStoreContext(state_dir=path, transactional_state=True), store)
    return store


def test_the_stores_are_written_after_the_transaction_committed(committed):
    committed.store.put(b"k", b"1")
    assert committed.committer.commit()
    assert committed.log == [
        "flush",
        "collector.flush",
        "prepare_offsets",  # the records are acknowledged: the changelog's end is final
        "send_offsets",
        "commit_transaction",
        "commit_stores",  # only now does RocksDB get the writes
        "begin_transaction",
    ]
    committed.store.close()
    store = _reopened(committed.path)
    assert store.get(b"k") == b"1"
    assert store.committed_offset(*TP) == 42
    store.close()


def test_a_failed_transaction_commit_leaves_the_stores_at_the_last_commit(committed):
    committed.store.put(b"k", b"1")
    assert committed.committer.commit()
    committed.store.put(b"k", b"2")
    committed.producer.fail_commit = True
    with pytest.raises(RetriableStreamsException):
        committed.committer.commit()
    assert "commit_stores" not in committed.log[committed.log.index("begin_transaction") :]
    committed.store.close()  # the rollback closes the task dirty
    store = _reopened(committed.path)
    assert store.get(b"k") == b"1"
    assert store.committed_offset(*TP) == 42
    store.close()


def test_a_commit_resumed_by_the_recovery_writes_the_stores(committed):
    committed.store.put(b"k", b"1")
    committed.producer.fail_commit = True
    with pytest.raises(RetriableStreamsException):
        committed.committer.commit()
    assert committed.committer.committing is not None
    committed.producer.fail_commit = False
    committed.committer.recover()  # commit_transaction is finished before anything else
    assert committed.log[-3:] == ["commit_transaction", "commit_stores", "begin_transaction"]
    assert committed.store.committed_offset(*TP) == 42
    assert committed.store.uncommitted_bytes == 0


# -- the uncommitted-bytes limit ------------------------------------------------------------


def _manager(limit: int | None, held: int) -> TaskManager:
    manager = TaskManager(
        config=None,  # type: ignore[arg-type]
        plan=None,  # type: ignore[arg-type]
        task_creator=None,  # type: ignore[arg-type]
        consumer=None,  # type: ignore[arg-type]
        standby=lambda: None,
        stall=None,  # type: ignore[arg-type]
        metrics=None,  # type: ignore[arg-type]
        changelog_end=lambda topic, partition: 0,
        uncommitted_limit=limit,
    )
    processed = []
    task = SimpleNamespace(
        state="RUNNING",
        uncommitted_bytes=held,
        stream_task=SimpleNamespace(commit_requested=False),
        reads_sources=False,
        process=lambda limit, now, lag, until=None: processed.append(limit) or limit,
    )
    manager.tasks = {"0_0": task}  # type: ignore[dict-item]
    manager.processed = processed  # type: ignore[attr-defined]
    return manager


def test_reaching_the_uncommitted_limit_asks_for_a_commit_and_holds_processing():
    full = _manager(limit=1000, held=1000)
    assert full.commit_requested()
    assert full.process(100, 0, lambda tp: None) == 0
    assert full.processed == []  # type: ignore[attr-defined]
    below = _manager(limit=1000, held=999)
    assert not below.commit_requested()
    assert below.process(100, 0, lambda tp: None) == 100
    # a limit of 0 commits after every pass, but lets each pass run
    zero = _manager(limit=0, held=0)
    assert not zero.commit_requested()
    assert zero.process(100, 0, lambda tp: None) == 100
    assert not _manager(limit=None, held=10**12).commit_requested()


def test_the_limit_is_split_among_the_stream_threads_under_exactly_once_only():
    def limit(**settings):
        return StreamsConfig.from_mapping({**BASE, **settings}).thread_uncommitted_max_bytes

    eos = {"processing.guarantee": "exactly_once_v2"}
    assert limit(**eos) == DEFAULT_UNCOMMITTED_MAX_BYTES == 64 * 1024 * 1024
    assert limit(**eos, **{"num.stream.threads": 4}) == DEFAULT_UNCOMMITTED_MAX_BYTES // 4
    assert limit(**eos, **{"statestore.uncommitted.max.bytes": "1000"}) == 1000
    assert limit(**eos, **{"statestore.uncommitted.max.bytes": -1}) is None
    assert limit() is None  # at-least-once writes as it goes


@pytest.mark.parametrize("value", ["-2", "lots", "1.5", True])
def test_an_invalid_uncommitted_limit_is_refused_with_what_to_set(value):
    with pytest.raises(ConfigException) as info:
        StreamsConfig.from_mapping({**BASE, "statestore.uncommitted.max.bytes": value})
    message = str(info.value)
    assert "statestore.uncommitted.max.bytes" in message
    assert "-1 for no limit" in message


# -- where stores resume --------------------------------------------------------------------


class _LegacyStore(StateStore):
    """A persistent store of the application's own, which keeps no offsets."""

    name = "legacy"

    @property
    def persistent(self) -> bool:
        return True


def _built(tmp_path) -> dict:
    kv = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv")).build()
    memory = Stores.key_value_store_builder(Stores.in_memory_key_value_store("mem")).build()
    return {"kv": kv, "mem": memory, "legacy": _LegacyStore()}


def test_without_a_checkpoint_only_the_stores_keeping_their_offsets_keep_their_files(tmp_path):
    for name in ("kv", "legacy"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data").write_text("x")
    prepare_task_dir(tmp_path, _built(tmp_path), None, transactional=True)
    assert (tmp_path / "kv" / "data").exists()
    assert not (tmp_path / "legacy").exists()
    # at-least-once nothing keeps its offsets: everything goes
    prepare_task_dir(tmp_path, _built(tmp_path), None, transactional=False)
    assert not (tmp_path / "kv").exists()
    # with a checkpoint nothing is deleted
    (tmp_path / "legacy").mkdir()
    write_checkpoint(tmp_path, {})
    prepare_task_dir(tmp_path, _built(tmp_path), {}, transactional=True)
    assert (tmp_path / "legacy").exists()


def test_each_kind_of_store_resumes_from_its_own_offsets(tmp_path):
    stores = _built(tmp_path)
    context = InMemoryStateStoreContext(
        state_dir=tmp_path,
        transactional_state=True,
        default_key_serde=serdes.String(),
        default_value_serde=serdes.String(),
    )
    kv, memory = stores["kv"], stores["mem"]
    kv.init(context, kv)
    memory.init(context, memory)
    checkpoint = {TP: 5, ("app-mem-changelog", 0): 5, ("app-legacy-changelog", 0): 9}
    # a transactional store: its own offsets, whatever the checkpoint says
    assert restore_start(kv, TP, checkpoint) is None
    kv.inner().commit({TP: 17})
    assert restore_start(kv, TP, checkpoint) == 17
    # an in-memory store replays everything; another persistent store: the checkpoint
    assert restore_start(memory, ("app-mem-changelog", 0), checkpoint) is None
    assert restore_start(stores["legacy"], ("app-legacy-changelog", 0), checkpoint) == 9
    assert restore_start(stores["legacy"], ("app-legacy-changelog", 0), None) is None
    kv.close()
    memory.close()
