"""Exactly-once commits of transactional stores, without a broker: the stores are written
only after the Kafka transaction committed, with the changelog offsets after the last record
of the transaction that the producer's delivery reports acknowledged (no request to the
brokers); a failed commit leaves them at the previous one; the uncommitted-bytes limit asks
for a commit and holds processing back; where each kind of store resumes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming import serdes
from streaming.errors import ConfigException
from streaming.runtime.active_task import ActiveTask
from streaming.runtime.commit import Committer
from streaming.runtime.config import DEFAULT_UNCOMMITTED_MAX_BYTES, StreamsConfig
from streaming.runtime.failures import RetriableStreamsException, Stall
from streaming.runtime.producer import RecordCollector
from streaming.runtime.state_directory import write_checkpoint
from streaming.runtime.store_offsets import prepare_task_dir, restore_start
from streaming.runtime.task_manager import TaskManager
from streaming.state import InMemoryStateStoreContext, Stores
from streaming.state.api import StateStore
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore

BASE = {"application.id": "app", "bootstrap.servers": "localhost:9092"}
TP = ("app-kv-changelog", 0)


class _Msg:
    """What a delivery report carries of a record."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


class _Producer:
    """A transactional producer: ``produce`` assigns the partition's next offset, ``flush``
    serves the delivery reports (as confluent-kafka does), the transactional calls are
    recorded in ``log``; ``fail_commit`` makes the commit fail. Ending a transaction writes
    a marker to each partition it wrote to."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.fail_commit = False
        self.ends: dict[tuple[str, int], int] = {}
        self.unacknowledged: list[_Msg] = []
        self.written: set[tuple[str, int]] = set()
        self.collector: RecordCollector | None = None

    def produce(self, topic, value, key, partition, **kwargs):
        offset = self.ends.get((topic, partition), 0)
        self.ends[(topic, partition)] = offset + 1
        self.written.add((topic, partition))
        self.unacknowledged.append(_Msg(topic, partition, offset))

    def poll(self, timeout):
        return 0

    def flush(self, timeout):
        self.log.append("collector.flush")
        assert self.collector is not None
        for msg in self.unacknowledged:
            self.collector.on_delivery(None, msg)
        self.unacknowledged = []
        return 0

    def _marker(self):
        for tp in self.written:
            self.ends[tp] += 1
        self.written = set()

    def send_offsets_to_transaction(self, *args):
        self.log.append("send_offsets")

    def commit_transaction(self, *args):
        if self.fail_commit:
            raise RetriableStreamsException("the coordinator is away")
        self._marker()
        self.log.append("commit_transaction")

    def abort_transaction(self, *args):
        self._marker()
        self.log.append("abort_transaction")

    def begin_transaction(self):
        self.log.append("begin_transaction")


class _Task:
    """An active task of one transactional key-value store (a real RocksDB one) and one of
    another partition's, with ``ActiveTask``'s own offset bookkeeping; its writes go to the
    changelog through ``collector``."""

    changelogs = {"kv": TP[0]}
    source_changelogs: set[str] = set()
    partition = TP[1]

    def __init__(self, store: RocksDBKeyValueStore, log: list[str], collector) -> None:
        self.store = store
        self.transactional = {"kv": store}
        self.log = log
        self.collector = collector
        self.commit_needed = True
        self.stream_task = SimpleNamespace(
            commit_requested=False, context=SimpleNamespace(stores={"kv": store})
        )
        self.partition_group = SimpleNamespace(processed_offsets={})
        self._prepared: dict = {}

    def put(self, key: bytes, value: bytes) -> None:
        """A store write and its changelog record."""
        self.store.put(key, value)
        self.collector.send_to_partition(TP[0], TP[1], key, value, 0)

    def flush(self):
        self.log.append("flush")

    def committable_offsets(self, position):
        return {("in", 0): 7}

    def commit_metadata(self):
        return {("in", 0): ""}, False

    @property
    def uncommitted_bytes(self):
        return self.store.uncommitted_bytes

    _store_offsets = ActiveTask._store_offsets

    def prepare_offsets(self, acked):
        self.log.append("prepare_offsets")
        ActiveTask.prepare_offsets(self, acked)  # type: ignore[arg-type]

    def commit_stores(self):
        self.log.append("commit_stores")
        ActiveTask.commit_stores(self)  # type: ignore[arg-type]


@pytest.fixture
def committed(tmp_path):
    """A committer of one task with a transactional store, its call log and its producer."""
    log: list[str] = []
    store = RocksDBKeyValueStore("kv")
    store.init(InMemoryStateStoreContext(state_dir=tmp_path, transactional_state=True), store)
    producer = _Producer(log)
    collector = RecordCollector(
        producer,  # type: ignore[arg-type]
        production_handler=None,  # type: ignore[arg-type]
        dead_letter_topic=None,
        partition_counts=lambda topic: 1,
        exactly_once=True,
    )
    producer.collector = collector
    task = _Task(store, log, collector)
    manager = SimpleNamespace(running=lambda: [task], assigned=[])
    committer = Committer(
        name="t",
        config=StreamsConfig.from_mapping({**BASE, "processing.guarantee": "exactly_once_v2"}),
        internal_topics=set,
        task_manager=manager,  # type: ignore[arg-type]
        stall=Stall("t", 300_000, 100),
        metrics=SimpleNamespace(record_commit=lambda ms: None, aborted_transactions=0),  # type: ignore[arg-type]
        position=lambda tp: None,
        changelog_end=lambda topic, partition: 0,
        consumer=SimpleNamespace(consumer_group_metadata=lambda: "group"),  # type: ignore[arg-type]
        producer=producer,  # type: ignore[arg-type]
        collector=collector,
    )
    committer.needs_init = False
    yield SimpleNamespace(
        committer=committer, log=log, producer=producer, task=task, store=store, path=tmp_path
    )
    committer.close()
    store.close()


def _reopened(path) -> RocksDBKeyValueStore:
    store = RocksDBKeyValueStore("kv")
    store.init(InMemoryStateStoreContext(state_dir=path, transactional_state=True), store)
    return store


def test_the_stores_are_written_after_the_transaction_committed(committed):
    committed.task.put(b"k", b"1")
    committed.task.put(b"k", b"2")
    assert committed.committer.commit()
    assert committed.log == [
        "flush",
        "collector.flush",
        "prepare_offsets",  # the records are acknowledged: their offsets are known
        "send_offsets",
        "commit_transaction",
        "commit_stores",  # only now does RocksDB get the writes
        "begin_transaction",
    ]
    committed.store.close()
    store = _reopened(committed.path)
    assert store.get(b"k") == b"2"
    # the changelog holds offsets 0 and 1, then the commit marker: restoring reads from 2
    assert store.committed_offset(*TP) == 2
    store.close()


def test_a_transaction_without_changelog_records_keeps_the_stores_offsets(committed):
    committed.task.put(b"k", b"1")
    assert committed.committer.commit()
    # another input offset to commit, no store write: the store stays where it is
    committed.task.committable_offsets = lambda position: {("in", 0): 8}
    assert committed.committer.commit()
    assert committed.store.committed_offset(*TP) == 1
    committed.task.put(b"k", b"2")  # offset 2 (the marker took 1)
    assert committed.committer.commit()
    assert committed.store.committed_offset(*TP) == 3


def _rebuilt_dirty(committed) -> None:
    """The rollback closes the task dirty (the store drops its uncommitted writes) and
    builds it again."""
    committed.store.close()
    store = committed.store = _reopened(committed.path)
    task = committed.task
    task.store = store
    task.transactional = {"kv": store}
    task.stream_task.context.stores = {"kv": store}


def test_an_aborted_transactions_records_are_not_the_next_ones(committed):
    committed.task.put(b"k", b"1")
    assert committed.committer.commit()  # offset 0, marker 1
    committed.task.put(b"k", b"2")  # offset 2: acknowledged, then rolled back
    committed.producer.flush(5)
    committed.committer.abort_after_corruption()
    _rebuilt_dirty(committed)
    committed.committer.recover()  # marker 3
    assert committed.log[-2:] == ["abort_transaction", "begin_transaction"]
    assert committed.committer.collector.acked == {}
    committed.task.committable_offsets = lambda position: {("in", 0): 8}
    assert committed.committer.commit()
    assert committed.store.committed_offset(*TP) == 1
    assert committed.store.get(b"k") == b"1"
    committed.task.put(b"k", b"3")  # offset 4
    assert committed.committer.commit()
    assert committed.store.committed_offset(*TP) == 5


def test_a_failed_transaction_commit_leaves_the_stores_at_the_last_commit(committed):
    committed.task.put(b"k", b"1")
    assert committed.committer.commit()
    committed.task.put(b"k", b"2")
    committed.producer.fail_commit = True
    with pytest.raises(RetriableStreamsException):
        committed.committer.commit()
    assert "commit_stores" not in committed.log[committed.log.index("begin_transaction") :]
    committed.store.close()  # the rollback closes the task dirty
    store = _reopened(committed.path)
    assert store.get(b"k") == b"1"
    assert store.committed_offset(*TP) == 1
    store.close()


def test_a_commit_resumed_by_the_recovery_writes_the_stores(committed):
    committed.task.put(b"k", b"1")
    committed.producer.fail_commit = True
    with pytest.raises(RetriableStreamsException):
        committed.committer.commit()
    assert committed.committer.committing is not None
    committed.producer.fail_commit = False
    committed.committer.recover()  # commit_transaction is finished before anything else
    assert committed.log[-3:] == ["commit_transaction", "commit_stores", "begin_transaction"]
    assert committed.store.committed_offset(*TP) == 1
    assert committed.store.uncommitted_bytes == 0


def test_a_transactional_producer_reports_every_delivery_whatever_the_user_says():
    def only_errors(**settings):
        config = StreamsConfig.from_mapping({**BASE, **settings})
        clients = config.clients()
        transactional_id = "app-1" if config.exactly_once else None
        producer = clients.producer(client_id="c", transactional_id=transactional_id)
        return producer["delivery.report.only.error"]

    eos = {"processing.guarantee": "exactly_once_v2"}
    assert only_errors(**eos) is False
    assert only_errors(**eos, **{"producer.delivery.report.only.error": True}) is False
    assert only_errors() is True  # at-least-once needs only the failures


def test_a_transactional_producer_lingers_like_kafka_streams_unless_the_user_says_otherwise():
    def settings(paced=False, **given):
        config = StreamsConfig.from_mapping({**BASE, **given})
        transactional_id = "app-1" if config.exactly_once else None
        return config.clients().producer(
            client_id="c", transactional_id=transactional_id, paced=paced
        )

    eos = {"processing.guarantee": "exactly_once_v2"}
    assert settings(**eos)["linger.ms"] == 100
    # other producers' sources wait for what this one appends: it does not linger long
    assert settings(paced=True, **eos)["linger.ms"] == 5
    assert settings(paced=True, **eos, **{"linger.ms": 50})["linger.ms"] == 50
    assert settings(**eos, **{"producer.linger.ms": 7})["linger.ms"] == 7
    assert settings(**eos, **{"linger.ms": 8})["linger.ms"] == 8
    aliased = settings(**eos, **{"producer.queue.buffering.max.ms": 9})
    assert "linger.ms" not in aliased and aliased["queue.buffering.max.ms"] == 9
    assert "linger.ms" not in settings()  # at-least-once: librdkafka's default


def test_a_transactional_producer_sends_a_batch_once_it_holds_64_kb_unless_the_user_says():
    def settings(**given):
        config = StreamsConfig.from_mapping({**BASE, **given})
        transactional_id = "app-1" if config.exactly_once else None
        return config.clients().producer(client_id="c", transactional_id=transactional_id)

    eos = {"processing.guarantee": "exactly_once_v2"}
    # under load the batches go out as they fill, not all at the commit's flush
    assert settings(**eos)["batch.size"] == 65_536
    assert settings(**eos, **{"producer.batch.size": 16_384})["batch.size"] == 16_384
    assert settings(**eos, **{"batch.size": 1_000})["batch.size"] == 1_000
    assert "batch.size" not in settings()  # at-least-once: librdkafka's default


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
