"""``topology.optimization=all`` on a real broker: the source table's topic is its store's
changelog (no ``-changelog`` topic; a restart with wiped state restores from the source topic
up to the committed offset, then processes what came after), and the merged repartition
topic is the only one the application creates."""

from __future__ import annotations

from test_app_support import T0, produce, read_all, settle, unique

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State

S = serdes.String()


class _Restores:
    def __init__(self) -> None:
        self.started: list[tuple[str, int, str, int, int]] = []

    def on_restore_start(self, tp, store, start, end):
        self.started.append((tp.topic, tp.partition, store, start, end))


def _topology(prices: str, orders: str, out: str, counts: str) -> StreamsBuilder:
    b = StreamsBuilder()
    table = b.table(prices, materialized="price-store", key_serde=S, value_serde=S)
    (
        b.stream(orders, key_serde=S, value_serde=S)
        .join(table, lambda qty, price: str(int(qty) * int(price)))
        .to(out, key_serde=S, value_serde=S)
    )
    # two aggregations behind one key change: one repartition topic once merged
    rekeyed = b.stream(f"{orders}-by-customer", key_serde=S, value_serde=S).select_key(
        lambda k, v: v
    )
    rekeyed.group_by_key().count().to_stream().to(counts, key_serde=S, value_serde=serdes.Long())
    rekeyed.group_by_key().reduce(lambda a, v: v).to_stream().to(f"{counts}-last")
    return b


def test_optimized_application_restores_source_table_from_its_topic(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    prices, orders, out, counts = (unique(n) for n in ("prices", "orders", "out", "counts"))
    for topic in (prices, orders, f"{orders}-by-customer", out, counts, f"{counts}-last"):
        kafka_cluster.create_topic(topic, partitions=2)
    produce(bootstrap, prices, ((f"k{i}".encode(), b"10", T0) for i in range(10)))
    app_id = unique("optimized")

    def config(state_dir):
        return {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "state.dir": str(state_dir),
            "topology.optimization": "all",
            "commit.interval.ms": 100,
        }

    app = KafkaStreams(_topology(prices, orders, out, counts), config(tmp_path / "a"))
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        produce(bootstrap, orders, ((f"k{i}".encode(), b"2", T0 + 1) for i in range(10)))
        msgs = read_all(bootstrap, [out], until=lambda m: len(m) >= 10, timeout=60)
        assert sorted((k, v) for _t, _p, _o, k, v, _h in msgs) == [
            (f"k{i}".encode(), b"20") for i in range(10)
        ]
        customers = [b"alice", b"bob", b"alice"]
        produce(bootstrap, f"{orders}-by-customer", ((b"o", c, T0) for c in customers))
        msgs = settle(bootstrap, [counts])
        last = {k: int.from_bytes(v, "big") for _t, _p, _o, k, v, _h in msgs}
        assert last == {b"alice": 2, b"bob": 1}
        topics = set(kafka_cluster.admin().list_topics(timeout=10).topics)
        own = sorted(t for t in topics if t.startswith(app_id))
        # no changelog for the source table; the two aggregations share one repartition topic
        assert f"{app_id}-price-store-changelog" not in topics
        assert [t for t in own if t.endswith("-repartition")] == [
            f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000007-repartition"
        ]
    finally:
        app.close(timeout=30)

    # while the application is away: k1's price changes; then a new instance on empty state
    produce(bootstrap, prices, [(b"k1", b"30", T0 + 2)])
    restores = _Restores()
    app = KafkaStreams(_topology(prices, orders, out, counts), config(tmp_path / "b"))
    app.set_global_state_restore_listener(restores)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        price_restores = [r for r in restores.started if r[2] == "price-store"]
        assert {t for t, *_rest in price_restores} == {prices}
        # restored up to the committed offsets: the 10 first prices, not the new one
        assert sum(end - start for *_x, start, end in price_restores) == 10
        produce(bootstrap, orders, [(b"k1", b"1", T0 + 3), (b"k2", b"1", T0 + 3)])
        msgs = settle(bootstrap, [out])
        rows = [(k, v) for _t, _p, _o, k, v, _h in msgs]
        first = [(f"k{i}".encode(), b"20") for i in range(10)]
        assert sorted(rows) == sorted([*first, (b"k1", b"30"), (b"k2", b"10")])
    finally:
        app.close(timeout=30)


def test_standby_follows_a_source_table_up_to_the_committed_offsets(kafka_cluster, tmp_path):
    """With ``reuse.ktable.source.topics`` the standby replica reads the source topic, only as
    far as the group has committed, and the survivor takes over from its checkpoint."""
    from test_app_support import wait_for

    from streaming.runtime.metadata import HostInfo

    bootstrap = kafka_cluster.bootstrap_servers
    prices, out = unique("prices"), unique("out")
    for topic in (prices, out):
        kafka_cluster.create_topic(topic, partitions=2)
    app_id = unique("standby-source")

    def topology():
        b = StreamsBuilder()
        table = b.table(prices, materialized="price-store", key_serde=S, value_serde=S)
        table.to_stream().to(out, key_serde=S, value_serde=S)
        return b

    apps: dict[HostInfo, KafkaStreams] = {}
    for i, port in enumerate((7211, 7212)):
        config = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "topology.optimization": "all",
            "num.standby.replicas": 1,
            "state.dir": str(tmp_path / f"i{i}"),
            "application.server": f"localhost:{port}",
            "commit.interval.ms": 100,
        }
        app = KafkaStreams(topology(), config)
        app.start()
        apps[HostInfo("localhost", port)] = app
    a, b = apps.values()
    n = 400
    try:
        wait_for(
            lambda: all(len(x.local_tasks()) == 1 and x.state is State.RUNNING for x in (a, b)),
            60,
            "one task per instance",
        )
        produce(bootstrap, prices, ((f"k{i}".encode(), f"{i}".encode(), T0 + i) for i in range(n)))
        read_all(bootstrap, [out], until=lambda m: len(m) >= n, timeout=60)
        wait_for(
            lambda: sum(t.applied for x in (a, b) for t in x.standby.tasks.values()) == n,
            30,
            "standbys to follow the source topic to the committed offsets",
        )
        # no standby ever ran ahead of what the group committed
        for x in (a, b):
            for (topic, partition), offset in x.standby.limits.items():
                task = next(t for t in x.standby.tasks.values() if (topic, partition) in t.offsets)
                assert task.offsets[(topic, partition)] <= offset
        meta = a.metadata_for_key("price-store", "k1", S)
        leaving, staying = (a, b) if apps[meta.active_host] is a else (b, a)
        moved = next(iter(leaving.local_tasks()))
        assert leaving.close(60)
        wait_for(lambda: len(staying.local_tasks()) == 2, 60, "the survivor to take over")
        assert staying.wait_until(State.RUNNING, 30)
        store = staying.store("price-store")
        assert all(store.get(f"k{i}") == f"{i}" for i in range(n))
        partition = int(moved.split("_")[1])
        progress = staying.metrics()["restore-progress"].get(f"{prices}-{partition}")
        # restored from the standby's checkpoint, not from the start of the source topic
        assert progress is None or progress["start-offset"] > 0, progress
    finally:
        for app in (a, b):
            app.close(60)
