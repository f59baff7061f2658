"""Null keys through repartition topics (Kafka's KIP-962, ``rewriteRepartitionNodes``): a
repartition lets them through when a left or outer join lies downstream of it, and drops
them otherwise, whether the repartition is a join's own or an explicit ``repartition()``."""

from __future__ import annotations

from streaming import JoinWindows, Repartitioned, StreamsBuilder, TopologyTestDriver, serdes

S = serdes.String()


def _null_if_n(key: str, value: str) -> str | None:
    return None if value.startswith("n") else key


def _run(build, inputs: dict[str, list[tuple[str, str, int]]], topics: list[str]) -> dict:
    builder = StreamsBuilder()
    build(builder)
    with TopologyTestDriver(builder.build(), {"application.id": "app"}) as driver:
        for topic, records in inputs.items():
            source = driver.create_input_topic(topic, S, S)
            for key, value, ts in records:
                source.pipe_input(key, value, ts)
        return {
            t: [
                (kv.key, kv.value)
                for kv in driver.create_output_topic(t, S, S).read_key_values_to_list()
            ]
            for t in topics
        }


def test_explicit_repartition_before_a_left_stream_table_join_keeps_null_keys():
    def build(b):
        table = b.table("t", key_serde=S, value_serde=S)
        (
            b.stream("s", key_serde=S, value_serde=S)
            .select_key(_null_if_n)
            .repartition(Repartitioned.as_("rp").with_key_serde(S))
            .left_join(table, lambda v, tv: f"{v}+{tv}")
            .to("out", key_serde=S, value_serde=S)
        )

    out = _run(
        build,
        {"t": [("a", "A", 0)], "s": [("a", "x", 1), ("a", "nx", 2)]},
        ["out", "app-rp-repartition"],
    )
    assert out["app-rp-repartition"] == [("a", "x"), (None, "nx")]
    assert out["out"] == [("a", "x+A"), (None, "nx+None")]


def test_explicit_repartition_before_an_inner_join_drops_null_keys():
    def build(b):
        table = b.table("t", key_serde=S, value_serde=S)
        (
            b.stream("s", key_serde=S, value_serde=S)
            .select_key(_null_if_n)
            .repartition(Repartitioned.as_("rp").with_key_serde(S))
            .join(table, lambda v, tv: f"{v}+{tv}")
            .to("out", key_serde=S, value_serde=S)
        )

    out = _run(
        build,
        {"t": [("a", "A", 0)], "s": [("a", "x", 1), ("a", "nx", 2)]},
        ["out", "app-rp-repartition"],
    )
    assert out["app-rp-repartition"] == [("a", "x")]
    assert out["out"] == [("a", "x+A")]


def test_a_left_stream_stream_join_further_down_relaxes_the_repartition():
    def build(b):
        other = b.stream("o", key_serde=S, value_serde=S)
        (
            b.stream("s", key_serde=S, value_serde=S)
            .select_key(_null_if_n)
            .repartition(Repartitioned.as_("rp").with_key_serde(S))
            .map_values(str.upper)
            .left_join(
                other, lambda v, ov: f"{v}+{ov}", JoinWindows.of_time_difference_with_no_grace(10)
            )
            .to("out", key_serde=S, value_serde=S)
        )

    out = _run(
        build,
        {"s": [("a", "x", 1), ("a", "nx", 2)], "o": [("a", "y", 3)]},
        ["out", "app-rp-repartition"],
    )
    assert out["app-rp-repartition"] == [("a", "x"), (None, "nx")]
    assert (None, "NX+None") in out["out"]
    assert ("a", "X+y") in out["out"]


def test_only_repartitions_with_a_left_join_downstream_are_relaxed():
    def build(b):
        table = b.table("t", key_serde=S, value_serde=S)
        keyed = b.stream("s", key_serde=S, value_serde=S).select_key(_null_if_n)
        keyed.repartition(Repartitioned.as_("joined").with_key_serde(S)).left_join(
            table, lambda v, tv: f"{v}+{tv}"
        ).to("out", key_serde=S, value_serde=S)
        keyed.repartition(Repartitioned.as_("plain").with_key_serde(S)).to(
            "copy", key_serde=S, value_serde=S
        )

    out = _run(
        build,
        {"t": [], "s": [("a", "x", 1), ("a", "nx", 2)]},
        ["app-joined-repartition", "app-plain-repartition", "copy"],
    )
    assert out["app-joined-repartition"] == [("a", "x"), (None, "nx")]
    assert out["app-plain-repartition"] == [("a", "x")]
    assert out["copy"] == [("a", "x")]
