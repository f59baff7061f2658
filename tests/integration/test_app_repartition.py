"""Repartitioning through ``<application.id>-<name>-repartition``: created with the upstream
partition count, read back exactly once, and purged up to the committed offsets."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from test_app_support import T0, last_value_per_key, long_value, produce, read_all, unique, wait_for

from streaming import Grouped, StreamsBuilder, serdes
from streaming.runtime.app import KafkaStreams, State

N = 1200
REGIONS = ["EU", "US", "APAC", "LATAM"]


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
    builder = StreamsBuilder()
    (
        builder.stream(orders, key_serde=serdes.String(), value_serde=serdes.String())
        .select_key(lambda k, v: v)
        .group_by_key(Grouped.as_("by-region").with_key_serde(serdes.String()))
        .count(materialized="per-region")
        .to_stream()
        .to(totals, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    app_id = unique("rekey")
    app = KafkaStreams(
        builder.build(),
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
