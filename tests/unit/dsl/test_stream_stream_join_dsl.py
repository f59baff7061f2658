"""KStream-KStream join DSL: names, stores, StreamJoined options, repartitioning, errors."""

from __future__ import annotations

import pytest

from streaming import JoinWindows, StreamJoined, StreamsBuilder, TopologyTestDriver, serdes
from streaming.dsl.processors.stream_stream_join import (
    EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX,
)
from streaming.errors import StreamsException
from streaming.state import Stores
from streaming.topology.nodes import SinkNode

S, L = serdes.String, serdes.Long
W = JoinWindows.of_time_difference_and_grace(10, 5)


def _streams(b: StreamsBuilder):
    return (
        b.stream("left", key_serde=S(), value_serde=L()),
        b.stream("right", key_serde=S(), value_serde=L()),
    )


def test_window_stores_retain_duplicates_with_kafkas_retention() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    left.outer_join(right, lambda a, c: a, W)
    stores = b.build().store_builders
    assert set(stores) == {
        "KSTREAM-OUTERTHIS-0000000004-store",
        "KSTREAM-OUTEROTHER-0000000005-store",
        "KSTREAM-OUTERSHARED-0000000004-store",
    }
    this = stores["KSTREAM-OUTERTHIS-0000000004-store"]
    assert this.supplier.retain_duplicates
    assert this.supplier.retention_period == 25  # before + after + grace
    assert this.supplier.window_size == 20
    assert this.supplier.persistent
    assert this.log_config == {"cleanup.policy": "delete"}
    assert not stores["KSTREAM-OUTERSHARED-0000000004-store"].supplier.timestamped


def test_inner_join_has_no_outer_store_and_store_names_follow_store_name() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    left.join(right, lambda a, c: a, W, StreamJoined.as_("js").with_logging_disabled())
    stores = b.build().store_builders
    assert set(stores) == {"js-this-join-store", "js-other-join-store"}
    assert not stores["js-this-join-store"].logging_enabled


def test_left_join_names_with_stream_joined_name() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    out = left.left_join(
        right, lambda a, c: a, W, stream_joined=StreamJoined.with_(S(), L(), L()).with_name("j")
    )
    nodes = b.build().nodes
    for name in ("j-this-windowed", "j-other-windowed", "j-this-join", "j-outer-other-join"):
        assert name in nodes
    assert out.name == "j-merge"
    assert "KSTREAM-OUTERSHARED-0000000004-store" in b.build().store_builders
    # the counter was burnt as if unnamed: the next generated name follows the merge's
    out.to("out")
    assert any(n.startswith("KSTREAM-SINK-0000000007") for n in nodes)


def test_in_memory_store_type_applies_to_all_three_stores() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    left.outer_join(right, lambda a, c: a, W, StreamJoined().in_memory())
    assert not any(s.persistent for s in b.build().store_builders.values())


def test_custom_suppliers_are_validated() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    good = Stores.in_memory_window_store("a", 25, 20, True)
    same_name = Stores.in_memory_window_store("a", 25, 20, True)
    with pytest.raises(StreamsException, match="same name"):
        left.join(right, lambda a, c: a, W, StreamJoined.with_store_suppliers(good, same_name))
    no_dups = Stores.in_memory_window_store("b", 25, 20, False)
    with pytest.raises(StreamsException, match="retainDuplicates"):
        left.join(right, lambda a, c: a, W, StreamJoined().with_this_store_supplier(no_dups))
    wrong = Stores.in_memory_window_store("c", 30, 20, True)
    with pytest.raises(StreamsException, match="Window settings mismatch"):
        left.join(right, lambda a, c: a, W, StreamJoined().with_other_store_supplier(wrong))


def test_arguments_are_checked() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    with pytest.raises(TypeError, match="JoinWindows"):
        left.join(right, lambda a, c: a, 10)
    with pytest.raises(TypeError, match="joiner"):
        left.join(right, None, W)
    with pytest.raises(ValueError, match="Grace period"):
        left.join(right, lambda a, c: a, JoinWindows(1, 1, -1))
    with pytest.raises(ValueError, match="beforeMs\\+afterMs"):
        left.join(right, lambda a, c: a, JoinWindows(1, -2, 0))


def test_sources_are_copartitioned() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    left.join(right, lambda a, c: a, W)
    assert b.build().copartition_groups == [
        {"KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001"}
    ]


def test_rekeyed_side_is_repartitioned_and_reused_by_later_unnamed_joins() -> None:
    b = StreamsBuilder()
    left, right = _streams(b)
    keyed = right.select_key(lambda k, v: k)
    left.join(keyed, lambda a, c: a, W)
    left.join(keyed, lambda a, c: a, W)
    t = b.build()
    assert list(t.internal_topics) == ["KSTREAM-KEY-SELECT-0000000002-repartition"]
    sinks = [n for n in t.nodes.values() if isinstance(n, SinkNode)]
    assert len(sinks) == 1


def test_named_self_join_of_rekeyed_stream_repartitions_each_side() -> None:
    b = StreamsBuilder()
    keyed = b.stream("left", key_serde=S(), value_serde=L()).select_key(lambda k, v: k)
    keyed.join(keyed, lambda a, c: a, W, StreamJoined().with_name("j"))
    assert set(b.build().internal_topics) == {"j-left-repartition", "j-right-repartition"}


def _run(kind: str, records: list[tuple[str, str | None, int | None, int]]) -> list[tuple]:
    """Rekey the left side by value (values over 100 get a null key) and join."""
    b = StreamsBuilder()
    left, right = _streams(b)
    keyed = left.select_key(lambda k, v: None if v > 100 else str(v % 2))
    getattr(keyed, kind)(
        right,
        lambda a, c: f"{a}/{c}",
        JoinWindows.of_time_difference_with_no_grace(5),
        StreamJoined.with_(S(), L(), L()),
    ).to("out", key_serde=S(), value_serde=S())
    config = {EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX: 0}
    with TopologyTestDriver(b.build(), config, initial_wall_clock_time_ms=0) as driver:
        topics = {
            t: driver.create_input_topic(t, key_serde=S(), value_serde=L())
            for t in ("left", "right")
        }
        for topic, key, value, ts in records:
            topics[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("out", key_serde=S(), value_serde=S())
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_null_keys_after_repartition_reach_left_joins_only() -> None:
    records = [("left", "x", 101, 1), ("left", "x", 3, 2), ("right", "1", 7, 3)]
    # the null-key record passes the repartition of a left join and is joined with null
    assert _run("left_join", records) == [(None, "101/None", 1), ("1", "3/7", 3)]
    assert _run("join", records) == [("1", "3/7", 3)]


def test_self_join_joins_each_record_with_itself_once() -> None:
    b = StreamsBuilder()
    s = b.stream("left", key_serde=S(), value_serde=L())
    s.join(s, lambda a, c: a * 10 + c, JoinWindows.of_time_difference_with_no_grace(5)).to(
        "out", key_serde=S(), value_serde=L()
    )
    with TopologyTestDriver(b.build(), initial_wall_clock_time_ms=0) as driver:
        src = driver.create_input_topic("left", key_serde=S(), value_serde=L())
        src.pipe_input("a", 1, timestamp=0)
        src.pipe_input("a", 2, timestamp=3)
        out = driver.create_output_topic("out", key_serde=S(), value_serde=L())
        # this side sees earlier records only; the other side sees the record itself too
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", 11, 0),
            ("a", 21, 3),
            ("a", 12, 3),
            ("a", 22, 3),
        ]
