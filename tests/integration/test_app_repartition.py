"""Repartitioning through ``<application.id>-<name>-repartition``: created with the upstream
partition count, read back exactly once, and purged up to the committed offsets."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from test_app_support import T0, last_value_per_key, long_value, produce, read_all, unique, wait_for

from streaming import Grouped, StreamsBuilder, serdes
from streaming.app import KafkaStreams, State

N = 1200
REGIONS = ["EU", "US", "APAC", "LATAM"]


def _rekey_count(orders: str, totals: str):
    """Orders keyed by id -> rekeyed by region (repartition ``by-region``) -> count."""
    builder = StreamsBuilder()
    (
        builder.stream(orders, key_serde=serdes.String(), value_serde=serdes.String())
        .select_key(lambda k, v: v)
        .group_by_key(Grouped.as_("by-region").with_key_serde(serdes.String()))
        .count(materialized="per-region")
        .to_stream()
        .to(totals, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder.build()


def test_rekey_count_with_two_threads(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    orders, totals = unique("orders"), unique("totals")
    kafka_cluster.create_topic(orders, partitions=3)
    kafka_cluster.create_topic(totals, partitions=2)
    produce(
        bootstrap,
        orders,
        ((f"o{i}".encode(), REGIONS[i % 4].encode(), T0 + i) for i in range(N)),
    )
    topology = _rekey_count(orders, totals)
    app_id = unique("rekey")
    app = KafkaStreams(
        topology,
        {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": 2,
            "state.dir": str(tmp_path),
            "repartition.purge.interval.ms": 0,
        },
    )
    app.start()
    repartition = f"{app_id}-by-region-repartition"
    try:
        assert app.wait_until(State.RUNNING, 60)
        # the repartition topic gets the partition count of the upstream source topic
        meta = kafka_cluster.admin().list_topics(timeout=10).topics
        assert len(meta[repartition].partitions) == 3
        assert len(meta[f"{app_id}-per-region-changelog"].partitions) == 3

        def counted(msgs):
            last = last_value_per_key(msgs, totals)
            return len(last) == 4 and all(long_value(v) == N // 4 for v in last.values())

        msgs = read_all(bootstrap, [totals], until=counted, timeout=60)
        assert {k.decode(): long_value(v) for k, v in last_value_per_key(msgs, totals).items()} == {
            r: N // 4 for r in REGIONS
        }
        assert len(app.metrics()["tasks"]) == 6  # 3 source tasks + 3 aggregation tasks
        assert app.metrics()["threads"] == 2

        # consumed repartition records are deleted (low watermark = committed offset)
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("probe")})

        def purged():
            lows = [
                probe.get_watermark_offsets(TopicPartition(repartition, p), timeout=5)
                for p in range(3)
            ]
            # N records plus transaction markers, all consumed and deleted
            return sum(high for _low, high in lows) > N and all(low == high for low, high in lows)

        try:
            wait_for(purged, 60, "the repartition topic to be purged")
        finally:
            probe.close()
    finally:
        assert app.close(60)


def test_committed_offsets_never_go_back_across_a_rebalance(kafka_cluster, tmp_path):
    """A rebalance that leaves a thread its tasks must not commit them further back.

    Under exactly-once the committed offset of an idle repartition partition lies past the
    last transaction marker, one beyond the last record processed, and the purge deletes up
    to it. After the rebalance the thread's consumer position is unknown until it fetches
    again; committing the last processed offset + 1 then would move the committed offset
    below the log start, and the partition's next owner would fetch out of range."""
    bootstrap = kafka_cluster.bootstrap_servers
    orders, totals, other = unique("orders"), unique("totals"), unique("other")
    kafka_cluster.create_topic(orders, partitions=2)
    kafka_cluster.create_topic(totals, partitions=1)
    kafka_cluster.create_topic(other, partitions=1)
    topology = _rekey_count(orders, totals)
    app_id = unique("rekey-kept")
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": str(tmp_path),
        "commit.interval.ms": 100,
        "repartition.purge.interval.ms": 0,
    }
    repartition = f"{app_id}-by-region-repartition"
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id})

    def committed() -> dict[int, int]:
        tps = [TopicPartition(repartition, p) for p in range(2)]
        return {tp.partition: tp.offset for tp in probe.committed(tps, timeout=10)}

    def watermarks() -> list[tuple[int, int]]:
        return [
            probe.get_watermark_offsets(TopicPartition(repartition, p), timeout=5) for p in range(2)
        ]

    def totals_reach(n: int):
        def done(msgs):
            last = last_value_per_key(msgs, totals)
            return sum(long_value(v) for v in last.values()) == n

        return done

    produce(
        bootstrap, orders, ((f"o{i}".encode(), REGIONS[i % 4].encode(), T0 + i) for i in range(N))
    )
    app = KafkaStreams(topology, config)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        read_all(bootstrap, [totals], until=totals_reach(N), timeout=60)
        # consumed, committed past the last marker, and purged up to there
        wait_for(
            lambda: all(
                high == 0 or low == high == committed()[p]
                for p, (low, high) in enumerate(watermarks())
            ),
            60,
            "the repartition topic to be committed and purged to its end",
        )
        before = committed()

        # a member of another subscription joins the group and leaves it, three times: the
        # application's thread goes through each rebalance keeping every one of its tasks
        for _ in range(3):
            foreign = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": app_id,
                    "partition.assignment.strategy": "range",
                }
            )
            foreign.subscribe([other])
            try:
                deadline = time.monotonic() + 60
                while not foreign.assignment() and time.monotonic() < deadline:
                    foreign.poll(0.2)
                assert foreign.assignment(), "the foreign member never got its partition"
                time.sleep(1)  # ten commit intervals
                assert committed() == before
            finally:
                foreign.close()
            time.sleep(1)
            assert committed() == before
    finally:
        assert app.close(60)
    probe.close()

    # the next owner of the partitions starts from the committed offsets, inside the log
    produce(
        bootstrap,
        orders,
        ((f"p{i}".encode(), REGIONS[i % 4].encode(), T0 + N + i) for i in range(N)),
    )
    app = KafkaStreams(topology, {**config, "state.dir": str(tmp_path / "second")})
    app.start()
    try:
        msgs = read_all(bootstrap, [totals], until=totals_reach(2 * N), timeout=90)
        assert totals_reach(2 * N)(msgs), "the next owner did not count on from the commits"
    finally:
        assert app.close(60)
