"""KafkaStreams end to end against a real broker: a count + copy topology under both
processing guarantees, local store queries, metrics, checkpoints and clean close."""

from __future__ import annotations

import pytest
from test_app_support import (
    T0,
    count_and_copy,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    unique,
    wait_for,
)

from streaming import Processor, PunctuationType, Record, Topology, serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.state_directory import read_checkpoint
from streaming.state.committed_offsets import read_committed_offsets

N = 2000
KEYS = 20


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_count_and_copy(kafka_cluster, tmp_path, guarantee):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    kafka_cluster.create_topic(names["in"], partitions=2)
    kafka_cluster.create_topic(names["copy"], partitions=2)
    kafka_cluster.create_topic(names["counts"], partitions=2)
    produce(
        bootstrap,
        names["in"],
        ((f"k{i % KEYS}".encode(), str(i).encode(), T0 + i) for i in range(N)),
    )
    app_id = unique("e2e")
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": guarantee,
        "state.dir": str(tmp_path / "state"),
        "commit.interval.ms": 200,
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    transitions = []
    app = KafkaStreams(count_and_copy(config), config)
    app.set_state_listener(lambda new, old: transitions.append((old, new)))
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)

        def done(msgs):
            copies = sum(1 for m in msgs if m[0] == names["copy"])
            counts = last_value_per_key(msgs, names["counts"])
            return (
                copies >= N
                and len(counts) == KEYS
                and all(long_value(v) == N // KEYS for v in counts.values())
            )

        msgs = read_all(bootstrap, [names["copy"], names["counts"]], until=done, timeout=60)
        copies = [m for m in msgs if m[0] == names["copy"]]
        assert sorted(int(m[4]) for m in copies) == list(range(N))
        # the copy keeps keys and partitions (same default partitioner as the input)
        assert all(m[3] == f"k{int(m[4]) % KEYS}".encode() for m in copies)
        counts = last_value_per_key(msgs, names["counts"])
        assert {k.decode(): long_value(v) for k, v in counts.items()} == {
            f"k{i}": N // KEYS for i in range(KEYS)
        }
        # local interactive queries see the same counts
        store = app.store("counts")
        assert {f"k{i}": store.get(f"k{i}") for i in range(KEYS)} == {
            f"k{i}": N // KEYS for i in range(KEYS)
        }
        assert dict(store.all()) == {f"k{i}": N // KEYS for i in range(KEYS)}
        assert store.approximate_num_entries() >= 1
        meta = app.metadata_for_key("counts", "k3", serdes.String())
        assert meta.partition in (0, 1)
        metrics = app.metrics()
        assert metrics["process-total"] == N
        assert metrics["commit-total"] >= 1
        assert metrics["commit-latency-max"] >= metrics["commit-latency-avg"] > 0
        caught_up = {f"{names['in']}-0": 0, f"{names['in']}-1": 0}
        wait_for(lambda: app.metrics()["consumer-lag"] == caught_up, 10, "lag 0")
        assert sorted(metrics["tasks"]) == ["0_0", "0_1"]
    finally:
        assert app.close(timeout=60)
    assert app.state is State.NOT_RUNNING
    assert (State.CREATED, State.REBALANCING) in transitions
    assert (State.REBALANCING, State.RUNNING) in transitions
    assert transitions[-2:] == [
        (State.RUNNING, State.PENDING_SHUTDOWN),
        (State.PENDING_SHUTDOWN, State.NOT_RUNNING),
    ]
    # a clean close leaves a checkpoint per task, at the end of each changelog partition;
    # under exactly-once the (transactional) store holds the same offset itself
    changelog = f"{app_id}-counts-changelog"
    for partition in (0, 1):
        task_dir = tmp_path / "state" / app_id / f"0_{partition}"
        checkpoint = read_checkpoint(task_dir)
        assert checkpoint is not None and checkpoint[(changelog, partition)] > 0
        if guarantee == "exactly_once_v2":
            assert read_committed_offsets(task_dir / "counts") == {
                (changelog, partition): checkpoint[(changelog, partition)]
            }

    # restarted with nothing new on its input, it is caught up: no lag, not all the input
    again = KafkaStreams(count_and_copy(config), config)
    again.start()
    try:
        assert again.wait_until(State.RUNNING, 60)
        wait_for(lambda: again.metrics()["consumer-lag"] == caught_up, 10, "lag 0 after restart")
    finally:
        assert again.close(timeout=60)


class _Ticker(Processor):
    """Counts records; a wall-clock punctuator forwards the count, a stream-time one the
    stream time it saw."""

    def init(self, context):
        self.context = context
        self.seen = 0
        context.schedule(200, PunctuationType.WALL_CLOCK_TIME, self._wall)
        context.schedule(1_000, PunctuationType.STREAM_TIME, self._stream)

    def process(self, record):
        self.seen += 1

    def _wall(self, timestamp):
        self.context.forward(Record("wall", str(self.seen), timestamp))

    def _stream(self, timestamp):
        self.context.forward(Record("stream", str(timestamp), timestamp))


def test_punctuation_runs_on_wall_clock_and_stream_time(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out = unique("in"), unique("out")
    kafka_cluster.create_topic(src, partitions=1)
    kafka_cluster.create_topic(out, partitions=1)
    topology = Topology()
    topology.add_source("src", src, key_serde=serdes.String(), value_serde=serdes.String())
    topology.add_processor("ticker", _Ticker, "src")
    topology.add_sink("sink", out, "ticker", key_serde=serdes.String(), value_serde=serdes.String())
    app = KafkaStreams(
        topology,
        {
            "application.id": unique("punct"),
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 100,
        },
    )
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        produce(bootstrap, src, ((b"k", b"v", T0 + i * 500) for i in range(5)))

        def enough(msgs):
            values = [(m[3], m[4]) for m in msgs]
            return (b"wall", b"5") in values and sum(1 for k, _ in values if k == b"stream") >= 3

        msgs = read_all(bootstrap, [out], until=enough, timeout=30)
        stream_times = [int(m[4]) for m in msgs if m[3] == b"stream"]
        # stream-time punctuation at multiples of 1 s as stream time passes them
        assert stream_times[:3] == [T0, T0 + 1_000, T0 + 2_000]
        assert app.metrics()["punctuate-total"] >= 1
    finally:
        assert app.close(60)


def test_start_fails_fast_on_missing_or_mispartitioned_topics(kafka_cluster, tmp_path):
    from streaming import StreamsBuilder
    from streaming.runtime.assignment import TopologyValidationError

    bootstrap = kafka_cluster.bootstrap_servers
    left, right = unique("left"), unique("right")
    kafka_cluster.create_topic(left, partitions=2)
    config = {
        "application.id": unique("bad"),
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path),
    }

    def joined():
        builder = StreamsBuilder()
        builder.stream(left).join(builder.table(right), lambda a, b: a).to(unique("out"))
        return builder.build()

    app = KafkaStreams(joined(), config)
    with pytest.raises(TopologyValidationError, match=rf"\['{right}'\] do not exist"):
        app.start()
    assert app.state is State.CREATED
    kafka_cluster.create_topic(right, partitions=3)
    app = KafkaStreams(joined(), config)  # the state directory lock was released
    with pytest.raises(TopologyValidationError, match="not co-partitioned"):
        app.start()
