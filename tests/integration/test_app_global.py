"""Global tables: every instance bootstraps the whole global topic before processing,
follows its updates, answers queries on it, and resumes from its checkpoint."""

from __future__ import annotations

from test_app_support import T0, produce, read_all, unique, wait_for

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State


def _topology(customers, orders, enriched):
    builder = StreamsBuilder()
    regions = builder.global_table(
        customers,
        materialized="regions",
        key_serde=serdes.String(),
        value_serde=serdes.String(),
    )
    (
        builder.stream(orders, key_serde=serdes.String(), value_serde=serdes.String())
        .join(
            regions, lambda order_id, customer: customer, lambda order, region: f"{order}@{region}"
        )
        .to(enriched, value_serde=serdes.String())
    )
    return builder.build()


def test_global_table_join(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    customers, orders, enriched = unique("customers"), unique("orders"), unique("enriched")
    kafka_cluster.create_topic(customers, partitions=3)
    kafka_cluster.create_topic(orders, partitions=2)
    kafka_cluster.create_topic(enriched, partitions=2)
    produce(
        bootstrap,
        customers,
        [(f"c{i}".encode(), ("EU" if i % 2 else "US").encode(), T0) for i in range(50)],
    )
    config = {
        "application.id": unique("global"),
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path),
        "commit.interval.ms": 100,
    }
    app = KafkaStreams(_topology(customers, orders, enriched), config)
    app.start()  # returns once the global store holds the whole topic
    try:
        assert app.store("regions").get("c7") == "EU"
        assert app.store("regions").approximate_num_entries() >= 1
        assert len(app.store("regions").all()) == 50
        assert app.wait_until(State.RUNNING, 60)
        produce(bootstrap, orders, [(b"o1", b"c1", T0 + 1), (b"o2", b"c2", T0 + 2)])
        msgs = read_all(bootstrap, [enriched], until=lambda m: len(m) >= 2, timeout=60)
        assert sorted(m[4] for m in msgs) == [b"c1@EU", b"c2@US"]
        # updates of the global topic reach the store while the application runs
        produce(bootstrap, customers, [(b"c1", b"APAC", T0 + 3)])
        wait_for(lambda: app.store("regions").get("c1") == "APAC", 30, "the global update")
        produce(bootstrap, orders, [(b"o3", b"c1", T0 + 4)])
        msgs = read_all(bootstrap, [enriched], until=lambda m: len(m) >= 3, timeout=60)
        assert sorted(m[4] for m in msgs) == [b"c1@APAC", b"c1@EU", b"c2@US"]
    finally:
        assert app.close(60)
    # a restart resumes from the global checkpoint with the same content
    app = KafkaStreams(_topology(customers, orders, enriched), config)
    app.start()
    try:
        assert app.store("regions").get("c1") == "APAC"
        assert len(app.store("regions").all()) == 50
        assert app.global_thread is not None and app.global_thread.processed == 0
    finally:
        assert app.close(60)
